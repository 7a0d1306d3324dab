package lock

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/clock"
)

// TestPlanStartItems: the first plan start stored for an epoch is the one every holder of it reads,
// LatestPlanStart finds the latest earlier epoch that has one, and the stored format (running
// groups read what older workers wrote) is pinned: pk "plan#<group>", sk the epoch, start the
// gzipped JSON.
func TestPlanStartItems(t *testing.T) {
	ctx := context.Background()
	h := twoHolders(t, "a", "b")
	db, table, a, b, la, lb := h.db, h.table, h.a, h.b, h.la, h.lb

	_, ok, err := a.PlanStart(ctx, "g", 0)
	require.NoError(t, err)
	require.False(t, ok)
	_, _, ok, err = a.LatestPlanStart(ctx, "g", 5)
	require.NoError(t, err)
	require.False(t, ok)

	first := PlanStart{Scan: "cp", Dirty: []int{2}, Pass: 3}
	got, err := la.StorePlanStart(ctx, first)
	require.NoError(t, err)
	require.Equal(t, first, got)
	got, err = lb.StorePlanStart(ctx, PlanStart{Scan: "other", Pass: 9})
	require.NoError(t, err)
	require.Equal(t, first, got, "the epoch's first plan start stands")

	it := rawItem(t, db, table, "plan#g", 0)
	require.Len(t, it, 3)
	require.Equal(t, avS("plan#g"), it["pk"])
	require.Equal(t, avN(0), it["sk"])
	blob, ok := it["start"].(*types.AttributeValueMemberB)
	require.True(t, ok)
	zr, err := gzip.NewReader(bytes.NewReader(blob.Value))
	require.NoError(t, err)
	text, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, `{"scan":"cp","dirty":[2],"pass":3}`+"\n", string(text))

	got, ok, err = b.PlanStart(ctx, "g", 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, first, got)
	got, epoch, ok, err := b.LatestPlanStart(ctx, "g", 4)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(0), epoch)
	require.Equal(t, first, got)
	_, _, ok, err = b.LatestPlanStart(ctx, "g", 0)
	require.NoError(t, err)
	require.False(t, ok, "only epochs before the one asked for")
}

// TestPlanStartOfAResizedGroup: a holder stores the plan start of the epoch it acquired under, and
// LatestPlanStart skips epochs that have none.
func TestPlanStartOfAResizedGroup(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	c, _ := newClient(t, db, table, WithClock(clk), WithOwner("a"))
	l, err := c.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	_, err = l.StorePlanStart(ctx, PlanStart{Scan: "e0"})
	require.NoError(t, err)
	release(t, l)
	for _, m := range []int{2, 1} {
		_, err = c.ResizeGroup(ctx, "g", m)
		require.NoError(t, err)
	}
	l, err = c.TryAcquireSlot(ctx, "g", 1)
	require.NoError(t, err)
	defer release(t, l)
	require.Equal(t, int64(2), l.Epoch())
	ps, epoch, ok, err := c.LatestPlanStart(ctx, "g", l.Epoch())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(0), epoch, "epoch 1 stored none")
	require.Equal(t, "e0", ps.Scan)
	_, err = l.StorePlanStart(ctx, PlanStart{Scan: "e2"})
	require.NoError(t, err)
	ps, ok, err = c.PlanStart(ctx, "g", 2)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "e2", ps.Scan)
}
