package ledger

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

// Tests of what only one ledger does, of the key encoding, and of the ledgers under injected
// faults. The behaviour both ledgers share is in ledger_contract_test.go.

func TestLedgerKeyEncoding(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	b := func(v ...byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }
	enc := func(k Key, attrs ...string) string {
		t.Helper()
		e, err := encodeKeyParts(k, attrs)
		require.NoError(t, err)
		return e
	}

	t.Run("distinct keys never collide", func(t *testing.T) {
		single := []Key{
			{"k": s("abc")}, {"k": b('a', 'b', 'c')}, {"k": s("1")}, {"k": n("1")}, {"k": b('1')},
			{"k": s("YWJj")}, {"k": b(0xff, 0xfe, 0x00)}, {"k": b(0xff, 0xfe)}, {"k": n("10")}, {"k": n("-1")},
			{"k": s("S:3:abc")}, {"k": s("")}, {"k": b()}, {"k": s("ü")}, {"k": b(0xc3, 0xbc)},
		}
		seen := map[string]int{}
		for i, k := range single {
			e := enc(k, "k")
			j, dup := seen[e]
			require.False(t, dup, "keys %d and %d both encode as %q", i, j, e)
			seen[e] = i
		}
		require.Equal(t, "S:3:abc", enc(Key{"k": s("abc")}, "k"))
		require.Equal(t, "B:4:YWJj", enc(Key{"k": b('a', 'b', 'c')}, "k"))

		// Composite keys: the length prefix keeps the split unambiguous.
		composite := []Key{
			{"p": s("a|S:1:b"), "q": s("c")}, {"p": s("a"), "q": s("b|S:1:c")}, {"p": s("a|"), "q": s("|c")},
			{"p": s("a"), "q": n("1")}, {"p": s("a"), "q": s("1")}, {"p": b('a'), "q": s("1")},
		}
		seen = map[string]int{}
		for i, k := range composite {
			e := enc(k, "p", "q")
			j, dup := seen[e]
			require.False(t, dup, "keys %d and %d both encode as %q", i, j, e)
			seen[e] = i
		}
		// Key attribute order is the schema's, not the map's.
		require.NotEqual(t, enc(Key{"p": s("x"), "q": s("y")}, "p", "q"), enc(Key{"p": s("x"), "q": s("y")}, "q", "p"))
	})

	t.Run("equal numbers encode alike", func(t *testing.T) {
		for _, v := range []string{"1.5", "1.50", "15E-1", "+1.5", "0015e-1", "0.15e1"} {
			require.Equal(t, "N:3:1.5", enc(Key{"k": n(v)}, "k"), v)
		}
	})

	t.Run("bad keys are errors", func(t *testing.T) {
		_, err := encodeKeyParts(Key{"other": s("x")}, []string{"k"})
		require.Error(t, err)
		_, err = encodeKeyParts(Key{"k": &types.AttributeValueMemberBOOL{Value: true}}, []string{"k"})
		require.Error(t, err)
		_, err = encodeKeyParts(Key{"k": n("one")}, []string{"k"})
		require.Error(t, err)
	})

	t.Run("KeyText writes a key with no encoding as given, never as pointers", func(t *testing.T) {
		require.Equal(t, "N:1:5", KeyText(Key{"id": n("+5.")}))
		require.Equal(t, `{id=N:"NaN", x=S:"a"}`, KeyText(Key{"id": n("NaN"), "x": s("a")}))
		require.Equal(t, "{id=*types.AttributeValueMemberBOOL, k=B:AQ==}", KeyText(Key{"id": &types.AttributeValueMemberBOOL{}, "k": b(1)}))
	})

	t.Run("table ledger row keys", func(t *testing.T) {
		db := dynamodb.New(dynamodb.Options{Region: "us-east-1"}) // never called
		pk := func(job, source string, k Key) string {
			t.Helper()
			l, err := NewTable(db, "ledger", job, source, []string{"id"})
			require.NoError(t, err)
			row, err := l.core.row.key(k)
			require.NoError(t, err)
			return row[ledgerPK].(*types.AttributeValueMemberS).Value
		}
		k := Key{"id": s("a"), "ignored": s("extra attributes are not part of the key")}
		require.Equal(t, "job#users#S:1:a", pk("job", "users", k))
		// A job name with the separator cannot pose as another job's rows.
		require.NotEqual(t, pk("x#users#S:1:a", "t", Key{"id": s("b")}), pk("x", "users", Key{"id": s("S:1:a#t#S:1:b")}))
		require.Equal(t, "a%23b%2523#t#S:1:a", pk("a#b%23", "t", k))
		// The same job over two source tables: two rows.
		require.NotEqual(t, pk("job", "t1", k), pk("job", "t2", k))
		// Keys too long for a partition key are hashed, still distinct.
		long1, long2 := pk("job", "t", Key{"id": s(strings.Repeat("x", 2040))}), pk("job", "t", Key{"id": s(strings.Repeat("x", 2039) + "y")})
		require.LessOrEqual(t, len(long1), maxLedgerPK)
		require.True(t, strings.HasPrefix(long1, "job#t#H:"))
		require.NotEqual(t, long1, long2)

		for _, bad := range []struct{ job, source string }{{"", "t"}, {"j", ""}, {"j", "a#b"}, {"j", "ledger"}} {
			_, err := NewTable(db, "ledger", bad.job, bad.source, []string{"id"})
			require.Error(t, err, "%+v", bad)
		}
		_, err := NewTable(db, "ledger", "j", "t", nil)
		require.Error(t, err, "no key attributes")
		_, err = NewInline(db, "t", []string{"id"}, WithRemoveOnDone("id"))
		require.Error(t, err, "a key attribute cannot be removed")
		_, err = NewInline(db, "t", []string{"dp_status"})
		require.Error(t, err, "a key attribute cannot be a state attribute")
		_, err = NewInline(nil, "t", []string{"id"})
		require.Error(t, err, "nil client")
	})
}

