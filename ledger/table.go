package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableClient is what CreateLedgerTable calls; any *dynamodb.Client fits.
type TableClient interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// The table ledger's attributes besides the state.
const (
	ledgerPK        = "pk"     // job, source table and the item key, see TableLedger
	ledgerJobAttr   = "job"    // the job name
	ledgerSrcAttr   = "source" // the source table
	ledgerKeyAttr   = "key"    // the item's key, as a map
	ledgerSeparator = "#"
)

// Table keeps each item's state in a row of a separate ledger table (see CreateLedgerTable), so
// the source table is only read and a new job processes every item again.
//
// A row's key pk is "<job>#<source table>#<item key>": the job with "%" and "#" escaped as "%25"
// and "%23", the source table's name (which cannot contain "#"), and the canonical encoding of
// the item key: per key attribute "<S|N|B>:<length>:<value>" joined by "|", with numbers in
// canonical decimal form and binary values in standard base64 (for example
// "default#users#S:5:alice"). Distinct (job, table, key) triples never share a row; an encoding
// longer than DynamoDB's 2048-byte partition key limit is replaced by "H:" and its SHA-256.
// The source table is part of the key so that two tables processed under the same job name (the
// default job, say) do not share state in a shared ledger table.
//
// A row holds job, source, key (the item key as a map) and the state attributes status, owner,
// slot, token, scope, claim, claim_until, attempts, retry_at, error, done_at and failed_at. The
// first claim of an item (and a complete-only write) creates its row; an item without a row is
// pending.
//
// It is safe for concurrent use.
type Table struct {
	ops
	job    string
	source string
}

var _ Ledger = (*Table)(nil)

// NewTable returns the table ledger of job for the items of sourceTable (primary key keyAttrs:
// the partition key, then the sort key if there is one), kept in ledgerTable. WithPrefix and
// WithRemoveOnDone do not apply.
func NewTable(db Client, ledgerTable, job, sourceTable string, keyAttrs []string, opts ...Option) (*Table, error) {
	switch {
	case job == "":
		return nil, errors.New("dynapart: table ledger: empty job name")
	case sourceTable == "":
		return nil, errors.New("dynapart: table ledger: empty source table name")
	case strings.Contains(sourceTable, ledgerSeparator):
		return nil, fmt.Errorf("dynapart: table ledger: source table name %q contains %q", sourceTable, ledgerSeparator)
	case ledgerTable == sourceTable:
		return nil, fmt.Errorf("dynapart: table ledger: the ledger table must not be the source table %q", sourceTable)
	}
	l := &Table{job: job, source: sourceTable}
	names := attrNames("")
	names[aJob], names[aSource], names[aItemKey] = ledgerJobAttr, ledgerSrcAttr, ledgerKeyAttr
	sh := shape{ident: []setTo{{a: aJob, v: vJob, quiet: true}, {a: aSource, v: vSource, quiet: true}, {a: aItemKey, v: vItemKey, quiet: true}}}
	core, err := newCore(db, coreSpec{name: "table ledger", keyAttrs: keyAttrs, names: names, shape: sh, opts: collect(opts), source: sourceTable,
		row: rowSpec{table: ledgerTable, keyAttrs: []string{ledgerPK}, key: l.rowKey, identVals: l.identVals}})
	if err != nil {
		return nil, err
	}
	l.core = core
	return l, nil
}

// rowKey is the key of item key k's row.
func (l *Table) rowKey(k Key) (Key, error) {
	ik, err := l.core.itemKeyOf(k)
	if err != nil {
		return nil, err
	}
	enc, err := encodeKeyParts(ik, l.core.keyAttrs)
	if err != nil {
		return nil, fmt.Errorf("dynapart: table ledger: %w", err)
	}
	prefix := strings.NewReplacer("%", "%25", "#", "%23").Replace(l.job) + ledgerSeparator + l.source + ledgerSeparator
	pk := prefix + enc
	if len(pk) > maxLedgerPK {
		pk = prefix + hashedKeyPart(enc)
	}
	return Key{ledgerPK: attrS(pk)}, nil
}

// identVals are the values of a row's identity for item key k.
func (l *Table) identVals(k Key, vals values) {
	ik, _ := l.core.itemKeyOf(k) // checked by rowKey already
	vals[vJob], vals[vSource] = attrS(l.job), attrS(l.source)
	vals[vItemKey] = &types.AttributeValueMemberM{Value: ik}
}

// StateOf implements Ledger: a scanned item carries no table ledger state.
func (l *Table) StateOf(map[string]types.AttributeValue) (ItemState, bool) { return ItemState{}, false }

