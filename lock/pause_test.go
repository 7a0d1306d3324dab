package lock

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"
)

// Pause and resume flip the flag on the meta item only; repeating one is a no-op; an unknown
// group is refused with nothing written; slots and their holders are untouched.
func TestPauseResumeGroup(t *testing.T) {
	db, table := lockTable(t)
	ctx := context.Background()
	c, err := New(db, table, WithOwner("w1"))
	require.NoError(t, err)

	_, err = c.PauseGroup(ctx, "nope")
	require.ErrorIs(t, err, ErrGroupNotFound)
	_, err = c.ResumeGroup(ctx, "nope")
	require.ErrorIs(t, err, ErrGroupNotFound)
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	require.NoError(t, err)
	require.Empty(t, out.Items, "nothing written for an unknown group")

	l, err := c.AcquireSlot(ctx, "g", 2)
	require.NoError(t, err)
	defer l.Release(ctx)
	paused, err := c.GroupPaused(ctx, "g")
	require.NoError(t, err)
	require.False(t, paused)

	changed, err := c.PauseGroup(ctx, "g")
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = c.PauseGroup(ctx, "g")
	require.NoError(t, err)
	require.False(t, changed, "pausing a paused group is a no-op")
	paused, err = c.GroupPaused(ctx, "g")
	require.NoError(t, err)
	require.True(t, paused)
	st, err := c.GroupStatus(ctx, "g")
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, 2, st.N)
	require.NoError(t, l.Err(), "pausing keeps the lease")

	changed, err = c.ResumeGroup(ctx, "g")
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = c.ResumeGroup(ctx, "g")
	require.NoError(t, err)
	require.False(t, changed)
	st, err = c.GroupStatus(ctx, "g")
	require.NoError(t, err)
	require.False(t, st.Paused)

	paused, err = c.GroupPaused(ctx, "never-run")
	require.NoError(t, err)
	require.False(t, paused)
}
