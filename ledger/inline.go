package ledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DefaultAttrPrefix is the inline ledger's default attribute prefix.
const DefaultAttrPrefix = "dp_"

// Inline keeps each item's state as attributes on the item itself: <p>status, <p>owner, <p>slot,
// <p>token, <p>scope, <p>claim, <p>claim_until (unix ms), <p>attempts, <p>retry_at (ms),
// <p>error, <p>done_at (ms) and <p>failed_at (ms), where <p> is the prefix (default "dp_"). Every
// write that may meet an item without state is conditioned on the item existing, so the ledger
// never re-creates an item that was deleted: a deleted item is reported not claimed,
// StatusPending; completing it is ErrClaimLost. Complete, CompleteOnly and DeadLetter also remove
// the attributes of WithRemoveOnDone.
//
// It is safe for concurrent use.
type Inline struct {
	ops
}

var _ Ledger = (*Inline)(nil)

// NewInline returns the inline ledger of table, whose primary key is keyAttrs (the partition key,
// then the sort key if there is one).
func NewInline(db Client, table string, keyAttrs []string, opts ...Option) (*Inline, error) {
	o := collect(opts)
	if o.prefix == "" {
		o.prefix = DefaultAttrPrefix
	}
	names := attrNames(o.prefix)
	taken := slices.Collect(maps.Values(names))
	for _, k := range keyAttrs {
		if slices.Contains(taken, k) {
			return nil, fmt.Errorf("dynapart: inline ledger: key attribute %q clashes with a state attribute (prefix %q)", k, o.prefix)
		}
	}
	sh := shape{mustExist: true}
	for i, a := range o.removeOnDone {
		if a == "" || slices.Contains(keyAttrs, a) || slices.Contains(taken, a) {
			return nil, fmt.Errorf("dynapart: inline ledger: RemoveOnDone %q: empty, a key attribute or a state attribute", a)
		}
		rm := attr("rm" + strconv.Itoa(i))
		names[rm] = a
		sh.removeOnDone = append(sh.removeOnDone, rm)
	}
	if len(keyAttrs) > 0 {
		names[aExists] = keyAttrs[0]
	}
	l := &Inline{}
	core, err := newCore(db, coreSpec{name: "inline ledger", keyAttrs: keyAttrs, names: names, shape: sh, opts: o, prefix: o.prefix,
		row: rowSpec{table: table, keyAttrs: keyAttrs, key: func(k Key) (Key, error) { return l.core.itemKeyOf(k) }}})
	if err != nil {
		return nil, err
	}
	l.core = core
	return l, nil
}

// States implements Ledger: an inline item carries its state.
func (l *Inline) States(_ context.Context, items []map[string]types.AttributeValue) ([]ItemState, error) {
	out := make([]ItemState, len(items))
	for i, it := range items {
		out[i] = l.core.decodeState(it)
	}
	return out, nil
}

// StateOf implements Ledger.
func (l *Inline) StateOf(item map[string]types.AttributeValue) (ItemState, bool) {
	return l.core.decodeState(item), true
}

// ScanAttrs implements Ledger: the state attributes a scan must read for StateOf.
func (l *Inline) ScanAttrs() []string { return l.core.attrNamesOf(stateAttrs...) }

// LeaveIndex implements Ledger.
func (l *Inline) LeaveIndex(ctx context.Context, key Key, shardAttr string) error {
	return l.core.removeAttr(ctx, l.core.row.table, key, shardAttr)
}

// Summarize implements Ledger with a consistent parallel scan of the table that reads only the
// status attribute.
func (l *Inline) Summarize(ctx context.Context) (Summary, error) {
	var s Summary
	err := l.core.parallelScan(ctx, dynamodb.ScanInput{
		TableName: aws.String(l.core.row.table), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#status"), ExpressionAttributeNames: map[string]string{"#status": l.core.names[aStatus]},
	}, func(out *dynamodb.ScanOutput) error {
		s.Total += int64(len(out.Items))
		countLedgerStates(&s, out.Items, l.core.names[aStatus])
		return nil
	})
	return s, err
}

// DeadLetters implements Ledger with a parallel scan for failed items; fn is never called
// concurrently, and an error from fn stops the scan and is returned as it is.
func (l *Inline) DeadLetters(ctx context.Context, fn func(DeadLetter) error) error {
	proj, names := projection(append(slices.Clone(l.core.keyAttrs), l.core.attrNamesOf(deadLetterAttrs...)...))
	names["#status"] = l.core.names[aStatus]
	return l.core.parallelScan(ctx, dynamodb.ScanInput{
		TableName: aws.String(l.core.row.table), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(proj), ExpressionAttributeNames: names,
		FilterExpression:          aws.String("#status = :failed"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":failed": attrS(string(StatusFailed))},
	}, func(out *dynamodb.ScanOutput) error {
		for _, it := range out.Items {
			key := make(Key, len(l.core.keyAttrs))
			for _, k := range l.core.keyAttrs {
				key[k] = it[k]
			}
			if err := fn(l.core.deadLetterOf(key, it)); err != nil {
				return err
			}
		}
		return nil
	})
}
