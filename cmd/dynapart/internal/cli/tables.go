package cli

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

// KeySpec is NAME:TYPE, e.g. id:S.
type KeySpec struct {
	Name string
	Type types.ScalarAttributeType
}

func (k KeySpec) String() string { return k.Name + ":" + string(k.Type) }

func parseKeySpec(flag, v string) (KeySpec, error) {
	name, typ, ok := strings.Cut(v, ":")
	if !ok {
		typ = "S"
	}
	typ = strings.ToUpper(typ)
	if name == "" {
		return KeySpec{}, Usagef("--%s %q: want NAME:TYPE, e.g. id:S", flag, v)
	}
	switch typ {
	case "S", "N", "B":
	default:
		return KeySpec{}, Usagef("--%s %q: type must be S, N or B", flag, v)
	}
	return KeySpec{Name: name, Type: types.ScalarAttributeType(typ)}, nil
}

// Describe returns the table, or nil when it does not exist.
func Describe(ctx context.Context, db *dynamodb.Client, table string) (*types.TableDescription, error) {
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

// KeySchema is a table's primary key: a partition key and an optional sort key (Sort.Name empty
// when there is none).
type KeySchema struct {
	Partition KeySpec
	Sort      KeySpec
}

// String names the schema as the flags spell it: "pk:B" or "pk:B sort sk:N".
func (s KeySchema) String() string {
	if s.Sort.Name == "" {
		return s.Partition.String()
	}
	return s.Partition.String() + " sort " + s.Sort.String()
}

// Specs lists the key attributes: the partition key first, then the sort key when there is one.
func (s KeySchema) Specs() []KeySpec {
	if s.Sort.Name == "" {
		return []KeySpec{s.Partition}
	}
	return []KeySpec{s.Partition, s.Sort}
}

// TableSchema returns the table's key schema as DescribeTable reports it.
func TableSchema(t *types.TableDescription) KeySchema {
	var s KeySchema
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	for _, e := range t.KeySchema {
		k := KeySpec{Name: aws.ToString(e.AttributeName), Type: attrTypes[aws.ToString(e.AttributeName)]}
		if e.KeyType == types.KeyTypeHash {
			s.Partition = k
		} else {
			s.Sort = k
		}
	}
	return s
}

// SourceTable says which source table to ensure: the schema to create it with, and whether that
// schema was given explicitly (then an existing table must match it).
type SourceTable struct {
	Name     string
	Schema   KeySchema
	Explicit bool
}

// EnsureSourceTable creates the table unless it exists and returns its key schema. An existing
// table is taken with the key schema it has; only an explicit schema that disagrees is an error
// (usage, naming both).
func EnsureSourceTable(ctx context.Context, db *dynamodb.Client, src SourceTable) (schema KeySchema, created bool, err error) {
	t, err := Describe(ctx, db, src.Name)
	if err != nil {
		return KeySchema{}, false, err
	}
	if t != nil {
		have := TableSchema(t)
		if src.Explicit && have != src.Schema {
			return have, false, Usagef("table %q exists with key %s, not the given %s (--key/--sort-key matter only when creating; leave them out to take the table as it is)",
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
		return KeySchema{}, false, fmt.Errorf("create table %q: %w", src.Name, err)
	}
	w := dynamodb.NewTableExistsWaiter(db)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(src.Name)}, 2*time.Minute); err != nil {
		return KeySchema{}, false, fmt.Errorf("wait for table %q: %w", src.Name, err)
	}
	return src.Schema, true, nil
}

func createTableInput(table string, s KeySchema) *dynamodb.CreateTableInput {
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

// SchemaFlags are --key and --sort-key of the commands that may create the source table.
type SchemaFlags struct {
	key, sortKey string
}

// Add defines --key and --sort-key.
func (f *SchemaFlags) Add(fs *pflag.FlagSet) {
	fs.StringVar(&f.key, "key", "id:S", "partition key as NAME:TYPE (S, N or B); used only when creating the table, an existing table keeps its own")
	fs.StringVar(&f.sortKey, "sort-key", "", "sort key as NAME:TYPE when creating the table (default none)")
}

// Source parses the flags; the schema is explicit when --key or --sort-key was set (on the
// command line or through DYNAPART_KEY / DYNAPART_SORT_KEY).
func (f *SchemaFlags) Source(fs *pflag.FlagSet, table string) (SourceTable, error) {
	pk, err := parseKeySpec("key", f.key)
	if err != nil {
		return SourceTable{}, err
	}
	src := SourceTable{Name: table, Schema: KeySchema{Partition: pk},
		Explicit: fs.Changed("key") || fs.Changed("sort-key")}
	if f.sortKey != "" {
		if src.Schema.Sort, err = parseKeySpec("sort-key", f.sortKey); err != nil {
			return SourceTable{}, err
		}
		if src.Schema.Sort.Name == pk.Name {
			return SourceTable{}, Usagef("--sort-key %q: must differ from the partition key", f.sortKey)
		}
	}
	return src, nil
}

// DeleteTable deletes the table.
func DeleteTable(ctx context.Context, db *dynamodb.Client, table string) error {
	_, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	return err
}

// Names are the key's attribute names, partition key first.
func (s KeySchema) Names() []string {
	var out []string
	for _, k := range s.Specs() {
		out = append(out, k.Name)
	}
	return out
}

// DescribeSource makes the client and describes the source table, which must exist.
func (g *Globals) DescribeSource(ctx context.Context, table string) (*dynamodb.Client, *types.TableDescription, error) {
	db, err := g.DynamoClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	t, err := Describe(ctx, db, table)
	if err != nil {
		return nil, nil, err
	}
	if t == nil {
		return nil, nil, Usagef("--table %q: table does not exist", table)
	}
	return db, t, nil
}

// EnsureSource makes the client and ensures the source table (EnsureSourceTable).
func (g *Globals) EnsureSource(ctx context.Context, src SourceTable) (*dynamodb.Client, KeySchema, bool, error) {
	db, err := g.DynamoClient(ctx)
	if err != nil {
		return nil, KeySchema{}, false, err
	}
	schema, created, err := EnsureSourceTable(ctx, db, src)
	return db, schema, created, err
}
