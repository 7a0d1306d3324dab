package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableClient is the DynamoDB calls CreateTable and CheckTable make; any *dynamodb.Client fits.
type TableClient interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// CreateTable creates the lock table (pk S hash, sk N range, on demand) unless it exists, and waits
// until it is active. It is idempotent; an existing table keyed differently is a *TableError.
func CreateTable(ctx context.Context, db TableClient, table string) error {
	if table == "" {
		return bad("table", "must not be empty")
	}
	err := CheckTable(ctx, db, table)
	var te *TableError
	if err == nil || !errors.As(err, &te) || !isNotFound(te.Err) {
		return err
	}
	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) { // in use: another process created it first
		return fmt.Errorf("lock: create table %q: %w", table, err)
	}
	// Wait for ACTIVE ourselves: the SDK waiter's 20 s minimum delay is far too slow for local use.
	delay := 100 * time.Millisecond
	for {
		err := CheckTable(ctx, db, table)
		if err == nil {
			return nil
		}
		if !errors.As(err, &te) || (te.Problem != problemNotActive && !isNotFound(te.Err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lock: wait for table %q: %w", table, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

const problemNotActive = "table is not active yet"

var errNotActive = errors.New("table status is not ACTIVE")

func isNotFound(err error) bool {
	var nf *types.ResourceNotFoundException
	return errors.As(err, &nf)
}

// CheckTable returns nil when the lock table exists, is active and keyed pk (S) + sk (N); otherwise
// a *TableError that names the table and the problem.
func CheckTable(ctx context.Context, db TableClient, table string) error {
	if table == "" {
		return bad("table", "must not be empty")
	}
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		if isNotFound(err) {
			return &TableError{Table: table, Problem: "table does not exist", Err: err}
		}
		return fmt.Errorf("lock: describe table %q: %w", table, err)
	}
	td := out.Table
	if td == nil {
		return &TableError{Table: table, Problem: "DescribeTable returned no table"}
	}
	if problem := keyProblem(td); problem != "" {
		return &TableError{Table: table, Problem: problem}
	}
	if td.TableStatus != types.TableStatusActive && td.TableStatus != types.TableStatusUpdating {
		return &TableError{Table: table, Problem: problemNotActive, Err: fmt.Errorf("%w: %s", errNotActive, td.TableStatus)}
	}
	return nil
}

func keyProblem(td *types.TableDescription) string {
	types_ := map[string]types.ScalarAttributeType{}
	for _, d := range td.AttributeDefinitions {
		types_[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	var hash, rng string
	for _, k := range td.KeySchema {
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			rng = aws.ToString(k.AttributeName)
		}
	}
	describe := func() string {
		s := fmt.Sprintf("%s %s", hash, types_[hash])
		if rng != "" {
			s += fmt.Sprintf(" + %s %s", rng, types_[rng])
		}
		return s
	}
	if hash != attrPK || types_[hash] != types.ScalarAttributeTypeS || rng != attrSK || types_[rng] != types.ScalarAttributeTypeN {
		return fmt.Sprintf("key schema is %s, want %s S + %s N", describe(), attrPK, attrSK)
	}
	return ""
}
