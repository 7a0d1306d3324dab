package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
)

// The ledger contract: one suite that both ledgers pass, on DynamoDB Local.

// newLedgerFunc makes a ledger over a fresh source table with the given key schema (id S when
// none is given) and returns a function that writes source items.
type newLedgerFunc func(t *testing.T, schema ...ddbtest.Key) (Ledger, func(keys ...Key))

// TestLedgerContract runs the suite on every backend (DynamoDB Local and moto, see
// ddbtest.ForEachBackend); a subtest that needs what a backend lacks skips there (ddbtest.Need).
func TestLedgerContract(t *testing.T) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		t.Run("inline", func(t *testing.T) {
			t.Parallel()
			runLedgerContract(t, func(t *testing.T, schema ...ddbtest.Key) (Ledger, func(keys ...Key)) {
				db, source, names := lcSourceTable(t, schema...)
				l, err := NewInline(db, source, names, lcOpts(t)...)
				require.NoError(t, err)
				return l, lcSeeder(t, db, source)
			})
		})
		t.Run("table", func(t *testing.T) {
			t.Parallel()
			runLedgerContract(t, func(t *testing.T, schema ...ddbtest.Key) (Ledger, func(keys ...Key)) {
				db, source, names := lcSourceTable(t, schema...)
				l, err := NewTable(db, lcLedgerTable(t, db), "job-1", source, names, lcOpts(t)...)
				require.NoError(t, err)
				return l, lcSeeder(t, db, source)
			})
		})
	})
}

// lcT0 is the suite's clock: every call gets its time explicitly.
var lcT0 = time.UnixMilli(1_750_000_000_000)

const lcTTL = time.Minute

