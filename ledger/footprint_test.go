package ledger

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/capacity"
)

// TestFootprintIsWhatTheWritesLeave: the sizes Footprint computes from the ledger's transitions are
// those of the state rows the ledger's real writes leave on DynamoDB (the item itself for the
// inline ledger), after a claim, its completion, and a complete-only write, for every shape of
// state the options give (versions, the complete-only audit, attributes removed on done).
func TestFootprintIsWhatTheWritesLeave(t *testing.T) {
	for _, c := range []struct {
		name  string
		table bool
		opts  []Option
	}{
		{"inline", false, nil},
		{"inline/versions", false, []Option{WithVersions()}},
		{"inline/audit/remove-on-done", false, []Option{WithCompleteOnlyAudit(), WithRemoveOnDone("shard"), WithPrefix("state_")}},
		{"table", true, nil},
		{"table/versions/audit", true, []Option{WithVersions(), WithCompleteOnlyAudit()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			db, source, names := lcSourceTable(t)
			var l interface {
				Ledger
				Footprint(item, row map[string]types.AttributeValue, req ClaimRequest) (Footprint, error)
				ContentVersion(map[string]types.AttributeValue) string
			}
			var err error
			var rowTable string
			if c.table {
				rowTable = lcLedgerTable(t, db)
				l, err = NewTable(db, rowTable, "job", source, names, c.opts...)
			} else {
				rowTable = source
				l, err = NewInline(db, source, names, c.opts...)
			}
			require.NoError(t, err)
			item := func(i int) map[string]types.AttributeValue {
				return map[string]types.AttributeValue{"id": lcKey(i)["id"], "payload": &types.AttributeValueMemberS{Value: strings.Repeat("x", 900)},
					"n": &types.AttributeValueMemberN{Value: "12.5"}, "shard": &types.AttributeValueMemberN{Value: "3"},
					"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": &types.AttributeValueMemberBOOL{Value: true}}}}
			}
			for i := range 2 {
				_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(source), Item: item(i)})
				require.NoError(t, err)
			}
			// One clock reading for every write: a number's size depends on its digits (a time
			// ending in 0 is a byte shorter).
			now := time.UnixMilli(1_795_907_093_412)
			req := func(i int) ClaimRequest {
				r := ClaimRequest{Key: lcKey(i), Owner: "ip-10-0-0-1-4242-0badf00d", Slot: 12, Token: 34567, Scope: "AbCdEfGhIjK",
					Now: now, Until: now.Add(time.Minute), Fresh: true}
				if c.opts != nil {
					r.Version = l.ContentVersion(item(i))
				}
				return r
			}
			fp, err := l.Footprint(item(0), nil, req(0))
			require.NoError(t, err)
			size := func(i int) int {
				rk := lcKey(i)
				if c.table {
					rk, err = l.(*Table).core.row.key(lcKey(i))
					require.NoError(t, err)
				}
				out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(rowTable), Key: rk, ConsistentRead: aws.Bool(true)})
				require.NoError(t, err)
				return capacity.ItemSize(out.Item)
			}
			require.Equal(t, size(0), fp.Before, "before any write")
			outs, err := l.Claim(ctx, []ClaimRequest{req(0)})
			require.NoError(t, err)
			require.True(t, outs[0].Claimed)
			require.Equal(t, size(0), fp.Claimed, "after the claim")
			require.NoError(t, l.Complete(ctx, outs[0].Claim, now))
			require.Equal(t, size(0), fp.Done, "after the completion")
			res, err := l.CompleteOnly(ctx, req(1))
			require.NoError(t, err)
			require.True(t, res.Applied)
			require.Equal(t, size(1), fp.CompleteOnly, "after a complete-only write")
			t.Logf("%s: %+v", c.name, fmt.Sprint(fp))

			// An item with a state already (a retry with a long error): sized from its row as stored.
			_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(source), Item: item(2)})
			require.NoError(t, err)
			first, err := l.Claim(ctx, []ClaimRequest{req(2)})
			require.NoError(t, err)
			require.NoError(t, l.Retry(ctx, first[0].Claim, strings.Repeat("e", 1000), now.Add(-time.Minute)))
			var row map[string]types.AttributeValue
			if c.table {
				st, r, err := l.(*Table).StateRow(ctx, lcKey(2))
				require.NoError(t, err)
				require.Equal(t, StatusRetry, st.Status)
				row = r
			} else {
				out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(source), Key: lcKey(2), ConsistentRead: aws.Bool(true)})
				require.NoError(t, err)
				row = out.Item
			}
			scanned := item(2)
			if !c.table {
				scanned = row
			}
			fp, err = l.Footprint(scanned, row, req(2))
			require.NoError(t, err)
			require.Equal(t, size(2), fp.Before, "a retry, before its claim")
			again := req(2)
			again.Fresh = false
			outs, err = l.Claim(ctx, []ClaimRequest{again})
			require.NoError(t, err)
			require.True(t, outs[0].Claimed)
			require.Equal(t, size(2), fp.Claimed, "a retry, after its claim")
			require.NoError(t, l.Complete(ctx, outs[0].Claim, now))
			require.Equal(t, size(2), fp.Done, "a retry, after its completion")
			t.Logf("%s, a retry: %+v", c.name, fmt.Sprint(fp))
		})
	}
}
