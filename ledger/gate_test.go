package ledger

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// TestThrottledAttempts: a call's throttled attempts are those the SDK's middleware saw, or 1 for
// a call that ended throttled without passing it (a wrapper's answer, a transaction cancelled for
// throttling).
func TestThrottledAttempts(t *testing.T) {
	require.Equal(t, int64(3), throttledAttempts(3, &types.ProvisionedThroughputExceededException{}))
	require.Equal(t, int64(1), throttledAttempts(0, &types.ProvisionedThroughputExceededException{}))
	cancelled := func(codes ...string) error {
		e := &types.TransactionCanceledException{}
		for _, c := range codes {
			e.CancellationReasons = append(e.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
		}
		return e
	}
	require.Equal(t, int64(1), throttledAttempts(0, cancelled("None", "ThrottlingError")))
	require.Equal(t, int64(0), throttledAttempts(0, cancelled("None", "ConditionalCheckFailed")))
	require.Equal(t, int64(0), throttledAttempts(0, &types.ConditionalCheckFailedException{}))
	require.Equal(t, int64(0), throttledAttempts(0, nil))
}
