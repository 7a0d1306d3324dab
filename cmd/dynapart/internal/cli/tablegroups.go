package cli

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableGroup is a group of a lease table whose workers work a given source table, with the
// ledger its meta item records.
type TableGroup struct {
	Name   string
	Ledger LedgerFlags
}

// groupMetaPrefix and groupMetaSK key a group's meta item in the lease table: pk
// "group#<name>", sk -1 (lock/doc.go, "Data model"). They are read here, never written: the lock
// package is the lease table's only writer, and has no call that lists groups.
const (
	groupMetaPrefix = "group#"
	groupMetaSK     = "-1"
)

// TableGroups lists the groups of leaseTable whose meta item records table as their source
// table, by name: one Scan of the lease table (a small table: the slots, meta items and unit
// markers of its groups) that keeps only such meta items. A lease table that does not exist has
// none.
func TableGroups(ctx context.Context, db dynamodb.ScanAPIClient, leaseTable, table string) ([]TableGroup, error) {
	in := &dynamodb.ScanInput{
		TableName:                aws.String(leaseTable),
		FilterExpression:         aws.String("sk = :meta AND begins_with(pk, :group) AND meta.#table = :table"),
		ProjectionExpression:     aws.String("pk, meta"),
		ExpressionAttributeNames: map[string]string{"#table": "table"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":meta":  &types.AttributeValueMemberN{Value: groupMetaSK},
			":group": &types.AttributeValueMemberS{Value: groupMetaPrefix},
			":table": &types.AttributeValueMemberS{Value: table},
		},
	}
	var groups []TableGroup
	for p := dynamodb.NewScanPaginator(db, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		var missing *types.ResourceNotFoundException
		if errors.As(err, &missing) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			if g, ok := tableGroup(it); ok {
				groups = append(groups, g)
			}
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	return groups, nil
}

// tableGroup reads a meta item as the scan projects it.
func tableGroup(it map[string]types.AttributeValue) (TableGroup, bool) {
	pk, _ := it["pk"].(*types.AttributeValueMemberS)
	m, _ := it["meta"].(*types.AttributeValueMemberM)
	if pk == nil || m == nil {
		return TableGroup{}, false
	}
	meta := map[string]string{}
	for k, v := range m.Value {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			meta[k] = s.Value
		}
	}
	l, _, ok := RecordedLedger(meta)
	return TableGroup{Name: strings.TrimPrefix(pk.Value, groupMetaPrefix), Ledger: l}, ok
}
