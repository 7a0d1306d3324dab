// Command run runs dynapart's benchmarks against a DynamoDB and writes BENCHMARKS.md and its PNG
// plots (docs/bench/ next to the report). `make bench` calls it with a DynamoDB Local it started.
//
//	go run ./internal/bench/run -endpoint http://127.0.0.1:8000 -out BENCHMARKS.md
//	go run ./internal/bench/run -endpoint http://127.0.0.1:8000 -quick -out /tmp/B.md
//
// Progress goes to stderr. It exits 1 when a scenario failed (the report is written anyway and
// says which).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dynapart/dynapart/internal/bench"
)

// args are the command line's settings.
type args struct {
	endpoint, out, plotDir, only, concs, bin string
	reps, items, serverPID                   int
	quick                                    bool
	followWindow                             time.Duration
	flags                                    *flag.FlagSet // to tell which were set
}

func main() {
	var a args
	flag.StringVar(&a.endpoint, "endpoint", os.Getenv("DYNAPART_TEST_ENDPOINT"), "DynamoDB endpoint (default $DYNAPART_TEST_ENDPOINT)")
	flag.StringVar(&a.out, "out", "BENCHMARKS.md", "the report to write")
	flag.StringVar(&a.plotDir, "plots", "", "directory of the PNG plots (default docs/bench next to -out)")
	flag.IntVar(&a.reps, "reps", 3, "repetitions of every measurement")
	flag.IntVar(&a.items, "items", 20000, "items per table of the throughput and mode scenarios")
	flag.BoolVar(&a.quick, "quick", false, "small sizes and one repetition: a smoke run")
	flag.StringVar(&a.only, "only", "", "comma-separated scenarios to run (default all): "+strings.Join(bench.Scenarios, ","))
	flag.StringVar(&a.concs, "concurrency", "1,4,16,64", "concurrencies of the throughput matrix")
	flag.DurationVar(&a.followWindow, "follow-window", 0, fmt.Sprintf("how long the writer changes items in each run of the follow scenario (default %s, 20s with -quick)", bench.FollowWindow))
	flag.StringVar(&a.bin, "bin", "bin/dynapart", "the dynapart binary for the process scenarios (built into a temp dir when missing)")
	flag.IntVar(&a.serverPID, "server-pid", 0, "DynamoDB Local's process, whose CPU time the cpu scenario reads (default: the process listening on the endpoint's port)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process (the library scenarios run in it) to this file")
	flag.Parse()
	a.flags = flag.CommandLine
	stop := func() {}
	if *cpuprofile != "" {
		var err error
		if stop, err = startProfile(*cpuprofile); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	err := run(a)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// startProfile starts a CPU profile into path; the returned func stops it.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func run(a args) error {
	if a.endpoint == "" {
		return fmt.Errorf("-endpoint (or $DYNAPART_TEST_ENDPOINT) is required: start one with `make local` or localstack/ddblocal.sh start")
	}
	opts := bench.Options{Reps: a.reps, Items: a.items, Quick: a.quick, FollowWindow: a.followWindow}
	if a.quick {
		set := map[string]bool{}
		a.flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["reps"] {
			opts.Reps = 1
		}
		if !set["items"] {
			opts.Items = 1000
		}
		if !set["concurrency"] {
			a.concs = "4,16"
		}
	}
	for _, c := range strings.Split(a.concs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("-concurrency %q: want positive integers separated by commas", a.concs)
		}
		opts.Concurrencies = append(opts.Concurrencies, n)
	}
	if a.only != "" {
		for _, s := range strings.Split(a.only, ",") {
			s = strings.TrimSpace(s)
			if !contains(bench.Scenarios, s) {
				return fmt.Errorf("-only: unknown scenario %q (want %s)", s, strings.Join(bench.Scenarios, ", "))
			}
			opts.Only = append(opts.Only, s)
		}
	}
	root, err := modRoot()
	if err != nil {
		return err
	}
	bin, cleanup, err := ensureBinary(root, a.bin)
	if err != nil {
		return err
	}
	defer cleanup()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &bench.Env{DB: bench.NewClient(a.endpoint, nil), Endpoint: a.endpoint, Bin: bin, ModRoot: root, Progress: os.Stderr, ServerPID: a.serverPID}
	res := env.Run(ctx, opts)

	outAbs, err := filepath.Abs(a.out)
	if err != nil {
		return err
	}
	if a.plotDir == "" {
		a.plotDir = filepath.Join(filepath.Dir(outAbs), "docs", "bench")
	}
	plots, err := res.WritePlots(a.plotDir, filepath.Dir(outAbs))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: plots:", err)
	}
	if err := os.WriteFile(a.out, []byte(res.Markdown(plots)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %s (plots in %s) in %s\n", a.out, a.plotDir, res.Elapsed.Round(1e9))
	if len(res.Errors) > 0 {
		return fmt.Errorf("%d scenario(s) failed: see %s", len(res.Errors), a.out)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// modRoot is the directory of the module's go.mod.
func modRoot() (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(b))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("run it inside the dynapart module")
	}
	return filepath.Dir(gomod), nil
}

// ensureBinary returns an absolute path to the dynapart binary, building one into a temp dir when
// bin does not exist.
func ensureBinary(root, bin string) (string, func(), error) {
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(root, bin)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "dynapart-bench-")
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "dynapart")
	fmt.Fprintf(os.Stderr, "bench: %s missing, building ./cmd/dynapart into %s\n", bin, path)
	cmd := exec.Command("go", "build", "-o", path, "./cmd/dynapart")
	cmd.Dir, cmd.Stderr = root, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build dynapart: %w", err)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}
