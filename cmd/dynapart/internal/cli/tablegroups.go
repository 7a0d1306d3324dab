package cli

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynapart/dynapart/lock"
)

// TableGroup is a group of a lease table whose workers work a given source table, with the
// ledger its meta item records.
type TableGroup struct {
	Name   string
	Ledger LedgerFlags
}

// TableGroups lists the groups of leaseTable whose meta records table as their source table, by
// name (lock.GroupsWithMeta: one Scan of the lease table), with the ledgers they record; a group
// whose meta records no ledger is left out. A lease table that does not exist has none.
func TableGroups(ctx context.Context, db dynamodb.ScanAPIClient, leaseTable, table string) ([]TableGroup, error) {
	metas, err := lock.GroupsWithMeta(ctx, db, leaseTable, "table", table)
	if err != nil {
		return nil, err
	}
	var groups []TableGroup
	for _, m := range metas {
		if l, _, ok := RecordedLedger(m.Meta); ok {
			groups = append(groups, TableGroup{Name: m.Name, Ledger: l})
		}
	}
	return groups, nil
}
