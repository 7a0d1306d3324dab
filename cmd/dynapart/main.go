// Command dynapart shares the processing of a DynamoDB table among N workers, exactly once.
//
// Run `dynapart --help` for the commands, and `dynapart COMMAND --help` for each one's flags.
// Every flag can also be set as DYNAPART_<FLAG> in the environment (e.g. DYNAPART_WORKERS=4).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// Exit codes of the CLI contract.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// usageError is bad usage or invalid configuration: exit 2, nothing written.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }

// usageArgs types the error of a cobra Args validator (cobra.NoArgs...) as a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &usageError{err}
		}
		return nil
	}
}

// stdio is what a run of the CLI uses of its process: its stdout, stderr and environment, and the
// HTTP client of its DynamoDB calls; os's in main, buffers, a map and the harness's client in tests.
type stdio struct {
	out, err  io.Writer
	lookupEnv func(string) (string, bool)
	http      aws.HTTPClient // nil: the AWS SDK's
}

func osStdio() stdio { return stdio{out: os.Stdout, err: os.Stderr, lookupEnv: os.LookupEnv} }

func (s stdio) getenv(k string) string {
	v, _ := s.lookupEnv(k)
	return v
}

// globals are the flags every command shares, and the process's stdio.
type globals struct {
	endpoint  string
	region    string
	logLevel  string
	logFormat string
	io        stdio
}

// logger is the logger of --log-level and --log-format on stderr, and the status line it shares.
func (g *globals) logger() (*slog.Logger, *statusLine, error) {
	return newLogger(logSetup{Level: g.logLevel, Format: g.logFormat, W: g.io.err, Terminal: isTerminal(g.io.err)})
}

func main() { os.Exit(run(os.Args[1:], osStdio())) }

// run runs the command line args and returns the exit code.
func run(args []string, sio stdio) int {
	root := newRoot(sio)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	if cmd == root {
		// The root runs nothing: its errors are about the command line (an unknown command, which
		// cobra reports untyped).
		err = &usageError{err}
	}
	var exit *exitError
	if errors.As(err, &exit) {
		if exit.msg != "" {
			fmt.Fprintln(sio.err, "dynapart:", exit.msg)
		}
		return exit.code
	}
	fmt.Fprintln(sio.err, "dynapart:", err)
	if isUsage(err) {
		return exitUsage
	}
	return exitRuntime
}

// exitError ends the program with a code and an optional message (verify's "not all done").
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// isUsage reports whether err is bad usage or invalid configuration (exit 2), by its type.
func isUsage(err error) bool {
	var ue *usageError
	var ce *worker.ConfigError
	var te *lock.TableError
	return errors.As(err, &ue) || errors.As(err, &ce) || errors.As(err, &te) || errors.Is(err, lock.ErrGroupMismatch)
}

func newRoot(sio stdio) *cobra.Command {
	g := &globals{io: sio}
	root := &cobra.Command{
		Use:   "dynapart",
		Short: "Share the processing of a DynamoDB table among N workers, exactly once",
		Long: `dynapart lets N workers (Lambda functions, ECS tasks, or processes on a laptop) share the
processing of a DynamoDB table so that every item is handled exactly once, fast, and survives
worker crashes.

Workers take a slot 0..N-1 from a lease table, read only their share of the table, and move every
item's state with conditional writes, so an item is claimed by one worker and completed once.

Every flag can also be given as an environment variable DYNAPART_<FLAG>, e.g. DYNAPART_WORKERS=4
or DYNAPART_LEASE_TTL=10s (flags on the command line win). AWS settings come from the standard
chain (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_DYNAMODB, ...) and --endpoint.

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
	root.PersistentFlags().StringVar(&g.endpoint, "endpoint", "", "DynamoDB endpoint URL, e.g. http://127.0.0.1:8000 for DynamoDB Local (default: the AWS SDK chain)")
	root.PersistentFlags().StringVar(&g.region, "region", "", "AWS region (default: the AWS SDK chain, else us-east-1)")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "auto", "log format: auto (text on a terminal, JSON otherwise), text, json")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := bindEnv(cmd, g.io.lookupEnv); err != nil {
			return err
		}
		_, _, err := g.logger() // --log-level and --log-format are checked before any command runs
		return err
	}
	root.SetOut(sio.out)
	root.SetErr(sio.err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(newLocalCmd(g), newInitCmd(g), newSeedCmd(g), newWorkCmd(g), newStatusCmd(g),
		newVerifyCmd(g), newFailedCmd(g), newRedriveCmd(g), newPartitionCmd(g), newDemoCmd(g))
	root.AddCommand(newPauseCmd(g), newResumeCmd(g), newScaleCmd(g))
	return root
}

// envName is the environment variable of a flag: DYNAPART_ + upper snake case.
func envName(flag string) string {
	return "DYNAPART_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv sets every flag not given on the command line from DYNAPART_<FLAG>.
func bindEnv(cmd *cobra.Command, lookupEnv func(string) (string, bool)) error {
	var errs []error
	set := func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" {
			return
		}
		if v, ok := lookupEnv(envName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, usagef("%s=%q: %v", envName(f.Name), v, err))
				return
			}
			f.Changed = true
		}
	}
	cmd.Flags().VisitAll(set)
	cmd.InheritedFlags().VisitAll(set)
	return errors.Join(errs...)
}

// dynamoClient builds a DynamoDB client from the SDK chain, --region and --endpoint.
func (g *globals) dynamoClient(ctx context.Context) (*dynamodb.Client, error) {
	var opts []func(*config.LoadOptions) error
	if g.region != "" {
		opts = append(opts, config.WithRegion(g.region))
	}
	loopback := false
	if g.endpoint != "" {
		u, err := url.Parse(g.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("--endpoint %q: want a URL such as http://127.0.0.1:8000", g.endpoint)
		}
		host := u.Hostname()
		ip := net.ParseIP(host)
		loopback = host == "localhost" || (ip != nil && ip.IsLoopback())
	}
	if loopback && g.io.getenv("AWS_ACCESS_KEY_ID") == "" && g.io.getenv("AWS_PROFILE") == "" {
		// DynamoDB Local accepts any credentials; do not require a profile for it.
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("dynapart", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	if g.io.http != nil {
		cfg.HTTPClient = g.io.http // set after loading, which would wrap it for AWS_CA_BUNDLE
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if g.endpoint != "" {
			o.BaseEndpoint = aws.String(g.endpoint)
		}
		checksumOption(o)
	}), nil
}
