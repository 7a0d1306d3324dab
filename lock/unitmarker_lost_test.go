package lock

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/clock"
)

// TestTakeOverUnitOfLostAnswer: a slot's next holder takes over a unit marker of the pass it
// resumes; the write lands, its answer is lost, and the SDK's repeat fails the condition (the
// marker names the caller now, not the lease it was read from). TakeOverUnit reports the
// take-over, from the marker the refusal carries or, when it carries none (a backend that ignores
// ALL_OLD), from a read. Before (helper-75) it reported (false, nil), and the worker failed the
// pass with "a unit marker of this slot changed under its holder".
func TestTakeOverUnitOfLostAnswer(t *testing.T) {
	for _, carried := range []bool{true, false} {
		t.Run(map[bool]string{true: "marker in the refusal", false: "refusal without it"}[carried], func(t *testing.T) {
			ctx := context.Background()
			db, table := lockTable(t)
			var lose atomic.Bool
			fc := ddbfault.New(db)
			fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				in := call.In.(*dynamodb.UpdateItemInput)
				if !strings.Contains(aws.ToString(in.ConditionExpression), ":fromToken") || !lose.CompareAndSwap(true, false) {
					return send(ctx, in)
				}
				if _, err := send(ctx, in); err != nil { // lands; its answer is lost
					return nil, err
				}
				out, err := send(ctx, in) // the SDK's repeat meets the write that landed
				var cf *types.ConditionalCheckFailedException
				if !carried && errors.As(err, &cf) {
					cf.Item = nil
				}
				return out, err
			}, ddbfault.OpUpdateItem)

			old, _ := newClient(t, db, table, WithClock(clock.NewFake(t0)), WithOwner("old"))
			lOld, err := old.TryAcquireSlot(ctx, "g", 1)
			require.NoError(t, err)
			p := UnitPass{Group: "g", Slot: 0, Pass: 1, Run: lOld.Token()}
			taken, _, err := lOld.MarkUnit(ctx, p, 3)
			require.NoError(t, err)
			require.True(t, taken)
			require.NoError(t, lOld.Release(ctx)) // the slot's next holder resumes the pass

			next, _ := newClient(t, fc, table, WithClock(clock.NewFake(t0)), WithOwner("next"))
			lNext, err := next.TryAcquireSlot(ctx, "g", 1)
			require.NoError(t, err)
			defer lNext.Release(ctx)
			_, cur, err := lNext.MarkUnit(ctx, p, 3)
			require.NoError(t, err)
			require.False(t, cur.HeldBy(lNext))

			lose.Store(true)
			took, err := lNext.TakeOverUnit(ctx, p, cur)
			require.NoError(t, err)
			require.True(t, took, "the take-over that landed is reported")
			require.False(t, lose.Load(), "the fault was met")
			ms, err := next.UnitMarkers(ctx, p)
			require.NoError(t, err)
			require.True(t, ms[3].HeldBy(lNext))

			taken, _, err = lOld.MarkUnit(ctx, p, 4) // the old lease released: refused, as before
			require.Error(t, err)
			require.False(t, taken)
			took, err = lNext.TakeOverUnit(ctx, p, UnitMarker{Unit: 3, Slot: 0, Token: lOld.Token()})
			require.NoError(t, err)
			require.True(t, took, "a repeat by the holder finds the marker its own")
		})
	}
}
