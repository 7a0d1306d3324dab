package main

import (
	"context"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// The files table: pk file_id (S); processed (BOOL); hash (N), a content hash that rows written
// before the hash existed do not have.
const (
	attrFile      = "file_id"
	attrProcessed = "processed"
	attrHash      = "hash"
	batchLimit    = 100
)

// Pending index settings of the dynapart version (the worker's defaults, spelled out).
const (
	IndexName = "dp_pending"
	ShardAttr = "dp_shard"
	Shards    = 16
)

// FileRow makes a row. Old rows (old = true) have no hash.
func FileRow(i int, processed, old bool) map[string]types.AttributeValue {
	id := fmt.Sprintf("f-%07d", i)
	item := map[string]types.AttributeValue{
		attrFile:      &types.AttributeValueMemberS{Value: id},
		attrProcessed: &types.AttributeValueMemberBOOL{Value: processed},
	}
	if !old {
		item[attrHash] = &types.AttributeValueMemberN{Value: strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(id))), 10)}
	}
	return item
}

// PendingRow makes an unprocessed row and puts it in the pending index: its shard is the
// partition of its hash, and a row without a hash goes to shard 0 ("coalesce to 0").
func PendingRow(i int, old bool) map[string]types.AttributeValue {
	item := FileRow(i, false, old)
	scan.MarkPending(item, attrHash, ShardAttr, Shards)
	return item
}

// Processor is the fake file processing: it records how many times each file was processed and
// by which slot, and signals when a number of files have been processed.
type Processor struct {
	mu      sync.Mutex
	times   map[string]int
	bySlot  map[int]int
	total   int
	waiters []waiter
}

type waiter struct {
	n  int
	ch chan struct{}
}

// Process records one processing of file by slot (-1 for the naive code).
func (p *Processor) Process(file string, slot int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.times == nil {
		p.times, p.bySlot = map[string]int{}, map[int]int{}
	}
	p.times[file]++
	p.bySlot[slot]++
	p.total++
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if p.total >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	p.waiters = kept
}

// Reached returns a channel closed once n processings have been recorded.
func (p *Processor) Reached(n int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	if p.total >= n {
		close(ch)
	} else {
		p.waiters = append(p.waiters, waiter{n, ch})
	}
	return ch
}

// Counts returns the number of files processed, the processings beyond the first per file, and
// the processings per slot.
func (p *Processor) Counts() (files, duplicates int, bySlot map[int]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	bySlot = map[int]int{}
	for s, n := range p.bySlot {
		bySlot[s] = n
	}
	for _, n := range p.times {
		files++
		duplicates += n - 1
	}
	return files, duplicates, bySlot
}

// PollNaive is one run of the cron job from the incident: "select where processed = false limit
// 100" (a filtered scan, read until 100 rows match), process them, set processed = true. Two
// workers whose runs overlap select the same rows. afterSelect (nil: nothing) runs between the
// select and the processing; tests use it to make two runs overlap for certain. It returns the
// items the select read and the read capacity they cost.
func PollNaive(ctx context.Context, db *dynamodb.Client, table string, p *Processor, afterSelect func()) (read int, rcu float64, err error) {
	var batch []map[string]types.AttributeValue
	var start map[string]types.AttributeValue
	for len(batch) < batchLimit {
		out, err := db.Scan(ctx, &dynamodb.ScanInput{
			TableName:                 aws.String(table),
			FilterExpression:          aws.String("#p = :false"),
			ExpressionAttributeNames:  map[string]string{"#p": attrProcessed},
			ExpressionAttributeValues: map[string]types.AttributeValue{":false": &types.AttributeValueMemberBOOL{Value: false}},
			ExclusiveStartKey:         start,
			ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		})
		if err != nil {
			return read, rcu, fmt.Errorf("select: %w", err)
		}
		read += int(out.ScannedCount)
		if cc := out.ConsumedCapacity; cc != nil && cc.CapacityUnits != nil {
			rcu += *cc.CapacityUnits
		}
		batch = append(batch, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	batch = batch[:min(len(batch), batchLimit)]
	if afterSelect != nil {
		afterSelect()
	}
	for _, it := range batch {
		id := it[attrFile].(*types.AttributeValueMemberS).Value
		p.Process(id, -1)
		if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: map[string]types.AttributeValue{attrFile: it[attrFile]},
			UpdateExpression:          aws.String("SET #p = :true"),
			ExpressionAttributeNames:  map[string]string{"#p": attrProcessed},
			ExpressionAttributeValues: map[string]types.AttributeValue{":true": &types.AttributeValueMemberBOOL{Value: true}},
		}); err != nil {
			return read, rcu, fmt.Errorf("mark processed: %w", err)
		}
	}
	return read, rcu, nil
}

// Handler is the dynapart handler: process the file and set processed = true (for the code that
// still reads the flag). The worker completes the item in its inline ledger and takes it out of
// the pending index.
func Handler(db worker.DynamoDBClient, table string, p *Processor) worker.Handler {
	return func(ctx context.Context, it worker.Item) error {
		p.Process(it.Key[attrFile].(*types.AttributeValueMemberS).Value, it.Slot)
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: it.Key,
			UpdateExpression:          aws.String("SET #p = :true"),
			ExpressionAttributeNames:  map[string]string{"#p": attrProcessed},
			ExpressionAttributeValues: map[string]types.AttributeValue{":true": &types.AttributeValueMemberBOOL{Value: true}},
		})
		return err
	}
}

// Meter wraps the client and counts what reads cost: calls, items read (ScannedCount) and the
// read capacity DynamoDB reports.
type Meter struct {
	worker.DynamoDBClient
	queries, items atomic.Int64
	rcuMilli       atomic.Int64
	mu             sync.Mutex
	notify         []waiter
}

// MeterReading is a snapshot of a Meter.
type MeterReading struct {
	Queries, Items int64
	RCU            float64
}

// Read returns the counts so far.
func (m *Meter) Read() MeterReading {
	return MeterReading{Queries: m.queries.Load(), Items: m.items.Load(), RCU: float64(m.rcuMilli.Load()) / 1000}
}

// Sub is r - o.
func (r MeterReading) Sub(o MeterReading) MeterReading {
	return MeterReading{Queries: r.Queries - o.Queries, Items: r.Items - o.Items, RCU: r.RCU - o.RCU}
}

// AfterQueries returns a channel closed once n more reads (Query or Scan) have returned.
func (m *Meter) AfterQueries(n int) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{})
	m.notify = append(m.notify, waiter{int(m.queries.Load()) + n, ch})
	return ch
}

func (m *Meter) count(scanned int32, cc *types.ConsumedCapacity) {
	q := m.queries.Add(1)
	m.items.Add(int64(scanned))
	if cc != nil && cc.CapacityUnits != nil {
		m.rcuMilli.Add(int64(*cc.CapacityUnits * 1000))
	}
	m.mu.Lock()
	kept := m.notify[:0]
	for _, w := range m.notify {
		if q >= int64(w.n) {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	m.notify = kept
	m.mu.Unlock()
}

// Query counts the read and passes it on.
func (m *Meter) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := m.DynamoDBClient.Query(ctx, in, optFns...)
	if err == nil && in.IndexName != nil {
		m.count(out.ScannedCount, out.ConsumedCapacity)
	}
	return out, err
}

// Scan counts the read and passes it on.
func (m *Meter) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := m.DynamoDBClient.Scan(ctx, in, optFns...)
	if err == nil {
		m.count(out.ScannedCount, out.ConsumedCapacity)
	}
	return out, err
}
