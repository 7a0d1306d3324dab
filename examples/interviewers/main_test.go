package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

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