func TestLedgerInlineNeverCreatesItems(t *testing.T) {
	ctx := context.Background()
	db, source, names := lcSourceTable(t)
	l, err := NewInline(db, source, names)
	require.NoError(t, err)
	present := lcKeys(0, 3)
	lcSeeder(t, db, source)(present...)
	gone := lcKey(99)

	o := lcClaim(t, l, lcReq(gone, "A", 0, 1, lcT0))
	require.False(t, o.Claimed)
	require.Equal(t, StatusPending, o.Found.Status, "a deleted item is reported pending, not claimed")
	outs, err := l.Claim(ctx, []ClaimRequest{lcReq(present[0], "A", 0, 1, lcT0), lcReq(gone, "A", 0, 1, lcT0), lcReq(present[1], "A", 0, 1, lcT0)})
	require.NoError(t, err)
	require.True(t, outs[0].Claimed)
	require.False(t, outs[1].Claimed)
	require.True(t, outs[2].Claimed)

	done, err := lcCompleteOnly(ctx, l, lcReq(gone, "A", 0, 1, lcT0))
	require.NoError(t, err)
	require.False(t, done)
	fake := Claim{Key: gone, Owner: "A", Slot: 0, Token: 1, Attempt: 1, Until: lcT0.Add(lcTTL)}
	require.ErrorIs(t, l.Complete(ctx, fake, lcT0), ErrClaimLost)
	require.ErrorIs(t, l.Retry(ctx, fake, "x", lcT0), ErrClaimLost)
	require.ErrorIs(t, l.DeadLetter(ctx, fake, "x", lcT0), ErrClaimLost)
	require.ErrorIs(t, l.Release(ctx, fake, lcT0), ErrClaimLost)

	require.Len(t, lcScanAll(t, db, source), len(present), "no item was created")
	s, err := l.Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, Summary{Total: 3, Claimed: 2, Pending: 1}, s)
}

