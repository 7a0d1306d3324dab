// Package root is the dynapart root command: it adds every command, sets unset flags from
// DYNAPART_<FLAG> environment variables, and turns a command's error into the exit code of the CLI
// contract (Run): 0 success, 1 runtime failure, 2 bad usage or invalid configuration.
package root

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/demo"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/initcmd"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/local"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/partition"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/pause"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/redrive"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/scale"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/seed"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/status"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/verify"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/work"
)

// Run runs the command line args and returns the exit code.
func Run(args []string, sio cli.Stdio) int {
	root := New(sio)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return cli.ExitOK
	}
	if cmd == root {
		// The root runs nothing: its errors are about the command line (an unknown command, which
		// cobra reports untyped).
		err = &cli.UsageError{Err: err}
	}
	err = cli.FromEnv(cmd, cli.TableFlagOf(cmd, err))
	var exit *cli.ExitError
	if errors.As(err, &exit) {
		if exit.Msg != "" {
			fmt.Fprintln(sio.Err, "dynapart:", exit.Msg)
		}
		return exit.Code
	}
	// The library's errors say "dynapart: " themselves: once is enough.
	fmt.Fprintln(sio.Err, "dynapart:", strings.TrimPrefix(err.Error(), "dynapart: "))
	if cli.IsUsage(err) {
		return cli.ExitUsage
	}
	return cli.ExitRuntime
}

// New is the root command with every command of the CLI, writing to sio.
func New(sio cli.Stdio) *cobra.Command {
	g := &cli.Globals{IO: sio}
	root := &cobra.Command{
		Use:   "dynapart",
		Short: "Share the processing of a DynamoDB table among N workers, exactly once",
		Long: `dynapart lets N workers (Lambda functions, ECS tasks, or processes on a laptop) share the
processing of a DynamoDB table so that every item is handled exactly once, fast, and survives
worker crashes.

Workers take a slot 0..N-1 from a lease table, read only their share of the table, and move every
item's state with conditional writes, so an item is claimed by one worker and completed once.

Every flag can also be given as an environment variable DYNAPART_<FLAG>, e.g. DYNAPART_WORKERS=4
or DYNAPART_LEASE_TTL=10s (flags on the command line win); but a dynapart command that CMD of
'work --exec' runs (DYNAPART_IDEMPOTENCY_KEY set) reads no flag from the variables 'work --exec'
sets per item (DYNAPART_KEY, DYNAPART_SLOT, DYNAPART_ATTEMPT, DYNAPART_TOKEN,
DYNAPART_IDEMPOTENCY_KEY, DYNAPART_VERSION), so it does not take the item's key for its own --key. A
usage error about a flag set from a variable names the variable too, and a DYNAPART_ variable a
letter or two from a flag's (DYNAPART_LEASE_TL) is warned of. AWS
settings come from the standard chain (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_DYNAMODB, ...)
and --endpoint.

Exit codes: 0 success, 1 runtime failure, 2 bad usage or invalid configuration (nothing written).`,
		Example: `  dynapart local &                                   # DynamoDB Local on :8000
  export DYNAPART_ENDPOINT=http://127.0.0.1:8000
  dynapart init --table users --key id:S
  dynapart seed --table users --items 10000
  dynapart work --table users --workers 3 --once --exec ./send-email.sh
  dynapart verify --table users`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.Endpoint, "endpoint", "", "DynamoDB endpoint URL, e.g. http://127.0.0.1:8000 for DynamoDB Local (default: the AWS SDK chain)")
	root.PersistentFlags().StringVar(&g.Region, "region", "", "AWS region (default: the AWS SDK chain, else us-east-1)")
	root.PersistentFlags().StringVar(&g.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.LogFormat, "log-format", "auto", "log format: auto (text on a terminal, JSON otherwise), text, json")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := cli.BindEnv(cmd, g.IO.LookupEnv); err != nil {
			return err
		}
		log, _, err := g.Logger() // --log-level and --log-format are checked before any command runs
		if err != nil {
			return err
		}
		if g.IO.Environ != nil { // before the other checks: a misspelt setting may be what they refuse
			for _, m := range cli.MisspeltEnv(cmd, g.IO.Environ()) {
				log.Warn(fmt.Sprintf("dynapart: %s sets nothing (ignored): did you mean %s (%s)?", m.Name, m.Meant, m.Flag))
			}
		}
		return cli.CheckTableNames(cmd.Flags())
	}
	root.SetOut(sio.Out)
	root.SetErr(sio.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cli.UsageError{Err: err} })
	root.AddCommand(local.New(g), initcmd.New(g), seed.New(g), work.New(g), status.New(g),
		verify.New(g), verify.NewFailed(g), redrive.New(g), partition.New(g), demo.New(g))
	root.AddCommand(pause.New(g), pause.NewResume(g), scale.New(g))
	return root
}
