package ledger

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// noCalls is a client that is never called (rendering needs none).
type noCalls struct{ Client }

// TestStatementRendering: the transitions a batch carries render as one PartiQL UPDATE each, with
// one parameter per placeholder; those PartiQL cannot express on an item without the attribute
// (an ADD, if_not_exists, a NOT) and names it cannot quote are not rendered.
func TestStatementRendering(t *testing.T) {
	l, err := NewInline(noCalls{}, "src", []string{"id"}, WithRemoveOnDone("shard"))
	require.NoError(t, err)
	c := l.core
	key := lcKey(1)
	req := lcReq(key, "A", 2, 7, lcT0)
	req.ID = "c1"
	s, ok := c.statement(OpClaimFresh, key, c.requestVals(req))
	require.True(t, ok)
	text := aws.ToString(s.Statement)
	require.True(t, strings.HasPrefix(text, `UPDATE "src" SET "dp_status" = ?`), text)
	require.Contains(t, text, `SET "dp_attempts" = ?`)
	require.Contains(t, text, `WHERE "id" = ? AND (("id" IS NOT MISSING) AND ("dp_status" IS MISSING))`)
	require.Equal(t, strings.Count(text, "?"), len(s.Parameters))
	for i, p := range s.Parameters {
		require.NotNil(t, p, "parameter %d", i)
	}
	require.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, s.ReturnValuesOnConditionCheckFailure)

	s, ok = c.statement(OpComplete, key, values{vClaim: attrS("c1"), vNow: attrMillis(lcT0)})
	require.True(t, ok)
	text = aws.ToString(s.Statement)
	require.Contains(t, text, `SET "dp_status" = ? SET "dp_done_at" = ? REMOVE "shard" WHERE "id" = ? AND (("dp_status" = ?) AND ("dp_claim" = ?))`)
	require.Equal(t, strings.Count(text, "?"), len(s.Parameters))

	for _, op := range []Op{OpClaim, OpCompleteOnly, OpRedrive, OpRelease} {
		_, ok := c.statement(op, key, c.requestVals(req))
		require.False(t, ok, "%s has no PartiQL form", op)
	}
	quoted, err := NewInline(noCalls{}, `sr"c`, []string{"id"})
	require.NoError(t, err)
	_, ok = quoted.core.statement(OpClaimFresh, key, quoted.core.requestVals(req))
	require.False(t, ok, "a table name with a double quote is not rendered")
}

// stmtEnv is an inline ledger over a fault-injecting client on DynamoDB Local.
type stmtEnv struct {
	db     *dynamodb.Client
	fc     *ddbfault.Client
	l      *Inline
	source string
}

func newStmtEnv(t *testing.T, items int) *stmtEnv {
	ddbtest.Need(t, ddbtest.CapPartiQLConditions)
	db, source, names := lcSourceTable(t)
	e := &stmtEnv{db: db, fc: ddbfault.New(db, ddbfault.WithTimeout(50*time.Millisecond)), source: source}
	var err error
	e.l, err = NewInline(e.fc, source, names)
	require.NoError(t, err)
	lcSeeder(t, db, source)(lcKeys(0, items)...)
	return e
}

func (e *stmtEnv) calls(op string) int64 { return e.fc.CallsByOp()[op] }

func (e *stmtEnv) row(t *testing.T, k Key) map[string]types.AttributeValue {
	out, err := e.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(e.source), Key: k, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item
}

func freshReqs(keys []Key, owner string, now time.Time) []ClaimRequest {
	reqs := make([]ClaimRequest, len(keys))
	for i, k := range keys {
		reqs[i] = lcReq(k, owner, 0, 1, now)
		reqs[i].Fresh = true
	}
	return reqs
}

