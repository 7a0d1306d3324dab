package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// The holes an adversarial review of effects found (2026-11-27), each pinned here.

// seededClaim seeds item 0 of e's source table and returns A's claim of it.
func (e *effectsEnv) seededClaim(t *testing.T) Claim {
	t.Helper()
	lcSeeder(t, e.raw, e.source)(lcKey(0))
	return lcMustClaim(t, e.l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1)
}

// TestEffectsItemRefusedInsideTransaction: DynamoDB refuses an invalid update inside a transaction
// (an operand of the wrong type, an item past 400 KB) as a cancellation whose reason on that
// action is ValidationError (DynamoDB Local answers a ValidationException instead, which the
// fault hook turns into DynamoDB's answer). With the inline ledger the item's changes ride on the
// completion (action 0): its refusal is theirs, a permanent *EffectError, not a retryable error.
func TestEffectsItemRefusedInsideTransaction(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"claim", "complete-only"} {
		t.Run(mode, func(t *testing.T) {
			e := newEffectsEnv(t, "inline")
			lcSeeder(t, e.raw, e.source)(lcKey(0))
			e.fc.OnCall(func(ctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
				return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled [ValidationError, None]"),
					CancellationReasons: []types.CancellationReason{
						{Code: aws.String("ValidationError"), Message: aws.String("An operand in the update expression has an incorrect data type")},
						{Code: aws.String("None")}}}
			}, ddbfault.OpTransactWriteItems)
			eff := (&Effects{}).Item(Add("payload", 1)).Update(e.other, otherKey("c"), Add("n", 1))
			var err error
			if mode == "claim" {
				err = e.l.CompleteWith(ctx, lcMustClaim(t, e.l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1), lcT0, eff)
			} else {
				_, err = e.l.CompleteOnlyWith(ctx, lcReq(lcKey(0), "A", 0, 1, lcT0), eff)
			}
			var ee *EffectError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, -1, ee.Write, "the item's update")
			require.Contains(t, err.Error(), "ValidationError")
			require.Nil(t, e.get(t, e.other, otherKey("c")))
		})
	}
}

// TestEffectsRepeatedPutIfAbsentIsOneRequest: a commit rendered again (a repeat of the same
// commit) is the same request under its token, a put-if-absent of many attributes too (its
// condition once named them in map order, and DynamoDB refused the repeat as another request).
func TestEffectsRepeatedPutIfAbsentIsOneRequest(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	c := e.seededClaim(t)
	row := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "once"}}
	for i := range 12 {
		row[fmt.Sprintf("a%d", i)] = &types.AttributeValueMemberS{Value: "v"}
	}
	eff := (&Effects{}).PutIfAbsent(e.other, row)
	for range 6 {
		require.NoError(t, e.l.CompleteWith(ctx, c, lcT0, eff))
	}
	require.Equal(t, row, e.get(t, e.other, otherKey("once")))
}

// TestEffectsBracketNamesRefused: names are attribute names, not paths, but the SDK's expressions
// read "tags[0]" as element 0 of tags (and a versioned ledger then recorded another content than
// the one stored, so a follower handled its own output again and again). Such a name is refused,
// on the item and on another item, before anything is written.
func TestEffectsBracketNamesRefused(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"inline", "table"} {
		t.Run(kind, func(t *testing.T) {
			e := newEffectsEnv(t, kind)
			c := e.seededClaim(t)
			before := e.get(t, e.source, lcKey(0))
			for _, eff := range []*Effects{
				(&Effects{}).Item(Set("tags[0]", "z")),
				(&Effects{}).Item(Remove("x]")),
				(&Effects{}).Update(e.other, otherKey("c"), Add("n[1]", 1)),
			} {
				err := e.l.CompleteWith(ctx, c, lcT0, eff)
				var ee *EffectError
				require.ErrorAs(t, err, &ee)
				require.Contains(t, err.Error(), "not paths")
			}
			require.Equal(t, before, e.get(t, e.source, lcKey(0)))
			require.Nil(t, e.get(t, e.other, otherKey("c")))
			// A put's item is literal: its names may have brackets, if absent too.
			row := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"}, "a]": &types.AttributeValueMemberS{Value: "x"}}
			require.NoError(t, e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).PutIfAbsent(e.other, row)))
			require.Equal(t, row, e.get(t, e.other, otherKey("p")))
		})
	}
}

