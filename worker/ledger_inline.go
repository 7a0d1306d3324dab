package worker

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DefaultAttrPrefix is the inline ledger's default attribute prefix.
const DefaultAttrPrefix = "dp_"

// InlineOptions configures an InlineLedger.
type InlineOptions struct {
	// Prefix starts the name of every state attribute (<Prefix>status, <Prefix>owner, ...).
	// Defaults to "dp_".
	Prefix string
	// RemoveOnDone are attributes removed when an item is done or dead-lettered, e.g. the shard
	// attribute of a sparse pending index, so that finished items leave the index. They may not be
	// key or state attributes. Defaults to none.
	RemoveOnDone []string
}

// InlineLedger keeps each item's state as attributes on the item itself: <p>status, <p>owner,
// <p>slot, <p>token, <p>claim_until (unix ms), <p>attempts, <p>retry_at (ms), <p>error,
// <p>done_at (ms) and <p>failed_at (ms), where <p> is the prefix (default "dp_"). Every write is
// conditioned on the item existing, so the ledger never re-creates an item that was deleted: a
// deleted item is reported not claimed, StatusPending; completing it is ErrClaimLost. Complete,
// CompleteOnly and DeadLetter also remove InlineOptions.RemoveOnDone.
//
// It is safe for concurrent use.
type InlineLedger struct {
	ledgerOps
}

var _ Ledger = (*InlineLedger)(nil)

// NewInlineLedger returns the inline ledger of table, whose primary key is keyAttrs (the
// partition key, then the sort key if there is one).
func NewInlineLedger(db LedgerClient, table string, keyAttrs []string, opts InlineOptions) (*InlineLedger, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultAttrPrefix
	}
	attrs := newStateAttrs(opts.Prefix)
	for _, k := range keyAttrs {
		if slices.Contains(attrs.all(), k) {
			return nil, fmt.Errorf("dynapart: inline ledger: key attribute %q clashes with a state attribute (prefix %q)", k, opts.Prefix)
		}
	}
	for _, a := range opts.RemoveOnDone {
		if a == "" || slices.Contains(keyAttrs, a) || slices.Contains(attrs.all(), a) {
			return nil, fmt.Errorf("dynapart: inline ledger: RemoveOnDone %q: empty, a key attribute or a state attribute", a)
		}
	}
	l := &InlineLedger{}
	var first string
	if len(keyAttrs) > 0 {
		first = keyAttrs[0]
	}
	core, err := newLedgerCore(db, "inline ledger", keyAttrs, attrs, ledgerRow{
		table:        table,
		keyAttrs:     keyAttrs,
		exists:       first,
		removeOnDone: slices.Clone(opts.RemoveOnDone),
		key:          func(k Key) (Key, error) { return l.core.itemKeyOf(k) },
	})
	if err != nil {
		return nil, err
	}
	l.core = core
	return l, nil
}

// Summarize implements Ledger with a consistent parallel scan of the table that reads only the
// status attribute.
func (l *InlineLedger) Summarize(ctx context.Context) (Summary, error) {
	var s Summary
	err := l.core.parallelScan(ctx, dynamodb.ScanInput{
		TableName: aws.String(l.core.row.table), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#status"), ExpressionAttributeNames: map[string]string{"#status": l.core.attrs.status},
	}, func(out *dynamodb.ScanOutput) error {
		s.Total += int64(len(out.Items))
		countLedgerStates(&s, out.Items, l.core.attrs.status)
		return nil
	})
	return s, err
}

// DeadLetters implements Ledger with a parallel scan for failed items; fn is never called
// concurrently, and an error from fn stops the scan and is returned as it is.
func (l *InlineLedger) DeadLetters(ctx context.Context, fn func(DeadLetter) error) error {
	a := l.core.attrs
	proj, names := ledgerProjection(append(slices.Clone(l.core.keyAttrs), a.attempts, a.error, a.failedAt))
	names["#status"] = a.status
	return l.core.parallelScan(ctx, dynamodb.ScanInput{
		TableName: aws.String(l.core.row.table), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(proj), ExpressionAttributeNames: names,
		FilterExpression:          aws.String("#status = :failed"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":failed": ledgerS(string(StatusFailed))},
	}, func(out *dynamodb.ScanOutput) error {
		for _, it := range out.Items {
			key := make(Key, len(l.core.keyAttrs))
			for _, k := range l.core.keyAttrs {
				key[k] = it[k]
			}
			dl := DeadLetter{Key: key, Attempts: int(ledgerNum(it[a.attempts])), Error: ledgerStr(it[a.error]), At: ledgerTime(it[a.failedAt])}
			if err := fn(dl); err != nil {
				return err
			}
		}
		return nil
	})
}
