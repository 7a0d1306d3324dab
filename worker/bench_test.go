package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// BenchmarkThroughput compares, on tables of 20,000 items at concurrency 16, Run's items/s with a
// plain SDK loop that does the same conditional UpdateItem per item. Run it with -benchtime=1x:
// one iteration processes the whole table, and the ratios are what to read.
//
//	go test -run XXX -bench Throughput -benchtime 1x ./worker/
func BenchmarkThroughput(b *testing.B) {
	const items, conc = 20000, 16
	modes := []struct {
		name string
		cfg  func(*Config)
	}{
		{"plain-sdk-loop", nil},
		{"run-complete-only", func(c *Config) { c.CompleteOnly = true }},
		{"run-claim-complete", func(c *Config) {}},
		{"run-batched-claims", func(c *Config) { c.BatchClaims = true }},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				f := newFixture(b, items)
				b.StartTimer()
				start := time.Now()
				var done int64
				if m.cfg == nil {
					done = plainLoop(b, f, conc)
				} else {
					c := f.config(LedgerInline)
					c.Workers, c.Once, c.Concurrency = 1, true, conc
					m.cfg(&c)
					w, err := New(c)
					if err != nil {
						b.Fatal(err)
					}
					if err := w.Run(context.Background(), func(context.Context, Item) error { return nil }); err != nil {
						b.Fatal(err)
					}
					done = w.Stats().Completed
				}
				if done != items {
					b.Fatalf("completed %d of %d", done, items)
				}
				b.ReportMetric(float64(items)/time.Since(start).Seconds(), "items/s")
			}
		})
	}
}

// plainLoop is the baseline: a parallel scan feeding conc goroutines that each mark an item done
// with one conditional UpdateItem, as a hand-rolled job would.
func plainLoop(b *testing.B, f *fixture, conc int) int64 {
	ctx := context.Background()
	keys := make(chan map[string]types.AttributeValue, conc*2)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				_, err := f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName: aws.String(f.table), Key: k,
					UpdateExpression:    aws.String("SET dp_status = :done"),
					ConditionExpression: aws.String("attribute_exists(id) AND (attribute_not_exists(dp_status) OR dp_status <> :done)"),
					ExpressionAttributeValues: map[string]types.AttributeValue{
						":done": &types.AttributeValueMemberS{Value: "done"}},
				})
				if err != nil {
					b.Error(err)
					continue
				}
				done.Add(1)
			}
		}()
	}
	var sg sync.WaitGroup
	for seg := range 4 {
		sg.Add(1)
		go func() {
			defer sg.Done()
			var start map[string]types.AttributeValue
			for {
				out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(f.table), Segment: aws.Int32(int32(seg)),
					TotalSegments: aws.Int32(4), ExclusiveStartKey: start, ProjectionExpression: aws.String("id")})
				if err != nil {
					b.Error(err)
					return
				}
				for _, it := range out.Items {
					keys <- it
				}
				if out.LastEvaluatedKey == nil {
					return
				}
				start = out.LastEvaluatedKey
			}
		}()
	}
	sg.Wait()
	close(keys)
	wg.Wait()
	return done.Load()
}
