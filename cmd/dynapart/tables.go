package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// keySpec is NAME:TYPE, e.g. id:S.
type keySpec struct {
	Name string
	Type types.ScalarAttributeType
}

func (k keySpec) String() string { return k.Name + ":" + string(k.Type) }

func parseKeySpec(flag, v string) (keySpec, error) {
	name, typ, ok := strings.Cut(v, ":")
	if !ok {
		typ = "S"
	}
	typ = strings.ToUpper(typ)
	if name == "" {
		return keySpec{}, usagef("--%s %q: want NAME:TYPE, e.g. id:S", flag, v)
	}
	switch typ {
	case "S", "N", "B":
	default:
		return keySpec{}, usagef("--%s %q: type must be S, N or B", flag, v)
	}
	return keySpec{Name: name, Type: types.ScalarAttributeType(typ)}, nil
}

// describe returns the table, or nil when it does not exist.
func describe(ctx context.Context, db *dynamodb.Client, table string) (*types.TableDescription, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe table %q: %w", table, err)
	}
	return out.Table, nil
}

// tableKey returns the table's partition key.
func tableKey(t *types.TableDescription) keySpec {
	var k keySpec
	for _, e := range t.KeySchema {
		if e.KeyType == types.KeyTypeHash {
			k.Name = aws.ToString(e.AttributeName)
		}
	}
	for _, a := range t.AttributeDefinitions {
		if aws.ToString(a.AttributeName) == k.Name {
			k.Type = a.AttributeType
		}
	}
	return k
}

// ensureSourceTable creates the table with the key unless it exists; an existing table must have
// that partition key.
func ensureSourceTable(ctx context.Context, db *dynamodb.Client, table string, key keySpec) (created bool, err error) {
	t, err := describe(ctx, db, table)
	if err != nil {
		return false, err
	}
	if t != nil {
		if have := tableKey(t); have != key {
			return false, usagef("table %q exists with partition key %s, not %s", table, have, key)
		}
		return false, nil
	}
	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key.Name), AttributeType: key.Type}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key.Name), KeyType: types.KeyTypeHash}},
	})
	var inUse *types.ResourceInUseException
	if errors.As(err, &inUse) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create table %q: %w", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(db)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 2*time.Minute); err != nil {
		return false, fmt.Errorf("wait for table %q: %w", table, err)
	}
	return true, nil
}

func deleteTable(ctx context.Context, db *dynamodb.Client, table string) error {
	_, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	return err
}
