package ddbfault

import (
	"context"
	"crypto/rand"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

type key = map[string]types.AttributeValue

func one(table *string) []string { return []string{aws.ToString(table)} }

// GetItem implements Next.
func (c *Client) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return run(ctx, c, call[dynamodb.GetItemInput, dynamodb.GetItemOutput]{op: OpGetItem, in: in, tables: one(in.TableName), keys: []key{in.Key},
		send: func(ctx context.Context, in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return c.next.GetItem(ctx, in, o...)
		}})
}

// PutItem implements Next.
func (c *Client) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return run(ctx, c, call[dynamodb.PutItemInput, dynamodb.PutItemOutput]{op: OpPutItem, in: in, tables: one(in.TableName), keys: []key{in.Item},
		send: func(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			return c.next.PutItem(ctx, in, o...)
		},
		noOld: func(in *dynamodb.PutItemInput) *dynamodb.PutItemInput {
			cp := *in
			cp.ReturnValuesOnConditionCheckFailure = ""
			return &cp
		}})
}

// UpdateItem implements Next.
func (c *Client) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return run(ctx, c, call[dynamodb.UpdateItemInput, dynamodb.UpdateItemOutput]{op: OpUpdateItem, in: in, tables: one(in.TableName), keys: []key{in.Key},
		send: func(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return c.next.UpdateItem(ctx, in, o...)
		},
		noOld: func(in *dynamodb.UpdateItemInput) *dynamodb.UpdateItemInput {
			cp := *in
			cp.ReturnValuesOnConditionCheckFailure = ""
			return &cp
		}})
}

// DeleteItem implements Next.
func (c *Client) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return run(ctx, c, call[dynamodb.DeleteItemInput, dynamodb.DeleteItemOutput]{op: OpDeleteItem, in: in, tables: one(in.TableName), keys: []key{in.Key},
		send: func(ctx context.Context, in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
			return c.next.DeleteItem(ctx, in, o...)
		},
		noOld: func(in *dynamodb.DeleteItemInput) *dynamodb.DeleteItemInput {
			cp := *in
			cp.ReturnValuesOnConditionCheckFailure = ""
			return &cp
		}})
}

// Query implements Next.
func (c *Client) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return run(ctx, c, call[dynamodb.QueryInput, dynamodb.QueryOutput]{op: OpQuery, in: in, tables: one(in.TableName),
		send: func(ctx context.Context, in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			return c.next.Query(ctx, in, o...)
		}})
}

// Scan implements Next.
func (c *Client) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return run(ctx, c, call[dynamodb.ScanInput, dynamodb.ScanOutput]{op: OpScan, in: in, tables: one(in.TableName),
		send: func(ctx context.Context, in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
			return c.next.Scan(ctx, in, o...)
		}})
}

// DescribeTable implements Next.
func (c *Client) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return run(ctx, c, call[dynamodb.DescribeTableInput, dynamodb.DescribeTableOutput]{op: OpDescribeTable, in: in, tables: one(in.TableName),
		send: func(ctx context.Context, in *dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) {
			return c.next.DescribeTable(ctx, in, o...)
		}})
}

// CreateTable implements Next.
func (c *Client) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return run(ctx, c, call[dynamodb.CreateTableInput, dynamodb.CreateTableOutput]{op: OpCreateTable, in: in, tables: one(in.TableName),
		send: func(ctx context.Context, in *dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error) {
			return c.next.CreateTable(ctx, in, o...)
		}})
}

// TransactWriteItems implements Next.
func (c *Client) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	var tables []string
	var keys []key
	for _, it := range in.TransactItems {
		switch {
		case it.Update != nil:
			tables, keys = append(tables, aws.ToString(it.Update.TableName)), append(keys, it.Update.Key)
		case it.Put != nil:
			tables, keys = append(tables, aws.ToString(it.Put.TableName)), append(keys, it.Put.Item)
		case it.Delete != nil:
			tables, keys = append(tables, aws.ToString(it.Delete.TableName)), append(keys, it.Delete.Key)
		case it.ConditionCheck != nil:
			tables, keys = append(tables, aws.ToString(it.ConditionCheck.TableName)), append(keys, it.ConditionCheck.Key)
		}
	}
	if in.ClientRequestToken == nil {
		// The SDK would add one; set here so that a retry (LostAnswerRetried) repeats it, as the
		// SDK's own retry does: DynamoDB then answers the replay as the first time.
		cp := *in
		cp.ClientRequestToken = aws.String(rand.Text())
		in = &cp
	}
	return run(ctx, c, call[dynamodb.TransactWriteItemsInput, dynamodb.TransactWriteItemsOutput]{op: OpTransactWriteItems, in: in, tables: tables, keys: keys,
		send: func(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
			return c.next.TransactWriteItems(ctx, in, o...)
		},
		noOld: transactNoOld})
}

