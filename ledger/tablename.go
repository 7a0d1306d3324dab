package ledger

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/arn"
)

// sameTable reports whether a and b name the same table, as the effect checks compare an effect's
// write with the ledger's tables: by name, or by the name in a table ARN
// (arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME), which DynamoDB accepts in a transaction as
// well, so a write by ARN is refused wherever one by name is. The ledger knows its tables'
// names, not their accounts and regions: a table of the same name in another account or region
// is checked as the ledger's own (refused alike, never let through).
func sameTable(a, b string) bool { return tableNamed(a) == tableNamed(b) }

// tableNamed is table's name: table itself, or the name in a DynamoDB table ARN.
func tableNamed(table string) string {
	if !arn.IsARN(table) {
		return table // a name (the common case): parsed without an error value per call
	}
	a, err := arn.Parse(table)
	if err != nil || a.Service != "dynamodb" {
		return table
	}
	name, ok := strings.CutPrefix(a.Resource, "table/")
	if !ok {
		return table
	}
	name, _, _ = strings.Cut(name, "/")
	return name
}
