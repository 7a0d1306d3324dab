package redrive

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/worker"
)

// TestStoppedNamesTheKey: a redrive that stopped at a failing key says which, spelled as --key
// takes it, with the cause and the keys left; one whose context ended says it was interrupted;
// other errors pass as they are.
func TestStoppedNamesTheKey(t *testing.T) {
	ctx := context.Background()
	cause := errors.New("dynapart: ledger redrive on table t: throttled")
	s := func(v string) worker.Key { return worker.Key{"id": &types.AttributeValueMemberS{Value: v}} }
	const again = ". Running the redrive again is safe: it moves what is failed then, this item too if its move did not land"

	err := stopped(ctx, fmt.Errorf("wrapped: %w", &worker.RedriveError{Key: s("user-17"), Left: 3, Err: cause}))
	require.ErrorIs(t, err, cause)
	require.Equal(t, `redrive stopped at item {"id":"user-17"}: dynapart: ledger redrive on table t: throttled; `+
		`3 keys after it not tried`+again, err.Error())

	err = stopped(ctx, &worker.RedriveError{Key: s("user-18"), Left: 1, Err: cause})
	require.Contains(t, err.Error(), "; 1 key after it not tried.")

	err = stopped(ctx, &worker.RedriveError{Key: s("user-19"), Interrupted: true, Err: fmt.Errorf("update: %w", context.Canceled)})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, `redrive interrupted at item {"id":"user-19"} (update: context canceled); 0 keys after it not tried`+again, err.Error())

	// DynamoDB out of reach (a dial timeout is a context.DeadlineExceeded too) is no interruption.
	err = stopped(ctx, &worker.RedriveError{Key: s("user-20"), Left: 2, Err: fmt.Errorf("dial tcp: i/o timeout: %w", context.DeadlineExceeded)})
	require.Equal(t, `redrive stopped at item {"id":"user-20"}: dial tcp: i/o timeout: context deadline exceeded; 2 keys after it not tried`+again, err.Error())

	// A move DynamoDB refuses stops there again: the text says how to leave the item out.
	refused := &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size has exceeded the maximum allowed size"}
	err = stopped(ctx, &worker.RedriveError{Key: s("user-21"), Left: 1, Err: refused})
	require.Equal(t, `redrive stopped at item {"id":"user-21"}: api error ValidationException: Item size has exceeded the maximum allowed size; `+
		`1 key after it not tried. DynamoDB refuses this item's move, so a redrive of it stops here again: to leave it out, redrive the other keys by name`, err.Error())

	// A key plain JSON cannot spell is written as the ledger writes keys, never as pointers.
	nan := worker.Key{"id": &types.AttributeValueMemberN{Value: "NaN"}}
	err = stopped(ctx, &worker.RedriveError{Key: nan, Left: 2, Err: cause})
	require.Contains(t, err.Error(), `redrive stopped at item {id=N:"NaN"}: dynapart: ledger redrive`)

	other := errors.New("other")
	require.Same(t, other, stopped(ctx, other))
	require.NoError(t, stopped(ctx, nil))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	err = stopped(cancelled, other)
	require.ErrorIs(t, err, other)
	require.Equal(t, "redrive interrupted before its first move: other", err.Error())
}

// TestNumberKeys: a number key is one DynamoDB stores, written in its canonical form, so that a
// stop can show it as JSON; NaN, infinities, hex and numbers out of DynamoDB's range are malformed.
func TestNumberKeys(t *testing.T) {
	schema := []cli.KeySpec{{Name: "id", Type: types.ScalarAttributeTypeN}}
	for in, want := range map[string]string{".5": "0.5", "+5": "5", "5.": "5", "1e2": "100", `{"id":-0.50}`: "-0.5", "42": "42"} {
		k, err := parseItemKey(in, schema)
		require.NoError(t, err, in)
		require.Equal(t, want, k["id"].(*types.AttributeValueMemberN).Value, in)
		js, err := cli.PlainJSON(k)
		require.NoError(t, err, in)
		require.Equal(t, `{"id":`+want+`}`, string(js))
	}
	for _, bad := range []string{"NaN", "Inf", "-Infinity", "0x10p0", "1e200", "1e-131", "1_000", "", `{"id":1e400}`,
		"123456789012345678901234567890123456789"} {
		_, err := parseItemKey(bad, schema)
		require.Error(t, err, bad)
	}
	_, err := parseItemKey("NaN", schema)
	require.EqualError(t, err, `attribute "id": number "NaN": not a number`)
}

// TestKeyObjects: a --key object is one JSON object, each attribute named once; what follows it,
// or an attribute named twice (a decoder keeps the last), is malformed.
func TestKeyObjects(t *testing.T) {
	schema := []cli.KeySpec{{Name: "id", Type: types.ScalarAttributeTypeN}}
	k, err := parseItemKey(` {"id": 6} `, schema)
	require.NoError(t, err)
	require.Equal(t, "6", k["id"].(*types.AttributeValueMemberN).Value)
	for bad, want := range map[string]string{
		`{"id":6} garbage`: "not one JSON object: more after it",
		`{"id":6}{"id":7}`: "not one JSON object: more after it",
		`{"id":4,"id":5}`:  `attribute "id" given twice`,
		`{"id":`:           "not a JSON object",
		`{"id":6`:          "not a JSON object",
		`{"id" 6}`:         "not a JSON object",
		`{"id":null}`:      `attribute "id": want a string or a number, got <nil>`,
		`{"id":6,"x":1}`:   "want exactly the key attributes id:N",
	} {
		_, err := parseItemKey(bad, schema)
		require.ErrorContains(t, err, want, bad)
	}
}
