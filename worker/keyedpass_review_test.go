package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
