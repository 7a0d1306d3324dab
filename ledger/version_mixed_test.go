package ledger

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestUnversionedRunAfterVersionedReopen (found by an adversarial review of effects): a back-fill
// group without versions and a following group with them share one job's ledger. The back-fill
// reads an item (no state, or a retry) and runs its handler on v1; meanwhile the follower claims
// v1, commits its effect with the completion, and reopens the item for v2 (Renew). The back-fill's
// complete-only write of v1 used to land then (a fresh one sent again under the general
// condition, a general one unfenced in a ledger without versions): v1's effect committed twice
// and the item done with v1's run. It is refused now, nothing of it applied, and the item stays
// open for v2.
func TestUnversionedRunAfterVersionedReopen(t *testing.T) {
	for _, kind := range []string{"inline", "table"} {
		for _, sawRetry := range []bool{false, true} {
			name := kind + map[bool]string{false: "/saw-no-state", true: "/saw-a-retry"}[sawRetry]
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				back, follow, db, source := mixedLedgers(t, kind)
				other := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "pk", Type: "S"})
				k := lcKey(0)
				lcSeeder(t, db, source)(k)
				eff := func() *Effects { return (&Effects{}).Update(other, otherKey("runs"), Add("v1", 1)) }

				b := lcReq(k, "backfill", 0, 1, lcT0)
				b.Fresh = true
				if sawRetry { // a failed attempt of the back-fill's left a retry, which it read
					f := lcReq(k, "backfill", 0, 1, lcT0)
					res, err := back.FailOnly(ctx, f, Failure{Error: "boom", RetryAt: lcT0, MaxAttempts: 5})
					require.NoError(t, err)
					require.True(t, res.Applied)
					b.Fresh, b.Seen = false, lcState(t, back, k).Claim
				}

				c := lcReq(k, "follow", 0, 1, lcT0)
				c.Version = "v1"
				o := lcClaim(t, follow, c)
				require.True(t, o.Claimed)
				require.NoError(t, follow.CompleteWith(ctx, o.Claim, lcT0, eff()))
				_, err := follow.Renew(ctx, k, lcState(t, follow, k).Claim, lcT0) // v2
				require.NoError(t, err)

				res, err := back.CompleteOnlyWith(ctx, b, eff())
				require.NoError(t, err)
				st := lcState(t, back, k)
				require.False(t, res.Applied, "the back-fill's run of v1 finished the reopened item: %+v", st)
				require.Equal(t, StatusRetry, st.Status, "still open for v2")
				require.Equal(t, "1", numOf(getItem(t, db, other, otherKey("runs")), "v1"), "v1's effect committed once")
			})
		}
	}
}

// mixedLedgers are two ledgers of kind over one fresh source table (and, for the table ledger,
// one ledger table and job): one without versions (a back-fill's) and one with them (a
// follower's).
func mixedLedgers(t *testing.T, kind string) (back, follow Ledger, db *dynamodb.Client, source string) {
	t.Helper()
	db, source, names := lcSourceTable(t)
	var err error
	if kind == "inline" {
		back, err = NewInline(db, source, names, lcOpts(t)...)
		require.NoError(t, err)
		follow, err = NewInline(db, source, names, append(lcOpts(t), WithVersions())...)
	} else {
		table := lcLedgerTable(t, db)
		back, err = NewTable(db, table, "job", source, names, lcOpts(t)...)
		require.NoError(t, err)
		follow, err = NewTable(db, table, "job", source, names, append(lcOpts(t), WithVersions())...)
	}
	require.NoError(t, err)
	return back, follow, db, source
}

// getItem reads key of table (consistent).
func getItem(t *testing.T, db *dynamodb.Client, table string, key Key) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item
}
