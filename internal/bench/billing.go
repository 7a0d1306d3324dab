package bench

import (
	"context"
	"errors"
	"maps"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/capacity"
)

// DynamoDB's published billing rules (the same units on-demand and provisioned): a write unit
// covers 1 KB of the item written, a read unit 4 KB read strongly consistent (an eventually
// consistent read costs half); an item written in a transaction costs two write units per KB, an
// item read in one two read units per 4 KB.
const (
	writeUnitBytes = 1024
	readUnitBytes  = 4096
)

// writeUnits is what one non-transactional write of an item of size bytes costs (PutItem,
// UpdateItem, DeleteItem, an item of BatchWriteItem, a PartiQL write): 1 WCU per KB started, at
// least 1, also when its condition fails.
func writeUnits(size int) float64 { return float64(max(1, ceilDiv(size, writeUnitBytes))) }

// readUnits is what a read of size bytes costs: 1 RCU per 4 KB started, at least 1; half when
// eventually consistent. A Scan or Query page is one read of all the items it evaluated.
func readUnits(size int, consistent bool) float64 {
	u := float64(max(1, ceilDiv(size, readUnitBytes)))
	if !consistent {
		u /= 2
	}
	return u
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Units are write and read capacity units.
type Units struct{ WCU, RCU float64 }

// TableBill is what the requests to one table cost.
type TableBill struct {
	Units
	// MaxWrite is the largest item size a write was billed for, MaxRead the most bytes one request
	// read, estimated (see billingDB): how far the figures are from the next unit.
	MaxWrite, MaxRead int
}

func (t *TableBill) add(o TableBill) {
	t.WCU += o.WCU
	t.RCU += o.RCU
	t.MaxWrite, t.MaxRead = max(t.MaxWrite, o.MaxWrite), max(t.MaxRead, o.MaxRead)
}

// Bill is what the requests sent through a billingDB cost by DynamoDB's billing rules.
type Bill struct {
	Requests int64            // every request sent (the SDK's own retries below it not seen)
	ByOp     map[string]int64 // requests by operation
	Tables   map[string]TableBill
}

// Total is the units on every table.
func (b Bill) Total() Units {
	var t Units
	for _, u := range b.Tables {
		t.WCU += u.WCU
		t.RCU += u.RCU
	}
	return t
}

// billedClient is what billingDB wraps and offers: the calls the fault client wraps (every
// data-plane call the library and the hand loops make), and the transaction reads and PartiQL
// calls a ledger may look for.
type billedClient interface {
	ddbfault.Next
	TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error)
	ExecuteStatement(ctx context.Context, in *dynamodb.ExecuteStatementInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ExecuteStatementOutput, error)
	BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error)
}

// billingDB bills every request sent through it by DynamoDB's published rules, from the request
// and its answer, not from the ConsumedCapacity DynamoDB Local reports (2 WCU for a whole
// transaction, where DynamoDB bills 2 per item).
//
// Sizes are estimated, without reading anything more. A write's item is the larger of the item
// before and after it, approximated as the table's stored item size (stored: the benchmarks seed
// items of one size; 0 for a table not given, such as the lease table) or the request's key,
// whichever is larger, plus the values the request carries (an update's expression values, with
// their placeholders standing in for attribute names, and its attribute names); a put's item is
// the item it puts, or the stored size if larger. So attributes an earlier write added are not
// counted: the benchmarks' items stay far below 1 KB either way, which MaxWrite shows. A read's
// item is what the answer returned, or the stored size if larger (a projection does not lower
// the bill); items a Scan or Query evaluated but filtered out count at the stored size (or the
// page's mean).
//
// A request is billed when it succeeded or a condition failed (a write whose condition fails is
// billed; a cancelled transaction in full, an upper bound); a throttled, invalid or lost request
// is not. Control-plane calls (DescribeTable) are counted as requests, free.
type billingDB struct {
	db     billedClient
	stored map[string]int // the stored item size of a table, bytes

	mu   sync.Mutex
	bill Bill
}

