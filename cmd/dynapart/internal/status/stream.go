package status

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/follow"
	"github.com/dynapart/dynapart/lock"
)

// The stream of a group that follows it (work --follow: a slot's checkpoint says its share was
// read and its holders follow the stream; before the first pass is complete nothing says the
// group will, and a group that records versions for a stream handler elsewhere (a Lambda function,
// --versions) leases no shards): its shards as the group's readers lease them (lock mutexes follow.ShardMutex(group, shard): the
// holder, the checkpoint, finished) and each shard's lag, the age of its oldest record after the
// checkpoint. Workers' counters (versions handled, superseded, unchanged) are not in the lease
// table: they are in each worker's metrics and progress. The stream is read at most every
// streamEvery (streamread.go says what a read costs).

// streamEvery is how often the page re-reads the stream's shards, whatever its --interval.
const streamEvery = 5 * time.Second

// streamDoc is the document's `stream`: null when the group does not follow a stream (also
// before its first slot has read its share).
type streamDoc struct {
	// ARN is the stream's: the source table's LatestStreamArn.
	ARN string `json:"arn"`
	// LagSeconds is the largest lag of the shards: how old the oldest record is that the group's
	// readers have not resolved; 0 when they are caught up; null when no shard's lag is known.
	LagSeconds *float64 `json:"lag_seconds"`
	// Shards are the stream's shards, as DescribeStream lists them, by shard id (DynamoDB makes it
	// from the shard's creation time, so a parent comes before its children).
	Shards []shardDoc `json:"shards"`
	// ReadAt is when the stream was read (at most every 5 s, so it may be older than the sample).
	ReadAt time.Time `json:"read_at"`
	// Error is the last read's error; the rest is from the read before (empty before one).
	Error string `json:"error"`
}

// shardDoc is one shard of the stream.
type shardDoc struct {
	Shard  string `json:"shard"`
	Parent string `json:"parent"` // "" for a shard without a parent
	// Owner is the worker holding the shard's lease, "" when no reader holds it (free).
	Owner string `json:"owner"`
	// Finished says the shard is closed and was read to its end: nothing more to read.
	Finished bool `json:"finished"`
	// Position is the shard's checkpoint: the sequence number of the last record resolved; ""
	// before its first.
	Position string `json:"position"`
	// LagSeconds is the age of the shard's oldest record after Position (by its
	// ApproximateCreationDateTime): 0 when there is none (caught up); null for a finished shard or
	// when it could not be read (Error says why).
	LagSeconds *float64 `json:"lag_seconds"`
	Error      string   `json:"error"`
}

// streamWatch reads the stream of a group for the page, at most every every; the last read is
// served in between. Not safe for concurrent use (one sampler calls it).
type streamWatch struct {
	streams follow.StreamsClient
	tables  tableDescriber
	locks   *lock.Client
	group   string
	every   time.Duration

	// arn is the stream of table, as DescribeTable said at arnAt (again after arnEvery).
	arn   string
	table string
	arnAt time.Time
	// finished are the shards found finished, which stay so: their leases are not read again.
	finished map[string]shardDoc
	last     *streamDoc
	tried    time.Time // the last read's start, failed or not
}

// newStreamWatch reads group's stream with streams (its shards' leases with locks, the table's
// stream ARN with tables); nil (no stream read) without a streams client.
func newStreamWatch(streams follow.StreamsClient, tables tableDescriber, locks *lock.Client, group string) *streamWatch {
	if streams == nil || tables == nil {
		return nil
	}
	return &streamWatch{streams: streams, tables: tables, locks: locks, group: group, every: streamEvery,
		finished: map[string]shardDoc{}}
}

// watchStream makes r read its group's stream with streams when the group follows one; the
// meter returned counts the stream's requests.
func (r *reader) watchStream(streams follow.StreamsClient) *readMeter {
	m := &readMeter{}
	r.stream = newStreamWatch(meteredStreams{streams, m}, r.tables, r.locks, r.group)
	return m
}

// follows reports whether a group follows its table's stream: a slot's checkpoint says its
// holders do (or the meta item says so, as groups recorded it for a while).
func follows(st *lock.GroupStatus) bool {
	if st.Meta["table"] == "" {
		return false
	}
	if st.Meta["follow"] == "true" {
		return true
	}
	for _, s := range st.Slots {
		if followsStream(s.Checkpoint) {
			return true
		}
	}
	return false
}

// doc is the stream's state for a sample at now: nil when the group does not follow a stream (or
// w is nil); the last read when it is younger than every; else a new read. A failed read keeps
// the read before, with the error.
func (w *streamWatch) doc(ctx context.Context, st *lock.GroupStatus, now time.Time) *streamDoc {
	if w == nil || !follows(st) {
		return nil
	}
	if !w.tried.IsZero() && now.Sub(w.tried) < w.every {
		return w.last
	}
	w.tried = now
	d, err := w.read(ctx, st.Meta["table"], now)
	switch {
	case err == nil:
		w.last = d
	case w.last != nil:
		failed := *w.last
		failed.Error = err.Error()
		w.last = &failed
	default:
		w.last = &streamDoc{ARN: w.arn, Shards: []shardDoc{}, Error: err.Error()}
	}
	return w.last
}

// streamLag is the largest known lag of shards, nil when none is known.
func streamLag(shards []shardDoc) *float64 {
	var lag *float64
	for _, s := range shards {
		if s.LagSeconds != nil && (lag == nil || *s.LagSeconds > *lag) {
			v := *s.LagSeconds
			lag = &v
		}
	}
	return lag
}

// lagText is a lag for people: "-" when unknown, "<1s" under a second, else whole seconds.
func lagText(s *float64) string {
	switch {
	case s == nil:
		return "-"
	case *s == 0:
		return "0s"
	case *s < 1:
		return "<1s"
	}
	return time.Duration(*s * float64(time.Second)).Round(time.Second).String()
}

// printStreamText prints the stream section of `status`: its ARN and lag, then a row per shard.
func printStreamText(w io.Writer, d *streamDoc) {
	if d == nil {
		return
	}
	lag := "lag " + lagText(d.LagSeconds)
	if d.LagSeconds != nil && *d.LagSeconds == 0 {
		lag += " (caught up)"
	}
	fmt.Fprintf(w, "stream %s: %s, %s (lag: the age of the oldest record after a shard's position)\n", orDash(d.ARN), lag, cli.Count(len(d.Shards), "shard"))
	if d.Error != "" {
		fmt.Fprintf(w, "  reading the stream failed: %s\n", d.Error)
	}
	if len(d.Shards) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tPARENT\tOWNER\tFINISHED\tPOSITION\tLAG")
	for _, s := range d.Shards {
		owner := s.Owner
		if owner == "" {
			owner = "free"
		}
		lag := lagText(s.LagSeconds)
		if s.Error != "" {
			lag = "? (" + s.Error + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\n", s.Shard, orDash(s.Parent), owner, s.Finished, orDash(s.Position), lag)
	}
	_ = tw.Flush()
}

// followsStream reports whether a slot checkpoint says the slot's share was read and its holders
// follow the stream: its scan position, the last field, is the worker's follow mark ("follow",
// worker/follow.go), which scan positions never are.
func followsStream(checkpoint string) bool {
	return strings.HasSuffix(checkpoint, "|follow")
}

// rescansTable reports whether a slot checkpoint says its holder scans the whole table again
// because the stream may have lost records (work --follow).
func rescansTable(checkpoint string) bool {
	return strings.HasSuffix(checkpoint, "|rescan")
}
