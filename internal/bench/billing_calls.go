package bench

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The calls billingDB bills, one method per operation: each sends the request, then records it
// with the charges its request and answer make by DynamoDB's rules.

func (b *billingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := b.db.GetItem(ctx, in, o...)
	return settle(b, "GetItem", out, err, func(c charges) {
		t := aws.ToString(in.TableName)
		c.read(t, b.readSize(t, out.Item), aws.ToBool(in.ConsistentRead), 1)
	})
}

func (b *billingDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := b.db.PutItem(ctx, in, o...)
	return settle(b, "PutItem", out, err, func(c charges) { c.write(aws.ToString(in.TableName), b.putSize(in.TableName, in.Item), 1) })
}

func (b *billingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := b.db.UpdateItem(ctx, in, o...)
	return settle(b, "UpdateItem", out, err, func(c charges) {
		c.write(aws.ToString(in.TableName), b.updateSize(in.TableName, in.Key, in.ExpressionAttributeValues, in.ExpressionAttributeNames), 1)
	})
}

func (b *billingDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := b.db.DeleteItem(ctx, in, o...)
	return settle(b, "DeleteItem", out, err, func(c charges) {
		c.write(aws.ToString(in.TableName), b.updateSize(in.TableName, in.Key, in.ExpressionAttributeValues, in.ExpressionAttributeNames), 1)
	})
}

func (b *billingDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := b.db.Query(ctx, in, o...)
	return settle(b, "Query", out, err, func(c charges) { b.page(c, in.TableName, out.Items, out.ScannedCount, in.ConsistentRead) })
}

func (b *billingDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := b.db.Scan(ctx, in, o...)
	return settle(b, "Scan", out, err, func(c charges) { b.page(c, in.TableName, out.Items, out.ScannedCount, in.ConsistentRead) })
}

// page charges a Scan or Query page: one read of the items it evaluated.
func (b *billingDB) page(c charges, table *string, items []map[string]types.AttributeValue, scanned int32, consistent *bool) {
	t := aws.ToString(table)
	c.read(t, b.pageSize(t, items, scanned), aws.ToBool(consistent), 1)
}

func (b *billingDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	out, err := b.db.DescribeTable(ctx, in, o...)
	return settle(b, "DescribeTable", out, err, nil)
}

// TransactWriteItems bills every item written or checked 2 WCU per KB.
func (b *billingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := b.db.TransactWriteItems(ctx, in, o...)
	return settle(b, "TransactWriteItems", out, err, func(c charges) {
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				c.write(aws.ToString(it.Put.TableName), b.putSize(it.Put.TableName, it.Put.Item), 2)
			case it.Update != nil:
				u := it.Update
				c.write(aws.ToString(u.TableName), b.updateSize(u.TableName, u.Key, u.ExpressionAttributeValues, u.ExpressionAttributeNames), 2)
			case it.Delete != nil:
				d := it.Delete
				c.write(aws.ToString(d.TableName), b.updateSize(d.TableName, d.Key, d.ExpressionAttributeValues, d.ExpressionAttributeNames), 2)
			case it.ConditionCheck != nil:
				k := it.ConditionCheck
				c.write(aws.ToString(k.TableName), b.updateSize(k.TableName, k.Key, k.ExpressionAttributeValues, k.ExpressionAttributeNames), 2)
			}
		}
	})
}

// TransactGetItems bills every item read 2 RCU per 4 KB (a missing item the minimum).
func (b *billingDB) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	out, err := b.db.TransactGetItems(ctx, in, o...)
	return settle(b, "TransactGetItems", out, err, func(c charges) {
		for i, it := range in.TransactItems {
			if it.Get == nil {
				continue
			}
			t := aws.ToString(it.Get.TableName)
			var item map[string]types.AttributeValue
			if out != nil && i < len(out.Responses) {
				item = out.Responses[i].Item
			}
			c.read(t, b.readSize(t, item), true, 2)
		}
	})
}