// TestEffectsActionLimit: DynamoDB commits up to 100 actions in one transaction: the completion,
// the table ledger's update of the item (when the item changes), and the writes. 100 are sent;
// 101 are refused before anything is written.
func TestEffectsActionLimit(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"inline", "table"} {
		t.Run(kind, func(t *testing.T) {
			e := newEffectsEnv(t, kind)
			lcSeeder(t, e.raw, e.source)(lcKey(0), lcKey(1))
			writes := func(n int, item bool) *Effects {
				eff := &Effects{}
				if item {
					eff.Item(Add("n", 1))
				}
				for i := range n {
					eff.Update(e.other, otherKey(fmt.Sprint(i)), Add("n", 1))
				}
				return eff
			}
			fits := 99 // with the completion
			if kind == "table" {
				fits = 98 // and the item's own update
			}
			c := lcMustClaim(t, e.l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1)
			err := e.l.CompleteWith(ctx, c, lcT0, writes(fits+1, true))
			require.ErrorIs(t, err, ErrEffectRefused)
			require.Contains(t, err.Error(), "at most 100 actions")
			require.NoError(t, e.l.CompleteWith(ctx, c, lcT0, writes(fits, true)))
			require.Equal(t, "1", numOf(e.get(t, e.other, otherKey(fmt.Sprint(fits-1))), "n"))
			c1 := lcMustClaim(t, e.l, lcReq(lcKey(1), "A", 0, 1, lcT0), 1)
			require.NoError(t, e.l.CompleteWith(ctx, c1, lcT0, writes(99, false)), "99 writes and the completion")
		})
	}
}

// TestMergedCommitOutlastsConflicts: a completion with the item's changes merged into its own
// UpdateItem that meets TransactionConflictException (the item in another client's transaction)
// more times than a claim would retry is sent again until it lands: a conflict applies nothing and
// is never the commit's failure.
func TestMergedCommitOutlastsConflicts(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"claim", "complete-only"} {
		t.Run(mode, func(t *testing.T) {
			e := newEffectsEnv(t, "inline")
			lcSeeder(t, e.raw, e.source)(lcKey(0))
			var c Claim
			if mode == "claim" {
				c = lcMustClaim(t, e.l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1)
			}
			e.conflictFirst(2*claimConflictRounds + 1)
			eff := (&Effects{}).Item(Add("runs", 1))
			if mode == "claim" {
				require.NoError(t, e.l.CompleteWith(ctx, c, lcT0, eff))
			} else {
				res, err := e.l.CompleteOnlyWith(ctx, lcReq(lcKey(0), "A", 0, 1, lcT0), eff)
				require.NoError(t, err)
				require.True(t, res.Applied)
			}
			item := e.get(t, e.source, lcKey(0))
			require.Equal(t, "1", numOf(item, "runs"))
			require.Equal(t, &types.AttributeValueMemberS{Value: "done"}, item["dp_status"])
		})
	}
}

// TestBatchSinglesNotHeldUpByABusyItem: a batch of completions falls back on one write per item;
// the item that transactions keep busy gives up after a few conflicts (its error returned), and
// the items after it in the batch are completed within the same context (they failed with its
// deadline while completions retried conflicts without limit).
func TestBatchSinglesNotHeldUpByABusyItem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newEffectsEnv(t, "inline")
	keys := []Key{lcKey(0), lcKey(1), lcKey(2)}
	lcSeeder(t, e.raw, e.source)(keys...)
	var claims []Claim
	for _, k := range keys {
		claims = append(claims, lcMustClaim(t, e.l, lcReq(k, "A", 0, 1, lcT0), 1))
	}
	invalid := &smithy.GenericAPIError{Code: "ValidationException", Message: "batch refused"}
	e.fc.OnCall(func(context.Context, ddbfault.Call, ddbfault.Send) (any, error) { return nil, invalid },
		ddbfault.OpBatchExecuteStatement, ddbfault.OpTransactWriteItems)
	busy := lcKey(0)["id"].(*types.AttributeValueMemberS).Value
	e.fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.UpdateItemInput)
		if id, ok := in.Key["id"].(*types.AttributeValueMemberS); ok && id.Value == busy {
			return nil, &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
		}
		return send(ctx, call.In)
	}, ddbfault.OpUpdateItem)
	errs := e.l.CompleteBatch(ctx, claims, lcT0)
	require.Error(t, errs[0], "the busy item")
	require.NoError(t, errs[1])
	require.NoError(t, errs[2])
	require.NoError(t, ctx.Err())
}

