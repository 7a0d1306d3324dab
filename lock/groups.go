package lock

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// GroupMeta is a group's name and the meta its workers recorded on its meta item (WithGroupMeta).
type GroupMeta struct {
	Name string
	Meta map[string]string
}

// GroupsWithMeta lists, by name, the groups of lease table table whose meta records value under
// key (e.g. the worker's "table", its source table): one Scan of the lease table that keeps only
// such meta items (a lease table is small: the slots, meta items and unit markers of its groups).
// A lease table that does not exist has none. It reads through db, which needs Scan (a Client's
// DynamoDBClient does not).
func GroupsWithMeta(ctx context.Context, db dynamodb.ScanAPIClient, table, key, value string) ([]GroupMeta, error) {
	in := &dynamodb.ScanInput{
		TableName:                aws.String(table),
		FilterExpression:         aws.String("#sk = :meta AND begins_with(#pk, :group) AND #m.#k = :v"),
		ProjectionExpression:     aws.String("#pk, #m"),
		ExpressionAttributeNames: map[string]string{"#sk": attrSK, "#pk": attrPK, "#m": attrMeta, "#k": key},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":meta":  &types.AttributeValueMemberN{Value: strconv.Itoa(metaSK)},
			":group": avS(groupPK("")),
			":v":     avS(value),
		},
	}
	var groups []GroupMeta
	for p := dynamodb.NewScanPaginator(db, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		var missing *types.ResourceNotFoundException
		if errors.As(err, &missing) {
			return nil, nil
		}
		if err != nil {
			return nil, classifyTableErr(table, err)
		}
		for _, it := range page.Items {
			groups = append(groups, GroupMeta{Name: strings.TrimPrefix(getS(it, attrPK), groupPK("")), Meta: decodeMeta(it).meta})
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	return groups, nil
}
