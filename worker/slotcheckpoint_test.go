package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A checkpoint written before counts existed (dp1) decodes with zero counts and its position; the
// counts round-trip; a new pass keeps done and failed and starts its own counts at zero.
func TestSlotCheckpointCounts(t *testing.T) {
	old, err := decodeSlotCheckpoint("dp1|3|1|some|scan")
	require.NoError(t, err)
	require.Equal(t, slotCheckpoint{pass: 3, dirty: true, scan: "some|scan"}, old)

	cp := slotCheckpoint{pass: 1, counts: slotCounts{done: 7, failed: 2, scanned: 12, elapsed: 2500 * time.Millisecond}, scan: "x|y"}
	require.Equal(t, "dp3|0.0|1|0|7.2.12.2500|x|y", cp.encode())
	v2, err := decodeSlotCheckpoint("dp2|1|0|7.2.12.2500|x|y")
	require.NoError(t, err, "a checkpoint made before plan epochs decodes with epoch 0")
	require.Equal(t, cp, v2)
	cp.epoch, cp.n = 4, 6
	require.Equal(t, "dp3|4.6|1|0|7.2.12.2500|x|y", cp.encode())
	back, err := decodeSlotCheckpoint(cp.encode())
	require.NoError(t, err)
	require.Equal(t, cp, back)
	require.Equal(t, slotCheckpoint{epoch: 4, n: 6, run: 9, pass: 2, counts: slotCounts{done: 7, failed: 2}}, cp.next(9))
	cp.run = 9
	require.Equal(t, "dp3|4.6.9|1|0|7.2.12.2500|x|y", cp.encode(), "the run (the token that started the pass) follows epoch.n")
	back, err = decodeSlotCheckpoint(cp.encode())
	require.NoError(t, err)
	require.Equal(t, cp, back)

	cp.counts.since = time.UnixMilli(1_795_000_000_123)
	require.Equal(t, "dp3|4.6.9|1|0|7.2.12.2500.1795000000123|x|y", cp.encode(), "since follows the counts")
	back, err = decodeSlotCheckpoint(cp.encode())
	require.NoError(t, err)
	require.Equal(t, cp, back)
	require.True(t, cp.next(9).counts.since.IsZero(), "a new pass has not started")
	cp.counts.since = time.Time{}

	for _, bad := range []string{"dp3|1.2|1|0|0.0.0.0.1.2|x", "dp3|1.2|1|0|0.0.0.0.x|x", "dp2|1|0|7.2.12|x", "dp2|1|0|a.b.c.d|x", "dp2|1|0|-1.0.0.0|x", "dp2|1|0", "dp3|-1.2|1|0|0.0.0.0|x", "dp3|e.2|1|0|0.0.0.0|x", "dp3|1|1|0|0.0.0.0|x", "dp3|1.-2|1|0|0.0.0.0|x", "dp3|1.2|1|0|0.0.0.0", "dp3|1.2.0|1|0|0.0.0.0|x", "dp3|1.2.x|1|0|0.0.0.0|x"} {
		_, err := decodeSlotCheckpoint(bad)
		require.Error(t, err, bad)
	}
	p, err := ParseSlotProgress(cp.encode())
	require.Error(t, err, "x|y is no scan position")
	require.Equal(t, int64(7), p.Done)
	require.Equal(t, int64(12), p.Scanned)
}