// ScanAttrs implements Ledger: none.
func (l *Table) ScanAttrs() []string { return nil }

// LeaveIndex implements Ledger: the shard attribute is removed from the source item.
func (l *Table) LeaveIndex(ctx context.Context, key Key, shardAttr string) error {
	return l.core.removeAttr(ctx, l.source, key, shardAttr)
}

// DeadLetters implements Ledger with a parallel scan of the job's failed rows; fn is never called
// concurrently, and an error from fn stops the scan and is returned as it is.
func (l *Table) DeadLetters(ctx context.Context, fn func(DeadLetter) error) error {
	proj, names := projection(append([]string{ledgerKeyAttr}, l.core.attrNamesOf(deadLetterAttrs...)...))
	names["#status"], names["#job"], names["#source"] = l.core.names[aStatus], ledgerJobAttr, ledgerSrcAttr
	return l.core.parallelScan(ctx, dynamodb.ScanInput{
		TableName: aws.String(l.core.row.table), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(proj), ExpressionAttributeNames: names,
		FilterExpression: aws.String("#job = :job AND #source = :source AND #status = :failed"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":job": attrS(l.job), ":source": attrS(l.source), ":failed": attrS(string(StatusFailed)),
		},
	}, func(out *dynamodb.ScanOutput) error {
		for _, it := range out.Items {
			var key Key
			if m, ok := it[ledgerKeyAttr].(*types.AttributeValueMemberM); ok {
				key = m.Value
			}
			if err := fn(l.core.deadLetterOf(key, it)); err != nil {
				return err
			}
		}
		return nil
	})
}

// CreateLedgerTable creates the table ledger's table (key pk, a string; on-demand capacity) unless
// it exists, and waits until it is active. An existing table with another key schema is an error
// (ErrLedgerTableSchema) that names the table and the problem.
func CreateLedgerTable(ctx context.Context, db TableClient, name string) error {
	if name == "" {
		return errors.New("dynapart: create ledger table: empty table name")
	}
	in := &dynamodb.DescribeTableInput{TableName: aws.String(name)}
	// Describe first: a worker allowed to use the table but not to create tables gets through.
	desc, err := db.DescribeTable(ctx, in)
	var notFound *types.ResourceNotFoundException
	switch {
	case err == nil:
		if err := CheckTableSchema(name, desc.Table); err != nil {
			return err
		}
		if desc.Table.TableStatus == types.TableStatusActive {
			return nil
		}
	case errors.As(err, &notFound):
		_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:   aws.String(name),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(ledgerPK), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(ledgerPK), KeyType: types.KeyTypeHash}},
		})
		var inUse *types.ResourceInUseException // created by someone else meanwhile
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("dynapart: create ledger table %q: %w", name, err)
		}
	default:
		return fmt.Errorf("dynapart: describe ledger table %q: %w", name, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 200*time.Millisecond, 5*time.Second
	})
	out, err := waiter.WaitForOutput(ctx, in, 5*time.Minute)
	if err != nil {
		return fmt.Errorf("dynapart: wait for ledger table %q to become active: %w", name, err)
	}
	return CheckTableSchema(name, out.Table)
}

// CheckTableSchema checks that a ledger table described as t has the key the table ledger needs;
// an error (ErrLedgerTableSchema) names the table and the problem.
func CheckTableSchema(name string, t *types.TableDescription) error {
	if t == nil {
		return fmt.Errorf("%w: table %q: no description", ErrLedgerTableSchema, name)
	}
	var keys []string
	for _, k := range t.KeySchema {
		keys = append(keys, fmt.Sprintf("%s (%s)", aws.ToString(k.AttributeName), k.KeyType))
	}
	if len(t.KeySchema) != 1 || aws.ToString(t.KeySchema[0].AttributeName) != ledgerPK || t.KeySchema[0].KeyType != types.KeyTypeHash {
		return fmt.Errorf("%w: table %q has key %s; want only the partition key %q (S)", ErrLedgerTableSchema, name, strings.Join(keys, ", "), ledgerPK)
	}
	i := slices.IndexFunc(t.AttributeDefinitions, func(d types.AttributeDefinition) bool { return aws.ToString(d.AttributeName) == ledgerPK })
	if i < 0 || t.AttributeDefinitions[i].AttributeType != types.ScalarAttributeTypeS {
		return fmt.Errorf("%w: table %q: partition key %q is not a string", ErrLedgerTableSchema, name, ledgerPK)
	}
	return nil
}