// newBillingDB bills the requests sent through it to db; stored gives tables' item sizes.
func newBillingDB(db billedClient, stored map[string]int) *billingDB {
	return &billingDB{db: db, stored: stored, bill: Bill{ByOp: map[string]int64{}, Tables: map[string]TableBill{}}}
}

// Bill is a copy of what was billed so far.
func (b *billingDB) Bill() Bill {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.bill
	out.ByOp, out.Tables = maps.Clone(b.bill.ByOp), maps.Clone(b.bill.Tables)
	return out
}

// charges are one request's units, by table.
type charges map[string]TableBill

func (c charges) write(table string, size int, times float64) {
	c.add(table, TableBill{Units: Units{WCU: times * writeUnits(size)}, MaxWrite: size})
}

func (c charges) read(table string, size int, consistent bool, times float64) {
	c.add(table, TableBill{Units: Units{RCU: times * readUnits(size, consistent)}, MaxRead: size})
}

func (c charges) add(table string, tb TableBill) {
	t := c[table]
	t.add(tb)
	c[table] = t
}

// settle counts a request of op that answered out and err and, when err leaves it billed, the
// charges charge makes (out may be nil); it returns out and err.
func settle[Out any](b *billingDB, op string, out Out, err error, charge func(c charges)) (Out, error) {
	c := charges{}
	if billed(err) && charge != nil {
		charge(c)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bill.Requests++
	b.bill.ByOp[op]++
	for t, tb := range c {
		cur := b.bill.Tables[t]
		cur.add(tb)
		b.bill.Tables[t] = cur
	}
	return out, err
}

// billed reports whether a request that ended with err is billed: it succeeded, or DynamoDB
// evaluated it and a condition failed.
func billed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	var tce *types.TransactionCanceledException
	return err == nil || errors.As(err, &ccf) || errors.As(err, &tce)
}

// ByOpText lists the requests by operation, "Scan 12, UpdateItem 3,000".
func (b Bill) ByOpText() string {
	ops := make([]string, 0, len(b.ByOp))
	for op := range b.ByOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for i, op := range ops {
		ops[i] = op + " " + num(float64(b.ByOp[op]), 0)
	}
	return strings.Join(ops, ", ")
}

// storedSize is the size billed for an existing item of table: its stored size, or its key's.
func (b *billingDB) storedSize(table string, key map[string]types.AttributeValue) int {
	return max(b.stored[table], capacity.ItemSize(key))
}

// putSize is a put's item size: the item put, or the stored item if larger (the item before).
func (b *billingDB) putSize(table *string, item map[string]types.AttributeValue) int {
	return max(capacity.ItemSize(item), b.stored[aws.ToString(table)])
}

// updateSize is an update's (or a condition check's) item size: the stored item and what the
// request carries.
func (b *billingDB) updateSize(table *string, key, values map[string]types.AttributeValue, names map[string]string) int {
	n := b.storedSize(aws.ToString(table), key) + capacity.ItemSize(values)
	for _, name := range names {
		n += len(name)
	}
	return n
}

// statementSize is a PartiQL write's item size: the stored item and the statement's parameters.
func (b *billingDB) statementSize(table string, params []types.AttributeValue) int {
	n := b.stored[table]
	for _, p := range params {
		n += capacity.ItemSize(map[string]types.AttributeValue{"": p})
	}
	return n
}

// readSize is what reading item of table bills: its size as returned, or the stored size if
// larger; a missing item (nil) bills the minimum.
func (b *billingDB) readSize(table string, item map[string]types.AttributeValue) int {
	if item == nil {
		return 0
	}
	return max(capacity.ItemSize(item), b.stored[table])
}

// pageSize is the bytes a Scan or Query page evaluated: the items returned, and the items
// evaluated but not returned (a filter's, or all with Select COUNT) at the stored size or the
// page's mean.
func (b *billingDB) pageSize(table string, items []map[string]types.AttributeValue, scanned int32) int {
	n := 0
	for _, it := range items {
		n += b.readSize(table, it)
	}
	if rest := int(scanned) - len(items); rest > 0 {
		each := b.stored[table]
		if each == 0 && len(items) > 0 {
			each = n / len(items)
		}
		n += rest * each
	}
	return n
}
