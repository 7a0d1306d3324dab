package follow

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/configerr"
)

// TableClient is what EnableStream calls; a *dynamodb.Client has it.
type TableClient interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
}

// ViewType is the stream view dynapart needs: each record carries the item before and after the
// write, so a write that changes nothing but the ledger's attributes can be told from a new version.
const ViewType = types.StreamViewTypeNewAndOldImages

// EnableStream turns on table's stream with ViewType unless it is on already (idempotent) and
// returns its ARN; changed reports whether it turned it on. A table whose stream has another view
// type gives a *configerr.Error naming the table and the view type, and nothing is changed (a
// stream's view type cannot be changed in place: it must be turned off first, which ends it).
func EnableStream(ctx context.Context, db TableClient, table string) (arn string, changed bool, err error) {
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", false, fmt.Errorf("dynapart: describe table %q: %w", table, err)
	}
	if spec := d.Table.StreamSpecification; spec != nil && aws.ToBool(spec.StreamEnabled) {
		if spec.StreamViewType != ViewType {
			return "", false, &configerr.Error{Field: "stream", Reason: fmt.Sprintf(
				"table %q already has a stream of view type %s; dynapart needs %s (turn the stream off and on again with that view type: the old stream's records are then lost)",
				table, spec.StreamViewType, ViewType)}
		}
		return aws.ToString(d.Table.LatestStreamArn), false, nil
	}
	out, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName:           aws.String(table),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ViewType},
	})
	if err != nil {
		// The SDK repeats an UpdateTable whose answer was lost; the repeat of one that landed is
		// refused (the stream is on already): what the table shows now decides.
		if d, derr := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); derr == nil {
			if spec := d.Table.StreamSpecification; spec != nil && aws.ToBool(spec.StreamEnabled) && spec.StreamViewType == ViewType {
				return aws.ToString(d.Table.LatestStreamArn), true, nil
			}
		}
		return "", false, fmt.Errorf("dynapart: turn on the stream of table %q: %w", table, err)
	}
	return aws.ToString(out.TableDescription.LatestStreamArn), true, nil
}
