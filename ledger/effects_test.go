package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

// effectsEnv is a ledger over a fresh source table, behind a ddbfault client, and a second table
// for the writes to other items (key pk S).
type effectsEnv struct {
	l      Ledger
	fc     *ddbfault.Client
	raw    *dynamodb.Client
	source string
	other  string
	ledger string // the table ledger's table, "" for the inline ledger
}

func newEffectsEnv(t *testing.T, kind string) *effectsEnv {
	db, source, names := lcSourceTable(t)
	e := &effectsEnv{fc: ddbfault.New(db), raw: db, source: source, other: ddbtest.CreateTable(t, db, ddbtest.Key{Name: "pk", Type: "S"})}
	var err error
	if kind == "inline" {
		e.l, err = NewInline(e.fc, source, names, lcOpts(t)...)
	} else {
		e.ledger = lcLedgerTable(t, db)
		e.l, err = NewTable(e.fc, e.ledger, "job", source, names, lcOpts(t)...)
	}
	require.NoError(t, err)
	return e
}

func (e *effectsEnv) get(t *testing.T, table string, key Key) map[string]types.AttributeValue {
	t.Helper()
	return getItem(t, e.raw, table, key)
}

func numOf(item map[string]types.AttributeValue, name string) string {
	if n, ok := item[name].(*types.AttributeValueMemberN); ok {
		return n.Value
	}
	return ""
}

func otherKey(pk string) Key { return Key{"pk": &types.AttributeValueMemberS{Value: pk}} }

// eachKind runs f for both ledgers on each backend.
func eachKind(t *testing.T, f func(t *testing.T, kind string)) {
	ddbtest.ForEachBackend(t, func(t *testing.T, _ ddbtest.Backend) {
		for _, kind := range []string{"inline", "table"} {
			t.Run(kind, func(t *testing.T) { f(t, kind) })
		}
	})
}

// TestEffectsCommitWithTheCompletion: the item's update and writes to other items land with the
// completion; with the inline ledger an update of the item alone is the completion's own write.
func TestEffectsCommitWithTheCompletion(t *testing.T) {
	eachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		e := newEffectsEnv(t, kind)
		lcSeeder(t, e.raw, e.source)(lcKey(0), lcKey(1))
		c := lcMustClaim(t, e.l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1)
		before := e.fc.CallsByOp()
		eff := (&Effects{}).Item(Set("first", "Ada"), Add("n", 1), Remove("payload"))
		require.NoError(t, e.l.CompleteWith(ctx, c, lcT0, eff))
		calls := e.fc.CallsByOp()
		if kind == "inline" {
			require.Equal(t, before[ddbfault.OpUpdateItem]+1, calls[ddbfault.OpUpdateItem], "one UpdateItem")
			require.Equal(t, before[ddbfault.OpTransactWriteItems], calls[ddbfault.OpTransactWriteItems], "no transaction")
		} else {
			require.Equal(t, before[ddbfault.OpTransactWriteItems]+1, calls[ddbfault.OpTransactWriteItems], "one transaction")
		}
		item := e.get(t, e.source, lcKey(0))
		require.Equal(t, &types.AttributeValueMemberS{Value: "Ada"}, item["first"])
		require.Equal(t, "1", numOf(item, "n"))
		require.NotContains(t, item, "payload")
		require.Equal(t, StatusDone, lcState(t, e.l, lcKey(0)).Status)
		require.NoError(t, e.l.CompleteWith(ctx, c, lcT0, eff), "a repeat of the same commit is the same commit")
		require.Equal(t, "1", numOf(e.get(t, e.source, lcKey(0)), "n"), "applied once")

		c1 := lcMustClaim(t, e.l, lcReq(lcKey(1), "A", 0, 1, lcT0), 1)
		w := (&Effects{}).Item(Add("n", 1)).Update(e.other, otherKey("campaign"), Add("delivered", 1)).
			PutIfAbsent(e.other, map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "assignment-1"}})
		require.NoError(t, e.l.CompleteWith(ctx, c1, lcT0, w))
		require.Equal(t, "1", numOf(e.get(t, e.other, otherKey("campaign")), "delivered"))
		require.NotNil(t, e.get(t, e.other, otherKey("assignment-1")))
		require.Equal(t, "1", numOf(e.get(t, e.source, lcKey(1)), "n"))
		require.Equal(t, StatusDone, lcState(t, e.l, lcKey(1)).Status)
	})
}

