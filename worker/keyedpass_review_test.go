package worker

import (
	"context"
	"testing"

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
			fails := map[string]int{itemKey(4): 2}
			_, hc := runRetrying(t, f, c, kind, n, fails)
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
	fails := map[string]int{itemKey(9): 2}
	_, hc := runRetrying(t, f, c, LedgerInline, n, fails)
	require.True(t, refuse.used.Load(), "the keyed pass's claim was refused")
	require.Equal(t, 3, hc.calls[itemKey(9)])
	require.Equal(t, 2, reads.count(ddbfault.OpBatchGetItem), "the round after the refused write reads by key again")
}

// TestKeyedReadCostOfLargeItems: an item read by key is billed by its own size, in whole 4 KB
// units (halved when eventually consistent), where a scan bills the bytes of its pages. For 1,000
// items of 5 KB a scan reads 625 units (eventually consistent): 800 of them read by key cost 800
// (two half units each), more than the scan. Before, the estimate took the scan's average (0.625
// a item: 500 for 800), and the worker read them by key, at more than a rescan costs.
func TestKeyedReadCostOfLargeItems(t *testing.T) {
	scan5KB := readCost{rcu: 625, scanned: 1000}
	require.InDelta(t, 800.0, scan5KB.byKey(800, false), 1e-9)
	require.InDelta(t, 1600.0, readCost{rcu: 1250, scanned: 1000}.byKey(800, true), 1e-9)
	// Small items: at least the smallest charge; items just under 4 KB: one unit each.
	require.InDelta(t, 50.0, readCost{rcu: 3, scanned: 1000}.byKey(100, false), 1e-9)
	require.InDelta(t, 100.0, readCost{rcu: 3, scanned: 1000}.byKey(100, true), 1e-9)
	require.InDelta(t, 50.0, readCost{rcu: 490, scanned: 1000}.byKey(100, false), 1e-9)
	// A scan's pages round up (half a unit a page at most): 4 KB items stay one unit each.
	require.InDelta(t, 50.0, readCost{rcu: 502, scanned: 1000}.byKey(100, false), 1e-9)
	require.InDelta(t, 0.5, readCost{}.byKey(1, false), 1e-9)
}