// TestLedgerReleaseDueOnEveryClockWithinSkew: a released claim (a shutdown gives its items back)
// is due at once for a worker whose clock is behind the releaser's by up to MaxClockSkew, on both
// ledgers, as a renewed item is: its retry_at is the release's time less the skew.
func TestLedgerReleaseDueOnEveryClockWithinSkew(t *testing.T) {
	const skew = 2 * time.Second
	ctx := context.Background()
	for _, kind := range []string{"inline", "table"} {
		t.Run(kind, func(t *testing.T) {
			db, source, names := lcSourceTable(t)
			newLedger := func(client Client, job string) Ledger {
				var l Ledger
				var err error
				if kind == "inline" {
					l, err = NewInline(client, source, names, lcOpts(t, WithMaxClockSkew(skew))...)
				} else {
					l, err = NewTable(client, lcLedgerTable(t, db), job, source, names, lcOpts(t, WithMaxClockSkew(skew))...)
				}
				require.NoError(t, err)
				return l
			}
			l := newLedger(db, "job-1")
			k := lcKey(1)
			lcSeeder(t, db, source)(k)
			c := lcMustClaim(t, l, lcReq(k, "A", 0, 1, lcT0), 1)
			released := lcT0.Add(time.Second)
			require.NoError(t, l.Release(ctx, c, released))
			st := lcState(t, l, k)
			require.Equal(t, StatusRetry, st.Status)
			require.True(t, st.RetryAt.Equal(released.Add(-skew)), "retry_at %v, want the release's time less the skew", st.RetryAt)
			behind := released.Add(-skew + time.Millisecond) // B's clock, behind A's by just under the skew
			lcMustClaim(t, l, lcReq(k, "B", 1, 1, behind), 1)

			// The undo of a claim whose answer was lost and whose row could not be read back is a
			// release at the claim's time: due at once for B too, the attempt not counted.
			u := lcKey(2)
			lcSeeder(t, db, source)(u)
			lost := errors.New("injected: connection reset after the write")
			lu := newLedger(&lcFaultClient{Client: db, loseUpdateAnswers: 1, failGets: 1, lostErr: lost}, "job-u")
			_, err := lu.Claim(ctx, []ClaimRequest{lcReq(u, "A", 0, 1, lcT0)})
			require.ErrorIs(t, err, lost, "a claim of unknown outcome is undone and reported failed")
			st = lcState(t, lu, u)
			require.Equal(t, StatusRetry, st.Status, "the claim landed, then was undone")
			require.True(t, st.RetryAt.Equal(lcT0.Add(-skew)), "retry_at %v, want the claim's time less the skew", st.RetryAt)
			lcMustClaim(t, lu, lcReq(u, "B", 1, 1, lcT0.Add(-skew+time.Millisecond)), 1)
		})
	}
}

func TestLedgerInlinePrefixAndRemoveOnDone(t *testing.T) {
	ctx := context.Background()
	db, source, names := lcSourceTable(t)
	l, err := NewInline(db, source, names, WithPrefix("x_"), WithRemoveOnDone("shard"))
	require.NoError(t, err)
	keys := lcKeys(0, 4)
	for _, k := range keys {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(source), Item: map[string]types.AttributeValue{
			"id": k["id"], "shard": &types.AttributeValueMemberN{Value: "3"}, "payload": &types.AttributeValueMemberS{Value: "p"},
		}})
		require.NoError(t, err)
	}
	require.NoError(t, l.Complete(ctx, lcMustClaim(t, l, lcReq(keys[0], "A", 0, 1, lcT0), 1), lcT0))
	require.NoError(t, l.DeadLetter(ctx, lcMustClaim(t, l, lcReq(keys[1], "A", 0, 1, lcT0), 1), "bad", lcT0))
	done, err := lcCompleteOnly(ctx, l, lcReq(keys[2], "A", 0, 1, lcT0))
	require.NoError(t, err)
	require.True(t, done)
	require.NoError(t, l.Retry(ctx, lcMustClaim(t, l, lcReq(keys[3], "A", 0, 1, lcT0), 1), "again", lcT0))

	items := map[string]map[string]types.AttributeValue{}
	for _, it := range lcScanAll(t, db, source) {
		items[it["id"].(*types.AttributeValueMemberS).Value] = it
	}
	for i, k := range keys {
		it := items[k["id"].(*types.AttributeValueMemberS).Value]
		require.Contains(t, it, "x_status", "state attributes carry the prefix")
		require.NotContains(t, it, "dp_status")
		require.Equal(t, &types.AttributeValueMemberS{Value: "p"}, it["payload"], "other attributes are left alone")
		if i < 3 {
			require.NotContains(t, it, "shard", "item %d is finished: it leaves the pending index", i)
		} else {
			require.Contains(t, it, "shard", "a retry stays in the pending index")
		}
	}
}

