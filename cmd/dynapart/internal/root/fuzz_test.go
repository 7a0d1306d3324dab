package root_test

import (
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/root"
)

// envFlags are the `work` flags FuzzEnvConfig sets: every one that runWork or worker.New checks,
// and the globals' DynamoClient and newLogger check.
var envFlags = []string{"workers", "sub-segments", "page-size", "concurrency", "shards", "max-attempts",
	"lease-ttl", "heartbeat", "standby-poll", "max-clock-skew", "claim-ttl", "poll-interval", "retry-backoff",
	"drain-timeout", "exec-timeout", "read-rate", "mode", "ledger", "progress", "once", "consistent-read",
	"batch-claims", "complete-only", "table", "lease-table", "ledger-table", "endpoint", "region", "log-level"}

// flagSetting is one flag's value, from DYNAPART_<FLAG> or from the command line.
type flagSetting struct {
	name, value string
	commandLine bool
}

// runWorkUntilListen runs `dynapart work` with the settings over valid defaults. --metrics-addr
// cannot be listened on, and runWork tries it after every check (flags, environment, endpoint,
// worker.New) and before its first DynamoDB call, so the run ends there when all checks pass.
func runWorkUntilListen(t *testing.T, settings ...flagSetting) (*cobra.Command, error) {
	t.Helper()
	cmd := root.New(cli.Stdio{Out: io.Discard, Err: io.Discard, LookupEnv: os.LookupEnv})
	work, _, err := cmd.Find([]string{"work"})
	if err != nil {
		t.Fatal(err)
	}
	for _, fs := range []*pflag.FlagSet{work.Flags(), cmd.PersistentFlags()} {
		fs.VisitAll(func(f *pflag.Flag) { unsetenv(t, cli.EnvName(f.Name)) })
	}
	for _, k := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"} {
		unsetenv(t, k)
	}
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent/dynapart-fuzz")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/dynapart-fuzz")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true") // no credentials: an AWS endpoint is refused without a request
	args := []string{"work", "--metrics-addr", "no-port"}
	given := map[string]bool{}
	for _, s := range settings {
		given[s.name] = true
		if s.commandLine {
			args = append(args, "--"+s.name+"="+s.value)
		} else {
			t.Setenv(cli.EnvName(s.name), s.value)
		}
	}
	for _, d := range [][2]string{{"table", "users"}, {"workers", "2"}, {"endpoint", "http://127.0.0.1:1"}, {"log-level", "error"}} {
		if !given[d[0]] {
			args = append(args, "--"+d[0], d[1])
		}
	}
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err = cmd.Execute()
	if err == nil {
		t.Fatalf("dynapart %q succeeded: it must stop at --metrics-addr", args)
	}
	return work, err
}

// unsetenv removes k for the rest of the test (t.Setenv restores it afterwards).
func unsetenv(t *testing.T, k string) {
	t.Setenv(k, "")
	os.Unsetenv(k)
}

// passedChecks tells an error of the --metrics-addr listen (every check passed) from a rejection.
func passedChecks(err error) bool { return strings.Contains(err.Error(), `--metrics-addr "no-port"`) }

// names reports whether msg names the flag, as --flag, DYNAPART_FLAG or the worker.Config field
// (LeaseTTL for lease-ttl).
func names(msg, flag string) bool {
	squash := strings.NewReplacer("-", "", "_", "", " ", "")
	return strings.Contains(strings.ToLower(squash.Replace(msg)), squash.Replace(flag))
}

