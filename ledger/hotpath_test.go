package ledger

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMergedUpdateCached: the completion merged with a shape of changes is built once per
// transition and shape, and is what building it anew gives, for every transition that completes.
func TestMergedUpdateCached(t *testing.T) {
	l, err := NewInline(noDB{}, "users", []string{"id"})
	require.NoError(t, err)
	item, err := renderChangesOnce([]Change{Set("first", "Ada"), Add("n", 1), Remove("name")})
	require.NoError(t, err)
	for _, op := range []Op{OpComplete, OpCompleteOnly, OpCompleteOnlyFresh} {
		c := l.core.ops[op]
		first := l.core.merged.of(c, item)
		require.Equal(t, mergeUpdate(c, item), first, op)
		again := l.core.merged.of(c, item)
		require.Equal(t, first.expr, again.expr, op)
		require.Contains(t, first.expr, "REMOVE", op)
	}
	require.Len(t, l.core.merged.m, 3)
}

// TestLeaseValuesFollowTheLease: a request's owner, slot, token and scope values are reused while
// they stay the same and made anew when any changes (a takeover's new token must never write the
// old one).
func TestLeaseValuesFollowTheLease(t *testing.T) {
	l, err := NewInline(noDB{}, "users", []string{"id"})
	require.NoError(t, err)
	r := hotRequest()
	a := l.core.requestVals(r)
	b := l.core.requestVals(r)
	require.Same(t, a[vToken], b[vToken])
	for _, change := range []func(*ClaimRequest){
		func(r *ClaimRequest) { r.Token++ },
		func(r *ClaimRequest) { r.Slot++ },
		func(r *ClaimRequest) { r.Owner += "-2" },
		func(r *ClaimRequest) { r.Scope = "other" },
	} {
		r2 := r
		change(&r2)
		v := l.core.requestVals(r2)
		require.Equal(t, attrN(r2.Token), v[vToken])
		require.Equal(t, attrN(int64(r2.Slot)), v[vSlot])
		require.Equal(t, attrS(r2.Owner), v[vOwner])
		require.Equal(t, attrS(r2.Scope), v[vScope])
	}
}

// TestSharedCachesAcrossGoroutines: goroutines of different leases build requests and merged
// completions at once (run with -race): each request carries its own lease's values.
func TestSharedCachesAcrossGoroutines(t *testing.T) {
	il, err := NewInline(noDB{}, "users", []string{"id", "sk"}, WithPrefix("x_"), WithCompleteOnlyAudit())
	require.NoError(t, err)
	l := il.core
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 3000 {
				req := hotRequest()
				req.Token, req.Owner, req.Slot, req.Fresh = int64(g*1000+i%3), fmt.Sprint("o", g), g, i%2 == 0
				vals := l.requestVals(req)
				if attrNum(vals[vToken]) != req.Token || attrStr(vals[vOwner]) != req.Owner || attrNum(vals[vSlot]) != int64(req.Slot) {
					t.Errorf("request %+v got lease values %v", req, vals)
					return
				}
				item, err := renderChangesOnce([]Change{Set("first", i), Add("n", 1), Remove("name")})
				if err != nil {
					t.Error(err)
					return
				}
				in := l.mergedInput(commit{op: completeOnlyOp(req), rowKey: Key{"id": attrS("k")}, vals: vals, plan: &effectPlan{item: item}})
				if attrNum(in.ExpressionAttributeValues[":token"]) != req.Token {
					t.Errorf("merged request with token %v, want %d", in.ExpressionAttributeValues[":token"], req.Token)
					return
				}
				_ = fmt.Sprint(in.ExpressionAttributeNames, *in.UpdateExpression) // read, as the SDK does
			}
		})
	}
	wg.Wait()
}
