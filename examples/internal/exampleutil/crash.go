package exampleutil

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Moment is where a crash point stops a child in the middle of a write.
type Moment string

// The moments of a write a child can be stopped at.
const (
	// BeforeSend: the child says "crash" and hangs before the write is sent; the parent kills it.
	BeforeSend Moment = "before-send"
	// AfterLanded: the write is sent and lands (the N-th that lands); the child says "crash" and
	// hangs before its answer reaches the caller (a lost answer); the parent kills it.
	AfterLanded Moment = "after-landed"
	// Held: the write is held "in the network": the child says "held" and the write waits until
	// the parent sends "release", then is delivered even if its sender has given up meanwhile (a
	// request already on the wire cannot be called back), and the child says "released". The
	// parent freezes the child (SIGSTOP) while it holds the write, so that its lease expires.
	Held Moment = "held"
)

// CrashPoint stops a child at the N-th write its match accepts (1-based; 0: never).
type CrashPoint struct {
	N  int    `json:"n,omitempty"`
	At Moment `json:"at,omitempty"`
}

// Write is a write request as a crash point's match sees it: the operation and, per item it
// writes, the table and the key (a put's whole item).
type Write struct {
	Op    string
	Items []WrittenItem
}

// WrittenItem is one item a write touches.
type WrittenItem struct {
	Table string
	Key   map[string]types.AttributeValue
}

// Touches reports whether the write touches table, on an item whose string attribute attr does
// not start with skipPrefix (skipPrefix "": any item).
func (w Write) Touches(table, attr, skipPrefix string) bool {
	for _, it := range w.Items {
		if it.Table != table {
			continue
		}
		s, _ := it.Key[attr].(*types.AttributeValueMemberS)
		if skipPrefix == "" || s == nil || !strings.HasPrefix(s.Value, skipPrefix) {
			return true
		}
	}
	return false
}

// CrashClient is a DynamoDB client that stops its process at a crash point: at the Point.N-th
// PutItem, UpdateItem or TransactWriteItems that Match accepts. Every other call goes through.
type CrashClient struct {
	*dynamodb.Client
	Point CrashPoint
	Match func(Write) bool
	n     atomic.Int64
}

// PutItem implements the DynamoDB call.
func (c *CrashClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	w := Write{Op: "PutItem", Items: []WrittenItem{{aws.ToString(in.TableName), in.Item}}}
	return crashAt(c, ctx, w, func(ctx context.Context) (*dynamodb.PutItemOutput, error) { return c.Client.PutItem(ctx, in, o...) })
}

// UpdateItem implements the DynamoDB call.
func (c *CrashClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	w := Write{Op: "UpdateItem", Items: []WrittenItem{{aws.ToString(in.TableName), in.Key}}}
	return crashAt(c, ctx, w, func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
		return c.Client.UpdateItem(ctx, in, o...)
	})
}

// TransactWriteItems implements the DynamoDB call.
func (c *CrashClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	w := Write{Op: "TransactWriteItems"}
	for _, ti := range in.TransactItems {
		switch {
		case ti.Put != nil:
			w.Items = append(w.Items, WrittenItem{aws.ToString(ti.Put.TableName), ti.Put.Item})
		case ti.Update != nil:
			w.Items = append(w.Items, WrittenItem{aws.ToString(ti.Update.TableName), ti.Update.Key})
		case ti.Delete != nil:
			w.Items = append(w.Items, WrittenItem{aws.ToString(ti.Delete.TableName), ti.Delete.Key})
		case ti.ConditionCheck != nil:
			w.Items = append(w.Items, WrittenItem{aws.ToString(ti.ConditionCheck.TableName), ti.ConditionCheck.Key})
		}
	}
	return crashAt(c, ctx, w, func(ctx context.Context) (*dynamodb.TransactWriteItemsOutput, error) {
		return c.Client.TransactWriteItems(ctx, in, o...)
	})
}

// crashAt sends w (send), unless w is the crash point's write: then it stops as Point.At says.
// AfterLanded counts the writes that landed (a write whose condition failed is not the one);
// the other moments count the writes about to be sent.
func crashAt[T any](c *CrashClient, ctx context.Context, w Write, send func(context.Context) (T, error)) (T, error) {
	if c.Point.N <= 0 || c.Match == nil || !c.Match(w) {
		return send(ctx)
	}
	if c.Point.At == AfterLanded {
		out, err := send(ctx)
		if err != nil || c.n.Add(1) != int64(c.Point.N) {
			return out, err
		}
		Say("crash %s landed", w.Op)
		Hang()
	}
	if c.n.Add(1) != int64(c.Point.N) {
		return send(ctx)
	}
	if c.Point.At == BeforeSend {
		Say("crash %s not sent", w.Op)
		Hang()
	}
	Say("held %s", w.Op)
	Hear("release")
	out, err := send(context.WithoutCancel(ctx))
	Say("released %s: %s", w.Op, outcome(err))
	return out, err
}

// outcome says briefly how a write ended: "landed", the codes of a cancelled transaction's items,
// or the error.
func outcome(err error) string {
	var tce *types.TransactionCanceledException
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return "landed"
	case errors.As(err, &tce):
		var codes []string
		for _, r := range tce.CancellationReasons {
			codes = append(codes, aws.ToString(r.Code))
		}
		return "cancelled " + strings.Join(codes, ", ")
	case errors.As(err, &ccf):
		return "condition failed"
	}
	return err.Error()
}

// NewCrashClient returns a CrashClient for endpoint (see NewClient) that stops at point.
func NewCrashClient(ctx context.Context, endpoint string, point CrashPoint, match func(Write) bool) (*CrashClient, error) {
	db, err := NewClient(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	return &CrashClient{Client: db, Point: point, Match: match}, nil
}
