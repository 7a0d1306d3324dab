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
	"github.com/spf13/pflag"
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

// keySchema is a table's primary key: a partition key and an optional sort key (Sort.Name empty
// when there is none).
type keySchema struct {
	Partition keySpec
	Sort      keySpec
}

// String names the schema as the flags spell it: "pk:B" or "pk:B sort sk:N".
func (s keySchema) String() string {
	if s.Sort.Name == "" {
		return s.Partition.String()
	}
	return s.Partition.String() + " sort " + s.Sort.String()
}

// specs lists the key attributes: the partition key first, then the sort key when there is one.
func (s keySchema) specs() []keySpec {
	if s.Sort.Name == "" {
		return []keySpec{s.Partition}
	}
	return []keySpec{s.Partition, s.Sort}
}

// tableSchema returns the table's key schema as DescribeTable reports it.
func tableSchema(t *types.TableDescription) keySchema {
	var s keySchema
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	for _, e := range t.KeySchema {
		k := keySpec{Name: aws.ToString(e.AttributeName), Type: attrTypes[aws.ToString(e.AttributeName)]}
		if e.KeyType == types.KeyTypeHash {
			s.Partition = k
		} else {
			s.Sort = k
		}
	}
	return s
}

// sourceTable says which source table to ensure: the schema to create it with, and whether that
// schema was given explicitly (then an existing table must match it).
type sourceTable struct {
	Name     string
	Schema   keySchema
	Explicit bool
}

// ensureSourceTable creates the table unless it exists and returns its key schema. An existing
// table is taken with the key schema it has; only an explicit schema that disagrees is an error
// (usage, naming both).
func ensureSourceTable(ctx context.Context, db *dynamodb.Client, src sourceTable) (schema keySchema, created bool, err error) {
	t, err := describe(ctx, db, src.Name)
	if err != nil {
		return keySchema{}, false, err
	}
	if t != nil {
		have := tableSchema(t)
		if src.Explicit && have != src.Schema {
			return have, false, usagef("table %q exists with key %s, not the given %s (--key/--sort-key matter only when creating; leave them out to take the table as it is)",
				src.Name, have, src.Schema)
		}
		return have, false, nil
	}
	_, err = db.CreateTable(ctx, createTableInput(src.Name, src.Schema))
	var inUse *types.ResourceInUseException
	if errors.As(err, &inUse) {
		return src.Schema, false, nil // created at the same moment by another init
	}
	if err != nil {
		return keySchema{}, false, fmt.Errorf("create table %q: %w", src.Name, err)
	}
	w := dynamodb.NewTableExistsWaiter(db)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(src.Name)}, 2*time.Minute); err != nil {
		return keySchema{}, false, fmt.Errorf("wait for table %q: %w", src.Name, err)
	}
	return src.Schema, true, nil
}

func createTableInput(table string, s keySchema) *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(s.Partition.Name), AttributeType: s.Partition.Type}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(s.Partition.Name), KeyType: types.KeyTypeHash}},
	}
	if s.Sort.Name != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(s.Sort.Name), AttributeType: s.Sort.Type})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(s.Sort.Name), KeyType: types.KeyTypeRange})
	}
	return in
}

// schemaFlags are --key and --sort-key of the commands that may create the source table.
type schemaFlags struct {
	key, sortKey string
}

func (f *schemaFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.key, "key", "id:S", "partition key as NAME:TYPE (S, N or B); used only when creating the table, an existing table keeps its own")
	fs.StringVar(&f.sortKey, "sort-key", "", "sort key as NAME:TYPE when creating the table (default none)")
}

// source parses the flags; the schema is explicit when --key or --sort-key was set (on the
// command line or through DYNAPART_KEY / DYNAPART_SORT_KEY).
func (f *schemaFlags) source(fs *pflag.FlagSet, table string) (sourceTable, error) {
	pk, err := parseKeySpec("key", f.key)
	if err != nil {
		return sourceTable{}, err
	}
	src := sourceTable{Name: table, Schema: keySchema{Partition: pk},
		Explicit: fs.Changed("key") || fs.Changed("sort-key")}
	if f.sortKey != "" {
		if src.Schema.Sort, err = parseKeySpec("sort-key", f.sortKey); err != nil {
			return sourceTable{}, err
		}
		if src.Schema.Sort.Name == pk.Name {
			return sourceTable{}, usagef("--sort-key %q: must differ from the partition key", f.sortKey)
		}
	}
	return src, nil
}

func deleteTable(ctx context.Context, db *dynamodb.Client, table string) error {
	_, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	return err
}

// names are the key's attribute names, partition key first.
func (s keySchema) names() []string {
	var out []string
	for _, k := range s.specs() {
		out = append(out, k.Name)
	}
	return out
}

// describeSource makes the client and describes the source table, which must exist.
func (g *globals) describeSource(ctx context.Context, table string) (*dynamodb.Client, *types.TableDescription, error) {
	db, err := g.dynamoClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	t, err := describe(ctx, db, table)
	if err != nil {
		return nil, nil, err
	}
	if t == nil {
		return nil, nil, usagef("--table %q: table does not exist", table)
	}
	return db, t, nil
}

// ensureSource makes the client and ensures the source table (ensureSourceTable).
func (g *globals) ensureSource(ctx context.Context, src sourceTable) (*dynamodb.Client, keySchema, bool, error) {
	db, err := g.dynamoClient(ctx)
	if err != nil {
		return nil, keySchema{}, false, err
	}
	schema, created, err := ensureSourceTable(ctx, db, src)
	return db, schema, created, err
}
