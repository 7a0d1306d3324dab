package capacity

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// IsThrottle reports whether err is DynamoDB (or the AWS SDK) refusing a request for capacity:
// the codes the SDK's retryer retries as throttling (retry.DefaultThrottleErrorCodes, which
// include ProvisionedThroughputExceededException, ThrottlingException and RequestLimitExceeded).
func IsThrottle(err error) bool {
	if err == nil {
		return false // before ae, which escapes: no allocation for a success
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	_, ok := retry.DefaultThrottleErrorCodes[ae.ErrorCode()]
	return ok
}

// IsThrottleReason reports whether a transaction's cancellation reason code is throttling.
func IsThrottleReason(code string) bool {
	switch code {
	case "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
		return true
	}
	return false
}

// CountThrottles returns a per-call option that counts into n every attempt DynamoDB throttles.
// The SDK's retryer retries throttled attempts on its own, so the caller never sees them as
// errors; this middleware sits just inside the retry loop (after the "Retry" finalize step) and so
// sees each attempt's result. A client that is not the SDK's (a test's wrapper) may answer with a
// throttle before any middleware runs: the caller sees that error, and n stays 0.
func CountThrottles(n *atomic.Int64) func(*dynamodb.Options) {
	mw := middleware.FinalizeMiddlewareFunc("dynapartCountThrottles",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			if IsThrottle(err) {
				n.Add(1)
			}
			return out, md, err
		})
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			if err := s.Finalize.Insert(mw, "Retry", middleware.After); err != nil {
				return s.Finalize.Add(mw, middleware.After)
			}
			return nil
		})
	}
}
