package ledger

// Regression tests from an adversarial review of the ledger and its effects (each failed before
// its fix, except the rewrite tests, which pin documented behaviour).

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// A Put of another item of an inline ledger's table (naming no ledger attribute) is accepted, and
// like any rewrite of that item replaces its state with it: the item is pending again, handled
// again, and its effect applies again (README: a Put of another item rewrites it).
func TestEffectsPutOfAnotherItemRewritesIt(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	a, b := lcKey(0), lcKey(1)
	lcSeeder(t, e.raw, e.source)(a, b)
	cb := lcMustClaim(t, e.l, lcReq(b, "W1", 0, 1, lcT0), 1)
	require.NoError(t, e.l.CompleteWith(ctx, cb, lcT0, (&Effects{}).Update(e.other, otherKey("count"), Add("n", 1))))
	ca := lcMustClaim(t, e.l, lcReq(a, "W1", 0, 1, lcT0), 1)
	require.NoError(t, e.l.CompleteWith(ctx, ca, lcT0, (&Effects{}).Put(e.source, map[string]types.AttributeValue{
		"id": b["id"], "payload": &types.AttributeValueMemberS{Value: "refreshed"}})))
	require.Equal(t, StatusPending, lcState(t, e.l, b).Status, "the rewrite took B's state with it")
	require.True(t, lcClaim(t, e.l, lcReq(b, "W2", 1, 1, lcT0.Add(time.Second))).Claimed)
}

// a complete-only commit sent as a transaction with Fresh = true that meets an item which has
// gained a state (a due retry) is refused, nothing of it applied, and not sent again under the
// general condition (it would land on a state another worker's write made: seenState); a commit
// that names the retry it saw (Seen) lands.
func TestEffectsFreshRefusedByGainedState(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	k := lcKey(0)
	lcSeeder(t, e.raw, e.source)(k)
	// A failed complete-only attempt leaves the item in retry, due now.
	r0 := lcReq(k, "W0", 0, 1, lcT0)
	res, err := e.l.FailOnly(ctx, r0, Failure{Error: "boom", RetryAt: lcT0, MaxAttempts: 5})
	require.NoError(t, err)
	require.Equal(t, StatusRetry, res.Found.Status)

	// A worker whose scan saw the item before that write (no state: Fresh) completes it with an effect.
	r := lcReq(k, "W1", 0, 1, lcT0.Add(time.Second))
	r.Fresh = true
	eff := func() *Effects { return (&Effects{}).Update(e.other, otherKey("count"), Add("n", 1)) }
	before := e.fc.CallsByOp()["TransactWriteItems"]
	res, err = e.l.CompleteOnlyWith(ctx, r, eff())
	require.NoError(t, err)
	require.False(t, res.Applied, "a state gained since the scan refuses the fresh write")
	require.Equal(t, StatusRetry, res.Found.Status)
	require.Equal(t, before+1, e.fc.CallsByOp()["TransactWriteItems"], "not sent again under the general condition")
	require.Nil(t, e.get(t, e.other, otherKey("count")), "nothing of the effects applied")

	r2 := lcReq(k, "W1", 0, 1, lcT0.Add(2*time.Second))
	r2.Seen = res.Found.Claim
	res, err = e.l.CompleteOnlyWith(ctx, r2, eff())
	require.NoError(t, err)
	require.True(t, res.Applied, "the retry it saw is completed")
}

// a write to the item ITSELF is refused for string keys, but not for binary keys (compare()
// does not order B values, so sameKey says "another item").
func TestEffectsWriteToItselfRefusedForEveryKeyType(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"S", "B"} {
		t.Run(kind, func(t *testing.T) {
			db, source, names := lcSourceTable(t, ddbtest.Key{Name: "id", Type: kind})
			ledgerTable := lcLedgerTable(t, db)
			l, err := NewTable(db, ledgerTable, "job", source, names)
			require.NoError(t, err)
			var k Key
			if kind == "S" {
				k = Key{"id": &types.AttributeValueMemberS{Value: "x"}}
			} else {
				k = Key{"id": &types.AttributeValueMemberB{Value: []byte("x")}}
			}
			lcSeeder(t, db, source)(k)
			c := lcMustClaim(t, l, lcReq(k, "W1", 0, 1, lcT0), 1)
			err = l.CompleteWith(ctx, c, lcT0, (&Effects{}).Delete(source, Key{"id": k["id"]}))
			t.Logf("%s key: CompleteWith(Delete of the item itself) err = %v", kind, err)
			require.Error(t, err, "README: a write to the item itself is refused before anything is written")
		})
	}
}

