package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

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
