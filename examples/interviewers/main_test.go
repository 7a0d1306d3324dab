package main

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

func TestMain(m *testing.M) {
	// The worker runs' workers are this test binary started again as children.
	exampleutil.RunIfChild(RunChild)
	ddbtest.Main(m)
}

func setup(t *testing.T) (*Store, []Approach) {
	t.Helper()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: attrInterview, Type: "S"}, ddbtest.Key{Name: attrSK, Type: "S"})
	leases := ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(context.Background(), db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	s := &Store{DB: db, Table: table}
	approaches, err := Approaches(s, db, leases)
	require.NoError(t, err)
	return s, approaches
}

func approach(t *testing.T, all []Approach, name string) Approach {
	t.Helper()
	for _, a := range all {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no approach %q", name)
	return Approach{}
}

// TestInterviewerAddedOnce first reproduces the incident with the naive check-then-insert (both
// the web request and the poller finish their check before either inserts: every interview gets
// the interviewer twice), then shows that the uniqueness item and the per-interview mutex each
// leave exactly one row in the same race.
func TestInterviewerAddedOnce(t *testing.T) {
	const updates = 12
	s, all := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	naive, err := Race(ctx, s, approach(t, all, "naive").Add, "naive", updates, true)
	require.NoError(t, err)
	require.Equal(t, updates, naive.Duplicates, "the naive code must add the interviewer twice whenever both checks come first")

	unique, err := Race(ctx, s, approach(t, all, "unique").Add, "unique", updates, true)
	require.NoError(t, err)
	require.Zero(t, unique.Duplicates, "the uniqueness item must let exactly one insert commit")

	// The mutex serialises the check with the insert, so there is no window to hold both sides in:
	// both sides start together and contend for the lock.
	mutex, err := Race(ctx, s, approach(t, all, "mutex").Add, "mutex", updates, false)
	require.NoError(t, err)
	require.Zero(t, mutex.Duplicates, "the mutex must serialise check and insert")

	for _, name := range []string{"unique", "mutex"} {
		mean, err := MeanUncontended(ctx, approach(t, all, name).Add, name+"-single", 10)
		require.NoError(t, err)
		t.Logf("%s: %.1f ms per raced update, %.1f ms alone", name, exampleutil.Ms(map[string]time.Duration{"unique": unique.MeanAdd, "mutex": mutex.MeanAdd}[name]), exampleutil.Ms(mean))
	}
}

// TestUniqueRefusesSecondAdd: a later add of the same interviewer reports added = false and
// leaves one row.
func TestUniqueRefusesSecondAdd(t *testing.T) {
	s, _ := setup(t)
	ctx := context.Background()
	added, err := s.AddUnique(ctx, "i-1", "ada@example.com", "web-request", nil)
	require.NoError(t, err)
	require.True(t, added)
	added, err = s.AddUnique(ctx, "i-1", "ada@example.com", "poller", nil)
	require.NoError(t, err)
	require.False(t, added)
	got, err := s.Interviewers(ctx, "i-1")
	require.NoError(t, err)
	require.Equal(t, []string{"ada@example.com"}, got)
}

func workerTables(t *testing.T) (*dynamodb.Client, *Store, Tables) {
	t.Helper()
	db := ddbtest.Client(t)
	tables := Tables{
		Updates:    ddbtest.CreateTable(t, db, ddbtest.Key{Name: attrID, Type: "S"}),
		Interviews: ddbtest.CreateTable(t, db, ddbtest.Key{Name: attrInterview, Type: "S"}, ddbtest.Key{Name: attrSK, Type: "S"}),
		Leases:     ddbtest.TableName(t, "lease"),
	}
	require.NoError(t, lock.CreateTable(context.Background(), db, tables.Leases))
	ddbtest.DeleteOnCleanup(t, db, tables.Leases)
	return db, &Store{DB: db, Table: tables.Interviews}, tables
}

// TestStaleWorkerDuplicatesUnlessEffects: a worker's insert is held in the network while the
// worker is frozen (SIGSTOP) past its lease; its successor does every update; then the frozen
// worker is thawed, its insert delivered late, and it is killed. The naive handler's late insert
// lands: that interview has the interviewer twice. The effects' late commit is refused whole (its
// claim was taken over): one row per interview, every update done.
func TestStaleWorkerDuplicatesUnlessEffects(t *testing.T) {
	const updates = 10
	for _, mode := range []Mode{Naive, Effects} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			db, _, tables := workerTables(t)
			out, err := StaleRun(ctx, db, ddbtest.Endpoint(t), tables, mode, updates)
			require.NoError(t, err)
			t.Logf("%s: %q; %d updates x 2 deliveries: %d done, %d failed; %d rows, %d interviews with a duplicate",
				mode, out.Said, out.Updates, out.Ledger.Done, out.Ledger.Failed, out.Rows, out.Duplicates)
			require.Equal(t, int64(2*updates), out.Ledger.Done, "the successor completes every delivery")
			require.Zero(t, out.Ledger.Failed)
			if mode == Naive {
				require.Equal(t, 1, out.Duplicates, "the stale worker's late insert lands")
				require.Equal(t, updates+1, out.Rows)
				return
			}
			require.Zero(t, out.Duplicates, "the stale worker's late commit is refused")
			require.Equal(t, updates, out.Rows)
		})
	}
}