// a batched completion that landed, whose answer was lost and whose repeat came back without
// the rows' images (LostAnswerRetriedNoOld), is reported as a lost claim (found "pending"), where
// Complete (and the interface: "as Complete") reports nil.
func TestCompleteBatchWithoutImageSettlesByRead(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	ks := lcKeys(0, 3)
	lcSeeder(t, e.raw, e.source)(ks...)
	var cs []Claim
	for _, k := range ks {
		cs = append(cs, lcMustClaim(t, e.l, lcReq(k, "W1", 0, 1, lcT0), 1))
	}
	e.fc.Inject(ddbfault.Fault{Kind: ddbfault.LostAnswerRetriedNoOld, At: 1, Ops: []string{ddbfault.OpTransactWriteItems}})
	errs := e.l.CompleteBatch(ctx, cs, lcT0)
	for i, k := range ks {
		t.Logf("item %d: state %q, CompleteBatch error: %v", i, lcState(t, e.l, k).Status, errs[i])
	}
	for i := range ks {
		require.NoError(t, errs[i], "a completion of this very claim that landed is the caller's")
	}
}

// an item effect DynamoDB refuses as invalid (ADD to a string attribute: a handler bug) is
// an *EffectError on the transaction path but not on the merged (inline) path, where it is a plain
// error the worker treats as an unknown outcome (claim mode) or retries for ever (complete-only);
// either path names the attribute added to, which DynamoDB's error does not.
func TestEffectsInvalidItemUpdateRefused(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"inline", "table"} {
		t.Run(kind, func(t *testing.T) {
			e := newEffectsEnv(t, kind)
			k := lcKey(0)
			lcSeeder(t, e.raw, e.source)(k, lcKey(1)) // payload is a string
			c := lcMustClaim(t, e.l, lcReq(k, "W1", 0, 1, lcT0), 1)
			err := e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).Item(Add("payload", 1)))
			t.Logf("%s CompleteWith: errors.Is(err, ErrEffectRefused)=%v err=%v", kind, errors.Is(err, ErrEffectRefused), err)
			r := lcReq(lcKey(1), "W1", 0, 1, lcT0)
			_, err2 := e.l.CompleteOnlyWith(ctx, r, (&Effects{}).Item(Add("payload", 1)))
			t.Logf("%s CompleteOnlyWith: errors.Is(err, ErrEffectRefused)=%v err=%v", kind, errors.Is(err2, ErrEffectRefused), err2)
			require.ErrorIs(t, err, ErrEffectRefused)
			require.ErrorIs(t, err2, ErrEffectRefused)
			// DynamoDB's "incorrect data type" names no attribute: the error names the one added to.
			require.ErrorContains(t, err, `the item's update, attribute "payload"`)
			require.ErrorContains(t, err2, `the item's update, attribute "payload"`)
		})
	}
}

// With the table ledger the state is not on the item: another client's PutItem rewrite of a done
// item leaves it done (README: only the inline ledger's state goes with a rewrite).
func TestTableLedgerStateOutlivesARewrite(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "table")
	k := lcKey(0)
	lcSeeder(t, e.raw, e.source)(k)
	c := lcMustClaim(t, e.l, lcReq(k, "W1", 0, 1, lcT0), 1)
	require.NoError(t, e.l.Complete(ctx, c, lcT0))
	lcSeeder(t, e.raw, e.source)(k) // another client rewrites the item with PutItem
	require.Equal(t, StatusDone, lcState(t, e.l, k).Status)
}

// A commit whose write names a table that does not exist is refused as a whole: the error names
// the tables the writes name (DynamoDB does not say which write), as a user who misspelt one needs
// (helper-70: it said only "Cannot do operations on a non-existent table"). It is not the item's
// refusal (ErrEffectRefused, which dead-letters it) but DynamoDB's ResourceNotFoundException,
// which every item that writes the table meets: the worker stops its pass on it, as on a commit
// IAM denies.
func TestEffectsMissingTableNamed(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	k := lcKey(0)
	lcSeeder(t, e.raw, e.source)(k)
	c := lcMustClaim(t, e.l, lcReq(k, "W1", 0, 1, lcT0), 1)
	err := e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).Update("no_such_counters", otherKey("count"), Add("n", 1)))
	require.NotErrorIs(t, err, ErrEffectRefused)
	var rnf *types.ResourceNotFoundException
	require.ErrorAs(t, err, &rnf)
	require.ErrorContains(t, err, `a table it writes does not exist (its writes name ["no_such_counters"])`)
	require.Equal(t, StatusClaimed, lcState(t, e.l, k).Status, "nothing of the commit applied")
}
