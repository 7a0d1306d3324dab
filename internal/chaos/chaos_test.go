package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dynapart-chaos-")
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	binary, err = Binary(ctx, dir)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	ddbtest.Main(m)
}

// seed is $CHAOS_SEED (to replay a failure) or a fresh one; it is logged either way.
func seed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		t.Logf("seed %d (from CHAOS_SEED)", v)
		return v
	}
	v := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with CHAOS_SEED=%d go test -run '^%s$' ./internal/chaos/)", v, v, t.Name())
	return v
}

func testEnv(t *testing.T) Env {
	ddbtest.Client(t)                   // skips (or fails in CI) without DynamoDB
	ddbtest.Need(t, ddbtest.CapStreams) // the lease history is read from the lease table's stream
	return Env{AWS: ddbtest.Config(t), Endpoint: ddbtest.Endpoint(t), Bin: binary, Dir: t.TempDir(), Logf: t.Logf}
}

func check(t *testing.T, r *Result) {
	t.Helper()
	for _, e := range r.Events {
		t.Logf("  %s", e)
	}
	if len(r.Faults) > 0 {
		t.Logf("  faults: %v", r.Faults)
	}
	t.Logf("  lease history from %s: %d writes (%d stream read errors), %d acquisitions, %d takeovers, %d releases, %d retakes; %d polls (%d failed)",
		r.Leases.Source, r.Leases.StreamRecords, r.Leases.StreamErrors, r.Leases.Acquisitions, r.Leases.Takeovers,
		r.Leases.Releases, r.Leases.Retakes, r.Leases.Reads, r.Leases.ReadErrors)
	if r.Leases.Source != "stream" {
		t.Errorf("seed %d: the lease history was not read from the stream (%s): polls can miss states", r.Seed, r.Leases.Source)
	}
	if r.Leases.Acquisitions == 0 {
		t.Errorf("seed %d: the lease history saw no acquisition", r.Seed)
	}
	t.Logf("%s", r.Summary())
	for _, v := range r.Violations {
		t.Errorf("seed %d: %s", r.Seed, v)
	}
	if r.PermanentItems > 0 && r.TransientFailures == 0 {
		t.Errorf("seed %d: no handler run failed transiently: the retry path did not run", r.Seed)
	}
	if r.CompletedTwice != 0 || r.Missing != 0 {
		t.Errorf("seed %d: completed twice %d, missing %d (both must be 0)", r.Seed, r.CompletedTwice, r.Missing)
	}
	if r.SideEffectDuplicates > r.SideEffectBound {
		t.Errorf("seed %d: %d side-effect duplicates, more than the %d items in flight at the failures", r.Seed, r.SideEffectDuplicates, r.SideEffectBound)
	}
}

func TestChaosSIGKILL(t *testing.T) {
	t.Parallel()
	// Handlers fail 10% of items once and 2% for good: retries and dead letters under kills.
	check(t, Kill(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 2000, Kills: 3, Transient: 0.1, Permanent: 0.02}))
}

// TestChaosEffects: SIGKILLed slot holders and a proxy that loses, resets and delays answers,
// while every completion commits effects (an item's own counter, a shared counter): every done
// item's own counter ends at 1 and every shared counter equals its items.
func TestChaosEffects(t *testing.T) {
	t.Parallel()
	t.Run("sigkill", func(t *testing.T) {
		check(t, Kill(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 1000, Kills: 2, Effects: true}))
	})
	t.Run("faults", func(t *testing.T) {
		check(t, Faults(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 600, Effects: true}))
	})
}

func TestChaosSIGSTOP(t *testing.T) {
	t.Parallel()
	check(t, Freeze(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 1000}))
}

func TestChaosFaultProxy(t *testing.T) {
	t.Parallel()
	// Handlers fail 10% of items once and 2% for good: retries and dead letters under faults.
	check(t, Faults(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 1000, Transient: 0.1, Permanent: 0.02}))
}

func TestChaosPartition(t *testing.T) {
	t.Parallel()
	check(t, Partition(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 500}))
}

func TestChaosTwoGroups(t *testing.T) {
	t.Parallel()
	check(t, TwoGroups(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 200}))
}

func TestChaosDynamoDBRestart(t *testing.T) {
	t.Parallel()
	check(t, Restart(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 1000}))
}

func TestChaosClockSkew(t *testing.T) {
	t.Parallel()
	check(t, Skew(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 1000, Kills: 2}))
}

// leaseTable creates a fresh lease table (lock.CreateTable), deleted after the test.
func leaseTable(t *testing.T, db *dynamodb.Client) string {
	t.Helper()
	name := ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(context.Background(), db, name))
	ddbtest.DeleteOnCleanup(t, db, name)
	return name
}

// TestChaosResize scales a working fleet up (with a SIGKILL while it re-plans) and down, in every
// mode (resize.go).
func TestChaosResize(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"segment", "filter", "index"} {
		t.Run(mode, func(t *testing.T) {
			check(t, Resize(context.Background(), testEnv(t), Params{Seed: seed(t), Items: 1000, Mode: mode}))
		})
	}
}