// TestEffectsFailedConditionAppliesNothing: a put-if-absent of an existing row cancels the whole
// commit, names the write, and leaves the item claimed; a stale claim applies no effect.
func TestEffectsFailedConditionAppliesNothing(t *testing.T) {
	eachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		e := newEffectsEnv(t, kind)
		lcSeeder(t, e.raw, e.source)(lcKey(0), lcKey(1))
		row := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "once"}}
		c0 := lcMustClaim(t, e.l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1)
		require.NoError(t, e.l.CompleteWith(ctx, c0, lcT0, (&Effects{}).PutIfAbsent(e.other, row)))
		c1 := lcMustClaim(t, e.l, lcReq(lcKey(1), "A", 0, 1, lcT0), 1)
		eff := (&Effects{}).Item(Set("x", 1)).Update(e.other, otherKey("counter"), Add("n", 1)).PutIfAbsent(e.other, row)
		err := e.l.CompleteWith(ctx, c1, lcT0, eff)
		var ee *EffectError
		require.ErrorAs(t, err, &ee)
		require.ErrorIs(t, err, ErrEffectRefused)
		require.Equal(t, 1, ee.Write, "the put-if-absent is write 1")
		require.Nil(t, e.get(t, e.other, otherKey("counter")), "nothing of the commit applied")
		require.NotContains(t, e.get(t, e.source, lcKey(1)), "x")
		require.Equal(t, StatusClaimed, lcState(t, e.l, lcKey(1)).Status)

		stale := c1
		stale.ID = "stale"
		err = e.l.CompleteWith(ctx, stale, lcT0, (&Effects{}).Update(e.other, otherKey("counter"), Add("n", 1)))
		require.ErrorIs(t, err, ErrClaimLost)
		require.Nil(t, e.get(t, e.other, otherKey("counter")), "a lost claim applies no effect")
	})
}

