package worker

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// Review of keyed passes (helper-85).

// TestKeyedReadWithKeyInProjection: a worker whose Projection names a key attribute (as the scan
// allows: it reads each name once) reads the items left by key too. Before, the keyed read named
// the key attribute twice in its ProjectionExpression, DynamoDB refused it (two document paths
// overlap) as a request refused for good, and the worker scanned its share for every retry round
// of the run.
func TestKeyedReadWithKeyInProjection(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		t.Run(string(kind), func(t *testing.T) {
			const n = 300
			f := newFixture(t, n)
			fc, reads := recordSourceReads(f)
			c := completeOnlyOnce(f, kind)
			c.Client, c.CompleteOnly, c.Projection = fc, false, []string{"id", "n"}
			w, err := New(c)
			require.NoError(t, err)
			hc := newHandlerCalls()
			fails := map[string]int{itemKey(4): 2}
			require.NoError(t, runOnceWithin(t, w, failingFirst(hc, fails), time.Minute))
			for i := range n {
				requireStatus(t, f, kind, itemKey(i), StatusDone)
			}
			require.Equal(t, 3, hc.calls[itemKey(4)])
			scans, gets := reads.scansAfterKeyedRead()
			require.Zero(t, scans, "no scan after the items left were read by key")
			require.Equal(t, 2, gets, "one BatchGetItem per retry round")
		})
	}
}

// TestKeyedPassWriteRefusedKeepsKeyedReads: a keyed pass whose claim DynamoDB refuses for good
// (a permission of the ledger's writes, put right since) ends as a failed pass; the worker's
// keyed reads were not refused, so the next retry round reads its items by key again. Before,
// any refusal that ended a keyed pass turned keyed reads off for the run, as if BatchGetItem had
// been refused, and the rounds after it scanned the share.
func TestKeyedPassWriteRefusedKeepsKeyedReads(t *testing.T) {
	const n = 300
	f := newFixture(t, n)
	fc, reads := recordSourceReads(f)
	var refuse onceFlag
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.UpdateItemInput)
		if call.Tables[0] == f.table && isTransition(in, ":until") && reads.count(ddbfault.OpBatchGetItem) > 0 && refuse.first() {
			return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "test: the keyed pass's claim is refused"}
		}
		return send(ctx, call.In)
	}, ddbfault.OpUpdateItem)
	c := completeOnlyOnce(f, LedgerInline)
	c.Client, c.CompleteOnly = fc, false
	w, err := New(c)
	require.NoError(t, err)
	hc := newHandlerCalls()
	fails := map[string]int{itemKey(9): 2}
	require.NoError(t, runOnceWithin(t, w, failingFirst(hc, fails), time.Minute))
	for i := range n {
		requireStatus(t, f, LedgerInline, itemKey(i), StatusDone)
	}
	require.True(t, refuse.used.Load(), "the keyed pass's claim was refused")
	require.Equal(t, 3, hc.calls[itemKey(9)])
	require.Equal(t, 2, reads.count(ddbfault.OpBatchGetItem), "the round after the refused write reads by key again")
}
