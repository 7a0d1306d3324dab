package worker

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/ledger"
)

// TestRunCommitsEffects: a handler's effects (a transform of the item, a counter on another
// table) commit with each completion, in every mode: claims single and batched, complete-only,
// both ledgers. Every item ends done with its transform, and the counter equals the items.
func TestRunCommitsEffects(t *testing.T) {
	for _, kind := range []LedgerKind{LedgerInline, LedgerTable} {
		for _, mode := range []string{"claim", "batch", "complete-only"} {
			t.Run(fmt.Sprintf("%s/%s", kind, mode), func(t *testing.T) {
				const n = 60
				f := newFixture(t, n)
				counters := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "pk", Type: "S"})
				c := fastTimings(f.config(kind))
				c.Workers, c.Once, c.Concurrency = 1, true, 8
				c.BatchClaims, c.CompleteOnly = mode == "batch", mode == "complete-only"
				w, err := New(c)
				require.NoError(t, err)
				counter := Key{"pk": &types.AttributeValueMemberS{Value: "total"}}
				h := WithEffects(func(_ context.Context, it Item) (*Effects, error) {
					var e Effects
					n, _ := strconv.Atoi(it.Attrs["n"].(*types.AttributeValueMemberN).Value)
					return e.Item(ledger.Set("double", 2*n), ledger.Remove("n")).Update(counters, counter, ledger.Add("items", 1)), nil
				})
				require.NoError(t, w.Run(context.Background(), h))
				require.Equal(t, int64(n), w.Stats().Completed)
				out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(counters), Key: counter, ConsistentRead: aws.Bool(true)})
				require.NoError(t, err)
				require.Equal(t, strconv.Itoa(n), out.Item["items"].(*types.AttributeValueMemberN).Value, "the counter counts every item once")
				for i := range n {
					got, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: skey(itemKey(i)), ConsistentRead: aws.Bool(true)})
					require.NoError(t, err)
					require.Equal(t, strconv.Itoa(2*i), got.Item["double"].(*types.AttributeValueMemberN).Value, "item %d", i)
					require.NotContains(t, got.Item, "n", "item %d", i)
				}
				s, err := f.ledger(t, kind, "").Summarize(context.Background())
				require.NoError(t, err)
				require.Equal(t, int64(n), s.Done)
			})
		}
	}
}

// TestRefusedEffectsDeadLetter: effects that cannot be committed (a put-if-absent of a row that
// exists) fail the attempt permanently, naming the write, and apply nothing.
func TestRefusedEffectsDeadLetter(t *testing.T) {
	for _, tc := range []struct {
		kind         LedgerKind
		completeOnly bool
	}{{LedgerInline, false}, {LedgerInline, true}, {LedgerTable, false}, {LedgerTable, true}} {
		kind, completeOnly := tc.kind, tc.completeOnly
		t.Run(fmt.Sprintf("%s/complete-only=%v", kind, completeOnly), func(t *testing.T) {
			f := newFixture(t, 3)
			rows := ddbtest.CreateTable(t, f.db, ddbtest.Key{Name: "pk", Type: "S"})
			c := fastTimings(f.config(kind))
			c.Workers, c.Once, c.Concurrency, c.CompleteOnly = 1, true, 1, completeOnly
			w, err := New(c)
			require.NoError(t, err)
			row := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "the-one"}}
			h := WithEffects(func(_ context.Context, it Item) (*Effects, error) {
				return (&Effects{}).Item(ledger.Set("touched", true)).PutIfAbsent(rows, row), nil
			})
			require.NoError(t, w.Run(context.Background(), h))
			st := w.Stats()
			require.Equal(t, int64(1), st.Completed, "the first item's put lands")
			require.Equal(t, int64(2), st.DeadLettered, "the others' put-if-absent fails")
			var letters []DeadLetter
			require.NoError(t, f.ledger(t, kind, "").DeadLetters(context.Background(), func(d DeadLetter) error {
				letters = append(letters, d)
				return nil
			}))
			require.Len(t, letters, 2)
			for _, d := range letters {
				require.Contains(t, d.Error, "writes[0]")
				got, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: d.Key, ConsistentRead: aws.Bool(true)})
				require.NoError(t, err)
				require.NotContains(t, got.Item, "touched", "nothing of a cancelled commit applied")
			}
		})
	}
}
