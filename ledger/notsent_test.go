package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// From helper-72's review of 19cab68: ErrNotSent (a round the write gate held past its context) is taken as
// "nothing of the call applied" (refused), but in multi-round calls an earlier round of the same
// writes may have landed with its outcome unknown. Each test: round 1 lands but answers with an
// error after which the call sends again; round 2 is held by the gate (1 WCU/s, rate halved by the
// throttle) until the 1 s context ends: ErrNotSent. The row shows the write applied.

type nsEnv struct {
	db     *dynamodb.Client
	fc     *ddbfault.Client
	source string
	plain  Ledger // no gate, no faults: makes the claims
	gated  Ledger // 1 WCU/s gate, through fc
	other  string
}

func newNSEnv(t *testing.T, items int) *nsEnv {
	db, source, names := lcSourceTable(t)
	e := &nsEnv{db: db, fc: ddbfault.New(db), source: source}
	var err error
	e.plain, err = NewInline(db, source, names)
	require.NoError(t, err)
	e.gated, err = NewInline(e.fc, source, names, WithWriteGate(NewWriteGate(1)))
	require.NoError(t, err)
	lcSeeder(t, db, source)(lcKeys(0, items)...)
	return e
}

func (e *nsEnv) status(t *testing.T, k Key) Status {
	st, err := e.plain.State(context.Background(), k)
	require.NoError(t, err)
	return st.Status
}

// H1: CompleteBatch in a statement batch: two statements land but are answered
// InternalServerError ("outcome unknown: sent again"); the repeat is held by the gate: both
// completions are reported ErrNotSent (settleCut skips its read for ErrNotSent), though done.
func TestCompleteBatchNotSentAfterUnknownRound(t *testing.T) {
	ddbtest.Need(t, ddbtest.CapPartiQLConditions)
	e := newNSEnv(t, 3)
	keys := lcKeys(0, 3)
	outs, err := e.plain.Claim(context.Background(), freshReqs(keys, "A", lcT0))
	require.NoError(t, err)
	claims := []Claim{outs[0].Claim, outs[1].Claim, outs[2].Claim}
	e.fc.OnCall(landedAsServerError(), ddbfault.OpBatchExecuteStatement)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	errs := e.gated.CompleteBatch(ctx, claims, lcT0)
	for i := range 2 {
		require.Equal(t, StatusDone, e.status(t, keys[i]), "the completion landed in round 1")
		require.False(t, errors.Is(errs[i], ErrNotSent), "completion %d applied but reported ErrNotSent (nothing applied): %v", i, errs[i])
	}
}

// H2: a batched fresh claim in a statement batch: two claims land but are answered
// InternalServerError; the repeat is held by the gate: Claim fails with ErrNotSent, and the landed
// claims are neither reported nor undone (claimStatementRound's `refused(err)` case skips
// undoSettled): attempt 1 used up under ids nobody holds.
func TestClaimBatchNotSentAfterUnknownRound(t *testing.T) {
	ddbtest.Need(t, ddbtest.CapPartiQLConditions)
	e := newNSEnv(t, 3)
	keys := lcKeys(0, 3)
	e.fc.OnCall(landedAsServerError(), ddbfault.OpBatchExecuteStatement)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := e.gated.Claim(ctx, freshReqs(keys, "A", lcT0))
	t.Logf("claim: %v", err)
	require.Error(t, err)
	for i := range 2 {
		st, serr := e.plain.State(context.Background(), keys[i])
		require.NoError(t, serr)
		require.Equal(t, 0, st.Attempts, "key %d: claim landed, not reported, not undone (status %s)", i, st.Status)
	}
}

// H3: a single fenced completion (Complete, also CompleteWith without effects, Retry, DeadLetter,
// Release): round 1 lands but ends throttled (an SDK attempt landed, its answer lost, the SDK's
// repeats throttled); updateConflicts sends again after a backoff, held by the gate: ErrNotSent,
// and fenced's settleCut does not read. Before 19cab68 the ctx error was settled by a read (nil).
func TestCompleteNotSentAfterThrottledRound(t *testing.T) {
	e := newNSEnv(t, 1)
	k := lcKey(0)
	c := lcMustClaim(t, e.plain, lcReq(k, "A", 0, 1, lcT0), 1)
	e.fc.OnCall(landedThenThrottled(), ddbfault.OpUpdateItem)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := e.gated.Complete(ctx, c, lcT0)
	require.Equal(t, StatusDone, e.status(t, k))
	require.False(t, errors.Is(err, ErrNotSent), "completion applied but reported ErrNotSent: %v", err)
}

// H4: a commit of effects (a transaction): round 1 lands but ends throttled; commitTx takes
// throttling for nothing applied (tokens++, lost stays 0), and the repeat, held by the gate,
// returns ErrNotSent without the settling read commitNotSent makes only for lost > 0. Before
// 19cab68 the ctx error reached `case ctx.Err() != nil: settleCommit`: applied.
func TestCommitNotSentAfterThrottledRound(t *testing.T) {
	e := newNSEnv(t, 1)
	other := ddbtest.CreateTable(t, e.db, ddbtest.Key{Name: "pk", Type: "S"})
	k := lcKey(0)
	c := lcMustClaim(t, e.plain, lcReq(k, "A", 0, 1, lcT0), 1)
	e.fc.OnCall(landedThenThrottled(), ddbfault.OpTransactWriteItems)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	eff := (&Effects{}).Put(other, map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}})
	err := e.gated.CompleteWith(ctx, c, lcT0, eff)
	require.Equal(t, StatusDone, e.status(t, k), "the commit landed in round 1")
	require.NotEmpty(t, getItem(t, e.db, other, otherKey("x")), "its effect too")
	require.False(t, errors.Is(err, ErrNotSent), "commit applied but reported ErrNotSent: %v", err)
}

// landedThenThrottled sends the first call, then answers it throttled (an SDK attempt landed, its
// answer lost, the SDK's repeats throttled); later calls are sent.
func landedThenThrottled() ddbfault.Hook {
	n := 0
	return func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		n++
		if n == 1 {
			if _, err := send(ctx, call.In); err != nil {
				return nil, err
			}
			return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("injected after landing")}
		}
		return send(ctx, call.In)
	}
}

// landedAsServerError sends the first statement batch and answers its statements 0 and 1 with
// InternalServerError ("outcome unknown: sent again"), though they landed; later calls are sent.
func landedAsServerError() ddbfault.Hook {
	n := 0
	return func(ctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
		n++
		out, err := send(ctx, c.In)
		if n == 1 && err == nil {
			o := out.(*dynamodb.BatchExecuteStatementOutput)
			for _, i := range []int{0, 1} {
				o.Responses[i] = types.BatchStatementResponse{Error: &types.BatchStatementError{
					Code: types.BatchStatementErrorCodeEnumInternalServerError, Message: aws.String("injected")}}
			}
		}
		return out, err
	}
}
