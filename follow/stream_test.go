package follow

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/configerr"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

// TestEnableStream: the stream is turned on once (NEW_AND_OLD_IMAGES), a second call changes
// nothing and returns the same ARN; a table streaming another view type is refused by name and
// left as it is.
func TestEnableStream(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		ctx := context.Background()
		db := ddbtest.Client(t)
		table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
		arn, changed, err := EnableStream(ctx, db, table)
		require.NoError(t, err)
		require.True(t, changed)
		require.NotEmpty(t, arn)
		d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		require.NoError(t, err)
		require.Equal(t, ViewType, d.Table.StreamSpecification.StreamViewType)
		again, changed, err := EnableStream(ctx, db, table)
		require.NoError(t, err)
		require.False(t, changed)
		require.Equal(t, arn, again)

		other := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
		_, err = db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(other),
			StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}})
		require.NoError(t, err)
		_, _, err = EnableStream(ctx, db, other)
		var ce *configerr.Error
		require.True(t, errors.As(err, &ce), "%v", err)
		require.Contains(t, err.Error(), "KEYS_ONLY")
		require.Contains(t, err.Error(), other)
		d, err = db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(other)})
		require.NoError(t, err)
		require.Equal(t, types.StreamViewTypeKeysOnly, d.Table.StreamSpecification.StreamViewType, "left as it is")

		_, _, err = EnableStream(ctx, db, "no-such-table")
		require.Error(t, err)
	})
}

// refusingUpdate is a table client whose UpdateTable lands and then answers as the SDK's repeat of
// it would: refused, the stream being on already.
type refusingUpdate struct{ *dynamodb.Client }

func (c refusingUpdate) UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error) {
	if _, err := c.Client.UpdateTable(ctx, in, optFns...); err != nil {
		return nil, err
	}
	return nil, &types.ResourceInUseException{Message: aws.String("Cannot enable stream")}
}

// TestEnableStreamLostAnswer: an UpdateTable that landed but whose repeat was refused (its answer
// lost) still turns the stream on, as the table shows.
func TestEnableStreamLostAnswer(t *testing.T) {
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	arn, changed, err := EnableStream(context.Background(), refusingUpdate{db}, table)
	require.NoError(t, err)
	require.True(t, changed)
	require.NotEmpty(t, arn)
}
