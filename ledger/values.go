package ledger

import (
	"encoding/base64"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// values are the values of one write, by symbol; the status values and the constants need not be
// given.
type values map[val]types.AttributeValue

var constants = values{
	vClaimed: attrS(string(StatusClaimed)), vRetry: attrS(string(StatusRetry)),
	vDone: attrS(string(StatusDone)), vFailed: attrS(string(StatusFailed)),
	vOne: attrN(1), vMinusOne: attrN(-1), vNone: attrS(""), vZero: attrN(0),
	// A write of a versioned ledger whose caller gave no version records that it is unknown.
	vVersion: attrS(unknownVersion),
}

// with sets s to x and returns v.
func (v values) with(s val, x types.AttributeValue) values {
	v[s] = x
	return v
}

// get is the value of s, a constant when v lacks it.
func (v values) get(s val) types.AttributeValue {
	if x, ok := v[s]; ok {
		return x
	}
	return constants[s]
}

func attrS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func attrN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func attrMillis(t time.Time) types.AttributeValue { return attrN(t.UnixMilli()) }

// dueAtOnce is the retry_at of a write at now that leaves an item due at once (a renew, a release,
// an undo): now less the skew, so every clock within the skew finds it due.
func (l *core) dueAtOnce(now time.Time) types.AttributeValue { return attrMillis(now.Add(-l.skew)) }

// fenceVals are the values of a fenced write under claim c.
func fenceVals(c Claim) values {
	v := values{vClaim: attrS(c.ID)}
	if c.Version != "" {
		v[vVersion] = attrS(c.Version)
	}
	return v
}

// requestVals are the values of a claim, complete-only or failure write of r. A request without
// an ID gets one here (see newID); callers that may repeat r set it first.
func (l *core) requestVals(r ClaimRequest) values {
	lv := l.leaseVals.of(r)
	now, until := attrMillis(r.Now), r.Until.Add(l.skew)
	vals := values{
		vOwner: lv.owner, vSlot: lv.slot, vToken: lv.token, vScope: lv.scope,
		vClaim: attrS(r.ID), vNow: now, vUntil: now,
	}
	if until.UnixMilli() != r.Now.UnixMilli() {
		vals[vUntil] = attrMillis(until)
	}
	if r.Version != "" {
		vals[vVersion] = attrS(r.Version)
	}
	vals[vPrev] = attrS(seenOrOwn(r)) // the complete-only writes' fence (seenState)
	if l.row.identVals != nil {
		l.row.identVals(r.Key, vals)
	}
	return vals
}

// seenOrOwn is what the complete-only writes require the item's claim id to be (seenState),
// when it has a state with one: the id the caller saw, or, when it saw no state, its own (which
// only its own earlier landing shows: an item that gained a state since is refused).
func seenOrOwn(r ClaimRequest) string {
	if r.Seen != "" {
		return r.Seen
	}
	return r.ID
}

// newID is a claim id: 96 random bits, 16 characters. Two claims never share one, so a row that
// shows it shows the write that set it.
func newID() string {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// withIDs returns a copy of reqs in which every request has an ID.
func withIDs(reqs []ClaimRequest) []ClaimRequest {
	out := slices.Clone(reqs)
	for i := range out {
		if out[i].ID == "" {
			out[i].ID = newID()
		}
	}
	return out
}

// truncateErrorText keeps the stored error under maxErrorText bytes of valid UTF-8.
func truncateErrorText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxErrorText {
		return s
	}
	const mark = " ...(truncated)"
	cut := maxErrorText - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
