package lock

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// GroupStatus.Finished: every slot 0..N-1 finished; slots past N do not count; a group never used
// is not finished, nor one whose slot item is missing.
func TestGroupStatusFinished(t *testing.T) {
	done := func(slot int) SlotStatus { return SlotStatus{Slot: slot, Finished: true} }
	require.False(t, (&GroupStatus{}).Finished())
	require.True(t, (&GroupStatus{N: 2, Slots: []SlotStatus{done(0), done(1), {Slot: 2}}}).Finished())
	require.False(t, (&GroupStatus{N: 2, Slots: []SlotStatus{done(0), {Slot: 1}}}).Finished())
	require.False(t, (&GroupStatus{N: 2, Slots: []SlotStatus{done(0)}}).Finished())
}