// TestKilledWorkersOneRowEach: two workers with the effects handler are SIGKILLed mid-update (one
// after its commit landed, its answer lost; one before its commit is sent); two fresh workers
// take over. Every interview has its interviewer exactly once, every delivery is done.
func TestKilledWorkersOneRowEach(t *testing.T) {
	const updates = 30
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, _, tables := workerTables(t)
	out, err := KillRun(ctx, db, ddbtest.Endpoint(t), tables, Effects, updates)
	require.NoError(t, err)
	t.Logf("kills %q; %d updates x 2 deliveries: %d done, %d failed; %d rows, %d interviews with a duplicate",
		out.Said, out.Updates, out.Ledger.Done, out.Ledger.Failed, out.Rows, out.Duplicates)
	require.Len(t, out.Said, 2)
	require.Equal(t, int64(2*updates), out.Ledger.Done)
	require.Zero(t, out.Ledger.Failed)
	require.Equal(t, updates, out.Rows, "one row per interview")
	require.Zero(t, out.Duplicates)
}

// TestRacingDeliveriesOneRowOneDeadLetter holds both deliveries of an update between their check
// and their commit (two handlers of one worker): both return the put-if-absent, one commits, the
// other's commit is cancelled whole and the delivery dead-lettered, naming the write. A redrive
// and a new run complete it without a write: the check now finds the row.
func TestRacingDeliveriesOneRowOneDeadLetter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, s, tables := workerTables(t)
	require.NoError(t, WriteUpdates(ctx, db, tables.Updates, "race", 1))
	both := exampleutil.NewBarrier(2)
	run := func(group string, between func()) worker.Stats {
		cfg := WorkerConfig(db, tables, 1, "racer")
		cfg.Group, cfg.Concurrency = group, 2
		w, err := worker.New(cfg)
		require.NoError(t, err)
		h, err := s.Handler(Effects, between)
		require.NoError(t, err)
		require.NoError(t, w.Run(ctx, h))
		return w.Stats()
	}
	st := run("race", func() { both.Wait(ctx) })
	require.Equal(t, int64(1), st.Completed)
	require.Equal(t, int64(1), st.DeadLettered, "the second commit's put-if-absent fails")
	got, err := s.Interviewers(ctx, "race-0000")
	require.NoError(t, err)
	require.Len(t, got, 1)

	l, err := ledger.NewInline(db, tables.Updates, []string{attrID})
	require.NoError(t, err)
	var keys []ledger.Key
	require.NoError(t, l.DeadLetters(ctx, func(d ledger.DeadLetter) error {
		t.Logf("dead letter %s: %s", ledger.KeyText(d.Key), d.Error)
		keys = append(keys, d.Key)
		return nil
	}))
	require.Len(t, keys, 1)
	moved, err := worker.Redrive(ctx, l, keys, time.Now())
	require.NoError(t, err)
	t.Logf("redrive: %+v", moved)
	st = run("race-again", nil)
	require.Equal(t, int64(1), st.Completed, "the redriven delivery completes, without effects")
	got, err = s.Interviewers(ctx, "race-0000")
	require.NoError(t, err)
	require.Len(t, got, 1)
	sum, err := l.Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), sum.Done)
}
