package ledger

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestReviewProbePartiQL: raw PartiQL behaviour of the backend (informational; logs answers).
func TestReviewProbePartiQL(t *testing.T) {
	ctx := context.Background()
	ddbtest.Need(t, ddbtest.CapPartiQLConditions)
	db, source, _ := lcSourceTable(t)
	lcSeeder(t, db, source)(lcKeys(0, 3)...)
	run := func(name string, stmts ...types.BatchStatementRequest) {
		out, err := db.BatchExecuteStatement(ctx, &dynamodb.BatchExecuteStatementInput{Statements: stmts})
		if err != nil {
			t.Logf("%s: whole batch error: %v", name, err)
			return
		}
		for i, r := range out.Responses {
			if r.Error != nil {
				t.Logf("%s: stmt %d: %s: %s item=%v", name, i, r.Error.Code, aws.ToString(r.Error.Message), r.Error.Item)
			} else {
				t.Logf("%s: stmt %d: ok", name, i)
			}
		}
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	st := func(text string, ps ...types.AttributeValue) types.BatchStatementRequest {
		return types.BatchStatementRequest{Statement: aws.String(text), Parameters: ps, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	}
	q := `"` + source + `"`
	run("insert existing", types.BatchStatementRequest{Statement: aws.String("INSERT INTO " + q + " VALUE {'id': ?, 'x': ?}"), Parameters: []types.AttributeValue{s("k0000"), s("1")}})
	run("update missing item", st("UPDATE "+q+` SET "x" = ? WHERE "id" = ? AND ("id" IS NOT MISSING)`, s("1"), s("nope")))
	run("two removes", st("UPDATE "+q+` SET "x" = ? REMOVE "a" REMOVE "b" WHERE "id" = ?`, s("1"), s("k0001")))
	run("same key twice", st("UPDATE "+q+` SET "x" = ? WHERE "id" = ?`, s("1"), s("k0002")), st("UPDATE "+q+` SET "y" = ? WHERE "id" = ?`, s("1"), s("k0002")))
	run("wrong key type", st("UPDATE "+q+` SET "x" = ? WHERE "id" = ?`, s("1"), &types.AttributeValueMemberN{Value: "1"}), st("UPDATE "+q+` SET "y" = ? WHERE "id" = ?`, s("1"), s("k0002")))
}

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

// TestReviewClaimErrorOrphansLandedStatementClaims: a batched claim whose statement batch landed
// some claims and then fails (here: two statements throttled, and the caller's context ends in the
// backoff before they are sent again, e.g. a shutdown or the lease ending) returns (nil, err); the
// claims that landed in the first round are neither reported nor undone. They stay claimed with
// attempt 1 under ids nobody holds: the next claim (after the TTL) is attempt 2. The transaction
// path never leaves such claims (a cancelled transaction wrote nothing; landed claims whose read
// back fails are undone).
func TestReviewClaimErrorOrphansLandedStatementClaims(t *testing.T) {
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
			t.Logf("Claim: outs=%v err=%v", outs, err)
			require.Error(t, err)
			var orphaned []int
			for i, k := range keys {
				st := e.l.stateOnItem(e.row(t, k))
				t.Logf("item %d: status=%q attempts=%d claim=%q", i, st.Status, st.Attempts, st.Claim)
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

// TestReviewCompleteBatchDuplicateKeyDisablesStatements: CompleteBatch with the same key twice
// (a claim sent twice) is one statement batch with a duplicate key: DynamoDB refuses the whole batch
// as invalid ("Provided list of item keys contains duplicates"), and statementsAnswered takes that
// for a backend without PartiQL: the ledger falls back to transactions (2 WCU per item) for good.
func TestReviewCompleteBatchDuplicateKeyDisablesStatements(t *testing.T) {
	ctx := context.Background()
	e := newStmtEnv(t, 3)
	keys := lcKeys(0, 3)
	outs, err := e.l.Claim(ctx, freshReqs(keys, "A", lcT0))
	require.NoError(t, err)
	c := []Claim{outs[0].Claim, outs[1].Claim, outs[2].Claim, outs[0].Claim}
	errs := e.l.CompleteBatch(ctx, c, lcT0)
	t.Logf("errs=%v", errs)
	require.False(t, e.l.core.noStatements.Load(), "one batch with a repeated key turned statement batches off for good")
}

// TestReviewTableInsertRowMatchesUpdateRow: the table ledger's row made by the statement INSERT
// (a batched fresh claim) has the same attributes as the row the single-claim UpdateItem makes, for
// a source with a sort key of type N.
func TestReviewTableInsertRowMatchesUpdateRow(t *testing.T) {
	ctx := context.Background()
	ddbtest.Need(t, ddbtest.CapPartiQLConditions)
	db, source, names := lcSourceTable(t, ddbtest.Key{Name: "p k", Type: "S"}, ddbtest.Key{Name: "select", Type: "N"})
	ledgerTable := lcLedgerTable(t, db)
	fc := ddbfault.New(db)
	l, err := NewTable(fc, ledgerTable, "jo#b%", source, names)
	require.NoError(t, err)
	key := func(i int) Key {
		return Key{"p k": &types.AttributeValueMemberS{Value: fmt.Sprintf("k%d", i)}, "select": &types.AttributeValueMemberN{Value: fmt.Sprint(i)}}
	}
	keys := []Key{key(1), key(2), key(3)}
	lcSeeder(t, db, source)(keys...)
	single := lcMustClaim(t, l, freshReqs(keys[:1], "A", lcT0)[0], 1)
	outs, err := l.Claim(ctx, freshReqs(keys[1:], "A", lcT0))
	require.NoError(t, err)
	require.True(t, outs[0].Claimed && outs[1].Claimed)
	require.Equal(t, int64(1), fc.CallsByOp()[ddbfault.OpBatchExecuteStatement])
	get := func(k Key) map[string]types.AttributeValue {
		rk, err := l.rowKey(k)
		require.NoError(t, err)
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(ledgerTable), Key: rk, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		return out.Item
	}
	a, b := get(keys[0]), get(keys[1])
	t.Logf("update row: %v", a)
	t.Logf("insert row: %v", b)
	require.Equal(t, len(a), len(b))
	for n, v := range a {
		w, ok := b[n]
		require.True(t, ok, "attribute %q missing on the INSERT's row", n)
		require.IsType(t, v, w, "attribute %q", n)
	}
	require.Equal(t, &types.AttributeValueMemberM{Value: keys[1]}, b["key"])
	sum, err := l.Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), sum.Claimed, "%+v", sum)
	st, err := l.State(ctx, keys[1])
	require.NoError(t, err)
	require.Equal(t, outs[0].Claim.ID, st.Claim)
	// complete all three in one batch; dead-letter nothing; summary says done.
	errs := l.CompleteBatch(ctx, []Claim{single, outs[0].Claim, outs[1].Claim}, lcT0)
	for _, err := range errs {
		require.NoError(t, err)
	}
	sum, err = l.Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), sum.Done, "%+v", sum)
}