// TestBatchOfOneOutlastsConflicts: a batch of one completion (the usual batch at low load) is a
// completion alone: it waits out conflicts as CompleteWith does instead of giving up after a few.
func TestBatchOfOneOutlastsConflicts(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	c := e.seededClaim(t)
	e.conflictFirst(2*claimConflictRounds + 1)
	require.Equal(t, []error{nil}, e.l.CompleteBatch(ctx, []Claim{c}, lcT0))
	require.Equal(t, &types.AttributeValueMemberS{Value: "done"}, e.get(t, e.source, lcKey(0))["dp_status"])
}

// conflictFirst makes the first n UpdateItems fail with TransactionConflict (a transaction holds
// the item), more than a bounded claim waits out; the later ones are sent.
func (e *effectsEnv) conflictFirst(n int64) {
	var conflicts atomic.Int64
	e.fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		if conflicts.Add(1) <= n {
			return nil, &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
		}
		return send(ctx, call.In)
	}, ddbfault.OpUpdateItem)
}

// TestEffectsLandedThenConflictAndFailedWrite (found by an adversarial review of effects): a
// commit lands but its answer is lost; the repeat under its token is throttled, so the next
// attempt is a new request, which DynamoDB cancels with a conflict on the completion and a
// failed condition on the put if absent (its row is the commit's own). The completion's outcome
// is not in that answer: the row shows the commit landed, and the caller is told so, not that
// nothing of it applied.
func TestEffectsLandedThenConflictAndFailedWrite(t *testing.T) {
	for _, kind := range []string{"inline", "table"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			e := newEffectsEnv(t, kind)
			c := e.seededClaim(t)
			var calls atomic.Int64
			e.fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				switch calls.Add(1) {
				case 1:
					if _, err := send(ctx, call.In); err != nil {
						return nil, err
					}
					return nil, errors.New("connection reset by peer") // landed, its answer lost
				case 2:
					return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("throttled")}
				default:
					return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled [TransactionConflict, ConditionalCheckFailed]"),
						CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}, {Code: aws.String("ConditionalCheckFailed")}}}
				}
			}, ddbfault.OpTransactWriteItems)
			row := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "once"}, "n": &types.AttributeValueMemberN{Value: "1"}}
			require.NoError(t, e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).PutIfAbsent(e.other, row)), "the commit landed")
			require.Equal(t, row, e.get(t, e.other, otherKey("once")))
			require.Equal(t, StatusDone, lcState(t, e.l, lcKey(0)).Status)
		})
	}
}

// TestEffectsRefusedWriteBeforeAnyRow (found by a review of a2b65a3): the table ledger's
// complete-only commit of an item that has no row yet, whose put if absent meets an existing row,
// is refused naming the write, whether DynamoDB's answer says the completion's condition held
// (None) or does not say (a conflict on it): a read then finds no row, the pending item the
// completion's condition holds on. The item was left pending with no outcome.
func TestEffectsRefusedWriteBeforeAnyRow(t *testing.T) {
	for _, conflict := range []bool{false, true} {
		for _, fresh := range []bool{false, true} {
			t.Run(fmt.Sprintf("conflict=%v/fresh=%v", conflict, fresh), func(t *testing.T) {
				ctx := context.Background()
				e := newEffectsEnv(t, "table")
				lcSeeder(t, e.raw, e.source)(lcKey(0))
				taken := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "taken"}}
				_, err := e.raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.other), Item: taken})
				require.NoError(t, err)
				if conflict {
					e.fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
						return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled [TransactionConflict, ConditionalCheckFailed]"),
							CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}, {Code: aws.String("ConditionalCheckFailed")}}}
					}, ddbfault.OpTransactWriteItems)
				}
				r := lcReq(lcKey(0), "A", 0, 1, lcT0)
				r.Fresh = fresh
				_, err = e.l.CompleteOnlyWith(ctx, r, (&Effects{}).PutIfAbsent(e.other, taken))
				require.ErrorIs(t, err, ErrEffectRefused)
				var ee *EffectError
				require.ErrorAs(t, err, &ee)
				require.Equal(t, 0, ee.Write)
			})
		}
	}
}
