package follow

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
)

// failsafe bounds every wait on a signal, so a bug fails the test instead of hanging it.
const failsafe = 30 * time.Second

// lockTable creates a fresh lock table and deletes it after the test.
func lockTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	db := ddbtest.Client(t)
	name := ddbtest.TableName(t, "lock")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, lock.CreateTable(ctx, db, name))
	ddbtest.DeleteOnCleanup(t, db, name)
	return db, name
}

func newLocks(t *testing.T, db lock.DynamoDBClient, table, owner string, opts ...lock.Option) *lock.Client {
	t.Helper()
	c, err := lock.New(db, table, append([]lock.Option{lock.WithOwner(owner)}, opts...)...)
	require.NoError(t, err)
	return c
}

// testLogger writes to stderr with -v, else nowhere.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type heldEvent struct {
	shard string
	held  bool
}

// running is a Reader running in the background, its events as channels.
type running struct {
	r       *Reader
	batches chan *Batch    // every batch fn got
	held    chan heldEvent // shards taken and let go
	saved   chan [2]string // checkpoints saved: shard, sequence number
	// seenSaved are the saves read from saved by waitSaved (a wait for one shard's may read
	// another's first); used by one test goroutine only.
	seenSaved map[[2]string]bool
	looked    chan struct{} // a look is over (holds one; more are dropped)
	result    chan error    // Run's answer
	stop      context.CancelFunc
}

// startReader runs a Reader for cfg. Its fn hands every batch to the test, and says Done itself
// when autoDone is set.
func startReader(t *testing.T, cfg ReaderConfig, autoDone bool) *running {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	r, err := NewReader(cfg)
	require.NoError(t, err)
	rr := &running{r: r, batches: make(chan *Batch, 4096), held: make(chan heldEvent, 4096),
		saved: make(chan [2]string, 4096), seenSaved: map[[2]string]bool{}, looked: make(chan struct{}, 1), result: make(chan error, 1)}
	r.hooks.held = func(shard string, held bool) { rr.held <- heldEvent{shard, held} }
	r.hooks.saved = func(shard, cp string) { rr.saved <- [2]string{shard, cp} }
	r.hooks.looked = func() {
		select {
		case rr.looked <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr.stop = cancel
	go func() {
		rr.result <- r.Run(ctx, func(_ context.Context, b *Batch) error {
			rr.batches <- b
			if autoDone {
				b.Done()
			}
			return nil
		})
	}()
	t.Cleanup(func() { rr.halt(t) })
	return rr
}

// halt stops the Reader and returns Run's answer (once; later calls return nil).
func (rr *running) halt(t *testing.T) error {
	t.Helper()
	rr.stop()
	select {
	case err, ok := <-rr.result:
		if ok {
			close(rr.result)
		}
		return err
	case <-time.After(failsafe):
		t.Fatal("Run did not return")
		return nil
	}
}

// answer waits for Run to return on its own.
func (rr *running) answer(t *testing.T) error {
	t.Helper()
	select {
	case err := <-rr.result:
		close(rr.result)
		return err
	case <-time.After(failsafe):
		t.Fatal("Run did not return")
		return nil
	}
}

func (rr *running) nextBatch(t *testing.T) *Batch {
	t.Helper()
	select {
	case b := <-rr.batches:
		return b
	case <-time.After(failsafe):
		t.Fatal("no batch delivered")
		return nil
	}
}

// noBatch fails when a batch is waiting.
func (rr *running) noBatch(t *testing.T) {
	t.Helper()
	select {
	case b := <-rr.batches:
		t.Fatalf("unexpected batch of shard %s: %v", b.Shard, seqsOf(b.Records))
	default:
	}
}

// waitHeld waits until shard is taken (held) or let go (!held).
func (rr *running) waitHeld(t *testing.T, shard string, held bool) {
	t.Helper()
	for {
		select {
		case e := <-rr.held:
			if e.shard == shard && e.held == held {
				return
			}
		case <-time.After(failsafe):
			t.Fatalf("shard %s never held=%t", shard, held)
		}
	}
}

// waitSaved waits until the shard's checkpoint seq is saved.
func (rr *running) waitSaved(t *testing.T, shard, seq string) {
	t.Helper()
	want := [2]string{shard, seq}
	if rr.seenSaved[want] {
		return
	}
	for {
		select {
		case e := <-rr.saved:
			// Saves of other shards may come first: kept for their own waits.
			rr.seenSaved[e] = true
			if e == want {
				return
			}
		case <-time.After(failsafe):
			t.Fatalf("checkpoint %s of shard %s never saved", seq, shard)
		}
	}
}

// waitLooks waits until n more looks are over.
func (rr *running) waitLooks(t *testing.T, n int) {
	t.Helper()
	select {
	case <-rr.looked: // a look over before the call
	default:
	}
	for range n {
		select {
		case <-rr.looked:
		case <-time.After(failsafe):
			t.Fatal("the reader stopped looking for shards")
		}
	}
}

func (rr *running) stat(t *testing.T, shard string) ShardStat {
	t.Helper()
	for _, s := range rr.r.Stats() {
		if s.Shard == shard {
			return s
		}
	}
	t.Fatalf("no stats for shard %s in %+v", shard, rr.r.Stats())
	return ShardStat{}
}

func seqsOf(recs []stypes.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = aws.ToString(r.Dynamodb.SequenceNumber)
	}
	return out
}

func mutexState(t *testing.T, c *lock.Client, group, shard string) lock.MutexState {
	t.Helper()
	st, err := c.MutexState(context.Background(), ShardMutex(group, shard))
	require.NoError(t, err)
	return st
}
