package status

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPageOfAGroupNotStartedYet: the page (status --serve) may be started before the job, so it
// serves a group that does not exist yet, saying so ("exists": false), and true once a worker
// has taken a slot.
func TestPageOfAGroupNotStartedYet(t *testing.T) {
	ctx := context.Background()
	_, _, lc := testLeaseTable(t)
	rd := &reader{locks: lc, group: "g1"}

	doc, err := rd.read(ctx, time.Now())
	require.NoError(t, err)
	require.False(t, doc.Exists, "no work of g1 has started")
	require.False(t, doc.Finished)

	lease, err := lc.AcquireSlot(ctx, "g1", 1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	doc, err = rd.read(ctx, time.Now())
	require.NoError(t, err)
	require.True(t, doc.Exists)
}
