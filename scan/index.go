package scan

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// IndexClient is the part of *dynamodb.Client CreatePendingIndex uses.
type IndexClient interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
}

// ErrIndexConflict: an index of the requested name exists with another key schema or projection.
var ErrIndexConflict = errors.New("scan: index exists with a different key schema or projection")

// CreatePendingIndex adds to table the sparse global secondary index index mode queries: partition
// key shardAttr (N), sort key the table's partition key, projection ALL. Only items that carry
// shardAttr (see MarkPending) are in it, so a query reads pending items only; removing the
// attribute when an item is done takes it out. The table's partition key as sort key gives every
// shard a stable order to paginate in. Idempotent (also when several processes race); it returns
// once the index is ACTIVE, or an error wrapping ErrIndexConflict when an index of that name has
// other keys, or projects less than ALL.
func CreatePendingIndex(ctx context.Context, db IndexClient, table, indexName, shardAttr string) error {
	if table == "" || indexName == "" || shardAttr == "" {
		return &ConfigError{Pkg: "scan", Field: "table/indexName/shardAttr", Reason: "all are required"}
	}
	desc, err := describeTable(ctx, db, table)
	if err != nil {
		return err
	}
	var pk string
	var pkType types.ScalarAttributeType
	for _, k := range desc.KeySchema {
		if k.KeyType == types.KeyTypeHash {
			pk = aws.ToString(k.AttributeName)
		}
	}
	for _, d := range desc.AttributeDefinitions {
		if aws.ToString(d.AttributeName) == pk {
			pkType = d.AttributeType
		}
	}
	if pk == shardAttr {
		return &ConfigError{Pkg: "scan", Field: "shardAttr", Reason: fmt.Sprintf("%q is the table's partition key", shardAttr)}
	}
	if g := findIndex(desc, indexName); g == nil {
		in := &dynamodb.UpdateTableInput{
			TableName: aws.String(table),
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(shardAttr), AttributeType: types.ScalarAttributeTypeN},
				{AttributeName: aws.String(pk), AttributeType: pkType},
			},
			GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
				IndexName: aws.String(indexName),
				KeySchema: []types.KeySchemaElement{
					{AttributeName: aws.String(shardAttr), KeyType: types.KeyTypeHash},
					{AttributeName: aws.String(pk), KeyType: types.KeyTypeRange},
				},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
			}}},
		}
		if pt := desc.ProvisionedThroughput; pt != nil && (desc.BillingModeSummary == nil || desc.BillingModeSummary.BillingMode == types.BillingModeProvisioned) &&
			aws.ToInt64(pt.ReadCapacityUnits) > 0 {
			in.GlobalSecondaryIndexUpdates[0].Create.ProvisionedThroughput = &types.ProvisionedThroughput{
				ReadCapacityUnits: pt.ReadCapacityUnits, WriteCapacityUnits: pt.WriteCapacityUnits}
		}
		if _, err := db.UpdateTable(ctx, in); err != nil {
			// Another process may have created it meanwhile, or the table is busy with it.
			again, derr := describeTable(ctx, db, table)
			if derr != nil || findIndex(again, indexName) == nil {
				return fmt.Errorf("scan: create index %q on %q: %w", indexName, table, err)
			}
		}
	} else if len(g.KeySchema) == 0 || aws.ToString(g.KeySchema[0].AttributeName) != shardAttr || g.KeySchema[0].KeyType != types.KeyTypeHash {
		return fmt.Errorf("%w: index %q of %q is not keyed by %q", ErrIndexConflict, indexName, table, shardAttr)
	} else if problem := PendingIndexProblem(desc, indexName); problem != "" {
		return fmt.Errorf("%w: table %q %s", ErrIndexConflict, table, problem)
	}
	// Wait until the index (and the table) is ACTIVE: a new index backfills first.
	delay := 50 * time.Millisecond
	for {
		desc, err = describeTable(ctx, db, table)
		if err != nil {
			return err
		}
		if g := findIndex(desc, indexName); g != nil && g.IndexStatus == types.IndexStatusActive && desc.TableStatus == types.TableStatusActive {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("scan: wait for index %q of %q: %w", indexName, table, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func describeTable(ctx context.Context, db IndexClient, table string) (*types.TableDescription, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return nil, fmt.Errorf("scan: describe table %q: %w", table, err)
	}
	return out.Table, nil
}

// PendingIndexProblem says why a table described by t cannot serve index mode from the index
// named name: it has no such index, or one that projects less than ALL attributes (index mode
// hands on the items as the index holds them: a handler would get part of each); "" when it can.
func PendingIndexProblem(t *types.TableDescription, name string) string {
	g := findIndex(t, name)
	switch {
	case g == nil:
		return fmt.Sprintf("has no index %q", name)
	case g.Projection == nil || g.Projection.ProjectionType != types.ProjectionTypeAll:
		return fmt.Sprintf("has an index %q that projects %s attributes: index mode needs ALL (handlers get the items as the index holds them)", name, projectionOf(g))
	}
	return ""
}

// projectionOf is g's projection type, as DynamoDB names it.
func projectionOf(g *types.GlobalSecondaryIndexDescription) string {
	if g.Projection == nil {
		return "no"
	}
	return string(g.Projection.ProjectionType)
}

func findIndex(t *types.TableDescription, name string) *types.GlobalSecondaryIndexDescription {
	for i := range t.GlobalSecondaryIndexes {
		if aws.ToString(t.GlobalSecondaryIndexes[i].IndexName) == name {
			return &t.GlobalSecondaryIndexes[i]
		}
	}
	return nil
}

// PendingShard is the shard of the pending index an item with this key goes to: Partition(key,
// shards). Index mode then gives shard s to slot s % Slots.
func PendingShard(key types.AttributeValue, shards int) int {
	return Partition(key, shards)
}

// MarkPending puts item into the pending index: it sets item[shardAttr] to its PendingShard (a
// number) computed from item[keyAttr]. Write the item afterwards.
func MarkPending(item map[string]types.AttributeValue, keyAttr, shardAttr string, shards int) {
	item[shardAttr] = &types.AttributeValueMemberN{Value: strconv.Itoa(PendingShard(item[keyAttr], shards))}
}
