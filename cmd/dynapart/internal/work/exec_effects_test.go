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

// TestExecEffectsNotUTF8: output that is not UTF-8 (Latin-1 bytes in a value or a name) or holds
// a lone surrogate escape fails the attempt, saying so, and applies nothing; encoding/json alone
// would have committed the text with U+FFFD in place of what it could not read.
func TestExecEffectsNotUTF8(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	for name, out := range map[string][]byte{
		"latin1":         []byte("{\"set\": {\"name\": \"caf\xe9\"}}"),
		"latin1 name":    []byte("{\"set\": {\"k\xff\": \"v\"}}"),
		"lone surrogate": []byte(`{"set": {"name": "a\ud800b"}}`),
	} {
		t.Run(name, func(t *testing.T) {
			table, leases := c.SeededTables(t, 1)
			c.WorkOnce(table, leases, 1, "--exec", printsScript(t, c.Dir, out), "--exec-effects", "--max-attempts", "1")
			it := scanItems(t, db, table)[0]
			require.Equal(t, "failed", strAttr(it["dp_status"]))
			require.Regexp(t, `not UTF-8|surrogate`, strAttr(it["dp_error"]))
			for k, v := range it {
				require.NotContains(t, k, "\uFFFD", "nothing of the effects is applied")
				require.NotContains(t, strAttr(v), "\uFFFD", "nothing of the effects is applied")
			}
			require.NotContains(t, it, "name", "nothing of the effects is applied")
		})
	}
}

// TestExecEffectsPlainTypes: effects write plain JSON's types only (README, work --help): the
// item's sets and binaries reach CMD as arrays and base64 text, and echoed back they are stored as
// L and S. A contract test of the documented limit, so that a change of it is a decision.
func TestExecEffectsPlainTypes(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	table, leases := c.SeededTables(t, 1)
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key:              map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "item-00000000"}},
		UpdateExpression: aws.String("SET ss = :ss, ns = :ns, bs = :bs, b = :b"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":ss": &types.AttributeValueMemberSS{Value: []string{"a"}}, ":ns": &types.AttributeValueMemberNS{Value: []string{"12345678901234567890123"}},
			":bs": &types.AttributeValueMemberBS{Value: [][]byte{{0, 1}}}, ":b": &types.AttributeValueMemberB{Value: []byte{0, 1, 2}}}})
	require.NoError(t, err)
	echo := `printf '{"set": {"echo": '; cat; printf '}}'` // the item as read, as one attribute
	c.WorkOnce(table, leases, 1, "--exec", echo, "--exec-effects", "--max-attempts", "1")
	it := scanItems(t, db, table)[0]
	require.Equal(t, "done", strAttr(it["dp_status"]), strAttr(it["dp_error"]))
	echoed := it["echo"].(*types.AttributeValueMemberM).Value
	require.Equal(t, &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "a"}}}, echoed["ss"])
	require.Equal(t, &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "12345678901234567890123"}}}, echoed["ns"])
	require.Equal(t, &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "AAE="}}}, echoed["bs"])
	require.Equal(t, &types.AttributeValueMemberS{Value: "AAEC"}, echoed["b"])
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

// TestExecLeftChildHoldsOutput (from an adversarial review): a CMD that exits 0 but leaves a
// process holding its stdout and stderr open completes its item with the output it wrote (the
// process left is killed with CMD's process group); it failed with 'WaitDelay expired before I/O
// complete', once per attempt, leaving the process running.
func TestExecLeftChildHoldsOutput(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	table, leases := c.SeededTables(t, 1)
	c.WorkOnce(table, leases, 1, "--exec", `cat >/dev/null; sleep 60 & echo '{"set": {"x": 1}}'`, "--exec-effects", "--max-attempts", "1")
	it := scanItems(t, db, table)[0]
	require.Equal(t, "done", strAttr(it["dp_status"]), "dp_error: %s", strAttr(it["dp_error"]))
	require.Equal(t, &types.AttributeValueMemberN{Value: "1"}, it["x"])
}

// TestExecEffectsBadOutputFailsAtOnce: output that is not an effects object fails the attempt
// permanently: the item is dead-lettered after one run of the command (which exited 0 with it and
// would print it again), not retried up to --max-attempts, as an effect the ledger refuses is.
func TestExecEffectsBadOutputFailsAtOnce(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	table, leases := c.SeededTables(t, 1)
	c.WorkOnce(table, leases, 1, "--exec", printsScript(t, c.Dir, []byte(`{"sett": {"a": 1}}`)), "--exec-effects",
		"--max-attempts", "3", "--retry-backoff", "10ms")
	it := scanItems(t, db, table)[0]
	require.Equal(t, "failed", strAttr(it["dp_status"]))
	require.Contains(t, strAttr(it["dp_error"]), `unknown field "sett"`)
	require.Equal(t, &types.AttributeValueMemberN{Value: "1"}, it["dp_attempts"], "one attempt, not --max-attempts")
	require.Nil(t, it["a"])
}

// TestExecEffectsEndlessOutputStopped: a CMD that writes without end (`yes '{}'`) is stopped once
// its output passes the 4 MB limit (it reads SIGPIPE), and the attempt fails permanently saying so.
// Before, the worker read and dropped the output until the claim's end killed CMD, and the
// attempt's error blamed --claim-ttl; every attempt did the same (82 s, 5 attempts, helper-70).
func TestExecEffectsEndlessOutputStopped(t *testing.T) {
	c := clitest.New(t)
	db := ddbtest.Client(t)
	table, leases := c.SeededTables(t, 1)
	status := filepath.Join(c.Dir, "yes-status") // yes's exit status, written once it has ended on its own
	c.WorkOnce(table, leases, 1, "--exec", "cat >/dev/null; yes '{}'; echo $? >"+status, "--exec-effects",
		"--claim-ttl", "10s", "--max-attempts", "3")
	got, err := os.ReadFile(status)
	require.NoError(t, err, "yes was killed with its process group at the claim's end, not stopped by its closed output")
	require.Equal(t, "141\n", string(got), "yes died of SIGPIPE (128+13)")
	it := scanItems(t, db, table)[0]
	require.Equal(t, "failed", strAttr(it["dp_status"]))
	require.Contains(t, strAttr(it["dp_error"]), "output is over 4194304 bytes")
	require.Equal(t, &types.AttributeValueMemberN{Value: "1"}, it["dp_attempts"], "one attempt, not --max-attempts")
}
