package follow

import (
	"context"
	"errors"
	"fmt"
	"testing"

	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"
)

// A shard family as DescribeStream may list it: children before their parent, a grandchild, and
// a shard whose parent was trimmed away. Parents come first; a child of an unlisted parent is a
// root.
func Example_lineage() {
	shards := []shard{
		{id: "shard-4", parent: "shard-2"},
		{id: "shard-3", parent: "shard-1"},
		{id: "shard-2", parent: "shard-1"},
		{id: "shard-1"},
		{id: "shard-5", parent: "shard-0"}, // shard-0 is gone from the stream
	}
	for _, s := range lineage(shards) {
		fmt.Println(s.id)
	}
	// Output:
	// shard-1
	// shard-5
	// shard-2
	// shard-3
	// shard-4
}

// TestReadable: a shard waits for a listed parent until that parent is finished; a parent gone
// from the listing does not hold its child back.
func TestReadable(t *testing.T) {
	listed := map[string]bool{"p": true, "c": true, "o": true}
	finished := map[string]bool{}
	isFinished := func(id string) bool { return finished[id] }
	require.True(t, shard{id: "p"}.readable(listed, isFinished), "no parent")
	require.False(t, shard{id: "c", parent: "p"}.readable(listed, isFinished), "parent listed, not finished")
	require.True(t, shard{id: "o", parent: "gone"}.readable(listed, isFinished), "parent trimmed away")
	finished["p"] = true
	require.True(t, shard{id: "c", parent: "p"}.readable(listed, isFinished), "parent finished")
}

// TestListShardsPages: listShards follows DescribeStream's pages (one shard per page here) and
// returns every shard once, parents first; a stream no longer enabled, or gone, is a *TrimmedError.
func TestListShardsPages(t *testing.T) {
	fs := newFakeStream()
	fs.page = 1
	fs.addShard("shard-3", "shard-2")
	fs.addShard("shard-2", "shard-1")
	fs.addShard("shard-1", "")
	fs.addShard("shard-9", "")
	calls := 0
	fs.setFault(func(op string) error {
		if calls++; calls > 10 {
			return errors.New("the pages never end")
		}
		return nil
	})
	got, err := listShards(context.Background(), fs, fakeARN)
	require.NoError(t, err)
	require.Equal(t, []shard{{id: "shard-1"}, {id: "shard-9"}, {id: "shard-2", parent: "shard-1"},
		{id: "shard-3", parent: "shard-2"}}, got)
	require.Equal(t, 4, calls, "one DescribeStream per page")

	fs.setFault(nil)
	fs.status = stypes.StreamStatusDisabled
	_, err = listShards(context.Background(), fs, fakeARN)
	var te *TrimmedError
	require.True(t, errors.As(err, &te), "%v", err)
	require.ErrorIs(t, err, ErrTrimmed)
	require.Empty(t, te.Shard)
	require.Contains(t, te.Reason, "DISABLED")

	fs.setFault(func(string) error { return &stypes.ResourceNotFoundException{} })
	_, err = listShards(context.Background(), fs, fakeARN)
	require.True(t, errors.As(err, &te), "%v", err)
	require.ErrorIs(t, err, ErrTrimmed)
	require.ErrorAs(t, err, new(*stypes.ResourceNotFoundException))
}