// FuzzEnvConfig: `dynapart work` reads its flags from DYNAPART_<FLAG> and the command line
// (which wins) and checks them before its first DynamoDB call. It never panics; a rejection is a
// usage error (exit 2) naming a flag it was given; the environment and the command line accept
// the same values; an accepted value's String parses back to itself; and an accepted --page-size
// fits worker.Config.PageSize (int32).
func FuzzEnvConfig(f *testing.F) {
	index := func(name string) uint8 { return uint8(slices.Index(envFlags, name)) }
	add := func(a, va, b, vb string, bCommandLine bool) { f.Add(index(a), va, index(b), vb, bCommandLine) }
	addEnvConfigSeeds(add)
	f.Fuzz(func(t *testing.T, a uint8, va string, b uint8, vb string, bCommandLine bool) {
		sa := flagSetting{name: envFlags[int(a)%len(envFlags)], value: va}
		sb := flagSetting{name: envFlags[int(b)%len(envFlags)], value: vb, commandLine: bCommandLine}
		settings := []flagSetting{sa, sb}
		if sa.name == sb.name && !sb.commandLine {
			settings = settings[:1] // one variable
		}
		for i, s := range settings {
			if !s.commandLine && strings.ContainsRune(s.value, 0) {
				settings[i].commandLine = true // the environment cannot hold NUL; the command line can
			}
		}
		work, err := runWorkUntilListen(t, settings...)
		ok := passedChecks(err)
		if !ok {
			if !cli.IsUsage(err) {
				t.Fatalf("%+v: %v is not a usage error (exit 2)", settings, err)
			}
			if !slices.ContainsFunc(settings, func(s flagSetting) bool { return names(err.Error(), s.name) }) {
				t.Fatalf("%+v: %q names none of the flags given", settings, err)
			}
		}

		// The command line accepts what the environment does, and gives the same value.
		moved := slices.Clone(settings)
		moved[0].commandLine = true
		if len(moved) == 2 && sa.name == sb.name {
			moved = moved[:1] // both on the command line: the last would win
		}
		work2, err2 := runWorkUntilListen(t, moved...)
		if ok2 := passedChecks(err2); ok2 != ok && len(moved) == len(settings) {
			t.Fatalf("%+v: %v, but with %s on the command line: %v", settings, err, sa.name, err2)
		}
		if !ok {
			return
		}
		for _, s := range settings {
			fl := lookupFlag(work, s.name)
			if fl2 := lookupFlag(work2, s.name); len(moved) == len(settings) && fl.Value.String() != fl2.Value.String() {
				t.Fatalf("%+v: --%s is %q from the environment, %q from the command line", settings, s.name, fl.Value, fl2.Value)
			}
			if !fl.Changed {
				t.Fatalf("%+v: --%s was given but is not marked changed", settings, s.name)
			}
			fresh := lookupFlag(newWorkCmdForTest(), s.name)
			if err := fresh.Value.Set(fl.Value.String()); err != nil || fresh.Value.String() != fl.Value.String() {
				t.Fatalf("--%s=%q: its String %q does not parse back (%v, %q)", s.name, s.value, fl.Value, err, fresh.Value)
			}
		}
		if sa.name == sb.name && sb.commandLine {
			want := lookupFlag(newWorkCmdForTest(), sb.name)
			if err := want.Value.Set(vb); err != nil || lookupFlag(work, sb.name).Value.String() != want.Value.String() {
				t.Fatalf("%+v: the command line did not win: --%s is %q", settings, sb.name, lookupFlag(work, sb.name).Value)
			}
		}
		if n, err := strconv.ParseInt(lookupFlag(work, "page-size").Value.String(), 10, 64); err != nil || n < 0 || n > math.MaxInt32 {
			t.Fatalf("%+v: --page-size %s accepted, but worker.Config.PageSize is an int32", settings, lookupFlag(work, "page-size").Value)
		}
	})
}

// addEnvConfigSeeds adds FuzzEnvConfig's seed corpus: two flags, a value each, and whether the
// second is on the command line.
func addEnvConfigSeeds(add func(a, va, b, vb string, bCommandLine bool)) {
	add("workers", "3", "mode", "filter", false)
	for _, v := range []string{"0", "-1", "1e3", "0x10", "-0", "9223372036854775808", "", " 3", "３", "many"} {
		add("workers", v, "workers", "2", false)
	}
	for _, v := range []string{"-1", "0", "2147483647", "2147483648", "4294967297", "9223372036854775807"} {
		add("page-size", v, "read-rate", "0", false)
	}
	for _, v := range []string{"1e309", "NaN", "-0", "Inf", "-1", "0x1p-2", "5e-324", "1.5"} {
		add("read-rate", v, "page-size", "0", false)
	}
	for _, v := range []string{"1h", "-1s", "0", "9999999h", "2562047h47m16.854775807s", "1ns", "3ns", "1µs", "1.5s", "1", "10s "} {
		add("lease-ttl", v, "heartbeat", "0", false)
		add("heartbeat", v, "lease-ttl", "10s", true)
	}
	add("max-clock-skew", "9s", "lease-ttl", "10s", false)
	add("max-clock-skew", "-1ns", "standby-poll", "-1s", false)
	add("claim-ttl", "999ms", "retry-backoff", "6m", false)
	add("drain-timeout", "-1s", "poll-interval", "-1s", true)
	add("concurrency", "-16", "max-attempts", "0", false)
	add("sub-segments", "250001", "workers", "4", false)
	add("sub-segments", "4611686018427387905", "mode", "index", false)
	add("shards", "1", "mode", "index", true)
	add("consistent-read", "true", "mode", "index", false)
	add("batch-claims", "1", "complete-only", "T", false)
	add("once", "maybe", "once", "false", true)
	add("ledger", "table", "ledger-table", "t", false)
	add("ledger", "paper", "lease-table", "t", false)
	add("table", "", "table", "dynapart-leases", true)
	add("table", "é\u202e", "mode", "Segment", false)
	add("progress", "json", "progress", "bars", false)
	add("endpoint", "not a url", "region", "", false)
	add("endpoint", "ftp://x", "endpoint", "https://dynamodb.eu-west-1.amazonaws.com", true)
	add("log-level", "DEBUG", "log-level", "loud", true)
	add("exec-timeout", "-5m", "concurrency", "0", false)
}

// newWorkCmdForTest is a fresh `work` command with its inherited flags, for parsing values.
func newWorkCmdForTest() *cobra.Command {
	work, _, _ := root.New(cli.OSStdio()).Find([]string{"work"})
	return work
}

// lookupFlag finds a flag of cmd or one it inherits.
func lookupFlag(cmd *cobra.Command, name string) *pflag.Flag {
	if fl := cmd.Flags().Lookup(name); fl != nil {
		return fl
	}
	return cmd.InheritedFlags().Lookup(name)
}
