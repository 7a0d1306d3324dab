package work_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// TestExecEffectsBigNumberKeyIsAnotherItem: a put to the neighbour of an item of an N-keyed table,
// whose key differs from the item's only in its 23rd digit, is a write to another item (DynamoDB
// keeps 38 digits), not one to the item itself: the item is done and the neighbour written.
func TestExecEffectsBigNumberKeyIsAnotherItem(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "N"})
	leases := ddbtest.TableName(t, "lease")
	ddbtest.DeleteOnCleanup(t, db, leases)
	c.MustRun("init", "--table", table, "--lease-table", leases)
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table),
		Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: "12345678901234567890123"}}})
	require.NoError(t, err)
	out := fmt.Sprintf(`{"writes": [{"put": {"table": %q, "item": {"id": 12345678901234567890124, "note": "neighbour"}}}]}`, table)
	c.WorkOnce(table, leases, 1, "--exec", printsScript(t, c.Dir, []byte(out)), "--exec-effects", "--max-attempts", "1")
	byID := map[string]map[string]types.AttributeValue{}
	for _, it := range scanItems(t, db, table) {
		byID[it["id"].(*types.AttributeValueMemberN).Value] = it
	}
	item := byID["12345678901234567890123"]
	require.Equal(t, "done", strAttr(item["dp_status"]), "dp_error: %s", strAttr(item["dp_error"]))
	require.Contains(t, byID, "12345678901234567890124", "the neighbour is written")
}

// printsScript is an --exec CMD that reads its stdin and prints out, byte for byte.
func printsScript(t *testing.T, dir string, out []byte) string {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("out-%d.bin", time.Now().UnixNano()))
	require.NoError(t, os.WriteFile(p, out, 0o644))
	return "cat >/dev/null; cat " + p
}

// scanItems are the items of table, read consistently.
func scanItems(t *testing.T, db *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Items
}

// strAttr is an S value's string, or the value's Go form when it is no S.
func strAttr(av types.AttributeValue) string {
	if s, ok := av.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return fmt.Sprintf("%#v", av)
}
