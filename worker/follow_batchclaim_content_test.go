package worker

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/ledger"
)

// claimGates holds B's first Scan, its first renew, and its first claim UpdateItem.
type claimGates struct {
	*dynamodb.Client
	table                          string
	scanOnce, renewOnce, claimOnce sync.Once
	scanHit, renewHit, claimHit    chan struct{}
	scanGo, renewGo, claimGo       chan struct{}
}

func newClaimGates(db *dynamodb.Client, table string) *claimGates {
	return &claimGates{Client: db, table: table, scanHit: make(chan struct{}), renewHit: make(chan struct{}), claimHit: make(chan struct{}),
		scanGo: make(chan struct{}), renewGo: make(chan struct{}), claimGo: make(chan struct{})}
}

func (g *claimGates) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if aws.ToString(in.TableName) == g.table {
		g.scanOnce.Do(func() { close(g.scanHit); <-g.scanGo })
	}
	return g.Client.Scan(ctx, in, opts...)
}

func (g *claimGates) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	_, zero := in.ExpressionAttributeValues[":zero"]
	_, until := in.ExpressionAttributeValues[":until"]
	if aws.ToString(in.TableName) != g.table {
		return g.Client.UpdateItem(ctx, in, opts...)
	}
	if zero {
		g.renewOnce.Do(func() { close(g.renewHit); <-g.renewGo })
	} else if until {
		g.claimOnce.Do(func() { close(g.claimHit); <-g.claimGo })
	}
	return g.Client.UpdateItem(ctx, in, opts...)
}

// TestBatchClaimAfterRefusedRenewGetsContentAsClaimed (found by an adversarial review of 5cedea1):
// claim mode, BatchClaims, Follow, inline ledger. After a refused renew, dispatch kept the item
// afterRefusedRenew read (before the claim) as the task's content, so contentAsClaimed no longer
// read the item after the batch claim: the handler ran content older than its claim. Only a
// complete-only task takes that content now.
func TestBatchClaimAfterRefusedRenewGetsContentAsClaimed(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 0)
	_, _, err := follow.EnableStream(ctx, f.db, f.table)
	require.NoError(t, err)
	f.seed(t, 0, 1, func(i int, it map[string]types.AttributeValue) { it["n"] = &types.AttributeValueMemberN{Value: "1"} })
	id := itemKey(0)
	l, err := ledger.NewInline(f.db, f.table, []string{"id"}, ledger.WithVersions(), ledger.WithMaxClockSkew(5*time.Second))
	require.NoError(t, err)
	read := func() map[string]types.AttributeValue {
		out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: skey(id), ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		return out.Item
	}
	// "another worker" handles the current content: claim, complete at its version.
	handle := func() string {
		now := time.Now()
		v := l.ContentVersion(read())
		outs, err := l.Claim(ctx, []ledger.ClaimRequest{{Key: skey(id), Owner: "T", Now: now, Until: now.Add(time.Minute), Version: v}})
		require.NoError(t, err)
		require.True(t, outs[0].Claimed, "%+v", outs[0])
		require.NoError(t, l.Complete(ctx, outs[0].Claim, time.Now()))
		st, err := l.State(ctx, skey(id))
		require.NoError(t, err)
		return st.Claim
	}
	c1 := handle() // done at n=1
	setN(t, f, 0, 2)

	g := newClaimGates(f.db, f.table)
	var mu sync.Mutex
	var seen []int
	b := startReview(t, f, LedgerInline, "B", newReviewStreams(t, false, 0), func(c *Config) {
		c.Client, c.BatchClaims = g, true
		c.Hooks.OnItem = func(e ItemEvent) { t.Logf("B event %s %s", keyID(e.Key), e.Outcome) }
	}, func(_ context.Context, it Item) error {
		nv, _ := strconv.Atoi(it.Attrs["n"].(*types.AttributeValueMemberN).Value)
		mu.Lock()
		seen = append(seen, nv)
		mu.Unlock()
		return nil
	})
	waitOn(t, g.scanHit, "B does not scan")
	close(g.scanGo) // B's page: n=2, done at n=1 -> renew (held)
	waitOn(t, g.renewHit, "B does not renew")
	c2, err := l.Renew(ctx, skey(id), c1, time.Now()) // another worker reopens it first
	require.NoError(t, err)
	require.NotEmpty(t, c2)
	close(g.renewGo) // B's renew refused: afterRefusedRenew reads n=2, retry -> batch claim (held)
	waitOn(t, g.claimHit, "B does not claim")
	c3 := handle() // another worker handles n=2
	setN(t, f, 0, 3)
	_, err = l.Renew(ctx, skey(id), c3, time.Now()) // and reopens it for n=3
	require.NoError(t, err)
	t.Logf("state before B's claim: %+v", func() ItemState { st, _ := l.State(ctx, skey(id)); return st }())
	close(g.claimGo) // B's claim lands on the reopened retry
	reviewWait(t, 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0, "B ran no handler"
	})
	b.stop()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 3, seen[0], "B's claim landed after n=3 was written and n=2 was handled; B's handler got n=%d (runs %v)", seen[0], seen)
}
