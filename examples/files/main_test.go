package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

// TestFilesProcessedOnce first reproduces the incident: two naive cron runs that overlap both
// select the same 100 unprocessed rows and process all of them twice, and each select reads the
// whole table. Then dynapart workers in continuous mode on the pending index process every
// pending row and every row added while they run exactly once, reading pending rows only.
func TestFilesProcessedOnce(t *testing.T) {
	s := Sizes{Done: 2000, Pending: 100, Added: 100, Workers: 2}
	db := ddbtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	file := ddbtest.Key{Name: attrFile, Type: "S"}

	naiveTable := ddbtest.CreateTable(t, db, file)
	require.NoError(t, Seed(ctx, db, naiveTable, s, false))
	naive, err := NaiveOverlap(ctx, db, naiveTable)
	require.NoError(t, err)
	require.Equal(t, s.Pending, naive.Files)
	require.Equal(t, s.Pending, naive.Duplicates, "both overlapping runs process the same batch")
	require.Greater(t, naive.ReadPerPoll, s.Done/2, "the select reads most of the table to find the rows left")
	t.Logf("naive: %d files, %d twice, %d items read per select", naive.Files, naive.Duplicates, naive.ReadPerPoll)

	table := ddbtest.CreateTable(t, db, file)
	require.NoError(t, scan.CreatePendingIndex(ctx, db, table, IndexName, ShardAttr))
	leases := ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(ctx, db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	require.NoError(t, Seed(ctx, db, table, s, true))

	res, err := RunDynapart(ctx, db, table, leases, s)
	require.NoError(t, err)
	require.Equal(t, s.Pending+s.Added, res.Files, "every pending and every added row is processed")
	require.Zero(t, res.Duplicates, "no row is processed twice")
	require.Zero(t, res.LeftPending)
	require.Less(t, res.First.Items, int64(s.Done), "index polls read pending rows, not the table")
	require.Zero(t, res.IdlePoll.Items, "an idle poll reads nothing")
	// Old rows have no hash: they all go to shard 0, which slot 0 owns (coalesce to 0).
	require.GreaterOrEqual(t, res.BySlot[0], (s.Pending+s.Added)/2)
	t.Logf("dynapart: %d files, %d twice; first %d read %d items in %d queries (%.1f RCU); idle poll %d items; by slot %v",
		res.Files, res.Duplicates, s.Pending, res.First.Items, res.First.Queries, res.First.RCU, res.IdlePoll.Items, res.BySlot)
}
