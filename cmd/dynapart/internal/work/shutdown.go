package work

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
)

// errSignal is the cause of a context cancelled by SIGTERM or SIGINT.
var errSignal = errors.New("signal")

// onSignals returns ctx, cancelled with cause errSignal at the first SIGTERM or SIGINT (a graceful
// shutdown); a second signal kills the --exec commands running (their process groups) and exits
// the process at once. stop ends the watch.
func onSignals(parent context.Context, log *slog.Logger, stderr io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		log.Info("dynapart: signal received, shutting down gracefully (again to exit at once)", "signal", s.String())
		cancel(errSignal)
		if _, ok := <-sigs; ok {
			fmt.Fprintln(stderr, "dynapart: second signal, exiting at once (the --exec commands running are killed)")
			runningCmds.killAll()
			os.Exit(cli.ExitRuntime)
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(sigs) // ends the goroutine above; after Stop no signal is sent on sigs
		cancel(nil)
	}
}