// TestReviewTableStatementBatchFaults: every ddbfault kind at the table ledger's INSERT batch and
// its completion batch: claims reported are stored, those not reported use up no attempt.
func TestReviewTableStatementBatchFaults(t *testing.T) {
	ctx := context.Background()
	ddbtest.Need(t, ddbtest.CapPartiQLConditions)
	for _, kind := range ddbfault.Kinds() {
		t.Run(string(kind), func(t *testing.T) {
			db, source, names := lcSourceTable(t)
			fc := ddbfault.New(db, ddbfault.WithTimeout(50*time.Millisecond))
			l, err := NewTable(fc, lcLedgerTable(t, db), "job", source, names)
			require.NoError(t, err)
			keys := lcKeys(0, 4)
			lcSeeder(t, db, source)(keys...)
			fc.Inject(ddbfault.Fault{Kind: kind, At: 1, Ops: []string{ddbfault.OpBatchExecuteStatement}})
			outs, err := l.Claim(ctx, freshReqs(keys, "A", lcT0))
			var claims []Claim
			var again []Key
			for i, k := range keys {
				st := lcState(t, l, k)
				if err == nil && outs[i].Claimed {
					require.Equal(t, StatusClaimed, st.Status, "item %d", i)
					require.Equal(t, outs[i].Claim.ID, st.Claim)
					require.Equal(t, outs[i].Claim.Attempt, st.Attempts)
					claims = append(claims, outs[i].Claim)
					continue
				}
				require.Zero(t, st.Attempts, "item %d: a claim not reported uses up no attempt (%+v, err %v)", i, st, err)
				again = append(again, k)
			}
			if len(again) > 0 {
				outs, err := l.Claim(ctx, freshReqs(again, "A", lcT0.Add(time.Second)))
				require.NoError(t, err)
				for _, o := range outs {
					require.True(t, o.Claimed)
					require.Equal(t, 1, o.Claim.Attempt)
					claims = append(claims, o.Claim)
				}
			}
			fc.Inject(ddbfault.Fault{Kind: kind, At: 1, Ops: []string{ddbfault.OpBatchExecuteStatement}})
			errs := l.CompleteBatch(ctx, claims, lcT0)
			for i, c := range claims {
				if errs[i] == nil {
					require.Equal(t, StatusDone, lcState(t, l, c.Key).Status)
					continue
				}
				require.NotErrorIs(t, errs[i], ErrClaimLost)
				require.NoError(t, l.Complete(ctx, c, lcT0))
			}
		})
	}
}