// TestLedgerStatementBatches: 25 fresh claims go in one BatchExecuteStatement and their
// completions in another, with no transaction and no read, at 1 WCU per item write. A fresh claim
// that meets a live claim reports it; one that meets an expired claim is made again as a general
// claim (an UpdateItem: attempt 2); a stale completion in a batch is a lost claim and a repeated
// one is done.
func TestLedgerStatementBatches(t *testing.T) {
	ctx := context.Background()
	e := newStmtEnv(t, 28)
	keys := lcKeys(0, 28)
	claims := mustClaimFresh(t, e.l, keys[:25])
	require.Equal(t, int64(1), e.calls(ddbfault.OpBatchExecuteStatement))
	require.Zero(t, e.calls(ddbfault.OpTransactWriteItems))
	require.Zero(t, e.calls(ddbfault.OpUpdateItem)+e.calls(ddbfault.OpGetItem)+e.calls(ddbfault.OpBatchGetItem), "nothing read back")
	require.InDelta(t, 25, e.l.ConsumedWCU(), 1e-9, "1 WCU per claim")

	for i, err := range e.l.CompleteBatch(ctx, claims, lcT0) {
		require.NoError(t, err, "item %d", i)
	}
	require.Equal(t, int64(2), e.calls(ddbfault.OpBatchExecuteStatement))
	require.Zero(t, e.calls(ddbfault.OpTransactWriteItems))
	require.InDelta(t, 50, e.l.ConsumedWCU(), 1e-9, "1 WCU per completion")
	for _, k := range keys[:25] {
		require.Equal(t, StatusDone, e.l.stateOnItem(e.row(t, k)).Status)
	}

	// A live claim, an expired one and a fresh item in one batch.
	live := lcMustClaim(t, e.l, lcReq(keys[25], "X", 1, 1, lcT0), 1)
	lcMustClaim(t, e.l, lcReq(keys[26], "X", 1, 1, lcT0.Add(-2*lcTTL)), 1)
	outs, err := e.l.Claim(ctx, freshReqs(keys[25:], "A", lcT0))
	require.NoError(t, err)
	require.False(t, outs[0].Claimed)
	require.Equal(t, StatusClaimed, outs[0].Found.Status)
	require.Equal(t, live.ID, outs[0].Found.Claim)
	require.True(t, outs[1].Claimed)
	require.Equal(t, 2, outs[1].Claim.Attempt, "the expired claim is taken over: attempt 2")
	require.True(t, outs[2].Claimed)
	require.Equal(t, 1, outs[2].Claim.Attempt)

	stale := outs[1].Claim
	stale.ID = "stale"
	errs := e.l.CompleteBatch(ctx, []Claim{stale, outs[2].Claim, claims[0]}, lcT0)
	require.ErrorIs(t, errs[0], ErrClaimLost)
	var lost *ClaimLostError
	require.ErrorAs(t, errs[0], &lost)
	require.Equal(t, StatusClaimed, lost.Found.Status)
	require.NoError(t, errs[1])
	require.NoError(t, errs[2], "a completion sent again after it landed is done")
}

// TestLedgerStatementBatchFaults: every fault at the statement batch of a claim and of a
// completion. Whatever the caller is told, the rows agree: a claim reported is stored with its
// attempt, a claim not reported holds no attempt of the caller's and is claimed by the next
// request; a completion reported is done, one not reported is done or still the caller's to
// complete.
func TestLedgerStatementBatchFaults(t *testing.T) {
	ctx := context.Background()
	for _, kind := range ddbfault.Kinds() {
		t.Run(string(kind), func(t *testing.T) {
			e := newStmtEnv(t, 4)
			keys := lcKeys(0, 4)
			e.fc.Inject(ddbfault.Fault{Kind: kind, At: 1, Ops: []string{ddbfault.OpBatchExecuteStatement}})
			outs, err := e.l.Claim(ctx, freshReqs(keys, "A", lcT0))
			claims := e.checkClaims(t, keys, outs, err)

			e.fc.Inject(ddbfault.Fault{Kind: kind, At: 1, Ops: []string{ddbfault.OpBatchExecuteStatement}})
			errs := e.l.CompleteBatch(ctx, claims, lcT0)
			for i, c := range claims {
				st := e.l.stateOnItem(e.row(t, c.Key))
				if errs[i] == nil {
					require.Equal(t, StatusDone, st.Status, "item %d reported done", i)
					continue
				}
				require.NotErrorIs(t, errs[i], ErrClaimLost, "item %d", i)
				require.NoError(t, e.l.Complete(ctx, c, lcT0), "item %d: done, or still the caller's to complete", i)
			}
		})
	}
}

// checkClaims checks a batch claim's outcomes against the rows, claims again what was not
// reported, and returns every claim held.
func (e *stmtEnv) checkClaims(t *testing.T, keys []Key, outs []ClaimOutcome, err error) []Claim {
	var claims []Claim
	var again []Key
	for i, k := range keys {
		row := e.row(t, k)
		st := e.l.stateOnItem(row)
		if err == nil && outs[i].Claimed {
			require.Equal(t, StatusClaimed, st.Status, "item %d reported claimed", i)
			require.Equal(t, outs[i].Claim.ID, st.Claim)
			require.Equal(t, outs[i].Claim.Attempt, st.Attempts)
			claims = append(claims, outs[i].Claim)
			continue
		}
		require.Zero(t, st.Attempts, "item %d: a claim not reported uses up no attempt (%+v)", i, st)
		again = append(again, k)
	}
	if len(again) > 0 {
		outs, err := e.l.Claim(context.Background(), freshReqs(again, "A", lcT0.Add(time.Second)))
		require.NoError(t, err)
		for i, o := range outs {
			require.True(t, o.Claimed, "item %v claimed by the next request", again[i])
			require.Equal(t, 1, o.Claim.Attempt)
			claims = append(claims, o.Claim)
		}
	}
	return claims
}

