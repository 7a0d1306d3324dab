package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/capacity"
)

func TestBillingUnits(t *testing.T) {
	for _, c := range []struct{ size, want int }{{0, 1}, {1, 1}, {1024, 1}, {1025, 2}, {3000, 3}} {
		require.Equal(t, float64(c.want), writeUnits(c.size), "write of %d bytes", c.size)
	}
	require.Equal(t, 1.0, readUnits(4096, true))
	require.Equal(t, 2.0, readUnits(4097, true))
	require.Equal(t, 0.5, readUnits(0, false))
	require.Equal(t, 1.5, readUnits(10000, false))
}

// sized is an item of exactly size bytes by DynamoDB's rules (id "k": 3 bytes, p: the rest).
func sized(size int) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{"id": s("k"), "p": s(strings.Repeat("x", size-4))}
	if capacity.ItemSize(it) != size {
		panic("sized")
	}
	return it
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

var key = map[string]types.AttributeValue{"id": s("k")}

// fakeBilled answers every call with its canned answer and error; it sends nothing.
type fakeBilled struct {
	billedClient
	err       error
	scan      *dynamodb.ScanOutput
	get       *dynamodb.GetItemOutput
	batchGet  *dynamodb.BatchGetItemOutput
	batchPut  *dynamodb.BatchWriteItemOutput
	txGet     *dynamodb.TransactGetItemsOutput
	statement *dynamodb.BatchExecuteStatementOutput
}

func (f *fakeBilled) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{}, f.err
}

func (f *fakeBilled) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, f.err
}

func (f *fakeBilled) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return &dynamodb.TransactWriteItemsOutput{}, f.err
}

func (f *fakeBilled) BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return f.batchPut, f.err
}

func (f *fakeBilled) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return f.scan, f.err
}

func (f *fakeBilled) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return f.get, f.err
}

func (f *fakeBilled) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return f.batchGet, f.err
}

func (f *fakeBilled) TransactGetItems(context.Context, *dynamodb.TransactGetItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	return f.txGet, f.err
}

func (f *fakeBilled) ExecuteStatement(context.Context, *dynamodb.ExecuteStatementInput, ...func(*dynamodb.Options)) (*dynamodb.ExecuteStatementOutput, error) {
	return &dynamodb.ExecuteStatementOutput{}, f.err
}

func (f *fakeBilled) BatchExecuteStatement(context.Context, *dynamodb.BatchExecuteStatementInput, ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	return f.statement, f.err
}

// billOf sends one request through a billing counter over f (the table "t" stores items of
// stored bytes) and returns the units billed and the requests counted.
func billOf(t *testing.T, f *fakeBilled, stored int, send func(ctx context.Context, db *billingDB)) (Units, int64) {
	t.Helper()
	db := newBillingDB(f, map[string]int{"t": stored})
	send(context.Background(), db)
	b := db.Bill()
	return b.Total(), b.Requests
}

// Single writes bill 1 WCU per KB of the item (stored item plus what the request carries), also
// when the condition fails; a throttled write is counted as a request but not billed.
func TestBillingSingleWrites(t *testing.T) {
	update := func(ctx context.Context, db *billingDB) {
		_, _ = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key,
			UpdateExpression: aws.String("SET #a = :v"), ExpressionAttributeNames: map[string]string{"#a": "abc"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": s(strings.Repeat("v", 98))}}) // 2 + 98 + 3 bytes
	}
	u, n := billOf(t, &fakeBilled{}, 900, update)
	require.Equal(t, Units{WCU: 1}, u) // 1,003 bytes
	require.Equal(t, int64(1), n)
	u, _ = billOf(t, &fakeBilled{}, 922, update) // 1,025 bytes
	require.Equal(t, Units{WCU: 2}, u)
	u, _ = billOf(t, &fakeBilled{err: &types.ConditionalCheckFailedException{}}, 900, update)
	require.Equal(t, Units{WCU: 1}, u)
	u, n = billOf(t, &fakeBilled{err: &types.ProvisionedThroughputExceededException{}}, 900, update)
	require.Equal(t, Units{}, u)
	require.Equal(t, int64(1), n)

	u, _ = billOf(t, &fakeBilled{}, 0, func(ctx context.Context, db *billingDB) {
		_, _ = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: sized(3000)})
	})
	require.Equal(t, Units{WCU: 3}, u)
}

// Every item of a transaction bills 2 WCU per KB (DynamoDB Local reports 2 for the whole
// transaction); a batch write's items 1 WCU per KB each, those left unprocessed not at all.
func TestBillingBatchesAndTransactions(t *testing.T) {
	upd := &types.Update{TableName: aws.String("t"), Key: key, UpdateExpression: aws.String("SET a = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("1")}}
	u, n := billOf(t, &fakeBilled{}, 200, func(ctx context.Context, db *billingDB) {
		_, _ = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: upd}, {Update: upd}, {Put: &types.Put{TableName: aws.String("other"), Item: sized(1500)}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String("t"), Key: key, ConditionExpression: aws.String("attribute_exists(id)")}},
		}})
	})
	require.Equal(t, Units{WCU: 2 + 2 + 4 + 2}, u)
	require.Equal(t, int64(1), n)

	puts := make([]types.WriteRequest, 25)
	for i := range puts {
		puts[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: sized(100)}}
	}
	u, _ = billOf(t, &fakeBilled{batchPut: &dynamodb.BatchWriteItemOutput{UnprocessedItems: map[string][]types.WriteRequest{"t": puts[:5]}}}, 0,
		func(ctx context.Context, db *billingDB) {
			_, _ = db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"t": puts}})
		})
	require.Equal(t, Units{WCU: 20}, u)
}

