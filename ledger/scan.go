package ledger

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// parallelScan scans a table with summarizeSegments segments; fn sees one page at a time (never
// two at once). The first error stops every segment.
func (l *core) parallelScan(ctx context.Context, in dynamodb.ScanInput, fn func(*dynamodb.ScanOutput) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
			cancel(err)
		}
	}
	for seg := range summarizeSegments {
		wg.Go(func() {
			in := in
			in.Segment, in.TotalSegments = aws.Int32(int32(seg)), aws.Int32(summarizeSegments)
			for {
				out, err := l.db.Scan(ctx, &in)
				mu.Lock()
				if err != nil {
					fail(l.wrapErr("scan", aws.ToString(in.TableName), err))
				} else if firstErr == nil {
					if err := fn(out); err != nil {
						fail(err) // the caller's own error, as it is
					}
				}
				stop := firstErr != nil
				mu.Unlock()
				if stop || len(out.LastEvaluatedKey) == 0 {
					return
				}
				in.ExclusiveStartKey = out.LastEvaluatedKey
			}
		})
	}
	wg.Wait()
	return firstErr
}

// countLedgerStates adds a page's items to s by their status attribute (not to s.Total).
func countLedgerStates(s *Summary, items []map[string]types.AttributeValue, status string) {
	for _, it := range items {
		s.count(Status(attrStr(it[status])))
	}
}

// count adds one item in state st to s's count of that state (not to s.Total).
func (s *Summary) count(st Status) {
	switch st {
	case StatusDone:
		s.Done++
	case StatusFailed:
		s.Failed++
	case StatusClaimed:
		s.Claimed++
	default:
		s.Pending++
	}
}