// BatchGetItem bills every key read like a GetItem (found items by their size, missing ones the
// minimum); keys DynamoDB left unprocessed are not billed.
func (b *billingDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := b.db.BatchGetItem(ctx, in, o...)
	return settle(b, "BatchGetItem", out, err, func(c charges) {
		for t, ka := range in.RequestItems {
			found := out.Responses[t]
			for _, item := range found {
				c.read(t, b.readSize(t, item), aws.ToBool(ka.ConsistentRead), 1)
			}
			for range max(len(ka.Keys)-len(found)-len(out.UnprocessedKeys[t].Keys), 0) {
				c.read(t, 0, aws.ToBool(ka.ConsistentRead), 1) // a key not found
			}
		}
	})
}

// BatchWriteItem bills every item written 1 WCU per KB; items DynamoDB left unprocessed are not
// billed.
func (b *billingDB) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	out, err := b.db.BatchWriteItem(ctx, in, o...)
	return settle(b, "BatchWriteItem", out, err, func(c charges) {
		for t, reqs := range in.RequestItems {
			for _, r := range reqs[:max(len(reqs)-len(out.UnprocessedItems[t]), 0)] { // sizes alike: which ones is immaterial
				switch {
				case r.PutRequest != nil:
					c.write(t, b.putSize(&t, r.PutRequest.Item), 1)
				case r.DeleteRequest != nil:
					c.write(t, b.storedSize(t, r.DeleteRequest.Key), 1)
				}
			}
		}
	})
}

// ExecuteStatement bills a PartiQL statement as the operation it is: a write (INSERT, UPDATE,
// DELETE) as a single write of the stored item and the statement's parameters; a SELECT as one
// read of the items it returned.
func (b *billingDB) ExecuteStatement(ctx context.Context, in *dynamodb.ExecuteStatementInput, o ...func(*dynamodb.Options)) (*dynamodb.ExecuteStatementOutput, error) {
	out, err := b.db.ExecuteStatement(ctx, in, o...)
	return settle(b, "ExecuteStatement", out, err, func(c charges) {
		t, read := statementTarget(aws.ToString(in.Statement))
		switch {
		case !read:
			c.write(t, b.statementSize(t, in.Parameters), 1)
		case out != nil:
			c.read(t, b.pageSize(t, out.Items, int32(len(out.Items))), aws.ToBool(in.ConsistentRead), 1)
		}
	})
}

// BatchExecuteStatement bills each statement as its own single operation (ExecuteStatement), when
// it succeeded or its condition failed (each is answered on its own).
func (b *billingDB) BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	out, err := b.db.BatchExecuteStatement(ctx, in, o...)
	return settle(b, "BatchExecuteStatement", out, err, func(c charges) {
		for i, st := range in.Statements {
			if out == nil || i >= len(out.Responses) || !statementBilled(out.Responses[i].Error) {
				continue
			}
			t, read := statementTarget(aws.ToString(st.Statement))
			if read {
				c.read(t, b.readSize(t, out.Responses[i].Item), aws.ToBool(st.ConsistentRead), 1)
			} else {
				c.write(t, b.statementSize(t, st.Parameters), 1)
			}
		}
	})
}

// statementBilled reports whether a statement of a batch that ended with e is billed.
func statementBilled(e *types.BatchStatementError) bool {
	return e == nil || e.Code == types.BatchStatementErrorCodeEnumConditionalCheckFailed ||
		e.Code == types.BatchStatementErrorCodeEnumDuplicateItem
}

// statementTarget is the table a PartiQL statement names (after UPDATE, INTO or FROM, quotes
// removed) and whether it reads (SELECT).
func statementTarget(stmt string) (table string, read bool) {
	f := strings.Fields(stmt)
	read = len(f) > 0 && strings.EqualFold(f[0], "SELECT")
	for i := 0; i+1 < len(f); i++ {
		switch strings.ToUpper(f[i]) {
		case "UPDATE", "INTO", "FROM":
			name := strings.Trim(f[i+1], `"'`)
			if j := strings.IndexByte(name, '"'); j >= 0 { // "table"."index"
				name = name[:j]
			}
			return name, read
		}
	}
	return "", read
}
