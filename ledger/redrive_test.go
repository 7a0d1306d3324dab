package ledger

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// TestRedrive runs on both ledgers: dead letters move back to pending with the attempt count
// reset and the last error kept; keys that are not failed are counted and left alone.
func TestRedrive(t *testing.T) {
	type setup struct {
		l        Ledger
		rawState func(k Key) map[string]types.AttributeValue
	}
	ledgers := map[string]func(t *testing.T) setup{
		"inline": func(t *testing.T) setup {
			db, source, names := lcSourceTable(t)
			l, err := NewInline(db, source, names, WithPrefix("x_"))
			require.NoError(t, err)
			lcSeeder(t, db, source)(lcKeys(0, 4)...)
			return setup{l: l, rawState: func(k Key) map[string]types.AttributeValue { return redriveRaw(t, db, source, k) }}
		},
		"table": func(t *testing.T) setup {
			db, source, names := lcSourceTable(t)
			lt := lcLedgerTable(t, db)
			l, err := NewTable(db, lt, "job-1", source, names)
			require.NoError(t, err)
			lcSeeder(t, db, source)(lcKeys(0, 4)...)
			return setup{l: l, rawState: func(k Key) map[string]types.AttributeValue {
				rk, err := l.core.row.key(k)
				require.NoError(t, err)
				return redriveRaw(t, db, lt, rk)
			}}
		},
	}
	for name, mk := range ledgers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := mk(t)
			l := s.l
			// k0, k1 dead-lettered; k2 done; k3 never touched.
			var c0 Claim
			for i, errText := range []string{"boom 0", "boom 1"} {
				c := lcMustClaim(t, l, lcReq(lcKey(i), "w", 0, 1, lcT0), 1)
				require.NoError(t, l.DeadLetter(ctx, c, errText, lcT0))
				if i == 0 {
					c0 = c
				}
			}
			c := lcMustClaim(t, l, lcReq(lcKey(2), "w", 0, 1, lcT0), 1)
			require.NoError(t, l.Complete(ctx, c, lcT0))

			res, err := Redrive(ctx, l, []Key{lcKey(0), lcKey(2), lcKey(3)}, lcT0.Add(lcTTL))
			require.NoError(t, err)
			require.Equal(t, RedriveResult{Moved: 1, NotFailed: 2}, res)
			redriven := lcState(t, l, lcKey(0))
			require.NotEmpty(t, redriven.Claim, "a redrive writes a new claim id")
			require.NotEqual(t, c0.ID, redriven.Claim)
			require.Equal(t, ItemState{Claim: redriven.Claim}, redriven, "redriven: pending, attempts reset")
			prefix := map[string]string{"inline": "x_", "table": ""}[name]
			raw := s.rawState(lcKey(0))
			require.Equal(t, &types.AttributeValueMemberS{Value: "boom 0"}, raw[prefix+"last_error"], "the last error is kept")
			require.Equal(t, StatusDone, lcState(t, l, lcKey(2)).Status, "a done item is left alone")
			require.Equal(t, StatusFailed, lcState(t, l, lcKey(1)).Status, "a key not given is left alone")

			// The redriven item is claimed again as a first attempt.
			lcMustClaim(t, l, lcReq(lcKey(0), "w2", 0, 2, lcT0.Add(lcTTL)), 1)

			// No keys: every dead letter (k1 only now).
			res, err = Redrive(ctx, l, nil, lcT0.Add(lcTTL))
			require.NoError(t, err)
			require.Equal(t, RedriveResult{Moved: 1}, res)
			res, err = Redrive(ctx, l, nil, lcT0.Add(lcTTL))
			require.NoError(t, err)
			require.Equal(t, RedriveResult{}, res, "nothing left to move")
			sum, err := l.Summarize(ctx)
			require.NoError(t, err)
			require.Zero(t, sum.Failed)
		})
	}
}

func TestRedriveBadInput(t *testing.T) {
	ctx := context.Background()
	db, source, names := lcSourceTable(t)
	l, err := NewInline(db, source, names)
	require.NoError(t, err)
	lcSeeder(t, db, source)(lcKey(0))
	c := lcMustClaim(t, l, lcReq(lcKey(0), "w", 0, 1, lcT0), 1)
	require.NoError(t, l.DeadLetter(ctx, c, "boom", lcT0))

	// A malformed key among good ones: nothing is written, not even for the good key.
	bad := Key{"other": &types.AttributeValueMemberS{Value: "x"}}
	_, err = Redrive(ctx, l, []Key{lcKey(0), bad}, lcT0)
	require.Error(t, err)
	require.Equal(t, StatusFailed, lcState(t, l, lcKey(0)).Status)
}

// TestRedriveStopsNamingTheKey: a move that fails (DynamoDB answering 500 to every try) stops the
// redrive with a *RedriveError naming the key and the keys left; the move before it stands, and a
// second redrive moves the rest.
func TestRedriveStopsNamingTheKey(t *testing.T) {
	ctx := context.Background()
	db, source, names := lcSourceTable(t)
	fc := ddbfault.New(db)
	l, err := NewInline(fc, source, names)
	require.NoError(t, err)
	ks := lcKeys(0, 3)
	lcSeeder(t, db, source)(ks...)
	for _, k := range ks {
		c := lcMustClaim(t, l, lcReq(k, "w", 0, 1, lcT0), 1)
		require.NoError(t, l.DeadLetter(ctx, c, "boom", lcT0))
	}
	var failing atomic.Bool
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		in := call.In.(*dynamodb.UpdateItemInput)
		if failing.Load() && KeyText(in.Key) == KeyText(ks[1]) {
			// As a dial timeout reads: a context.DeadlineExceeded, with the redrive's context live.
			return nil, fmt.Errorf("test: DynamoDB out of reach: %w", context.DeadlineExceeded)
		}
		return send(ctx, call.In)
	}, ddbfault.OpUpdateItem)
	failing.Store(true)
	res, err := Redrive(ctx, l, ks, lcT0)
	var re *RedriveError
	require.ErrorAs(t, err, &re)
	require.Equal(t, ks[1], re.Key)
	require.Equal(t, 1, re.Left)
	require.Contains(t, err.Error(), "test: DynamoDB out of reach")
	require.Contains(t, err.Error(), "dynapart: redrive stopped at item "+KeyText(ks[1])+": ")
	require.False(t, re.Interrupted, "DynamoDB out of reach is no interruption")
	require.Equal(t, RedriveResult{Moved: 1}, res)
	require.Equal(t, StatusFailed, lcState(t, l, ks[2]).Status, "a key after the failing one was not tried")

	failing.Store(false)
	res, err = Redrive(ctx, l, ks, lcT0)
	require.NoError(t, err)
	require.Equal(t, RedriveResult{Moved: 2, NotFailed: 1}, res)

	// A redrive whose context ended says it was interrupted, at the key it was moving.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = Redrive(cancelled, l, ks, lcT0)
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, re.Interrupted)
	require.Equal(t, ks[0], re.Key)
	require.Contains(t, err.Error(), "dynapart: redrive interrupted at item "+KeyText(ks[0])+" (")
	require.Contains(t, err.Error(), "; 2 keys after it not tried.")
}

func redriveRaw(t *testing.T, db *dynamodb.Client, table string, k Key) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: k, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item
}
