package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/scan"
)

// TestStatusTextIsForPeople: settings as sorted key=value lines, a slot's position as its pass and
// segments done, never a Go map or the raw checkpoint.
func TestStatusTextIsForPeople(t *testing.T) {
	pos, err := scan.EncodeCheckpoint(scan.Position{Table: "users", Mode: scan.ModeSegment, TotalSegments: 8, Cursors: []scan.Cursor{
		{TotalSegments: 8, Segment: 0, Done: true},
		{TotalSegments: 8, Segment: 1, LastEvaluatedKey: map[string]types.AttributeValue{"id": sAV("u17")}},
		{TotalSegments: 8, Segment: 2, Done: true},
		{TotalSegments: 8, Segment: 3},
	}})
	require.NoError(t, err)
	var buf bytes.Buffer
	printStatusText(&buf, statusJSON{Group: "users/default", Workers: 3,
		Meta: map[string]string{"mode": "segment", "job": "default", "ledger": "inline"},
		Slots: []slotJSON{
			{Slot: 0, Owner: "w1", Token: 4, Held: true, Checkpoint: "dp1|1|1|" + pos},
			{Slot: 1, Finished: true, Checkpoint: "dp1|0|0|"},
			{Slot: 2, Checkpoint: "garbage"},
		}})
	out := buf.String()
	require.Contains(t, out, "group users/default: 3 slots, finished=false\nsettings:\n  job=default\n  ledger=inline\n  mode=segment\n")
	require.NotContains(t, out, "map[")
	require.NotContains(t, out, `{"v"`, "no raw checkpoint")
	lines := strings.Split(out, "\n")
	require.Regexp(t, `^0\s+w1\s+4\s+true\s+-\s+false\s+pass 2, 2/4 segments done, another pass needed$`, lines[6])
	require.Regexp(t, `^1\s+-\s+0\s+false\s+-\s+true\s+pass 1, not started$`, lines[7])
	require.Regexp(t, `^2\s.*unreadable checkpoint \(7 bytes\)$`, lines[8])
}
