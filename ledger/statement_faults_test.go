package ledger

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// These tests are an adversarial review's reproducers of the statement batches (each failed before
// its fix): claims that landed before a batched Claim failed, a repeated key in CompleteBatch,
// throttled statements counted, statements denied by IAM.

// stmtHook answers a BatchExecuteStatement: the statements at the indexes in fail are not sent and
// answered with code; the rest are sent and their real answers returned in place.
func stmtHook(fail map[int]types.BatchStatementErrorCodeEnum) ddbfault.Hook {
	return func(ctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
		in := c.In.(*dynamodb.BatchExecuteStatementInput)
		cp := *in
		cp.Statements = nil
		var sentIdx []int
		for i, s := range in.Statements {
			if _, ok := fail[i]; !ok {
				cp.Statements = append(cp.Statements, s)
				sentIdx = append(sentIdx, i)
			}
		}
		resp := make([]types.BatchStatementResponse, len(in.Statements))
		for i, code := range fail {
			resp[i] = types.BatchStatementResponse{Error: &types.BatchStatementError{Code: code, Message: aws.String("injected")}}
		}
		if len(cp.Statements) > 0 {
			out, err := send(ctx, &cp)
			if err != nil {
				return nil, err
			}
			for j, r := range out.(*dynamodb.BatchExecuteStatementOutput).Responses {
				resp[sentIdx[j]] = r
			}
		}
		return &dynamodb.BatchExecuteStatementOutput{Responses: resp}, nil
	}
}

// TestStatementClaimErrorUndoesLandedClaims: a batched claim whose statement batch landed
// some claims and then fails (here: two statements throttled, and the caller's context ends in the
// backoff before they are sent again, e.g. a shutdown or the lease ending) returns (nil, err); the
// claims that landed in the first round are neither reported nor undone. They stay claimed with
// attempt 1 under ids nobody holds: the next claim (after the TTL) is attempt 2. The transaction
// path never leaves such claims (a cancelled transaction wrote nothing; landed claims whose read
// back fails are undone).
func TestStatementClaimErrorUndoesLandedClaims(t *testing.T) {
	for _, mode := range []string{"throttle-then-cancel", "internal-error-then-lost-batch", "access-denied-statement"} {
		t.Run(mode, func(t *testing.T) {
			e := newStmtEnv(t, 4)
			keys := lcKeys(0, 4)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := 0
			e.fc.OnCall(func(hctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
				n++
				switch mode {
				case "throttle-then-cancel":
					if n == 1 {
						out, err := stmtHook(map[int]types.BatchStatementErrorCodeEnum{
							0: types.BatchStatementErrorCodeEnumProvisionedThroughputExceeded,
							1: types.BatchStatementErrorCodeEnumProvisionedThroughputExceeded,
						})(hctx, c, send)
						cancel() // shutdown while the throttled statements wait
						return out, err
					}
				case "internal-error-then-lost-batch":
					if n == 1 {
						return stmtHook(map[int]types.BatchStatementErrorCodeEnum{
							0: types.BatchStatementErrorCodeEnumInternalServerError,
							1: types.BatchStatementErrorCodeEnumInternalServerError,
						})(hctx, c, send)
					}
					return nil, errors.New("injected: connection reset")
				case "access-denied-statement":
					return stmtHook(map[int]types.BatchStatementErrorCodeEnum{0: types.BatchStatementErrorCodeEnumAccessDenied})(hctx, c, send)
				}
				return send(hctx, c.In)
			}, ddbfault.OpBatchExecuteStatement)
			outs, err := e.l.Claim(ctx, freshReqs(keys, "A", lcT0))
			if mode == "access-denied-statement" {
				require.NoError(t, err, "a denied statement is claimed with an UpdateItem")
				for i, k := range keys {
					require.True(t, outs[i].Claimed)
					require.Equal(t, 1, e.l.stateOnItem(e.row(t, k)).Attempts)
				}
				return
			}
			require.Error(t, err)
			var orphaned []int
			for i, k := range keys {
				st := e.l.stateOnItem(e.row(t, k))
				if st.Attempts != 0 {
					orphaned = append(orphaned, i)
				}
			}
			// Expected (as checkClaims in TestLedgerStatementBatchFaults states): a claim not
			// reported uses up no attempt.
			require.Empty(t, orphaned, "claims landed, not reported and not undone")
		})
	}
}

// TestStatementCompleteBatchRepeatedKey: CompleteBatch with the same key twice
// (a claim sent twice) is one statement batch with a duplicate key: DynamoDB refuses the whole batch
// as invalid ("Provided list of item keys contains duplicates"), and statementsAnswered takes that
// for a backend without PartiQL: the ledger falls back to transactions (2 WCU per item) for good.
func TestStatementCompleteBatchRepeatedKey(t *testing.T) {
	ctx := context.Background()
	e := newStmtEnv(t, 3)
	keys := lcKeys(0, 3)
	outs, err := e.l.Claim(ctx, freshReqs(keys, "A", lcT0))
	require.NoError(t, err)
	c := []Claim{outs[0].Claim, outs[1].Claim, outs[2].Claim, outs[0].Claim}
	errs := e.l.CompleteBatch(ctx, c, lcT0)
	for i, err := range errs {
		require.NoError(t, err, "completion %d (the repeat is done by the first)", i)
	}
	require.False(t, e.l.core.noStatements.Load(), "one batch with a repeated key turned statement batches off for good")
}

