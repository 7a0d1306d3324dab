package ledger

import (
	"context"
	"crypto/sha256"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Summarize implements Ledger for the items that exist in the source table now: it reads the job's
// rows of the ledger table (row key and status, a consistent parallel scan), then the source
// table's keys (another one), and counts each source item by the state of its row; an item
// without a row, or waiting for a retry, is pending. Rows left over belong to items deleted from
// the source since: they are counted as Orphaned, never as done. Memory grows with the job's rows
// (16 bytes of row key hash and a status each).
func (l *Table) Summarize(ctx context.Context) (Summary, error) {
	rows, err := l.rowStates(ctx)
	if err != nil {
		return Summary{}, err
	}
	var s Summary
	proj, names := projection(l.core.keyAttrs)
	err = l.core.parallelScan(ctx, dynamodb.ScanInput{
		TableName: aws.String(l.source), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(proj), ExpressionAttributeNames: names,
	}, func(out *dynamodb.ScanOutput) error {
		for _, it := range out.Items {
			rk, err := l.core.row.key(it)
			if err != nil {
				return err
			}
			h := rowHash(rk)
			st := rows[h]
			delete(rows, h)
			countStatus(&s, st)
		}
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	s.Orphaned = int64(len(rows))
	return s, nil
}

// rowStates reads the status of every row of the job, by row key hash.
func (l *Table) rowStates(ctx context.Context) (map[[16]byte]Status, error) {
	rows := map[[16]byte]Status{}
	err := l.core.parallelScan(ctx, dynamodb.ScanInput{
		TableName: aws.String(l.core.row.table), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#pk, #status"),
		FilterExpression:     aws.String("#job = :job AND #source = :source"),
		ExpressionAttributeNames: map[string]string{
			"#pk": ledgerPK, "#status": l.core.names[aStatus], "#job": ledgerJobAttr, "#source": ledgerSrcAttr,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{":job": attrS(l.job), ":source": attrS(l.source)},
	}, func(out *dynamodb.ScanOutput) error {
		for _, it := range out.Items {
			rows[rowHash(Key{ledgerPK: it[ledgerPK]})] = Status(attrStr(it[l.core.names[aStatus]]))
		}
		return nil
	})
	return rows, err
}

// rowHash is a row key's identity in memory: a 128-bit prefix of the SHA-256 of its pk.
func rowHash(rowKey Key) [16]byte {
	sum := sha256.Sum256([]byte(attrStr(rowKey[ledgerPK])))
	return [16]byte(sum[:16])
}

// countStatus adds one item in state st to s.
func countStatus(s *Summary, st Status) {
	s.Total++
	s.count(st)
}
