package ddbfault

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// call is one wrapped operation: how to send it, and how to drop ALL_OLD from a copy of it.
type call[In, Out any] struct {
	op     string
	in     *In
	tables []string
	keys   []map[string]types.AttributeValue
	send   func(context.Context, *In) (*Out, error)
	noOld  func(*In) *In // nil: the operation has no ReturnValuesOnConditionCheckFailure
}

func run[In, Out any](ctx context.Context, c *Client, k call[In, Out]) (*Out, error) {
	n, f := c.begin(k.op, k.tables, k.keys)
	hooks := c.hooksFor(k.op)
	if len(hooks) == 0 {
		return deliver(ctx, c, k, n, f, k.in)
	}
	var once sync.Once
	return throughHooks(ctx, k, n, hooks, func(ctx context.Context, in *In) (*Out, error) {
		var fault *Fault
		once.Do(func() { fault = f })
		return deliver(ctx, c, k, n, fault, in)
	})
}

// deliver sends in, the request of call k (call number n), to the wrapped client, with fault f
// when not nil.
func deliver[In, Out any](ctx context.Context, c *Client, k call[In, Out], n int64, f *Fault, in *In) (*Out, error) {
	if f == nil {
		out, err := k.send(ctx, in)
		c.sent(Sent{Call: n, Op: k.op, In: in, Err: err})
		return out, err
	}
	switch f.Kind {
	case ErrorBeforeSend:
		return nil, opError(k.op, &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}})
	case Throttle:
		return nil, opError(k.op, &types.ProvisionedThroughputExceededException{Message: aws.String("ddbfault: injected throttling")})
	case ServerError:
		return nil, opError(k.op, &types.InternalServerError{Message: aws.String("ddbfault: injected HTTP 500")})
	}
	_, err := k.send(ctx, in)
	c.landed(err)
	c.sent(Sent{Call: n, Op: k.op, In: in, Err: err, Faulted: true})
	switch f.Kind {
	case LostAnswer:
		return nil, opError(k.op, &smithyhttp.RequestSendError{Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}})
	case LostAnswerRetried, LostAnswerRetriedNoOld:
		if f.Kind == LostAnswerRetriedNoOld && k.noOld != nil {
			in = k.noOld(in)
		}
		out, err := k.send(ctx, in)
		c.sent(Sent{Call: n, Op: k.op, In: in, Err: err, Retry: true})
		return out, err
	default: // DelayedAnswer
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, opError(k.op, &smithy.CanceledError{Err: ctx.Err()})
		case <-t.C:
			return nil, opError(k.op, &smithyhttp.RequestSendError{Err: timeoutError{}})
		}
	}
}

func opError(op string, err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: err}
}

// timeoutError is what an http.Client with a Timeout reports: a net.Error whose Timeout is true.
type timeoutError struct{}

func (timeoutError) Error() string   { return "ddbfault: client timeout awaiting response" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (timeoutError) Unwrap() error   { return context.DeadlineExceeded }

var _ net.Error = timeoutError{}

// IsInjected reports whether err came from this package rather than from DynamoDB (a lost, delayed,
// refused, throttled or 500 answer made up here). A retried lost answer returns the server's own
// second answer, which this does not match.
func IsInjected(err error) bool {
	var se *smithyhttp.RequestSendError
	var pt *types.ProvisionedThroughputExceededException
	var ie *types.InternalServerError
	var ce *smithy.CanceledError
	return errors.As(err, &se) || errors.As(err, &pt) || errors.As(err, &ie) || errors.As(err, &ce)
}
