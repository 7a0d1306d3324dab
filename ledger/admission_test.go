package ledger

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// TestAdmissionEndsTheWaitForWriteCapacity: a claim held by the write gate (a write rate) is not
// sent once its admission ends (WithAdmission: a worker's stop), though its own context lives on;
// one admitted is sent. A stop used to wait for the capacity, send the claims and release them
// again, and leave those the release's time did not cover claimed (helper-69).
func TestAdmissionEndsTheWaitForWriteCapacity(t *testing.T) {
	db, source, names := lcSourceTable(t)
	fc := ddbfault.New(db)
	keys := lcKeys(0, 6)
	lcSeeder(t, db, source)(keys...)
	l, err := NewInline(fc, source, names, WithWriteGate(NewWriteGate(1))) // 1 WCU/s: a batch of 6 waits ~5s
	require.NoError(t, err)
	reqs := make([]ClaimRequest, len(keys))
	for i, k := range keys {
		reqs[i] = lcReq(k, "A", 0, 1, lcT0)
		reqs[i].Fresh = true
	}

	admit, stop := context.WithCancel(context.Background())
	stop() // the worker stopped while the batch waited
	_, err = l.Claim(WithAdmission(context.Background(), admit), reqs)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	for op, n := range fc.CallsByOp() {
		require.Contains(t, []string{ddbfault.OpGetItem, ddbfault.OpBatchGetItem}, op, "%s sent %d times after the stop (reads settle only)", op, n)
	}
	for _, k := range keys {
		st, err := l.State(context.Background(), k)
		require.NoError(t, err)
		require.Equal(t, StatusPending, st.Status, "nothing claimed")
	}

	outs, err := l.Claim(WithAdmission(context.Background(), context.Background()), reqs[:1])
	require.NoError(t, err)
	require.True(t, outs[0].Claimed, "an admitted claim is sent")
}
