package worker

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

// LedgerTableClient is what CreateLedgerTable calls; any *dynamodb.Client fits.
type LedgerTableClient interface {
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

// TableLedger keeps each item's state in a row of a separate ledger table (see
// CreateLedgerTable), so the source table is only read and a new job processes every item again.
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
// slot, token, scope, claim_until, attempts, retry_at, error, done_at and failed_at. The first claim of
// an item (and a complete-only write) creates its row; an item without a row is pending.
//
// It is safe for concurrent use.
type TableLedger struct {
	ledgerOps
	job    string
	source string
}

var _ Ledger = (*TableLedger)(nil)

// NewTableLedger returns the table ledger of job for the items of sourceTable (primary key
// keyAttrs: the partition key, then the sort key if there is one), kept in ledgerTable.
func NewTableLedger(db LedgerClient, ledgerTable, job, sourceTable string, keyAttrs []string) (*TableLedger, error) {
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
	l := &TableLedger{job: job, source: sourceTable}
	prefix := strings.NewReplacer("%", "%25", "#", "%23").Replace(job) + ledgerSeparator + sourceTable + ledgerSeparator
	core, err := newLedgerCore(db, "table ledger", keyAttrs, newStateAttrs(""), ledgerRow{
		table:    ledgerTable,
		keyAttrs: []string{ledgerPK},
		key: func(k Key) (Key, error) {
			ik, err := l.core.itemKeyOf(k)
			if err != nil {
				return nil, err
			}
			enc, err := encodeKeyParts(ik, l.core.keyAttrs)
			if err != nil {
				return nil, fmt.Errorf("dynapart: table ledger: %w", err)
			}
			pk := prefix + enc
			if len(pk) > maxLedgerPK {
				pk = prefix + hashedKeyPart(enc)
			}
			return Key{ledgerPK: ledgerS(pk)}, nil
		},
		claimSet: ", #job = :job, #source = :source, #itemKey = :itemKey",
		claimVals: func(k Key, vals map[string]types.AttributeValue) {
			ik, _ := l.core.itemKeyOf(k) // checked by key already
			vals[":job"], vals[":source"] = ledgerS(job), ledgerS(sourceTable)
			vals[":itemKey"] = &types.AttributeValueMemberM{Value: ik}
		},
		extraNames: map[string]string{"#job": ledgerJobAttr, "#source": ledgerSrcAttr, "#itemKey": ledgerKeyAttr},
	})
	if err != nil {
		return nil, err
	}
	l.core = core
	return l, nil
}

// DeadLetters implements Ledger with a parallel scan of the job's failed rows; fn is never called
// concurrently, and an error from fn stops the scan and is returned as it is.
func (l *TableLedger) DeadLetters(ctx context.Context, fn func(DeadLetter) error) error {
	a := l.core.attrs
	proj, names := ledgerProjection([]string{ledgerKeyAttr, a.attempts, a.error, a.failedAt})
	names["#status"], names["#job"], names["#source"] = a.status, ledgerJobAttr, ledgerSrcAttr
	return l.core.parallelScan(ctx, dynamodb.ScanInput{
		TableName: aws.String(l.core.row.table), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(proj), ExpressionAttributeNames: names,
		FilterExpression: aws.String("#job = :job AND #source = :source AND #status = :failed"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":job": ledgerS(l.job), ":source": ledgerS(l.source), ":failed": ledgerS(string(StatusFailed)),
		},
	}, func(out *dynamodb.ScanOutput) error {
		for _, it := range out.Items {
			var key Key
			if m, ok := it[ledgerKeyAttr].(*types.AttributeValueMemberM); ok {
				key = m.Value
			}
			dl := DeadLetter{Key: key, Attempts: int(ledgerNum(it[a.attempts])), Error: ledgerStr(it[a.error]), At: ledgerTime(it[a.failedAt])}
			if err := fn(dl); err != nil {
				return err
			}
		}
		return nil
	})
}

// CreateLedgerTable creates the table ledger's table (key pk, a string; on-demand capacity) unless
// it exists, and waits until it is active. An existing table with another key schema is an error
// (ErrLedgerTableSchema) that names the table and the problem.
func CreateLedgerTable(ctx context.Context, db LedgerTableClient, name string) error {
	if name == "" {
		return errors.New("dynapart: create ledger table: empty table name")
	}
	in := &dynamodb.DescribeTableInput{TableName: aws.String(name)}
	// Describe first: a worker allowed to use the table but not to create tables gets through.
	desc, err := db.DescribeTable(ctx, in)
	var notFound *types.ResourceNotFoundException
	switch {
	case err == nil:
		if err := checkLedgerSchema(name, desc.Table); err != nil {
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
	return checkLedgerSchema(name, out.Table)
}

func checkLedgerSchema(name string, t *types.TableDescription) error {
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
