package status

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/scan"
)

// TestStatusTextIsForPeople: settings as sorted key=value lines, a slot's position as its pass and
// segments done, never a Go map or the raw checkpoint.
func TestStatusTextIsForPeople(t *testing.T) {
	pos, err := scan.EncodeCheckpoint(scan.Position{Table: "users", Mode: scan.ModeSegment, TotalSegments: 8, Cursors: []scan.Cursor{
		{TotalSegments: 8, Segment: 0, Done: true},
		{TotalSegments: 8, Segment: 1, LastEvaluatedKey: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "u17"}}},
		{TotalSegments: 8, Segment: 2, Done: true},
		{TotalSegments: 8, Segment: 3},
	}})
	require.NoError(t, err)
	var buf bytes.Buffer
	printText(&buf, statusJSON{Group: "users/default", Workers: 3,
		Meta: map[string]string{"mode": "segment", "job": "default", "ledger": "inline"},
		Slots: []slotJSON{
			{Slot: 0, Owner: "w1", Token: 4, Held: true, Checkpoint: "dp1|1|1|" + pos, Segments: "0-3"},
			{Slot: 1, Finished: true, Checkpoint: "dp1|0|0|", Segments: "4-7"},
			{Slot: 2, Checkpoint: "garbage", Segments: "8-11"},
			{Slot: 3, Retired: true},
		}})
	out := buf.String()
	require.Contains(t, out, "group users/default: 3 slots, plan epoch 0, finished=false\nsettings:\n  job=default\n  ledger=inline\n  mode=segment\n")
	require.NotContains(t, out, "map[")
	require.NotContains(t, out, `{"v"`, "no raw checkpoint")
	lines := strings.Split(out, "\n")
	require.Regexp(t, `^0\s+w1\s+4\s+true\s+-\s+false\s+0-3\s+pass 2, 2/4 segments done, another pass needed$`, lines[6])
	require.Regexp(t, `^1\s+-\s+0\s+false\s+-\s+true\s+4-7\s+pass 1, not started$`, lines[7])
	require.Regexp(t, `^2\s.*8-11\s+unreadable checkpoint \(7 bytes\)$`, lines[8])
	require.Regexp(t, `^3\s.*retired \(beyond N\)\s+-$`, lines[9])
}

// The units a slot owns under the group's plan, as status shows them.
func TestStatusPlanUnits(t *testing.T) {
	st := &lock.GroupStatus{N: 3, Meta: map[string]string{"mode": "segment", "segments": "12"}}
	p := planOf(st)
	require.Equal(t, []string{"0-3", "4-7", "8-11", ""}, []string{p.units(0), p.units(1), p.units(2), p.units(3)})
	old := planOf(&lock.GroupStatus{N: 2, Meta: map[string]string{"mode": "segment", "sub_segments": "2"}})
	require.Equal(t, "2-3", old.units(1), "a group recorded before segment counts has n x sub_segments")
	idx := planOf(&lock.GroupStatus{N: 3, Meta: map[string]string{"mode": "index", "shards": "8"}})
	require.Equal(t, "1,4,7", idx.units(1))
	require.Equal(t, "all", planOf(&lock.GroupStatus{N: 2, Meta: map[string]string{"mode": "filter"}}).units(1))
	require.Equal(t, "0-2,5,7-8", compactRanges([]int{0, 1, 2, 5, 7, 8}))
}
