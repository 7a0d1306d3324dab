package scan_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/scan"
)

// A work-stealing worker reads one unit of another slot with Only, and the slot's own scanner
// skips it through BeforeSegment: together they read the slot's share exactly once, the skipping
// scanner is Done without the skipped unit, and its checkpoint keeps that unit unread.
func TestOnlyAndBeforeSegmentSplitAShare(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	items := makeItems("S", 400, 0)
	seed(t, db, table, items)
	plan := scan.Plan{Mode: scan.ModeFilter, Slots: 2, SubSegments: 2, Total: 8}
	base := scan.Config{Client: db, Table: table, Plan: plan, Slot: 1, PartitionAttr: "grp"}
	want, _ := readAll(t, base)

	var mu sync.Mutex
	asked := map[int]int{}
	owner := base
	owner.BeforeSegment = func(_ context.Context, seg int) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		asked[seg]++
		return seg != 7, nil
	}
	got, sc := readAll(t, owner)
	require.Len(t, asked, 8, "asked once for every segment")
	pos, err := scan.DecodeCheckpoint(sc.Checkpoint())
	require.NoError(t, err)
	c, ok := pos.Cursor(7)
	require.True(t, ok)
	require.False(t, c.Done, "the skipped segment stays unread in the checkpoint")

	thief := base
	thief.Only = []int{7}
	stolen, tsc := readAll(t, thief)
	require.Len(t, tsc.Stats().Segments, 1)
	for k, it := range stolen {
		_, dup := got[k]
		require.False(t, dup, "item %s read by both", k)
		got[k] = it
	}
	require.Equal(t, len(want), len(got))
	for k := range want {
		require.Contains(t, got, k)
	}
}

func TestOnlyRefusesUnitsTheSlotDoesNotOwn(t *testing.T) {
	t.Parallel()
	plan := scan.Plan{Mode: scan.ModeSegment, Slots: 2, SubSegments: 2, Total: 8}
	for _, only := range [][]int{{0}, {5, 5}} {
		_, err := scan.New(scan.Config{Client: &countingClient{}, Table: "t", Plan: plan, Slot: 1, Only: only})
		var ce *scan.ConfigError
		require.True(t, errors.As(err, &ce), "Only %v: %v", only, err)
		require.Equal(t, "Only", ce.Field)
	}
	_, err := scan.New(scan.Config{Client: &countingClient{}, Table: "t", Plan: plan, Slot: 1, Only: []int{6}})
	require.NoError(t, err)
}

func TestBeforeSegmentErrorEndsRun(t *testing.T) {
	t.Parallel()
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	seed(t, db, table, makeItems("S", 20, 0))
	boom := errors.New("boom")
	sc, err := scan.New(scan.Config{Client: db, Table: table, Plan: scan.Plan{Slots: 1, SubSegments: 2, Total: 4},
		BeforeSegment: func(context.Context, int) (bool, error) { return false, boom }})
	require.NoError(t, err)
	err = sc.Run(context.Background(), func(context.Context, *scan.Page) error { return nil })
	require.ErrorIs(t, err, boom)
	require.False(t, sc.Done())
}