// A Scan page bills the items it evaluated, rounded up to 4 KB once for the page, halved when
// eventually consistent; a projection or a filter does not lower it.
func TestBillingScans(t *testing.T) {
	full := make([]map[string]types.AttributeValue, 10)
	for i := range full {
		full[i] = sized(1000)
	}
	scan := func(consistent bool) func(ctx context.Context, db *billingDB) {
		return func(ctx context.Context, db *billingDB) {
			_, _ = db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("t"), ConsistentRead: aws.Bool(consistent)})
		}
	}
	u, _ := billOf(t, &fakeBilled{scan: &dynamodb.ScanOutput{Items: full, ScannedCount: 10}}, 0, scan(false))
	require.Equal(t, Units{RCU: 1.5}, u) // 10,000 bytes: 3 units, halved
	u, _ = billOf(t, &fakeBilled{scan: &dynamodb.ScanOutput{Items: full, ScannedCount: 10}}, 0, scan(true))
	require.Equal(t, Units{RCU: 3}, u)
	projected := []map[string]types.AttributeValue{key, key} // 2 of 10 returned, id only
	u, _ = billOf(t, &fakeBilled{scan: &dynamodb.ScanOutput{Items: projected, ScannedCount: 10}}, 1000, scan(false))
	require.Equal(t, Units{RCU: 1.5}, u)
	u, _ = billOf(t, &fakeBilled{scan: &dynamodb.ScanOutput{}}, 1000, scan(false))
	require.Equal(t, Units{RCU: 0.5}, u) // an empty page bills the minimum
}

// Item reads bill 1 RCU per 4 KB (half eventually consistent, a missing item the minimum), per
// item in a batch, twice in a transaction.
func TestBillingItemReads(t *testing.T) {
	u, _ := billOf(t, &fakeBilled{get: &dynamodb.GetItemOutput{Item: sized(5000)}}, 0, func(ctx context.Context, db *billingDB) {
		_, _ = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key})
	})
	require.Equal(t, Units{RCU: 1}, u) // 2 units, eventually consistent
	u, _ = billOf(t, &fakeBilled{get: &dynamodb.GetItemOutput{}}, 0, func(ctx context.Context, db *billingDB) {
		_, _ = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key, ConsistentRead: aws.Bool(true)})
	})
	require.Equal(t, Units{RCU: 1}, u)

	keys := []map[string]types.AttributeValue{key, key, key, key}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{"t": {sized(100), sized(5000)}},
		UnprocessedKeys: map[string]types.KeysAndAttributes{"t": {Keys: keys[:1]}}}
	u, _ = billOf(t, &fakeBilled{batchGet: out}, 0, func(ctx context.Context, db *billingDB) {
		_, _ = db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"t": {Keys: keys}}})
	})
	require.Equal(t, Units{RCU: 0.5 + 1 + 0.5}, u) // 100 bytes, 5,000 bytes, one missing; one unprocessed

	tx := &dynamodb.TransactGetItemsOutput{Responses: []types.ItemResponse{{Item: sized(100)}, {}}}
	get := types.TransactGetItem{Get: &types.Get{TableName: aws.String("t"), Key: key}}
	u, _ = billOf(t, &fakeBilled{txGet: tx}, 0, func(ctx context.Context, db *billingDB) {
		_, _ = db.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{get, get}})
	})
	require.Equal(t, Units{RCU: 4}, u)
}

// PartiQL statements bill as the single operations they are: in a batch, each on its own, also
// when its condition failed, not when it was throttled.
func TestBillingStatements(t *testing.T) {
	st := types.BatchStatementRequest{Statement: aws.String(`UPDATE "t" SET s = ? WHERE id = ? AND attribute_not_exists(s)`),
		Parameters: []types.AttributeValue{s("done"), s("k")}}
	out := &dynamodb.BatchExecuteStatementOutput{Responses: []types.BatchStatementResponse{{},
		{Error: &types.BatchStatementError{Code: types.BatchStatementErrorCodeEnumConditionalCheckFailed}},
		{Error: &types.BatchStatementError{Code: types.BatchStatementErrorCodeEnumThrottlingError}}}}
	u, n := billOf(t, &fakeBilled{statement: out}, 1020, func(ctx context.Context, db *billingDB) {
		_, _ = db.BatchExecuteStatement(ctx, &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{st, st, st}})
	})
	require.Equal(t, Units{WCU: 2 * 2}, u) // 1,020 + 5 bytes: 2 WCU each, 2 billed
	require.Equal(t, int64(1), n)
	u, _ = billOf(t, &fakeBilled{}, 100, func(ctx context.Context, db *billingDB) {
		_, _ = db.ExecuteStatement(ctx, &dynamodb.ExecuteStatementInput{Statement: st.Statement, Parameters: st.Parameters})
	})
	require.Equal(t, Units{WCU: 1}, u)

	for stmt, want := range map[string]string{`UPDATE "t" SET a = ?`: "t", `INSERT INTO "t" VALUE {'id': ?}`: "t",
		`delete from t where id = ?`: "t", `SELECT * FROM "t"."byStatus" WHERE s = ?`: "t"} {
		table, read := statementTarget(stmt)
		require.Equal(t, want, table, stmt)
		require.Equal(t, strings.HasPrefix(stmt, "SELECT"), read, stmt)
	}
}