// TestReviewTableRedrivenRowBatchClaim: a dead-lettered row, redriven (the row exists with no
// status), is claimed again by a batched fresh claim (INSERT fails DuplicateItem, UpdateItem claims).
func TestReviewTableRedrivenRowBatchClaim(t *testing.T) {
	ctx := context.Background()
	ddbtest.Need(t, ddbtest.CapPartiQLConditions)
	db, source, names := lcSourceTable(t)
	l, err := NewTable(db, lcLedgerTable(t, db), "job", source, names)
	require.NoError(t, err)
	keys := lcKeys(0, 3)
	lcSeeder(t, db, source)(keys...)
	c := lcMustClaim(t, l, lcReq(keys[0], "A", 1, 1, lcT0), 1)
	require.NoError(t, l.DeadLetter(ctx, c, "boom", lcT0))
	moved, err := l.Redrive(ctx, keys[0], lcT0)
	require.NoError(t, err)
	require.True(t, moved)
	outs, err := l.Claim(ctx, freshReqs(keys, "B", lcT0))
	require.NoError(t, err)
	for i, o := range outs {
		require.True(t, o.Claimed, "item %d: %+v", i, o)
		require.Equal(t, 1, o.Claim.Attempt)
	}
	w := l.ConsumedWCU()
	t.Logf("ConsumedWCU %.1f", w)
}

// TestReviewInlineOddSchema: the inline ledger on a table with a binary partition key and a number
// sort key, an attribute prefix with punctuation, two RemoveOnDone attributes, and one item deleted
// between the scan and the claim: the batched claim and completion are one statement batch each,
// the deleted item is not re-created, and the removed attributes are gone.
func TestReviewInlineOddSchema(t *testing.T) {
	ctx := context.Background()
	ddbtest.Need(t, ddbtest.CapPartiQLConditions)
	db, source, names := lcSourceTable(t, ddbtest.Key{Name: "b-key", Type: "B"}, ddbtest.Key{Name: "n.sort", Type: "N"})
	fc := ddbfault.New(db)
	l, err := NewInline(fc, source, names, WithPrefix("x-y.'z "), WithRemoveOnDone("a b", "c"))
	require.NoError(t, err)
	key := func(i int) Key {
		return Key{"b-key": &types.AttributeValueMemberB{Value: []byte{0, byte(i), 0xff}}, "n.sort": &types.AttributeValueMemberN{Value: fmt.Sprintf("%d.5e-3", i)}}
	}
	var keys []Key
	for i := range 4 {
		k := key(i)
		keys = append(keys, k)
		item := map[string]types.AttributeValue{"a b": attrS("1"), "c": attrS("2")}
		for n, v := range k {
			item[n] = v
		}
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(source), Item: item})
		require.NoError(t, err)
	}
	_, err = db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(source), Key: keys[2]})
	require.NoError(t, err)
	outs, err := l.Claim(ctx, freshReqs(keys, "A", lcT0))
	require.NoError(t, err)
	require.Equal(t, int64(1), fc.CallsByOp()[ddbfault.OpBatchExecuteStatement])
	var claims []Claim
	for i, o := range outs {
		t.Logf("item %d: %+v", i, o)
		if i == 2 {
			require.False(t, o.Claimed)
			continue
		}
		require.True(t, o.Claimed, "item %d", i)
		claims = append(claims, o.Claim)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(source), Key: keys[2], ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.Empty(t, out.Item, "the deleted item is not re-created")
	for i, err := range l.CompleteBatch(ctx, claims, lcT0) {
		require.NoError(t, err, "claim %d", i)
	}
	require.Equal(t, int64(2), fc.CallsByOp()[ddbfault.OpBatchExecuteStatement])
	require.Zero(t, fc.CallsByOp()[ddbfault.OpTransactWriteItems])
	for _, c := range claims {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(source), Key: c.Key, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		require.Equal(t, StatusDone, l.stateOnItem(out.Item).Status)
		require.NotContains(t, out.Item, "a b")
		require.NotContains(t, out.Item, "c")
	}
}