func lcKey(i int) Key { return Key{"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("k%04d", i)}} }

func lcKeys(lo, n int) []Key {
	out := make([]Key, n)
	for i := range out {
		out[i] = lcKey(lo + i)
	}
	return out
}

func lcReq(k Key, owner string, slot int, token int64, now time.Time) ClaimRequest {
	return ClaimRequest{Key: k, Owner: owner, Slot: slot, Token: token, Now: now, Until: now.Add(lcTTL)}
}

// lcClaim claims one item and returns its outcome.
func lcClaim(t *testing.T, l Ledger, r ClaimRequest) ClaimOutcome {
	t.Helper()
	outs, err := l.Claim(context.Background(), []ClaimRequest{r})
	require.NoError(t, err)
	require.Len(t, outs, 1)
	return outs[0]
}

// lcMustClaim claims one item that must be free and checks the claim it gets.
func lcMustClaim(t *testing.T, l Ledger, r ClaimRequest, attempt int) Claim {
	t.Helper()
	o := lcClaim(t, l, r)
	require.True(t, o.Claimed, "claim %v by %s: status %q", r.Key, r.Owner, o.Found.Status)
	require.NotEmpty(t, o.Claim.ID, "a claim has an id")
	require.Equal(t, Claim{Key: r.Key, ID: o.Claim.ID, Owner: r.Owner, Slot: r.Slot, Token: r.Token, Attempt: attempt, Until: r.Until}, o.Claim)
	if r.ID != "" {
		require.Equal(t, r.ID, o.Claim.ID, "the request's own id")
	}
	return o.Claim
}

func lcState(t *testing.T, l Ledger, k Key) ItemState {
	t.Helper()
	st, err := l.State(context.Background(), k)
	require.NoError(t, err)
	return st
}

func runLedgerContract(t *testing.T, newLedger newLedgerFunc) {
	ctx := context.Background()

	t.Run("claim complete done", func(t *testing.T) {
		l, seed := newLedger(t)
		k := lcKey(1)
		seed(k)
		require.Equal(t, ItemState{}, lcState(t, l, k), "a new item is pending")

		c := lcMustClaim(t, l, lcReq(k, "A", 0, 1, lcT0), 1)
		st := lcState(t, l, k)
		require.Equal(t, StatusClaimed, st.Status)
		require.Equal(t, "A", st.Owner)
		require.Equal(t, int64(1), st.Token)
		require.Equal(t, 1, st.Attempts)
		require.True(t, st.ClaimUntil.Equal(lcT0.Add(lcTTL)))

		require.NoError(t, l.Complete(ctx, c, lcT0.Add(time.Second)))
		st = lcState(t, l, k)
		require.Equal(t, StatusDone, st.Status)
		require.True(t, st.DoneAt.Equal(lcT0.Add(time.Second)))
		require.True(t, st.ClaimUntil.IsZero())

		// Done is final: no claim, however late and whoever asks, and no second completion.
		o := lcClaim(t, l, lcReq(k, "B", 0, 2, lcT0.Add(time.Hour)))
		require.False(t, o.Claimed)
		require.Equal(t, StatusDone, o.Found.Status)
		// Completing again with the same claim is idempotent (a retried request whose first answer
		// was lost): done by this claim, still once. Any other claim is refused.
		require.NoError(t, l.Complete(ctx, c, lcT0.Add(2*time.Second)))
		other := c
		other.ID = "another-claim"
		require.ErrorIs(t, l.Complete(ctx, other, lcT0.Add(2*time.Second)), ErrClaimLost)
		require.True(t, lcState(t, l, k).DoneAt.Equal(lcT0.Add(time.Second)), "the first completion stands")
		require.ErrorIs(t, l.Retry(ctx, c, "x", lcT0), ErrClaimLost)
		require.ErrorIs(t, l.DeadLetter(ctx, c, "x", lcT0), ErrClaimLost)
		require.ErrorIs(t, l.Release(ctx, c, lcT0), ErrClaimLost)
		require.Equal(t, StatusDone, lcState(t, l, k).Status)
	})

	t.Run("concurrent claims: one winner per item", func(t *testing.T) {
		ddbtest.Need(t, ddbtest.CapConcurrentIsolation)
		l, seed := newLedger(t)
		const items, owners = 40, 8
		keys := lcKeys(0, items)
		seed(keys...)
		var (
			mu   sync.Mutex
			wins = map[string][]Claim{}
			wg   sync.WaitGroup
			errs = make(chan error, owners)
		)
		start := make(chan struct{})
		for o := range owners {
			wg.Go(func() {
				<-start
				owner := "owner-" + strconv.Itoa(o)
				order := rand.Perm(items)
				var reqs []ClaimRequest
				for _, i := range order {
					reqs = append(reqs, lcReq(keys[i], owner, o, 1, lcT0))
				}
				// Half the owners claim one item at a time, half in batches (transactions).
				batch := 1
				if o%2 == 1 {
					batch = 10
				}
				for len(reqs) > 0 {
					n := min(batch, len(reqs))
					outs, err := l.Claim(ctx, reqs[:n])
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					for _, oc := range outs {
						if oc.Claimed {
							id := lcKeyString(oc.Claim.Key)
							wins[id] = append(wins[id], oc.Claim)
						} else if oc.Found.Status != StatusClaimed {
							errs <- fmt.Errorf("%s: unexpected status %q", owner, oc.Found.Status)
						}
					}
					mu.Unlock()
					reqs = reqs[n:]
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, wins, items)
		for _, k := range keys {
			w := wins[lcKeyString(k)]
			require.Len(t, w, 1, "item %s claimed %d times", lcKeyString(k), len(w))
			require.Equal(t, 1, w[0].Attempt)
			st := lcState(t, l, k)
			require.Equal(t, w[0].Owner, st.Owner, "the stored claim is the winner's")
			require.NoError(t, l.Complete(ctx, w[0], lcT0), "the winner's claim is current")
		}
	})

	t.Run("stale claim cannot finish", func(t *testing.T) {
		l, seed := newLedger(t)
		keys := lcKeys(0, 4)
		seed(keys...)
		later := lcT0.Add(lcTTL + time.Millisecond) // A's claims have expired
		finish := []struct {
			name string
			do   func(c Claim) error
		}{
			{"complete", func(c Claim) error { return l.Complete(ctx, c, later) }},
			{"retry", func(c Claim) error { return l.Retry(ctx, c, "late", later) }},
			{"dead-letter", func(c Claim) error { return l.DeadLetter(ctx, c, "late", later) }},
			{"release", func(c Claim) error { return l.Release(ctx, c, later) }},
		}
		for i, f := range finish {
			stale := lcMustClaim(t, l, lcReq(keys[i], "A", 0, 1, lcT0), 1)
			o := lcClaim(t, l, lcReq(keys[i], "A", 0, 1, lcT0.Add(time.Second)))
			require.False(t, o.Claimed, "an unexpired claim is not taken by the same slot and token")
			require.Equal(t, StatusClaimed, o.Found.Status)

			fresh := lcMustClaim(t, l, lcReq(keys[i], "B", 1, 7, later), 2)
			require.ErrorIs(t, f.do(stale), ErrClaimLost, f.name)
			st := lcState(t, l, keys[i])
			require.Equal(t, StatusClaimed, st.Status, f.name)
			require.Equal(t, "B", st.Owner, f.name)
			require.Equal(t, 2, st.Attempts, f.name)
			require.True(t, st.ClaimUntil.Equal(fresh.Until), f.name)
			require.NoError(t, f.do(fresh), f.name)
		}
	})

	t.Run("reclaim by the same owner and token is fenced by the attempt", func(t *testing.T) {
		l, seed := newLedger(t)
		k := lcKey(1)
		seed(k)
		first := lcMustClaim(t, l, lcReq(k, "A", 0, 3, lcT0), 1)
		second := lcMustClaim(t, l, lcReq(k, "A", 0, 3, lcT0.Add(lcTTL)), 2)
		require.ErrorIs(t, l.Complete(ctx, first, lcT0.Add(lcTTL)), ErrClaimLost)
		require.NoError(t, l.Complete(ctx, second, lcT0.Add(lcTTL)))
	})

	t.Run("newer token of the same slot takes over at once", func(t *testing.T) {
		l, seed := newLedger(t)
		k := lcKey(1)
		seed(k)
		old := lcMustClaim(t, l, lcReq(k, "A", 2, 5, lcT0), 1)

		for _, r := range []ClaimRequest{
			lcReq(k, "C", 2, 4, lcT0.Add(time.Second)),   // older token, same slot
			lcReq(k, "D", 3, 100, lcT0.Add(time.Second)), // another slot
		} {
			o := lcClaim(t, l, r)
			require.False(t, o.Claimed, "%s must wait for the claim TTL", r.Owner)
			require.Equal(t, StatusClaimed, o.Found.Status)
		}
		took := lcMustClaim(t, l, lcReq(k, "B", 2, 6, lcT0.Add(time.Second)), 2)
		require.ErrorIs(t, l.Complete(ctx, old, lcT0.Add(2*time.Second)), ErrClaimLost)
		// The old token cannot take it back, even though it is the same slot.
		o := lcClaim(t, l, lcReq(k, "A", 2, 5, lcT0.Add(2*time.Second)))
		require.False(t, o.Claimed)
		require.NoError(t, l.Complete(ctx, took, lcT0.Add(2*time.Second)))
		require.Equal(t, "B", lcState(t, l, k).Owner)
	})

	t.Run("retry, dead letter, release", func(t *testing.T) {
		l, seed := newLedger(t)
		k, r := lcKey(1), lcKey(2)
		seed(k, r)
		c := lcMustClaim(t, l, lcReq(k, "A", 0, 1, lcT0), 1)
		retryAt := lcT0.Add(10 * time.Second)
		require.NoError(t, l.Retry(ctx, c, "boom", retryAt))
		st := lcState(t, l, k)
		require.Equal(t, StatusRetry, st.Status)
		require.True(t, st.RetryAt.Equal(retryAt))
		require.Equal(t, "boom", st.Error)
		require.ErrorIs(t, l.Complete(ctx, c, lcT0), ErrClaimLost, "a retried claim is over")

		o := lcClaim(t, l, lcReq(k, "B", 0, 1, retryAt.Add(-time.Millisecond)))
		require.False(t, o.Claimed, "not before retry_at")
		require.Equal(t, StatusRetry, o.Found.Status)
		c2 := lcMustClaim(t, l, lcReq(k, "B", 0, 1, retryAt), 2)

		long := strings.Repeat("é", 5000) // 10 KB of two-byte runes
		require.NoError(t, l.DeadLetter(ctx, c2, "fatal: "+long, retryAt.Add(time.Second)))
		st = lcState(t, l, k)
		require.Equal(t, StatusFailed, st.Status)
		require.LessOrEqual(t, len(st.Error), maxErrorText)
		require.True(t, strings.HasPrefix(st.Error, "fatal: éé"))
		o = lcClaim(t, l, lcReq(k, "C", 1, 9, lcT0.Add(24*time.Hour)))
		require.False(t, o.Claimed, "failed is final")
		require.Equal(t, StatusFailed, o.Found.Status)
		done, err := lcCompleteOnly(ctx, l, lcReq(k, "C", 1, 9, lcT0.Add(24*time.Hour)))
		require.NoError(t, err)
		require.False(t, done, "complete-only does not finish a dead letter")

		var dls []DeadLetter
		require.NoError(t, l.DeadLetters(ctx, func(d DeadLetter) error { dls = append(dls, d); return nil }))
		require.Len(t, dls, 1)
		require.Equal(t, k, dls[0].Key)
		require.Equal(t, 2, dls[0].Attempts)
		require.Equal(t, st.Error, dls[0].Error)
		require.True(t, dls[0].At.Equal(retryAt.Add(time.Second)))
		stop := errors.New("stop")
		require.ErrorIs(t, l.DeadLetters(ctx, func(DeadLetter) error { return stop }), stop)

		// Release: pending at once, the attempt not counted.
		rc := lcMustClaim(t, l, lcReq(r, "A", 0, 1, lcT0), 1)
		require.NoError(t, l.Release(ctx, rc, lcT0.Add(time.Second)))
		require.Equal(t, StatusRetry, lcState(t, l, r).Status)
		require.ErrorIs(t, l.Complete(ctx, rc, lcT0.Add(time.Second)), ErrClaimLost)
		rc2 := lcMustClaim(t, l, lcReq(r, "B", 1, 1, lcT0.Add(time.Second)), 1)
		require.NoError(t, l.Complete(ctx, rc2, lcT0.Add(2*time.Second)))
	})

	t.Run("complete only", func(t *testing.T) {
		l, seed := newLedger(t)
		keys := lcKeys(0, 6)
		seed(keys...)
		done, err := lcCompleteOnly(ctx, l, lcReq(keys[0], "A", 0, 1, lcT0))
		require.NoError(t, err)
		require.True(t, done)
		st := lcState(t, l, keys[0])
		require.Equal(t, StatusDone, st.Status)
		require.NotEmpty(t, st.Claim, "the write's id")
		require.True(t, st.DoneAt.Equal(lcT0))
		done, err = lcCompleteOnly(ctx, l, lcReq(keys[0], "B", 1, 1, lcT0))
		require.NoError(t, err)
		require.False(t, done, "done once")
		o := lcClaim(t, l, lcReq(keys[0], "B", 1, 1, lcT0.Add(time.Hour)))
		require.Equal(t, StatusDone, o.Found.Status)

		// A live claim (of another group: a complete-only group makes none) is left alone until
		// it expires; then the item may be completed without a claim, and the claimer finds its
		// claim lost, done by someone else.
		c := lcMustClaim(t, l, lcReq(keys[1], "A", 0, 1, lcT0), 1)
		res, err := l.CompleteOnly(ctx, lcReq(keys[1], "B", 1, 1, lcT0.Add(lcTTL-time.Millisecond)))
		require.NoError(t, err)
		require.False(t, res.Applied, "a live claim is left alone")
		require.Equal(t, StatusClaimed, res.Found.Status)
		require.True(t, res.Found.Due().Equal(lcT0.Add(lcTTL)), "due at the claim's expiry")
		seen := lcReq(keys[1], "B", 1, 1, lcT0.Add(lcTTL))
		seen.Seen = res.Found.Claim // the state it judged the item by
		done, err = lcCompleteOnly(ctx, l, seen)
		require.NoError(t, err)
		require.True(t, done, "an expired claim does not hold the item")
		err = l.Complete(ctx, c, lcT0)
		require.ErrorIs(t, err, ErrClaimLost)
		var lost *ClaimLostError
		require.ErrorAs(t, err, &lost)
		require.Equal(t, StatusDone, lost.Found.Status, "the claimer learns what it found")

		// Many goroutines, one winner per item.
		ddbtest.Need(t, ddbtest.CapConcurrentIsolation)
		const racers = 12
		var wg sync.WaitGroup
		wins := make([]int, len(keys))
		var mu sync.Mutex
		errs := make(chan error, racers*len(keys))
		start := make(chan struct{})
		for g := range racers {
			wg.Go(func() {
				<-start
				for i := 2; i < len(keys); i++ {
					done, err := lcCompleteOnly(ctx, l, lcReq(keys[i], "G"+strconv.Itoa(g), g, 1, lcT0))
					if err != nil {
						errs <- err
						continue
					}
					if done {
						mu.Lock()
						wins[i]++
						mu.Unlock()
					}
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, []int{0, 0, 1, 1, 1, 1}, wins)
	})

	t.Run("batched claims skip taken items", func(t *testing.T) {
		l, seed := newLedger(t)
		keys := lcKeys(0, 60)
		seed(keys...)
		// By someone else: 0-9 claimed, 10-19 done; 20-24 claimed earlier but expired by now.
		for i := range 10 {
			lcMustClaim(t, l, lcReq(keys[i], "X", 1, 1, lcT0), 1)
			done, err := lcCompleteOnly(ctx, l, lcReq(keys[10+i], "Y", 2, 1, lcT0))
			require.NoError(t, err)
			require.True(t, done)
		}
		for i := 20; i < 25; i++ {
			lcMustClaim(t, l, lcReq(keys[i], "X", 1, 1, lcT0.Add(-2*lcTTL)), 1)
		}
		// Interleave taken and free items so every transaction meets both.
		order := rand.Perm(len(keys))
		reqs := make([]ClaimRequest, len(keys))
		for j, i := range order {
			reqs[j] = lcReq(keys[i], "Z", 0, 1, lcT0)
		}
		outs, err := l.Claim(ctx, reqs)
		require.NoError(t, err)
		require.Len(t, outs, len(reqs))
		claimed := 0
		for j, i := range order {
			o := outs[j]
			switch {
			case i < 10:
				require.False(t, o.Claimed, "item %d", i)
				require.Equal(t, StatusClaimed, o.Found.Status, "item %d", i)
			case i < 20:
				require.False(t, o.Claimed, "item %d", i)
				require.Equal(t, StatusDone, o.Found.Status, "item %d", i)
			default:
				require.True(t, o.Claimed, "item %d: %q", i, o.Found.Status)
				want := 1
				if i < 25 {
					want = 2
				}
				require.Equal(t, Claim{Key: keys[i], ID: o.Claim.ID, Owner: "Z", Slot: 0, Token: 1, Attempt: want, Until: reqs[j].Until}, o.Claim, "item %d", i)
				claimed++
				// The claim's attempt number is the stored one: it fences.
				require.NoError(t, l.Complete(ctx, o.Claim, lcT0), "item %d", i)
			}
		}
		require.Equal(t, 40, claimed)

		// A key asked for twice in one call is claimed once.
		dup := lcKey(100)
		seed(dup)
		outs, err = l.Claim(ctx, []ClaimRequest{lcReq(dup, "Z", 0, 1, lcT0), lcReq(keys[0], "Z", 0, 1, lcT0), lcReq(dup, "Z", 0, 1, lcT0)})
		require.NoError(t, err)
		require.True(t, outs[0].Claimed)
		require.False(t, outs[1].Claimed)
		require.False(t, outs[2].Claimed)
		require.Equal(t, StatusClaimed, outs[2].Found.Status)
	})

	t.Run("summarize", func(t *testing.T) {
		l, seed := newLedger(t)
		keys := lcKeys(0, 16)
		seed(keys...)
		claim := func(i int) Claim { return lcMustClaim(t, l, lcReq(keys[i], "A", 0, 1, lcT0), 1) }
		for i := range 3 { // 0-2 done
			require.NoError(t, l.Complete(ctx, claim(i), lcT0))
		}
		for i := 3; i < 5; i++ { // 3-4 failed
			require.NoError(t, l.DeadLetter(ctx, claim(i), "bad", lcT0))
		}
		for i := 5; i < 9; i++ { // 5-8 claimed
			claim(i)
		}
		for i := 9; i < 11; i++ { // 9-10 waiting for a retry; 11-15 untouched
			require.NoError(t, l.Retry(ctx, claim(i), "again", lcT0.Add(time.Hour)))
		}
		s, err := l.Summarize(ctx)
		require.NoError(t, err)
		require.Equal(t, Summary{Total: 16, Done: 3, Failed: 2, Claimed: 4, Pending: 7}, s)
	})

	t.Run("key types", func(t *testing.T) {
		bin := func(b ...byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: b} }
		str := func(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
		num := func(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }
		cases := []struct {
			name   string
			schema []ddbtest.Key
			keys   []Key
		}{
			{"S", []ddbtest.Key{{Name: "id", Type: "S"}}, []Key{{"id": str("a")}, {"id": str("a|1")}, {"id": str("S:1:a")}, {"id": str("ü#")}}},
			{"N", []ddbtest.Key{{Name: "n", Type: "N"}}, []Key{{"n": num("1")}, {"n": num("10")}, {"n": num("-1")}, {"n": num("0.5")}, {"n": num("123456789012345678901234567890")}}},
			{"B", []ddbtest.Key{{Name: "b", Type: "B"}}, []Key{{"b": bin(0xff)}, {"b": bin(0xff, 0x00)}, {"b": bin(0xfe, 0xff, 0x80, 'a')}, {"b": bin('a', 'b', 'c')}}},
			{"S+N", []ddbtest.Key{{Name: "pk", Type: "S"}, {Name: "sk", Type: "N"}}, []Key{
				{"pk": str("a"), "sk": num("1")}, {"pk": str("a"), "sk": num("2")}, {"pk": str("b"), "sk": num("1")}, {"pk": str("a|1"), "sk": num("1")},
			}},
			{"B+S", []ddbtest.Key{{Name: "pk", Type: "B"}, {Name: "sk", Type: "S"}}, []Key{
				{"pk": bin(0x00), "sk": str("x")}, {"pk": bin(0x00, 0x00), "sk": str("x")}, {"pk": bin(0x00), "sk": str("xx")},
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if tc.schema[0].Type == "B" {
					ddbtest.Need(t, ddbtest.CapBinaryKeySegments) // Summarize scans in segments
				}
				l, seed := newLedger(t, tc.schema...)
				seed(tc.keys...)
				reqs := make([]ClaimRequest, len(tc.keys))
				for i, k := range tc.keys {
					reqs[i] = lcReq(k, "A", 0, 1, lcT0)
				}
				outs, err := l.Claim(ctx, reqs)
				require.NoError(t, err)
				for i, o := range outs {
					require.True(t, o.Claimed, "key %d: distinct keys never share state", i)
				}
				require.NoError(t, l.Complete(ctx, outs[0].Claim, lcT0))
				require.NoError(t, l.DeadLetter(ctx, outs[1].Claim, "bad key", lcT0))
				require.Equal(t, StatusDone, lcState(t, l, tc.keys[0]).Status)
				require.Equal(t, StatusFailed, lcState(t, l, tc.keys[1]).Status)
				for _, k := range tc.keys[2:] {
					require.Equal(t, StatusClaimed, lcState(t, l, k).Status)
				}
				var dls []DeadLetter
				require.NoError(t, l.DeadLetters(ctx, func(d DeadLetter) error { dls = append(dls, d); return nil }))
				require.Len(t, dls, 1)
				require.Equal(t, tc.keys[1], dls[0].Key, "dead letters report the item key as it is")
				s, err := l.Summarize(ctx)
				require.NoError(t, err)
				require.Equal(t, Summary{Total: int64(len(tc.keys)), Done: 1, Failed: 1, Claimed: int64(len(tc.keys) - 2)}, s)
			})
		}
	})
}

// lcKeyString is a readable, canonical form of an item key for maps in tests.
func lcKeyString(k Key) string {
	s, err := encodeKeyParts(k, keysSorted(k))
	if err != nil {
		panic(err)
	}
	return s
}

// lcSourceTable creates a source table with the given key schema (id S by default).
// lcOpts are the options every test ledger takes on the test's backend: transactions for batched
// writes where the backend lacks PartiQL conditions (moto).
func lcOpts(t testing.TB, more ...Option) []Option {
	if !ddbtest.Has(t, ddbtest.CapPartiQLConditions) {
		more = append(more, WithoutStatementBatches())
	}
	return more
}

func lcSourceTable(t *testing.T, schema ...ddbtest.Key) (*dynamodb.Client, string, []string) {
	t.Helper()
	if len(schema) == 0 {
		schema = []ddbtest.Key{{Name: "id", Type: "S"}}
	}
	db := ddbtest.Client(t)
	source := ddbtest.CreateTable(t, db, schema[0], schema[1:]...)
	names := make([]string, len(schema))
	for i, k := range schema {
		names[i] = k.Name
	}
	return db, source, names
}

// lcLedgerTable creates a ledger table for the test.
func lcLedgerTable(t *testing.T, db *dynamodb.Client) string {
	t.Helper()
	name := ddbtest.TableName(t, "ledger")
	require.NoError(t, CreateLedgerTable(context.Background(), db, name))
	ddbtest.DeleteOnCleanup(t, db, name)
	return name
}

// lcSeeder returns a function that writes source items with the given keys and a payload.
func lcSeeder(t *testing.T, db *dynamodb.Client, table string) func(keys ...Key) {
	return func(keys ...Key) {
		t.Helper()
		ctx := context.Background()
		for start := 0; start < len(keys); start += 25 {
			var reqs []types.WriteRequest
			for _, k := range keys[start:min(start+25, len(keys))] {
				item := map[string]types.AttributeValue{"payload": &types.AttributeValueMemberS{Value: "p"}}
				for n, v := range k {
					item[n] = v
				}
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
			}
			for len(reqs) > 0 {
				out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
				require.NoError(t, err)
				reqs = out.UnprocessedItems[table]
			}
		}
	}
}

// lcScanAll reads a whole table (consistently), for before/after comparisons.
func lcScanAll(t *testing.T, db *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := db.Scan(context.Background(), in)
		require.NoError(t, err)
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// lcCompleteOnly is l.CompleteOnly's Applied.
func lcCompleteOnly(ctx context.Context, l Ledger, r ClaimRequest) (bool, error) {
	res, err := l.CompleteOnly(ctx, r)
	return res.Applied, err
}
