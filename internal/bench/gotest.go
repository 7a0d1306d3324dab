package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// GoBench is one testing.B benchmark's results: one value per -count run, per unit.
type GoBench struct {
	Name    string            // without the "Benchmark" prefix and the -GOMAXPROCS suffix
	Metrics map[string]Sample // unit ("ns/op", "allocs/op", "items/s", ...) -> values
}

// Metric returns the sample of unit, or nil.
func (b *GoBench) Metric(unit string) Sample {
	if b == nil {
		return nil
	}
	return b.Metrics[unit]
}

// GoBenchRun is the outcome of one `go test -bench` invocation.
type GoBenchRun struct {
	Package string
	Command string
	Benches []*GoBench
	Missing bool // the package or the benchmark does not exist (yet)
}

// Bench returns the benchmark called name, or nil.
func (r *GoBenchRun) Bench(name string) *GoBench {
	if r == nil {
		return nil
	}
	for _, b := range r.Benches {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// RunGoBench runs `go test -run '^$' -bench pattern -count count [extra...] pkg` in the module
// root, with the endpoint in $DYNAPART_TEST_ENDPOINT, and parses the benchmark lines. A package
// that does not exist, or has no benchmark matching pattern, is reported as Missing.
func (e *Env) RunGoBench(ctx context.Context, pkg, pattern string, count int, extra ...string) (*GoBenchRun, error) {
	run := &GoBenchRun{Package: pkg}
	if _, err := os.Stat(filepath.Join(e.ModRoot, strings.TrimPrefix(pkg, "./"))); err != nil {
		run.Missing = true
		return run, nil
	}
	args := []string{"test", "-run", "^$", "-bench", pattern, "-count", strconv.Itoa(count)}
	if i := slices.Index(extra, "-args"); i >= 0 { // the package goes before the test binary's own flags
		args = append(append(append(args, extra[:i]...), pkg), extra[i:]...)
	} else {
		args = append(append(args, extra...), pkg)
	}
	run.Command = "go " + shellJoin(args)
	e.logf("%s", run.Command)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = e.ModRoot
	cmd.Env = append(os.Environ(), "DYNAPART_TEST_ENDPOINT="+e.Endpoint)
	out, err := cmd.CombinedOutput()
	run.Benches = parseGoBench(string(out))
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", run.Command, err, tail(string(out), 3000))
	}
	if len(run.Benches) == 0 {
		run.Missing = true
	}
	return run, nil
}

// parseGoBench reads the result lines of `go test -bench` output:
//
//	BenchmarkName-2   	 1000	  1234 ns/op	  12.5 items/s	  0 B/op	  0 allocs/op
func parseGoBench(out string) []*GoBench {
	var benches []*GoBench
	byName := map[string]*GoBench{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a log line, not a result
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		b := byName[name]
		if b == nil {
			b = &GoBench{Name: name, Metrics: map[string]Sample{}}
			byName[name] = b
			benches = append(benches, b)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			b.Metrics[f[i+1]] = append(b.Metrics[f[i+1]], v)
		}
	}
	return benches
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " ^$|*?'\"") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