func TestLedgerTableNeverWritesSource(t *testing.T) {
	ctx := context.Background()
	db, source, names := lcSourceTable(t)
	ledgerTable := lcLedgerTable(t, db)
	fc := &lcFaultClient{Client: db}
	l, err := NewTable(fc, ledgerTable, "job", source, names)
	require.NoError(t, err)
	keys := lcKeys(0, 30)
	lcSeeder(t, db, source)(keys...)
	before := lcScanAll(t, db, source)

	reqs := make([]ClaimRequest, 28)
	for i := range reqs {
		reqs[i] = lcReq(keys[i], "A", 0, 1, lcT0)
	}
	outs, err := l.Claim(ctx, reqs)
	require.NoError(t, err)
	require.NoError(t, l.Complete(ctx, outs[0].Claim, lcT0))
	require.NoError(t, l.Retry(ctx, outs[1].Claim, "again", lcT0))
	require.NoError(t, l.DeadLetter(ctx, outs[2].Claim, "bad", lcT0))
	require.NoError(t, l.Release(ctx, outs[3].Claim, lcT0))
	done, err := lcCompleteOnly(ctx, l, lcReq(keys[29], "A", 0, 1, lcT0))
	require.NoError(t, err)
	require.True(t, done)
	s, err := l.Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, Summary{Total: 30, Done: 2, Failed: 1, Claimed: 24, Pending: 3}, s)

	require.Equal(t, 0, fc.writesTo(source), "the source table is only read")
	require.Positive(t, fc.writesTo(ledgerTable))
	require.Equal(t, before, lcScanAll(t, db, source), "source items unchanged")

	// The ledger row carries the job, the source table and the item key.
	rows := lcScanAll(t, db, ledgerTable)
	require.Len(t, rows, 29)
	for _, r := range rows {
		require.Equal(t, &types.AttributeValueMemberS{Value: "job"}, r["job"])
		require.Equal(t, &types.AttributeValueMemberS{Value: source}, r["source"])
		require.IsType(t, &types.AttributeValueMemberM{}, r["key"])
	}
}

func TestLedgerTableJobsAndSourcesAreSeparate(t *testing.T) {
	ctx := context.Background()
	db, source, names := lcSourceTable(t)
	_, other, _ := lcSourceTable(t)
	ledgerTable := lcLedgerTable(t, db)
	keys := lcKeys(0, 3)
	lcSeeder(t, db, source)(keys...)
	lcSeeder(t, db, other)(keys...)
	ledger := func(job, src string) *Table {
		l, err := NewTable(db, ledgerTable, job, src, names)
		require.NoError(t, err)
		return l
	}
	first := ledger("campaign-1", source)
	for _, k := range keys {
		done, err := lcCompleteOnly(ctx, first, lcReq(k, "A", 0, 1, lcT0))
		require.NoError(t, err)
		require.True(t, done)
	}
	for _, l := range []*Table{ledger("campaign-2", source), ledger("campaign-1", other)} {
		s, err := l.Summarize(ctx)
		require.NoError(t, err)
		require.Equal(t, Summary{Total: 3, Pending: 3}, s, "a new job (or another table) processes everything again")
		lcMustClaim(t, l, lcReq(keys[0], "B", 0, 1, lcT0), 1)
	}
	s, err := first.Summarize(ctx)
	require.NoError(t, err)
	require.Equal(t, Summary{Total: 3, Done: 3}, s)
}

