package redrive

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/worker"
)

// TestStoppedNamesTheKey: a redrive that stopped at a failing key says which, spelled as --key
// takes it, with the cause and the keys left; other errors pass as they are.
func TestStoppedNamesTheKey(t *testing.T) {
	cause := errors.New("dynapart: ledger redrive on table t: throttled")
	re := &worker.RedriveError{Key: worker.Key{"id": &types.AttributeValueMemberS{Value: "user-17"}}, Left: 3, Err: cause}
	err := stopped(fmt.Errorf("wrapped: %w", re))
	require.ErrorIs(t, err, cause)
	require.Equal(t, `redrive stopped at item {"id":"user-17"}: dynapart: ledger redrive on table t: throttled `+
		`(3 keys after it not tried; running the redrive again is safe: it moves only what is still failed)`, err.Error())
	other := errors.New("other")
	require.Same(t, other, stopped(other))
	require.NoError(t, stopped(nil))
}
