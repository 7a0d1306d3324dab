package ddbfault

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Next is the client a Client wraps; any *dynamodb.Client fits.
type Next interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// DefaultTimeout is how long a DelayedAnswer holds the answer unless WithTimeout says otherwise.
const DefaultTimeout = 200 * time.Millisecond

// Option configures a Client.
type Option func(*Client)

// WithTimeout sets the client timeout a DelayedAnswer outlasts (the answer is held this long, or
// until the caller's context ends). Defaults to DefaultTimeout.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// Sent is one request that reached the server, with the server's own answer.
type Sent struct {
	Call int64 // the call's number among all calls of the client
	Op   string
	In   any   // the request, e.g. *dynamodb.UpdateItemInput
	Err  error // the server's answer: nil when applied
	// Faulted reports whether the caller was told something else (a lost or delayed answer, or
	// the first of a retried pair).
	Faulted bool
	// Retry reports the second request of a retried pair (LostAnswerRetried, ...). A retried
	// TransactWriteItems with the first one's ClientRequestToken is not applied again.
	Retry bool
}

// Client wraps a Next, counts its calls and injects at most one armed Fault. Safe for concurrent
// use. The zero value is not usable; use New.
type Client struct {
	next    Next
	timeout time.Duration

	mu       sync.Mutex
	calls    int64
	byOp     map[string]int64
	fault    *Fault
	matched  int64 // calls that matched the armed fault's filter
	injected *Injection
	onSent   func(Sent)
	onInject func(Injection)
	hooks    []hookEntry // see OnCall
	hookIDs  int64
}

var _ Next = (*Client)(nil)

// New wraps next.
func New(next Next, opts ...Option) *Client {
	c := &Client{next: next, timeout: DefaultTimeout, byOp: map[string]int64{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Inject arms f: it fires on the f.At-th call from now on that matches its filter. It replaces a
// fault armed earlier that has not fired, and clears what Injected reports.
func (c *Client) Inject(f Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fault, c.matched, c.injected = &f, 0, nil
}

// Disarm removes an armed fault that has not fired.
func (c *Client) Disarm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fault = nil
}

// Injected returns the call the fault hit, and false while it has not fired.
func (c *Client) Injected() (Injection, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.injected == nil {
		return Injection{}, false
	}
	return *c.injected, true
}

// Calls returns the number of calls made through the client.
func (c *Client) Calls() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// CallsByOp returns the number of calls per operation.
func (c *Client) CallsByOp() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.byOp))
	for k, v := range c.byOp {
		out[k] = v
	}
	return out
}

// OnSent sets a function called (synchronously, from the calling goroutine) for every request
// that reached the server. Set it before the client is used.
func (c *Client) OnSent(f func(Sent)) { c.onSent = f }

// OnInject sets a function called when the fault fires, before the faulted request is sent (so
// Landed and ServerErr are not known yet). Set it before the client is used.
func (c *Client) OnInject(f func(Injection)) { c.onInject = f }

// begin counts a call and returns the fault to inject into it, if any.
func (c *Client) begin(op string, tables []string, keys []map[string]types.AttributeValue) (int64, *Fault) {
	c.mu.Lock()
	c.calls++
	c.byOp[op]++
	call := c.calls
	var hit *Fault
	if c.fault != nil && c.fault.matches(op, tables) {
		c.matched++
		if c.matched == c.fault.At {
			hit = c.fault
			c.fault = nil
			c.injected = &Injection{Fault: *hit, Call: call, Op: op, Tables: tables, Keys: keys}
		}
	}
	inj := c.injected
	c.mu.Unlock()
	if hit != nil && c.onInject != nil {
		c.onInject(*inj)
	}
	return call, hit
}

// landed records the server's answer to a faulted request.
func (c *Client) landed(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.injected != nil {
		c.injected.Landed, c.injected.ServerErr = true, err
	}
}

func (c *Client) sent(s Sent) {
	if c.onSent != nil {
		c.onSent(s)
	}
}