func TestCreateLedgerTable(t *testing.T) {
	ctx := context.Background()
	db := ddbtest.Client(t)
	name := ddbtest.TableName(t, "ledger")
	ddbtest.DeleteOnCleanup(t, db, name)
	require.NoError(t, CreateLedgerTable(ctx, db, name))
	require.NoError(t, CreateLedgerTable(ctx, db, name), "idempotent")
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	require.NoError(t, err)
	require.Equal(t, types.TableStatusActive, out.Table.TableStatus)
	require.Equal(t, types.BillingModePayPerRequest, out.Table.BillingModeSummary.BillingMode)

	for _, schema := range [][]ddbtest.Key{
		{{Name: "id", Type: "S"}},
		{{Name: "pk", Type: "N"}},
		{{Name: "pk", Type: "S"}, {Name: "sk", Type: "S"}},
	} {
		wrong := ddbtest.CreateTable(t, db, schema[0], schema[1:]...)
		err := CreateLedgerTable(ctx, db, wrong)
		require.ErrorIs(t, err, ErrLedgerTableSchema, "%v", schema)
	}
}

func TestLedgerMissingTables(t *testing.T) {
	ctx := context.Background()
	db, source, names := lcSourceTable(t)
	ledgerTable := lcLedgerTable(t, db)
	var rnf *types.ResourceNotFoundException

	inline, err := NewInline(db, "no-such-table", names)
	require.NoError(t, err)
	_, err = inline.Claim(ctx, []ClaimRequest{lcReq(lcKey(1), "A", 0, 1, lcT0)})
	require.ErrorAs(t, err, &rnf)
	_, err = inline.Summarize(ctx)
	require.ErrorAs(t, err, &rnf)

	table, err := NewTable(db, "no-such-ledger", "job", source, names)
	require.NoError(t, err)
	_, err = table.Claim(ctx, []ClaimRequest{lcReq(lcKey(1), "A", 0, 1, lcT0), lcReq(lcKey(2), "A", 0, 1, lcT0)})
	require.ErrorAs(t, err, &rnf)
	_, err = table.State(ctx, lcKey(1))
	require.ErrorAs(t, err, &rnf)

	noSource, err := NewTable(db, ledgerTable, "job", "no-such-source", names)
	require.NoError(t, err)
	_, err = noSource.Summarize(ctx)
	require.ErrorAs(t, err, &rnf)
}

