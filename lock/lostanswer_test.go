package lock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/clock"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// sdkAttempts is how many attempts the SDK makes per call in these tests (its default).
const sdkAttempts = 3

// lossyTransport forwards every request to DynamoDB Local, and can lose the answers of
// acquisition writes (a PutItem or UpdateItem that sets acquired_at) after the server has applied
// them: the SDK then sees a reset connection, as when a connection dies between the server's reply
// and the client, and sends the same write again. Renews, fenced writes and reads pass untouched.
type lossyTransport struct {
	next http.RoundTripper
	// plan is asked on an acquisition write's first attempt how many of its attempts lose their
	// answer: 0, 1 (the SDK's retry meets the write that landed), or sdkAttempts (the caller
	// sees an unknown outcome).
	plan func() int

	mu   sync.Mutex
	left map[string]int // SDK invocation id -> answers still to lose

	writes     atomic.Int64 // acquisition write attempts
	lost       atomic.Int64 // of them, answers lost
	lostLanded atomic.Int64 // of the lost answers, those of writes the server applied (the answer said 200)
	allLost    atomic.Int64 // invocations whose every answer was lost
}

var errConnReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

func (p *lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := req.Header.Get("X-Amz-Target")
	if op != "DynamoDB_20120810.PutItem" && op != "DynamoDB_20120810.UpdateItem" {
		return p.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	fwd := req.Clone(req.Context())
	fwd.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(`"`+attrAcquiredAt+`"`)) {
		return p.next.RoundTrip(fwd)
	}
	inv := req.Header.Get("Amz-Sdk-Invocation-Id")
	if inv == "" {
		return nil, errors.New("lossyTransport: the SDK sent no Amz-Sdk-Invocation-Id, cannot tell retries apart")
	}
	p.mu.Lock()
	if p.left == nil {
		p.left = map[string]int{}
	}
	left, seen := p.left[inv]
	if !seen {
		left = p.plan()
		if left == sdkAttempts {
			p.allLost.Add(1)
		}
	}
	p.left[inv] = max(left-1, 0)
	p.mu.Unlock()

	p.writes.Add(1)
	resp, err := p.next.RoundTrip(fwd)
	if err != nil || left == 0 {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	p.lost.Add(1)
	if resp.StatusCode == http.StatusOK {
		p.lostLanded.Add(1)
	}
	return nil, errConnReset
}

// lossyClient is a DynamoDB client whose acquisition writes go through p. The SDK retries without
// backoff and without a retry quota, so many lost answers neither slow the test nor exhaust it.
func lossyClient(t testing.TB, p *lossyTransport) *dynamodb.Client {
	t.Helper()
	p.next = ddbtest.HTTPClient.Transport
	return dynamodb.NewFromConfig(ddbtest.Config(t), func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: p}
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = sdkAttempts
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			so.RateLimiter = ratelimit.None
		})
	})
}

// An acquisition write that reaches DynamoDB but whose answer is lost is ours: when the SDK's
// retry then fails its condition (with or without ALL_OLD), and when every answer is lost. The
// acquirer gets a working lease (it renews, releases, and the slot is free again at once), not
// ErrNoFreeSlot with a phantom lease held until it expires. Both acquisition writes are covered:
// the Put of a new item and the Update of a released one.
func TestLostAcquisitionAnswerIsOurs(t *testing.T) {
	_, table := lockTable(t)
	cases := []struct {
		name        string
		lose        int
		hideAllOld  bool
		wantAttempt int64 // write attempts per acquisition
	}{
		{"retry fails its condition", 1, false, 2},
		{"retry fails its condition, no ALL_OLD", 1, true, 2},
		{"every answer lost", sdkAttempts, false, sdkAttempts},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			group := fmt.Sprintf("g%d", ci)
			var loseNext atomic.Int32
			p := &lossyTransport{plan: func() int {
				if loseNext.Swap(0) == 1 {
					return tc.lose
				}
				return 0
			}}
			db := ddbfault.New(lossyClient(t, p))
			if tc.hideAllOld {
				db.OnCall(dropAllOld, ddbfault.OpPutItem, ddbfault.OpUpdateItem)
			}
			clk := clock.NewFake(t0)
			a, aev := newClient(t, db, table, timingOpts(clk, "a")...)
			direct := ddbtest.Client(t)
			b, _ := newClient(t, direct, table, timingOpts(clk, "b")...)

			var nonces []string
			for i, wantToken := range []int64{1, 3} { // a Put, then an Update of the item b released
				writes, lost := p.writes.Load(), p.lostLanded.Load()
				loseNext.Store(1)
				la, err := a.TryAcquireSlot(ctx, group, 1)
				require.NoError(t, err, "acquisition %d", i)
				require.Equal(t, tc.wantAttempt, p.writes.Load()-writes, "acquisition %d: write attempts", i)
				require.Equal(t, int64(1), p.lostLanded.Load()-lost, "acquisition %d: the landed write's answer was lost", i)
				require.Equal(t, wantToken, la.Token())
				require.Equal(t, clk.Now().Add(ttl), la.ExpiresAt())
				nonce := getS(rawItem(t, direct, table, la.pk, la.slot), attrNonce)
				require.NotEmpty(t, nonce)
				require.NotContains(t, nonces, nonce, "a fresh nonce per acquisition")
				nonces = append(nonces, nonce)

				clk.Advance(hb)
				require.Equal(t, "ok", recv(t, aev.renewed, "a renews"))
				require.NoError(t, la.Err())
				require.NoError(t, la.SaveCheckpoint(ctx, fmt.Sprintf("a%d", i)))
				require.NoError(t, la.Release(ctx))

				lb, err := b.TryAcquireSlot(ctx, group, 1)
				require.NoError(t, err, "a's release freed the slot: no phantom lease")
				require.False(t, lb.TookOver())
				require.Equal(t, wantToken+1, lb.Token())
				require.Equal(t, fmt.Sprintf("a%d", i), lb.Checkpoint())
				release(t, lb)
			}
		})
	}
}