// TestEffectsRefusedBeforeWriting: effects on a key or ledger attribute, on the item itself as
// another write, or on the ledger's table are refused with the attribute or write named, and
// nothing is written.
func TestEffectsRefusedBeforeWriting(t *testing.T) {
	for _, kind := range []string{"inline", "table"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			e := newEffectsEnv(t, kind)
			lcSeeder(t, e.raw, e.source)(lcKey(0))
			c := lcMustClaim(t, e.l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1)
			cases := []struct {
				eff  *Effects
				attr string
			}{
				{(&Effects{}).Item(Set("id", "other")), "id"},
				{(&Effects{}).Item(Set("x", 1), Set("x", 2)), "x"},
				{(&Effects{}).Update(e.source, lcKey(0), Set("y", 1)), ""},
				{(&Effects{}).Item(Set("bad", make(chan int))), "bad"},
				// Text that is not UTF-8: DynamoDB would store U+FFFD for its bad bytes.
				{(&Effects{}).Item(Set("summary", "h\xc3")), "summary"},
				{(&Effects{}).Item(Set("tags", map[string]any{"ok": []string{"a", "\xff"}})), "tags"},
				{(&Effects{}).Item(Add("n\xff", 1)), "n\xff"},
				{(&Effects{}).Update(e.other, otherKey("c\xff"), Add("n", 1)), ""},
				{(&Effects{}).PutIfAbsent(e.other, map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"},
					"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k\xc3": &types.AttributeValueMemberNULL{Value: true}}}}), ""},
				{(&Effects{}).Check(e.other, otherKey("c"), expression.Name("s").Equal(expression.Value("\xff"))), ""},
				{(&Effects{}).Check(e.other, otherKey("c"), expression.AttributeExists(expression.Name("s\xff"))), ""},
				{(&Effects{}).Update(e.other, otherKey("c")), ""}, // no change
				// An empty attribute name in a put's item, as in a change: DynamoDB refuses the
				// commit as a whole without saying which write.
				{(&Effects{}).Put(e.other, map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"},
					"": &types.AttributeValueMemberN{Value: "1"}}), ""},
				// An empty attribute name in a map, at any depth: DynamoDB refuses the write naming
				// only the value's placeholder (":0").
				{(&Effects{}).Item(Set("m", map[string]any{"": 1})), "m"},
				{(&Effects{}).Item(Set("l", []any{map[string]any{"a": map[string]any{"": "x"}}})), "l"},
				{(&Effects{}).Update(e.other, otherKey("c"), Set("m", map[string]any{"": 1})), "m"},
				{(&Effects{}).Put(e.other, map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"},
					"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"": &types.AttributeValueMemberNULL{Value: true}}}}), ""},
				{(&Effects{}).Check(e.other, otherKey("c"), expression.Name("s").Equal(expression.Value(map[string]any{"": 1}))), ""},
				// Numbers and sets DynamoDB does not store, refused by it naming only the placeholder.
				{(&Effects{}).Item(Set("n", &types.AttributeValueMemberN{Value: "abc"})), "n"},
				{(&Effects{}).Item(Set("tags", &types.AttributeValueMemberSS{})), "tags"},
				{(&Effects{}).Item(Add("ns", &types.AttributeValueMemberNS{Value: []string{"1", "1.0"}})), "ns"},
				{(&Effects{}).Update(e.other, otherKey("c"), Set("bs", &types.AttributeValueMemberBS{Value: [][]byte{{1}, {1}}})), "bs"},
				{(&Effects{}).Put(e.other, map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"},
					"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberNS{Value: []string{"1e400"}}}}}), ""},
			}
			if kind == "inline" {
				cases = append(cases, struct {
					eff  *Effects
					attr string
				}{(&Effects{}).Item(Set("dp_status", "done")), "dp_status"})
			} else {
				cases = append(cases, struct {
					eff  *Effects
					attr string
				}{(&Effects{}).Update(e.ledger, otherKey("x"), Set("y", 1)), ""})
			}
			before := e.fc.Calls()
			for i, tc := range cases {
				err := e.l.CompleteWith(ctx, c, lcT0, tc.eff)
				var ee *EffectError
				require.ErrorAs(t, err, &ee, "case %d", i)
				require.Equal(t, tc.attr, ee.Attr, "case %d: %v", i, err)
			}
			require.Equal(t, before, e.fc.Calls(), "nothing sent")
			require.Equal(t, StatusClaimed, lcState(t, e.l, lcKey(0)).Status)
		})
	}
}

// TestEffectsLostAnswerAppliedOnce: a commit whose answer is lost is sent again with the same
// ClientRequestToken (or, merged, settled by its claim id): the effects land once.
func TestEffectsLostAnswerAppliedOnce(t *testing.T) {
	for _, kind := range []ddbfault.Kind{ddbfault.LostAnswer, ddbfault.LostAnswerRetried, ddbfault.DelayedAnswer} {
		for _, ledger := range []string{"inline", "table"} {
			t.Run(fmt.Sprintf("%s/%s", ledger, kind), func(t *testing.T) {
				ctx := context.Background()
				e := newEffectsEnv(t, ledger)
				lcSeeder(t, e.raw, e.source)(lcKey(0))
				c := lcMustClaim(t, e.l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1)
				e.fc.Inject(ddbfault.Fault{Kind: kind, At: 1, Ops: []string{ddbfault.OpTransactWriteItems}})
				err := e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).Item(Add("n", 1)).Update(e.other, otherKey("c"), Add("n", 1)))
				_, hit := e.fc.Injected()
				require.True(t, hit)
				require.NoError(t, err, "settled: the commit landed")
				require.Equal(t, "1", numOf(e.get(t, e.other, otherKey("c")), "n"))
				require.Equal(t, "1", numOf(e.get(t, e.source, lcKey(0)), "n"))
				require.Equal(t, StatusDone, lcState(t, e.l, lcKey(0)).Status)
			})
		}
	}
}

