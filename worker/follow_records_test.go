package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/lock"
)

// HandleRecords takes the group's state from the start's read while it is younger than a standby
// poll (an invocation that found its slot at once reads the meta item once), and reads it again
// when the call stood by longer: a pause lifted meanwhile is seen.
func TestRecordsGroupStateReadsAgainWhenStale(t *testing.T) {
	f, cfg := recordsGroup(t)
	ctx := context.Background()
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	_, err = locks.PauseGroup(ctx, cfg.Group)
	require.NoError(t, err)

	clk := newTestClock()
	cfg.Clock = clk
	w, err := New(cfg)
	require.NoError(t, err)
	e, err := w.prepare(ctx)
	require.NoError(t, err)
	require.True(t, e.started.Paused, "the start read the pause")
	_, err = locks.ResumeGroup(ctx, cfg.Group)
	require.NoError(t, err)
	s := &slot{w: w, e: e}

	st, err := s.recordsGroupState(ctx)
	require.NoError(t, err)
	require.True(t, st.Paused, "within a standby poll of the start: its read, not another")
	clk.Advance(w.Config().StandbyPoll + time.Millisecond)
	st, err = s.recordsGroupState(ctx)
	require.NoError(t, err)
	require.False(t, st.Paused, "older than a standby poll: read again, the resume seen")
}

// A call that would record Config.MaxWCU on a group the start found without a budget reads the
// group again first: a budget an operator set meanwhile stands.
func TestRecordsGroupStateReadsAgainBeforeRecordingABudget(t *testing.T) {
	f, cfg := recordsGroup(t)
	ctx := context.Background()

	cfg.MaxWCU = 5
	w, err := New(cfg)
	require.NoError(t, err)
	e, err := w.prepare(ctx)
	require.NoError(t, err)
	require.False(t, e.started.Budget.Set())
	locks, err := lock.New(f.db, f.leaseTable)
	require.NoError(t, err)
	_, err = locks.SetBudget(ctx, cfg.Group, lock.Limits{WCU: 1000}) // the operator's, after the start's read
	require.NoError(t, err)
	s := &slot{w: w, e: e}
	st, err := s.recordsGroupState(ctx)
	require.NoError(t, err)
	require.Equal(t, 1000.0, st.Budget.MaxWCU, "read again: the operator's budget seen, and not recorded over")
}

// recordsGroup is a fixture with a versioned group that a HandleRecords call created, and its
// Config.
func recordsGroup(t *testing.T) (*fixture, Config) {
	f := newFixture(t, 0)
	cfg := f.config(LedgerInline)
	cfg.Versions, cfg.Workers, cfg.Group = true, 1, f.table+"/records"
	w, err := New(cfg)
	require.NoError(t, err)
	_, err = w.HandleRecords(context.Background(), func(context.Context, Item) error { return nil }, nil)
	require.NoError(t, err)
	return f, cfg
}