// TestLedgerBatchClaimFaults drives the transaction retry paths with injected cancellations that
// DynamoDB Local does not produce on its own (it serialises transactions, so it never answers
// TransactionConflict), and claims without BatchGetItem (the wrapper hides it).
func TestLedgerBatchClaimFaults(t *testing.T) {
	ctx := context.Background()
	cancelled := func(codes ...string) error {
		e := &types.TransactionCanceledException{Message: aws.String("injected")}
		for _, c := range codes {
			e.CancellationReasons = append(e.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
		}
		return e
	}
	cases := []struct {
		name      string
		faults    []error
		transacts int // TransactWriteItems calls that reach DynamoDB
	}{
		{"conflict then success", []error{cancelled("None", "TransactionConflict", "None", "None", "None", "None")}, 1},
		{"conflict exception", []error{&types.TransactionConflictException{Message: aws.String("injected")}}, 1},
		{"no reasons: one by one", []error{cancelled()}, 0},
		{"conflicts every time: one by one", []error{
			cancelled("TransactionConflict", "None", "None", "None", "None", "None"),
			cancelled("TransactionConflict", "None", "None", "None", "None", "None"),
			cancelled("TransactionConflict", "None", "None", "None", "None", "None"),
			cancelled("TransactionConflict", "None", "None", "None", "None", "None"),
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, source, names := lcSourceTable(t)
			fc := &lcFaultClient{Client: db, transactFaults: tc.faults}
			l, err := NewInline(fc, source, names)
			require.NoError(t, err)
			keys := lcKeys(0, 6)
			lcSeeder(t, db, source)(keys...)
			// Two items hold expired claims: their new claims are attempt 2.
			lcMustClaim(t, l, lcReq(keys[1], "X", 1, 1, lcT0.Add(-2*lcTTL)), 1)
			lcMustClaim(t, l, lcReq(keys[4], "X", 1, 1, lcT0.Add(-2*lcTTL)), 1)
			reqs := make([]ClaimRequest, len(keys))
			for i, k := range keys {
				reqs[i] = lcReq(k, "A", 0, 1, lcT0)
			}
			outs, err := l.Claim(ctx, reqs)
			require.NoError(t, err)
			for i, o := range outs {
				want := 1
				if i == 1 || i == 4 {
					want = 2
				}
				require.True(t, o.Claimed, "item %d", i)
				require.Equal(t, want, o.Claim.Attempt, "item %d", i)
				require.NoError(t, l.Complete(ctx, o.Claim, lcT0), "item %d: the claim fences", i)
			}
			require.Empty(t, fc.transactFaults, "every fault was met")
			require.Equal(t, tc.transacts, fc.transactsPassed())
		})
	}

	t.Run("validation error is reported for its item", func(t *testing.T) {
		db, source, names := lcSourceTable(t)
		fc := &lcFaultClient{Client: db, transactFaults: []error{cancelled("ValidationError", "None")}}
		l, err := NewInline(fc, source, names)
		require.NoError(t, err)
		lcSeeder(t, db, source)(lcKeys(0, 2)...)
		outs, err := l.Claim(ctx, []ClaimRequest{lcReq(lcKey(0), "A", 0, 1, lcT0), lcReq(lcKey(1), "A", 0, 1, lcT0)})
		require.NoError(t, err)
		require.ErrorIs(t, outs[0].Err, ErrUnprocessable)
		require.False(t, outs[0].Claimed)
		require.True(t, outs[1].Claimed, "the other item is claimed")
		require.NoError(t, outs[1].Err)
	})
}

// TestLedgerClaimAnswerLost: a claim that was written but whose answer never arrived (a timeout)
// is settled by reading the row back, and recognised as the caller's own when the caller asks
// again, with the stored attempt number.
func TestLedgerClaimAnswerLost(t *testing.T) {
	ctx := context.Background()
	db, source, names := lcSourceTable(t)
	lost := errors.New("injected: connection reset after the write")
	fc := &lcFaultClient{Client: db, loseUpdateAnswers: 1, lostErr: lost}
	l, err := NewTable(fc, lcLedgerTable(t, db), "job", source, names)
	require.NoError(t, err)
	k := lcKey(1)
	lcSeeder(t, db, source)(k)
	r := lcReq(k, "A", 0, 1, lcT0)
	r.ID = "claim-1" // sent again below, as a caller repeats a request whose answer it lost
	outs, err := l.Claim(ctx, []ClaimRequest{r})
	require.NoError(t, err, "the lost answer is settled by reading the row back")
	require.True(t, outs[0].Claimed)
	require.Equal(t, 1, outs[0].Claim.Attempt)
	fc.mu.Lock()
	require.Zero(t, fc.loseUpdateAnswers, "the answer was lost")
	fc.mu.Unlock()
	c := lcMustClaim(t, l, r, 1)
	o := lcClaim(t, l, lcReq(k, "A", 0, 1, lcT0))
	require.False(t, o.Claimed, "another request (another id) is not the same claim")
	require.NoError(t, l.Complete(ctx, c, lcT0))
}

func TestLedgerCapacityAndConditionFailures(t *testing.T) {
	ddbtest.Need(t, ddbtest.CapTransactionCapacity)
	ctx := context.Background()
	db, source, names := lcSourceTable(t)
	inline, err := NewInline(db, source, names)
	require.NoError(t, err)
	table, err := NewTable(db, lcLedgerTable(t, db), "job", source, names)
	require.NoError(t, err)
	keys := lcKeys(0, 26)
	lcSeeder(t, db, source)(keys...)
	for _, l := range []interface {
		Ledger
		ConsumedWCU() float64
		ConditionFailures() int64
	}{inline, table} {
		c := lcMustClaim(t, l, lcReq(keys[0], "A", 0, 1, lcT0), 1)
		claimWCU := l.ConsumedWCU()
		require.Positive(t, claimWCU)
		require.NoError(t, l.Complete(ctx, c, lcT0))
		completeWCU := l.ConsumedWCU() - claimWCU
		require.Positive(t, completeWCU)
		require.Zero(t, l.ConditionFailures())
		stale := c
		stale.ID = "stale"
		require.ErrorIs(t, l.Complete(ctx, stale, lcT0), ErrClaimLost)
		require.Equal(t, int64(1), l.ConditionFailures())

		reqs := make([]ClaimRequest, 25)
		for i := range reqs {
			reqs[i] = lcReq(keys[i+1], "A", 0, 1, lcT0)
		}
		before := l.ConsumedWCU()
		_, err := l.Claim(ctx, reqs)
		require.NoError(t, err)
		batchWCU := l.ConsumedWCU() - before
		require.Positive(t, batchWCU)
		t.Logf("%T: WCU per claim %.1f, per complete %.1f, per batched claim %.2f", l, claimWCU, completeWCU, batchWCU/25)
	}
}

// The table ledger's writes to source items (LeaveIndex: 3 KB items, 3 WCU each) are metered
// apart from its small rows (1 WCU): one meter sampling both scaled the rows' writes by the
// source items' cost, or the other way round (here 90 WCU counted where 100 were billed).
func TestTableLedgerMetersSourceWritesApart(t *testing.T) {
	ctx := context.Background()
	db, source, names := lcSourceTable(t)
	l, err := NewTable(db, lcLedgerTable(t, db), "job", source, names)
	require.NoError(t, err)
	keys := lcKeys(0, 20)
	for _, k := range keys {
		item := map[string]types.AttributeValue{"shard": &types.AttributeValueMemberN{Value: "1"},
			"payload": &types.AttributeValueMemberS{Value: strings.Repeat("p", 2900)}}
		maps.Copy(item, k)
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(source), Item: item})
		require.NoError(t, err)
	}
	for _, k := range keys { // claim, complete, leave the index: writes 1, 17, 33 and 49 ask
		c := lcMustClaim(t, l, lcReq(k, "A", 0, 1, lcT0), 1)
		require.NoError(t, l.Complete(ctx, c, lcT0))
		require.NoError(t, l.LeaveIndex(ctx, k, "shard"))
	}
	require.Equal(t, float64(20+20+3*20), l.ConsumedWCU(), "claims and completions of small rows, and 3 KB source items")
}

