package scale_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
)

// scaleFixture is a lease table with groups made as workers make them (a slot taken once, with
// the group's meta).
type scaleFixture struct {
	db     *dynamodb.Client
	leases string
	lc     *lock.Client
}

func newScaleFixture(t *testing.T) *scaleFixture {
	t.Helper()
	db := ddbtest.Client(t)
	leases := ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(context.Background(), db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	lc, err := lock.New(db, leases)
	require.NoError(t, err)
	return &scaleFixture{db: db, leases: leases, lc: lc}
}

func (f *scaleFixture) group(t *testing.T, name string, n int, meta map[string]string) {
	t.Helper()
	l, err := f.lc.TryAcquireSlot(context.Background(), name, n, lock.WithGroupMeta(meta))
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
}

func (f *scaleFixture) items(t *testing.T) []map[string]types.AttributeValue {
	t.Helper()
	out, err := f.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(f.leases), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Items
}

func (f *scaleFixture) state(t *testing.T, group string) lock.GroupState {
	t.Helper()
	st, err := f.lc.GroupState(context.Background(), group)
	require.NoError(t, err)
	return st
}

// scale exits 2 with a message naming the problem, and writes nothing, for an unknown group, a
// missing or invalid --workers, and M beyond the group's segments (segment mode, also a group
// made before the segment count was recorded: n x sub_segments, recorded at its first resize) or
// shards (index mode); M = N is a no-op; a resize prints the old and new N and the plan epoch.
func TestScaleCLI(t *testing.T) {
	c := clitest.New(t)
	f := newScaleFixture(t)
	scale := func(args ...string) (string, string, int) {
		t.Helper()
		return c.Run(append([]string{"scale", "--lease-table", f.leases}, args...)...)
	}
	_, stderr, code := scale("--group", "no/such", "--workers", "3")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, `group "no/such" does not exist`)
	require.Empty(t, f.items(t), "nothing written for an unknown group")

	f.group(t, "seg", 2, map[string]string{"mode": "segment", "sub_segments": "4"})
	f.group(t, "idx", 2, map[string]string{"mode": "index", "sub_segments": "4", "shards": "4"})
	f.group(t, "flt", 2, map[string]string{"mode": "filter", "sub_segments": "4"})
	before := f.items(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--group", "seg"}, "--workers is required"},
		{[]string{"--group", "seg", "--workers", "0"}, "at least 1 slot"},
		{[]string{"--group", "seg", "--workers", "-3"}, "at least 1 slot"},
		{[]string{"--workers", "3"}, "--group is required"},
		{[]string{"--group", "seg", "--workers", "9"}, `group "seg" can be scaled up to 8 slots, not 9: it has 8 segments, and that count is fixed when the group is created`},
		{[]string{"--group", "idx", "--workers", "5"}, `group "idx" can be scaled up to 4 slots, not 5: it has 4 shards`},
	} {
		out, stderr, code := scale(tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.msg, tc.args)
		require.Empty(t, out)
	}
	out, stderr, code := scale("--group", "seg", "--workers", "2")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "group seg: already 2 slots (no change)\n", out)
	require.Equal(t, before, f.items(t), "nothing written by bad input or M = N")

	out = c.MustRun("scale", "--lease-table", f.leases, "--group", "seg", "--workers", "6")
	require.Equal(t, "group seg: 2 -> 6 slots (plan epoch 1); running workers re-plan within one heartbeat\n", out)
	st := f.state(t, "seg")
	require.Equal(t, 6, st.N)
	require.Equal(t, int64(1), st.Epoch)
	require.Equal(t, "8", st.Meta["segments"], "the old layout's segment count is recorded at the first resize")
	_, stderr, code = scale("--group", "seg", "--workers", "9")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "can be scaled up to 8 slots", "not 6 x 4")
	out = c.MustRun("scale", "--lease-table", f.leases, "--group", "seg", "--workers", "1")
	require.Contains(t, out, "group seg: 6 -> 1 slot (plan epoch 2)")

	out = c.MustRun("scale", "--lease-table", f.leases, "--group", "idx", "--workers", "4")
	require.Contains(t, out, "2 -> 4 slots (plan epoch 1)")
	require.NotContains(t, f.state(t, "idx").Meta, "segments", "only segment mode records segments")
	out = c.MustRun("scale", "--lease-table", f.leases, "--group", "flt", "--workers", "100")
	require.Contains(t, out, "2 -> 100 slots (plan epoch 1)", "filter mode has no cap")

	help := c.MustRun("scale", "--help")
	for _, s := range []string{"segment mode", "index mode", "filter mode", "nothing is read again", "reads only", "Examples:"} {
		require.Contains(t, help, s)
	}
}