// TestEffectsHotCounter: many items adding to one counter conflict in DynamoDB; every conflict is
// retried, none counted as a failed attempt, and the counter ends exact.
func TestEffectsHotCounter(t *testing.T) {
	ddbtest.Need(t, ddbtest.CapConcurrentIsolation)
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	const n = 40
	keys := lcKeys(0, n)
	lcSeeder(t, e.raw, e.source)(keys...)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			o := lcClaim(t, e.l, lcReq(keys[i], "A", 0, 1, lcT0))
			eff := (&Effects{}).Item(Add("n", 1)).Update(e.other, otherKey("hot"), Add("n", 1))
			errs <- e.l.CompleteWith(ctx, o.Claim, lcT0, eff)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, fmt.Sprint(n), numOf(e.get(t, e.other, otherKey("hot")), "n"))
}

// TestEffectsCompleteOnly: complete-only with an update of the item is one write; with a write to
// another table a transaction; a live claim of another group applies nothing.
func TestEffectsCompleteOnly(t *testing.T) {
	eachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		e := newEffectsEnv(t, kind)
		lcSeeder(t, e.raw, e.source)(lcKey(0), lcKey(1), lcKey(2))
		r := lcReq(lcKey(0), "A", 0, 1, lcT0)
		r.Fresh = true
		res, err := e.l.CompleteOnlyWith(ctx, r, (&Effects{}).Item(Set("v", 2)))
		require.NoError(t, err)
		require.True(t, res.Applied)
		require.Equal(t, "2", numOf(e.get(t, e.source, lcKey(0)), "v"))

		res, err = e.l.CompleteOnlyWith(ctx, lcReq(lcKey(1), "A", 0, 1, lcT0), (&Effects{}).Update(e.other, otherKey("k"), Add("n", 5)))
		require.NoError(t, err)
		require.True(t, res.Applied)
		require.Equal(t, "5", numOf(e.get(t, e.other, otherKey("k")), "n"))

		lcMustClaim(t, e.l, lcReq(lcKey(2), "B", 1, 1, lcT0), 1)
		res, err = e.l.CompleteOnlyWith(ctx, lcReq(lcKey(2), "A", 0, 1, lcT0), (&Effects{}).Update(e.other, otherKey("k"), Add("n", 5)))
		require.NoError(t, err)
		require.False(t, res.Applied, "a live claim is left alone")
		require.Equal(t, "5", numOf(e.get(t, e.other, otherKey("k")), "n"), "and nothing of the effects applied")
	})
}

// TestEffectsCheck: a check that fails cancels the commit and names the write.
func TestEffectsCheck(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	lcSeeder(t, e.raw, e.source)(lcKey(0))
	c := lcMustClaim(t, e.l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1)
	err := e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).Check(e.other, otherKey("gate"), expression.AttributeExists(expression.Name("open"))))
	var ee *EffectError
	require.True(t, errors.As(err, &ee), "%v", err)
	require.Equal(t, 0, ee.Write)
	require.Equal(t, StatusClaimed, lcState(t, e.l, lcKey(0)).Status)
}

// TestEffectsOnRemovedAttributeRefused: an item change of an attribute the inline ledger removes
// when the item is finished (WithRemoveOnDone: index mode's shard attribute) is refused before
// anything is written, naming it; DynamoDB refused the completion as "two document paths overlap"
// after the handler ran. Another item may still set it.
func TestEffectsOnRemovedAttributeRefused(t *testing.T) {
	ctx := context.Background()
	db, source, names := lcSourceTable(t)
	fc := ddbfault.New(db)
	l, err := NewInline(fc, source, names, append(lcOpts(t), WithRemoveOnDone("shard"))...)
	require.NoError(t, err)
	lcSeeder(t, db, source)(lcKey(0), lcKey(1))
	c := lcMustClaim(t, l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1)
	before := fc.Calls()
	for _, ch := range []Change{Remove("shard"), Set("shard", 3)} {
		err := l.CompleteWith(ctx, c, lcT0, (&Effects{}).Item(ch))
		var ee *EffectError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, "shard", ee.Attr, "%v", err)
	}
	require.Equal(t, before, fc.Calls(), "nothing sent")
	require.NoError(t, l.CompleteWith(ctx, c, lcT0, (&Effects{}).Update(source, lcKey(1), Set("shard", 3))))
}
