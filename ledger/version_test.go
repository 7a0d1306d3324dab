package ledger

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestVersionedLedger: a versioned ledger records the version each finishing write was given
// (complete, complete-only, dead letter; batched completions too), Renew reopens a finished item
// only from the state its caller read (a renew whose prev is stale, or of an unfinished item,
// changes nothing), and the renewed item is claimed as attempt 1 with the recorded version kept
// until the next finish. An unversioned ledger refuses Renew.
func TestVersionedLedger(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		for _, kind := range []string{"inline", "table"} {
			t.Run(kind, func(t *testing.T) {
				t.Parallel()
				l, db, source := versionedLedger(t, kind, "job-v")
				lcSeeder(t, db, source)(lcKeys(0, 4)...)
				checkVersioned(t, l)
			})
		}
		t.Run("unversioned", func(t *testing.T) {
			db, source, names := lcSourceTable(t)
			l, err := NewInline(db, source, names, lcOpts(t)...)
			require.NoError(t, err)
			_, err = l.Renew(context.Background(), lcKey(0), "x", lcT0)
			require.ErrorContains(t, err, "WithVersions")
		})
	})
}

func checkVersioned(t *testing.T, l Ledger) {
	ctx := context.Background()
	k := lcKey(0)
	r := lcReq(k, "w1", 0, 1, lcT0)
	r.Version, r.WantItem = "v1", true
	o := lcClaim(t, l, r)
	require.True(t, o.Claimed)
	require.Equal(t, "v1", o.Claim.Version)
	require.Equal(t, 1, o.Claim.Attempt)
	if _, inline := l.(*Inline); inline {
		require.Equal(t, k["id"], o.Item["id"], "the inline ledger's claim returns the item as it left it")
		require.Equal(t, &types.AttributeValueMemberS{Value: "claimed"}, o.Item["dp_status"])
	} else {
		require.Nil(t, o.Item, "the table ledger's row is not the item")
	}
	require.NoError(t, l.Complete(ctx, o.Claim, lcT0))
	st, err := l.State(ctx, k)
	require.NoError(t, err)
	require.Equal(t, StatusDone, st.Status)
	require.Equal(t, "v1", st.Version)

	id, err := l.Renew(ctx, k, "not-the-claim", lcT0)
	require.NoError(t, err)
	require.Empty(t, id, "a stale prev renews nothing")
	id, err = l.Renew(ctx, k, st.Claim, lcT0)
	require.NoError(t, err)
	require.NotEmpty(t, id)
	twice, err := l.Renew(ctx, k, st.Claim, lcT0)
	require.NoError(t, err)
	require.Empty(t, twice, "renewed once: the item is no longer finished")
	again, err := l.State(ctx, k)
	require.NoError(t, err)
	require.Equal(t, StatusRetry, again.Status)
	require.Equal(t, id, again.Claim, "Renew returns the claim id it wrote")
	require.Equal(t, "v1", again.Version, "the version handled last is kept")

	r2 := lcReq(k, "w2", 1, 1, lcT0.Add(1))
	r2.Version = "v2"
	o2 := lcClaim(t, l, r2)
	require.True(t, o2.Claimed)
	require.Equal(t, 1, o2.Claim.Attempt, "a new version starts at attempt 1")
	require.NoError(t, l.DeadLetter(ctx, o2.Claim, "boom", lcT0))
	st, err = l.State(ctx, k)
	require.NoError(t, err)
	require.Equal(t, StatusFailed, st.Status)
	require.Equal(t, "v2", st.Version)

	// Complete-only and batched completions record their versions too; no version given: "-".
	co := lcReq(lcKey(1), "w1", 0, 1, lcT0)
	co.Version = "v9"
	res, err := l.CompleteOnly(ctx, co)
	require.NoError(t, err)
	require.True(t, res.Applied)
	st, _ = l.State(ctx, lcKey(1))
	require.Equal(t, "v9", st.Version)
	var claims []Claim
	for i, k := range []Key{lcKey(2), lcKey(3)} {
		rq := lcReq(k, "w1", 0, 1, lcT0)
		if i == 0 {
			rq.Version = "b2"
		}
		o := lcClaim(t, l, rq)
		require.True(t, o.Claimed)
		claims = append(claims, o.Claim)
	}
	for _, err := range l.CompleteBatch(ctx, claims, lcT0) {
		require.NoError(t, err)
	}
	st, _ = l.State(ctx, lcKey(2))
	require.Equal(t, "b2", st.Version)
	st, _ = l.State(ctx, lcKey(3))
	require.Equal(t, unknownVersion, st.Version)
}

// TestContentVersion: the version ignores the inline ledger's attributes, attribute and set
// order and number spelling, and changes with any content; AppliedTo predicts the content an item
// effect leaves, so the recorded version matches the item as stored.
func TestContentVersion(t *testing.T) {
	db, source, names := lcSourceTable(t)
	l, err := NewInline(db, source, names, WithVersions())
	require.NoError(t, err)
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	base := map[string]types.AttributeValue{"id": s("a"), "n": n("1.50"), "tags": &types.AttributeValueMemberSS{Value: []string{"x", "y"}}}
	v := l.ContentVersion(base)
	same := map[string]types.AttributeValue{"id": s("a"), "n": n("1.5"), "tags": &types.AttributeValueMemberSS{Value: []string{"y", "x"}},
		"dp_status": s("done"), "dp_version": s(v), "dp_whatever": s("z")}
	require.Equal(t, v, l.ContentVersion(same))
	other := map[string]types.AttributeValue{"id": s("a"), "n": n("1.51"), "tags": &types.AttributeValueMemberSS{Value: []string{"x", "y"}}}
	require.NotEqual(t, v, l.ContentVersion(other))
	moved := map[string]types.AttributeValue{"id": s("a"), "m": n("1.50"), "tags": &types.AttributeValueMemberSS{Value: []string{"x", "y"}}}
	require.NotEqual(t, v, l.ContentVersion(moved), "a value under another name is other content")

	eff := new(Effects).Item(Set("first", "Ada"), Add("n", 2), Remove("tags"))
	after := eff.AppliedTo(base)
	require.Len(t, base, 3, "AppliedTo does not modify its argument")
	want := map[string]types.AttributeValue{"id": s("a"), "n": n("3.5"), "first": s("Ada")}
	require.Equal(t, l.ContentVersion(want), l.ContentVersion(after))
}

// versionedLedger is a versioned ledger of kind ("inline" or "table", job job) over a fresh
// source table, with the table's client and name.
func versionedLedger(t *testing.T, kind, job string) (Ledger, *dynamodb.Client, string) {
	t.Helper()
	db, source, names := lcSourceTable(t)
	opts := append(lcOpts(t), WithVersions())
	var l Ledger
	var err error
	if kind == "inline" {
		l, err = NewInline(db, source, names, opts...)
	} else {
		l, err = NewTable(db, lcLedgerTable(t, db), job, source, names, opts...)
	}
	require.NoError(t, err)
	return l, db, source
}