// mixedLosses is a lossyTransport plan: an acquisition write loses no answer, the first one (the
// SDK's retry meets the write that landed) or every one (an unknown outcome), a third each.
func mixedLosses() int {
	switch mrand.N(3) {
	case 0:
		return 0
	case 1:
		return 1
	default:
		return sdkAttempts
	}
}

// Goroutines sharing one Client (so one owner id, as examples/receipts' consumers do) contend for
// one mutex while many acquisition answers are lost: some after the write landed, followed by the
// SDK's retry failing its condition; some for every attempt, leaving the outcome to the re-read;
// and some of the writes whose answers are lost are losers' writes aimed at the very same token
// and version as the winner's. No two goroutines ever hold the mutex at once (no overlap, no lost
// update of a read-modify-write under the lock, every token handed out once), and nobody is left
// waiting on a phantom lease: the lease TTL is longer than the test's deadline.
func TestSharedClientLostAnswersNoDoubleHolder(t *testing.T) {
	_, table := lockTable(t)
	const (
		goroutines = 8
		rounds     = 12
	)
	p := &lossyTransport{plan: mixedLosses}
	// Real clock: no lease may expire in this test (the TTL outlasts the deadline), and the
	// standbys' polls must run by themselves.
	c, err := New(lossyClient(t, p), table, WithOwner("shared"), WithLeaseTTL(5*time.Minute),
		WithPollInterval(10*time.Millisecond))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		inside   atomic.Int32
		overlaps atomic.Int32
		counter  atomic.Int64 // read, then written back +1 after a DynamoDB round trip: loses updates under two holders
		mu       sync.Mutex
		tokens   = map[int64]int{}
		wg       sync.WaitGroup
	)
	// hold is one round: lock, a read-modify-write of counter around a DynamoDB round trip made
	// through the lease, unlock.
	hold := func(m *Mutex) error {
		if err := m.Lock(ctx); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		defer func() { _ = m.Unlock(context.WithoutCancel(ctx)) }()
		if inside.Add(1) != 1 {
			overlaps.Add(1)
		}
		defer inside.Add(-1)
		l := m.Lease()
		mu.Lock()
		tokens[l.Token()]++
		mu.Unlock()
		v := counter.Load()
		if err := l.SaveCheckpoint(ctx, strconv.FormatInt(v, 10)); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		counter.Store(v + 1)
		return nil
	}
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.NewMutex("m") // one Mutex per goroutine, one Client for all
			for r := range rounds {
				if err := hold(m); err != nil {
					errs <- fmt.Errorf("goroutine %d round %d: %w", g, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	require.Zero(t, overlaps.Load(), "two goroutines held the mutex at once")
	for tok, n := range tokens {
		require.Equal(t, 1, n, "token %d handed out %d times", tok, n)
	}
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(goroutines*rounds), counter.Load(), "lost updates under the lock")
	require.Len(t, tokens, goroutines*rounds, "every acquisition has its own token")
	require.Positive(t, p.lostLanded.Load(), "some landed acquisition writes lost their answer")
	require.Positive(t, p.lost.Load()-p.lostLanded.Load(), "some losers' writes lost their answer")
	require.Positive(t, p.allLost.Load(), "some acquisitions saw an unknown outcome")
	t.Logf("%d acquisitions, %d acquisition write attempts, %d answers lost (%d of landed writes), %d unknown outcomes",
		goroutines*rounds, p.writes.Load(), p.lost.Load(), p.lostLanded.Load(), p.allLost.Load())
}

// Items written before nonces existed decode with nonce "", so they are never taken for ours.
func TestDecodeSlotNonce(t *testing.T) {
	item := key("group#g", 0)
	item[attrOwner], item[attrToken], item[attrVersion] = avS("a"), avN(3), avN(7)
	old := decodeSlot(item)
	require.True(t, old.exists)
	require.Equal(t, "", old.nonce)
	require.Equal(t, "a", old.owner)
	require.Equal(t, int64(3), old.token)

	item[attrNonce] = avS("n1")
	require.Equal(t, "n1", decodeSlot(item).nonce)
}