// TestReviewLandedButAnsweredError: statements that landed but were answered InternalServerError
// are sent again; the repeat is refused and settled as the caller's own write (claims: claimed at
// attempt 1; completions: done), inline and table ledger.
func TestReviewLandedButAnsweredError(t *testing.T) {
	ctx := context.Background()
	ddbtest.Need(t, ddbtest.CapPartiQLConditions)
	landedISE := func(idx ...int) ddbfault.Hook {
		n := 0
		return func(hctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
			n++
			out, err := send(hctx, c.In)
			if err != nil || n > 1 {
				return out, err
			}
			o := out.(*dynamodb.BatchExecuteStatementOutput)
			for _, i := range idx {
				o.Responses[i] = types.BatchStatementResponse{Error: &types.BatchStatementError{Code: types.BatchStatementErrorCodeEnumInternalServerError, Message: aws.String("injected")}}
			}
			return o, nil
		}
	}
	for _, table := range []bool{false, true} {
		t.Run(fmt.Sprint("table=", table), func(t *testing.T) {
			db, source, names := lcSourceTable(t)
			fc := ddbfault.New(db)
			var l Ledger
			var err error
			if table {
				l, err = NewTable(fc, lcLedgerTable(t, db), "job", source, names)
			} else {
				l, err = NewInline(fc, source, names)
			}
			require.NoError(t, err)
			keys := lcKeys(0, 5)
			lcSeeder(t, db, source)(keys...)
			rm := fc.OnCall(landedISE(0, 2, 4), ddbfault.OpBatchExecuteStatement)
			outs, err := l.Claim(ctx, freshReqs(keys, "A", lcT0))
			rm()
			require.NoError(t, err)
			var claims []Claim
			for i, o := range outs {
				require.True(t, o.Claimed, "item %d: %+v", i, o)
				require.Equal(t, 1, o.Claim.Attempt)
				require.Equal(t, o.Claim.ID, lcState(t, l, keys[i]).Claim)
				claims = append(claims, o.Claim)
			}
			rm = fc.OnCall(landedISE(1, 3), ddbfault.OpBatchExecuteStatement)
			errs := l.CompleteBatch(ctx, claims, lcT0)
			rm()
			for i, err := range errs {
				require.NoError(t, err, "claim %d", i)
				require.Equal(t, StatusDone, lcState(t, l, keys[i]).Status)
			}
			t.Logf("calls %v WCU %.1f", fc.CallsByOp(), l.ConsumedWCU())
		})
	}
}

// TestReviewThrottledStatementsCountedTwice: statements a batch answers as throttled were not
// written (DynamoDB bills no capacity for a throttled request), but executeStatements counts
// every statement of every batch at 1 WCU: sent again, each throttled statement is counted twice.
func TestReviewThrottledStatementsCountedTwice(t *testing.T) {
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

var (
	_ = errors.New
	_ = fmt.Sprintf
	_ = time.Second
	_ = require.NoError
	_ = ddbfault.Kinds
)
