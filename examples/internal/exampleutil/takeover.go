package exampleutil

import (
	"io"
	"log/slog"
	"time"

	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// TakeoverTTL is the lease time to live of the examples that kill workers: a dead or frozen
// worker's slot (or lock) is taken over about this long after its last heartbeat.
const TakeoverTTL = 2 * time.Second

// QuickTakeover returns c with the short lease timings of the examples that kill workers
// (TakeoverTTL, a clock skew allowance of 250 ms, standbys looking every 100 ms, a checkpoint
// every 200 ms) and its logs discarded.
func QuickTakeover(c worker.Config) worker.Config {
	c.LeaseTTL, c.MaxClockSkew = TakeoverTTL, 250*time.Millisecond
	c.StandbyPoll, c.CheckpointInterval = 100*time.Millisecond, 200*time.Millisecond
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return c
}

// OneAtATimePer returns c set so that the items with one value of attr are handled by one slot,
// one at a time: filter mode partitioned by attr, one handler per worker, no stealing (a worker
// whose slot is finished does not read another slot's items). A handler that reads a row and
// returns a write conditioned on what it read is then not overtaken by another item of that row;
// a worker that overlaps anyway (a stale one) fails the condition instead of writing twice.
func OneAtATimePer(attr string, c worker.Config) worker.Config {
	c.Mode, c.PartitionAttr, c.Concurrency, c.NoSteal = scan.ModeFilter, attr, 1, true
	return c
}