// TestStatementThrottledNotCounted: statements a batch answers as throttled were not
// written (DynamoDB bills no capacity for a throttled request), but executeStatements counts
// every statement of every batch at 1 WCU: sent again, each throttled statement is counted twice.
func TestStatementThrottledNotCounted(t *testing.T) {
	ctx := context.Background()
	e := newStmtEnv(t, 4)
	keys := lcKeys(0, 4)
	n := 0
	e.fc.OnCall(func(hctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
		n++
		if n == 1 {
			return stmtHook(map[int]types.BatchStatementErrorCodeEnum{
				0: types.BatchStatementErrorCodeEnumThrottlingError, 1: types.BatchStatementErrorCodeEnumThrottlingError,
			})(hctx, c, send)
		}
		return send(hctx, c.In)
	}, ddbfault.OpBatchExecuteStatement)
	outs, err := e.l.Claim(ctx, freshReqs(keys, "A", lcT0))
	require.NoError(t, err)
	for _, o := range outs {
		require.True(t, o.Claimed)
	}
	t.Logf("batches %d, ConsumedWCU %.1f", n, e.l.ConsumedWCU())
	require.InDelta(t, 4, e.l.ConsumedWCU(), 1e-9, "4 items written once each (the throttled statements were not written)")
}

// TestStatementAccessDeniedFallsBack: a role without dynamodb:PartiQLUpdate (an IAM
// policy from before this change) has each statement of a batch answered AccessDenied; the batch
// itself succeeds, so statementsAnswered never counts a failure and the ledger never falls back.
// Every batched claim fails, and every batched completion fails with an error that is not a lost
// claim (the worker reports it as unknown and handles the item again once its claim expires),
// for ever, where the single writes (UpdateItem) and transactions would work.
func TestStatementAccessDeniedFallsBack(t *testing.T) {
	ctx := context.Background()
	e := newStmtEnv(t, 6)
	keys := lcKeys(0, 6)
	// Claim 3 items singly (allowed) so there is something to complete.
	var claims []Claim
	for _, k := range keys[:3] {
		claims = append(claims, lcMustClaim(t, e.l, lcReq(k, "A", 0, 1, lcT0), 1))
	}
	e.fc.OnCall(func(hctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
		in := c.In.(*dynamodb.BatchExecuteStatementInput)
		fail := map[int]types.BatchStatementErrorCodeEnum{}
		for i := range in.Statements {
			fail[i] = types.BatchStatementErrorCodeEnumAccessDenied
		}
		return stmtHook(fail)(hctx, c, send)
	}, ddbfault.OpBatchExecuteStatement)
	outs, err := e.l.Claim(ctx, freshReqs(keys[3:], "A", lcT0))
	require.NoError(t, err)
	for _, o := range outs {
		require.True(t, o.Claimed)
	}
	for i, err := range e.l.CompleteBatch(ctx, claims, lcT0) {
		require.NoError(t, err, "completion %d", i)
	}
	require.True(t, e.l.core.noStatements.Load(), "statements denied: the ledger stops sending them")
}

// TestStatementTableInsertDenied: the table ledger's batched fresh claims are INSERTs, which IAM
// authorises as dynamodb:PartiQLInsert. Simulated: each INSERT statement answered AccessDenied
// (UPDATEs allowed), as under a policy without PartiQLInsert: the claims are made by UpdateItems
// and the ledger sends no more statements (it failed every batched claim for ever before).
func TestStatementTableInsertDenied(t *testing.T) {
	ctx := context.Background()
	l, fc, keys := newTableStmtLedger(t, 4)
	fc.OnCall(func(hctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
		in := c.In.(*dynamodb.BatchExecuteStatementInput)
		fail := map[int]types.BatchStatementErrorCodeEnum{}
		for i, s := range in.Statements {
			if len(aws.ToString(s.Statement)) > 6 && aws.ToString(s.Statement)[:6] == "INSERT" {
				fail[i] = types.BatchStatementErrorCodeEnumAccessDenied
			}
		}
		return stmtHook(fail)(hctx, c, send)
	}, ddbfault.OpBatchExecuteStatement)
	outs, err := l.Claim(ctx, freshReqs(keys, "A", lcT0))
	require.NoError(t, err)
	for i, o := range outs {
		require.True(t, o.Claimed, "item %d", i)
		require.Equal(t, 1, o.Claim.Attempt)
	}
	require.True(t, l.core.noStatements.Load(), "a denied statement: the ledger stops sending them")
}
