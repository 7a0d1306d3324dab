package lock

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
)

// Retryable tells an outage (which a standby and a starting worker wait through) from what no
// wait cures.
func TestRetryable(t *testing.T) {
	api := func(code string) error {
		return fmt.Errorf("operation error DynamoDB: %w", &smithy.GenericAPIError{Code: code, Message: "test"})
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection reset", errors.New("read tcp: connection reset by peer"), true},
		{"throttled past the SDK's retries", api("ThrottlingException"), true},
		{"server error", api("InternalServerError"), true},
		{"nil", nil, false},
		{"missing table", fmt.Errorf("x: %w", &types.ResourceNotFoundException{}), false},
		{"table error", &TableError{Table: "t", Problem: "table does not exist"}, false},
		{"config error", bad("n", "must be at least 1"), false},
		{"group mismatch", &GroupMismatchError{}, false},
		{"group finished", ErrGroupFinished, false},
		{"cancelled", fmt.Errorf("x: %w", context.Canceled), false},
		{"refused credentials", api("UnrecognizedClientException"), false},
		{"expired token", api("ExpiredTokenException"), false},
		{"validation", api("ValidationException"), false},
	} {
		require.Equal(t, c.want, Retryable(c.err), c.name)
	}
}
