package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/internal/ddbnum"
)

// Versions: an item's version is its content, every attribute but the ledger's. A versioned ledger
// (WithVersions) records on every write that finishes an item the version its caller handled
// (Claim.Version, ClaimRequest.Version), so that a worker following the table's stream can tell
// a new version of a finished item from one already handled: the item is due again exactly when
// the version of its current content differs from the recorded one, and Renew reopens it.

// unknownVersion is what a versioned ledger records when its caller gave no version: it matches
// no content, so the item's next change is handled.
const unknownVersion = "-"

// ContentVersion is the version of an item's content: a hash of every attribute but the
// inline ledger's own (its state and every attribute under its prefix; the table ledger's item
// has none), independent of attribute order, set
// member order and number spelling ("1.50" and "1.5" are one number, as DynamoDB stores them).
func (l ops) ContentVersion(item map[string]types.AttributeValue) string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(item)) {
		if l.core.prefix != "" && l.core.isLedgerAttr(name) { // the inline ledger's
			continue
		}
		writeCanonical(h, &types.AttributeValueMemberS{Value: name})
		writeCanonical(h, item[name])
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// Renew reopens a finished item for a new version of its content: done or failed, finished by
// the write whose claim id is prev (ItemState.Claim as the caller read it) -> retry, due now,
// attempts 0, under a new claim id, which it returns. "" when the item is no longer in that state
// (someone renewed or handled it since: read it again). Due now for every worker: the retry is
// due at now less the ledger's MaxClockSkew, so a worker whose clock is behind the renewer's by
// up to that claims it at once instead of finding it not yet due and waiting for its next pass.
// A versioned ledger only (WithVersions).
func (l ops) Renew(ctx context.Context, key Key, prev string, now time.Time) (string, error) {
	c := l.core
	if !c.versioned {
		return "", errors.New("dynapart: Renew needs a versioned ledger (ledger.WithVersions)")
	}
	rowKey, err := c.row.key(key)
	if err != nil {
		return "", err
	}
	id := newID()
	ok, err := c.renew(ctx, rowKey, values{vPrev: attrS(prev), vClaim: attrS(id), vNow: c.dueAtOnce(now)})
	if !ok {
		id = ""
	}
	return id, err
}

// renew sends OpRenew with vals; it reports whether it landed.
func (c *core) renew(ctx context.Context, rowKey Key, vals values) (bool, error) {
	in := c.input(OpRenew, rowKey, vals)
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err := c.update(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf) && ccf.Item != nil:
		// A repeat of a renew whose answer was lost finds its own claim id.
		return c.applied(OpRenew, ccf.Item, vals), nil
	case !errors.As(err, &ccf) && refused(err):
		return false, c.wrapErr("renew", c.row.table, err)
	}
	// Refused without the row's image, or no answer: the row says whether the renew landed.
	sctx, cancel := settleContext(ctx)
	defer cancel()
	row, rerr := c.readRow(sctx, "renew", rowKey)
	if rerr != nil {
		return false, c.wrapErr("renew", c.row.table, err)
	}
	return c.applied(OpRenew, row, vals), nil
}

// writeCanonical writes v to h in a form that is the same for equal values.
func writeCanonical(h interface{ Write([]byte) (int, error) }, v types.AttributeValue) {
	w := func(tag string, parts ...string) {
		_, _ = h.Write([]byte(tag))
		for _, p := range parts {
			_, _ = h.Write([]byte(strconv.Itoa(len(p)) + ":" + p))
		}
	}
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		w("S", x.Value)
	case *types.AttributeValueMemberN:
		w("N", numberForm(x.Value))
	case *types.AttributeValueMemberB:
		w("B", string(x.Value))
	case *types.AttributeValueMemberBOOL:
		w("BOOL", strconv.FormatBool(x.Value))
	case *types.AttributeValueMemberNULL:
		w("NULL")
	case *types.AttributeValueMemberSS:
		w("SS", sortedCopy(x.Value)...)
	case *types.AttributeValueMemberNS:
		ns := make([]string, len(x.Value))
		for i, n := range x.Value {
			ns[i] = numberForm(n)
		}
		w("NS", sortedCopy(ns)...)
	case *types.AttributeValueMemberBS:
		bs := make([]string, len(x.Value))
		for i, b := range x.Value {
			bs[i] = string(b)
		}
		w("BS", sortedCopy(bs)...)
	case *types.AttributeValueMemberL:
		w("L", strconv.Itoa(len(x.Value)))
		for _, e := range x.Value {
			writeCanonical(h, e)
		}
	case *types.AttributeValueMemberM:
		w("M", strconv.Itoa(len(x.Value)))
		for _, k := range slices.Sorted(maps.Keys(x.Value)) {
			w("K", k)
			writeCanonical(h, x.Value[k])
		}
	default:
		w("?")
	}
}

// numberForm is n in ddbnum.Canonical's one form per value; n itself when it does not parse.
func numberForm(n string) string {
	if c, err := ddbnum.Canonical(n); err == nil {
		return c
	}
	return n
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