// TestLedgerStatementFallback: a backend that fails statement batches as a whole makes the ledger
// write its batches as transactions, at once when it refuses them as invalid, else after
// statementFailuresToFallBack failures in a row; the claims are made either way.
func TestLedgerStatementFallback(t *testing.T) {
	ctx := context.Background()
	invalid := &smithy.GenericAPIError{Code: "ValidationException", Message: "injected: statement not supported"}
	for _, tc := range []struct {
		name     string
		failures int
		err      error
	}{{"invalid", 1, invalid}, {"server errors", statementFailuresToFallBack, errors.New("injected: 500")}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newStmtEnv(t, 2*(tc.failures+1))
			failed := 0
			e.fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
				failed++
				return nil, tc.err
			}, ddbfault.OpBatchExecuteStatement)
			keys := lcKeys(0, 2*(tc.failures+1))
			for round := 0; round <= tc.failures; round++ {
				outs, err := e.l.Claim(ctx, freshReqs(keys[2*round:2*round+2], "A", lcT0))
				if err != nil {
					require.Less(t, round, tc.failures, "round %d: %v", round, err)
					continue
				}
				for _, o := range outs {
					require.True(t, o.Claimed)
				}
			}
			require.Equal(t, tc.failures, failed, "statement batches sent before the fallback")
			require.True(t, e.l.core.noStatements.Load(), "fell back to transactions")
		})
	}
}

// TestLedgerTableStatementBatches: the table ledger's fresh claims are INSERTs of their rows in one
// statement batch (no transaction, 1 WCU each); a row that exists already (claimed by another
// worker, or expired) fails its INSERT and is claimed by an UpdateItem under the transition's own
// condition; the completions are one statement batch.
func TestLedgerTableStatementBatches(t *testing.T) {
	ctx := context.Background()
	l, fc, keys := newTableStmtLedger(t, 27)
	live := lcMustClaim(t, l, lcReq(keys[25], "X", 1, 1, lcT0), 1)
	lcMustClaim(t, l, lcReq(keys[26], "X", 1, 1, lcT0.Add(-2*lcTTL)), 1)
	before := fc.CallsByOp()
	wcu := l.ConsumedWCU()

	claims := mustClaimFresh(t, l, keys[:25])
	after := fc.CallsByOp()
	require.Equal(t, before[ddbfault.OpBatchExecuteStatement]+1, after[ddbfault.OpBatchExecuteStatement])
	require.Equal(t, before[ddbfault.OpTransactWriteItems], after[ddbfault.OpTransactWriteItems], "no transaction")
	require.InDelta(t, 25, l.ConsumedWCU()-wcu, 1e-9)
	for i, err := range l.CompleteBatch(ctx, claims, lcT0) {
		require.NoError(t, err, "item %d", i)
	}
	for _, k := range keys[:25] {
		st, err := l.State(ctx, k)
		require.NoError(t, err)
		require.Equal(t, StatusDone, st.Status)
	}

	outs, err := l.Claim(ctx, freshReqs(keys[25:], "A", lcT0))
	require.NoError(t, err)
	require.False(t, outs[0].Claimed)
	require.Equal(t, live.ID, outs[0].Found.Claim, "the live claim is reported")
	require.True(t, outs[1].Claimed)
	require.Equal(t, 2, outs[1].Claim.Attempt, "the expired claim is taken over")
}

// newTableStmtLedger is a table ledger over a fault-injecting client on DynamoDB Local, with n
// source items.
func newTableStmtLedger(t *testing.T, n int) (*Table, *ddbfault.Client, []Key) {
	ddbtest.Need(t, ddbtest.CapPartiQLConditions)
	db, source, names := lcSourceTable(t)
	fc := ddbfault.New(db)
	l, err := NewTable(fc, lcLedgerTable(t, db), "job", source, names)
	require.NoError(t, err)
	keys := lcKeys(0, n)
	lcSeeder(t, db, source)(keys...)
	return l, fc, keys
}

// mustClaimFresh claims keys as fresh items in one call: every claim must land, at attempt 1.
func mustClaimFresh(t *testing.T, l Ledger, keys []Key) []Claim {
	t.Helper()
	outs, err := l.Claim(context.Background(), freshReqs(keys, "A", lcT0))
	require.NoError(t, err)
	claims := make([]Claim, len(outs))
	for i, o := range outs {
		require.True(t, o.Claimed, "item %d", i)
		require.Equal(t, 1, o.Claim.Attempt)
		claims[i] = o.Claim
	}
	return claims
}