// transactNoOld is the transaction without ALL_OLD and without its idempotency token: DynamoDB
// would refuse the same token with other parameters, so this is a new transaction (as an
// application-level retry sends), whose conditions meet the state the first one left.
func transactNoOld(in *dynamodb.TransactWriteItemsInput) *dynamodb.TransactWriteItemsInput {
	cp := *in
	cp.ClientRequestToken = nil
	cp.TransactItems = make([]types.TransactWriteItem, len(in.TransactItems))
	for i, it := range in.TransactItems {
		switch {
		case it.Update != nil:
			u := *it.Update
			u.ReturnValuesOnConditionCheckFailure = ""
			it.Update = &u
		case it.Put != nil:
			p := *it.Put
			p.ReturnValuesOnConditionCheckFailure = ""
			it.Put = &p
		case it.Delete != nil:
			d := *it.Delete
			d.ReturnValuesOnConditionCheckFailure = ""
			it.Delete = &d
		case it.ConditionCheck != nil:
			cc := *it.ConditionCheck
			cc.ReturnValuesOnConditionCheckFailure = ""
			it.ConditionCheck = &cc
		}
		cp.TransactItems[i] = it
	}
	return &cp
}

// BatchGetItem implements Next.
func (c *Client) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	var tables []string
	var keys []key
	for t, ka := range in.RequestItems {
		tables, keys = append(tables, t), append(keys, ka.Keys...)
	}
	return run(ctx, c, call[dynamodb.BatchGetItemInput, dynamodb.BatchGetItemOutput]{op: OpBatchGetItem, in: in, tables: tables, keys: keys,
		send: func(ctx context.Context, in *dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error) {
			return c.next.BatchGetItem(ctx, in, o...)
		}})
}

// BatchWriteItem implements Next.
func (c *Client) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	var tables []string
	var keys []key
	for t, reqs := range in.RequestItems {
		tables = append(tables, t)
		for _, r := range reqs {
			if r.PutRequest != nil {
				keys = append(keys, r.PutRequest.Item)
			} else if r.DeleteRequest != nil {
				keys = append(keys, r.DeleteRequest.Key)
			}
		}
	}
	return run(ctx, c, call[dynamodb.BatchWriteItemInput, dynamodb.BatchWriteItemOutput]{op: OpBatchWriteItem, in: in, tables: tables, keys: keys,
		send: func(ctx context.Context, in *dynamodb.BatchWriteItemInput) (*dynamodb.BatchWriteItemOutput, error) {
			return c.next.BatchWriteItem(ctx, in, o...)
		}})
}

// BatchExecuteStatement implements Next. The tables are those the statements name (the first
// quoted name of each); the keys are not known to it.
func (c *Client) BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	var tables []string
	for _, s := range in.Statements {
		tables = append(tables, statementTable(aws.ToString(s.Statement)))
	}
	return run(ctx, c, call[dynamodb.BatchExecuteStatementInput, dynamodb.BatchExecuteStatementOutput]{op: OpBatchExecuteStatement, in: in, tables: tables,
		send: func(ctx context.Context, in *dynamodb.BatchExecuteStatementInput) (*dynamodb.BatchExecuteStatementOutput, error) {
			return c.next.BatchExecuteStatement(ctx, in, o...)
		},
		noOld: func(in *dynamodb.BatchExecuteStatementInput) *dynamodb.BatchExecuteStatementInput {
			cp := *in
			cp.Statements = make([]types.BatchStatementRequest, len(in.Statements))
			for i, s := range in.Statements {
				s.ReturnValuesOnConditionCheckFailure = ""
				cp.Statements[i] = s
			}
			return &cp
		}})
}

// statementTable is the first double-quoted name of a PartiQL statement (its table, as the ledgers
// write them), or "" when there is none.
func statementTable(s string) string {
	_, rest, ok := strings.Cut(s, `"`)
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, `"`)
	return name
}