// lcFaultClient passes calls on to DynamoDB, counts writes per table, and injects faults. It has
// no BatchGetItem, so batched claims read their attempts back with GetItem through it.
type lcFaultClient struct {
	Client

	mu                sync.Mutex
	writes            map[string]int
	transactFaults    []error // answered, in order, instead of calling TransactWriteItems
	transacts         int     // TransactWriteItems calls passed on
	loseUpdateAnswers int     // this many UpdateItem calls are made but answered with lostErr
	lostErr           error
	failGets          int // this many GetItem calls fail with lostErr, unsent
}

func (c *lcFaultClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.mu.Lock()
	fail := c.failGets > 0
	if fail {
		c.failGets--
	}
	c.mu.Unlock()
	if fail {
		return nil, c.lostErr
	}
	return c.Client.GetItem(ctx, in, optFns...)
}

func (c *lcFaultClient) wrote(table string) {
	if c.writes == nil {
		c.writes = map[string]int{}
	}
	c.writes[table]++
}

func (c *lcFaultClient) writesTo(table string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes[table]
}

func (c *lcFaultClient) transactsPassed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.transacts
}

func (c *lcFaultClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.mu.Lock()
	c.wrote(aws.ToString(in.TableName))
	lose := c.loseUpdateAnswers > 0
	if lose {
		c.loseUpdateAnswers--
	}
	c.mu.Unlock()
	out, err := c.Client.UpdateItem(ctx, in, optFns...)
	if lose && err == nil {
		return nil, c.lostErr
	}
	return out, err
}

func (c *lcFaultClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	for _, it := range in.TransactItems {
		if it.Update != nil {
			c.wrote(aws.ToString(it.Update.TableName))
		}
	}
	if len(c.transactFaults) > 0 {
		err := c.transactFaults[0]
		c.transactFaults = c.transactFaults[1:]
		c.mu.Unlock()
		return nil, err
	}
	c.transacts++
	c.mu.Unlock()
	return c.Client.TransactWriteItems(ctx, in, optFns...)
}
