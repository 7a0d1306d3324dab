package worker

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// This file is the machinery both ledgers share: the conditional expressions of every transition,
// batched claims with cancellation-reason handling, the canonical key encoding, scans and errors.
// The two ledgers differ only in where the state row lives (the item itself, or a row of the
// ledger table) and in how they count and list items.

// LedgerClient is every DynamoDB call the ledgers make; any *dynamodb.Client fits, and tests wrap
// it to count or fail calls. When the client also has BatchGetItem (a *dynamodb.Client does), a
// batched claim reads its attempt numbers back in one call instead of one GetItem per item.
type LedgerClient interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// ledgerBatchGetter is the optional fast path for reading a batch's claims back.
type ledgerBatchGetter interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// ErrLedgerTableSchema means an existing ledger table does not have the key the table ledger
// needs (pk, a string, as its only key).
var ErrLedgerTableSchema = errors.New("dynapart: ledger table has the wrong key schema")

const (
	// claimBatchSize is the most items one TransactWriteItems claims.
	claimBatchSize = 25
	// claimConflictRounds bounds the transaction retries after conflicts; the items still left
	// are then claimed one UpdateItem at a time.
	claimConflictRounds = 4
	// maxErrorText bounds the stored error text (bytes).
	maxErrorText = 1024
	// summarizeSegments is the parallel scan width of Summarize and DeadLetters.
	summarizeSegments = 4
	// maxLedgerPK is DynamoDB's limit for a partition key (bytes); longer encodings are hashed.
	maxLedgerPK = 2048
)

// ledgerRow says where an item's state row lives and what a claim writes besides the state.
type ledgerRow struct {
	// table is the table the state is written to.
	table string
	// key returns the state row's primary key for an item key.
	key func(Key) (Key, error)
	// keyAttrs are the state row's key attribute names (to match BatchGetItem results).
	keyAttrs []string
	// exists, when set, is the attribute that must exist for any write: the inline ledger never
	// creates an item.
	exists string
	// claimSet is more SET clauses (", #a = :a") for claims and complete-only writes, claimVals
	// adds their values and extraNames their placeholders: the table ledger records the job, the
	// source table and the item key on its row.
	claimSet   string
	claimVals  func(itemKey Key, vals map[string]types.AttributeValue)
	extraNames map[string]string
	// removeOnDone are attributes removed when the item is done or failed.
	removeOnDone []string
}

// stateAttrs are the names of the state attributes.
type stateAttrs struct {
	status, owner, slot, token, claimUntil, attempts, retryAt, error, doneAt, failedAt string
	scope                                                                              string
}

func newStateAttrs(prefix string) stateAttrs {
	return stateAttrs{
		status: prefix + "status", owner: prefix + "owner", slot: prefix + "slot", token: prefix + "token",
		claimUntil: prefix + "claim_until", attempts: prefix + "attempts", retryAt: prefix + "retry_at",
		error: prefix + "error", doneAt: prefix + "done_at", failedAt: prefix + "failed_at",
		scope: prefix + "scope",
	}
}

func (a stateAttrs) all() []string {
	return []string{a.status, a.owner, a.slot, a.token, a.claimUntil, a.attempts, a.retryAt, a.error, a.doneAt, a.failedAt, a.scope}
}

// ledgerExprs are one ledger's update and condition expressions, built once.
type ledgerExprs struct {
	claimCond, claimUpdate               string
	fenceCond                            string // the caller's claim is current
	completeUpdate                       string
	retryUpdate, deadUpdate, releaseUpd  string
	completeOnlyCond, completeOnlyUpdate string
}

// ledgerCore implements the transitions for both ledgers.
type ledgerCore struct {
	db       LedgerClient
	name     string // "inline ledger" or "table ledger", for errors
	keyAttrs []string
	attrs    stateAttrs
	row      ledgerRow
	names    map[string]string // placeholder -> attribute name
	x        ledgerExprs
	// placeholders caches the placeholders each of x's expressions uses.
	placeholders map[string][]string

	wcuBits      atomic.Uint64 // float64 bits
	condFailures atomic.Int64
}

func newLedgerCore(db LedgerClient, name string, keyAttrs []string, attrs stateAttrs, row ledgerRow) (*ledgerCore, error) {
	if db == nil {
		return nil, fmt.Errorf("dynapart: %s: nil DynamoDB client", name)
	}
	if row.table == "" {
		return nil, fmt.Errorf("dynapart: %s: empty table name", name)
	}
	if len(keyAttrs) == 0 || len(keyAttrs) > 2 {
		return nil, fmt.Errorf("dynapart: %s: want 1 or 2 key attributes, got %d", name, len(keyAttrs))
	}
	seen := map[string]bool{}
	for _, k := range keyAttrs {
		if k == "" || seen[k] {
			return nil, fmt.Errorf("dynapart: %s: key attributes %q: empty or repeated name", name, keyAttrs)
		}
		seen[k] = true
	}
	l := &ledgerCore{db: db, name: name, keyAttrs: append([]string(nil), keyAttrs...), attrs: attrs, row: row}
	l.names = map[string]string{
		"#status": attrs.status, "#owner": attrs.owner, "#slot": attrs.slot, "#token": attrs.token,
		"#claimUntil": attrs.claimUntil, "#attempts": attrs.attempts, "#retryAt": attrs.retryAt,
		"#error": attrs.error, "#doneAt": attrs.doneAt, "#failedAt": attrs.failedAt, "#scope": attrs.scope,
	}
	for p, n := range row.extraNames {
		l.names[p] = n
	}
	exists := ""
	if row.exists != "" {
		l.names["#exists"] = row.exists
		exists = "attribute_exists(#exists) AND "
	}
	rm := ""
	for i, a := range row.removeOnDone {
		p := "#rm" + strconv.Itoa(i)
		l.names[p] = a
		rm += ", " + p
	}
	extra := row.claimSet
	l.x = ledgerExprs{
		// Not done, not failed, and: no state, a retry that is due, or a claim that expired or
		// was made under an older lease token of the caller's slot in the caller's scope (tokens
		// count per group and lease table: another group's token says nothing about this one).
		claimCond: exists + "(attribute_not_exists(#status)" +
			" OR (#status = :retry AND (attribute_not_exists(#retryAt) OR #retryAt <= :now))" +
			" OR (#status = :claimed AND (attribute_not_exists(#claimUntil) OR #claimUntil <= :now" +
			" OR (#slot = :slot AND #token < :token AND #scope = :scope))))",
		claimUpdate: "SET #status = :claimed, #owner = :owner, #slot = :slot, #token = :token, #scope = :scope, #claimUntil = :until" +
			extra + " REMOVE #retryAt ADD #attempts :one",
		fenceCond:        exists + "#status = :claimed AND #owner = :owner AND #slot = :slot AND #token = :token AND #attempts = :attempt",
		completeUpdate:   "SET #status = :done, #doneAt = :now REMOVE #claimUntil, #retryAt" + rm,
		retryUpdate:      "SET #status = :retry, #retryAt = :retryAt, #error = :error REMOVE #claimUntil",
		deadUpdate:       "SET #status = :failed, #error = :error, #failedAt = :now REMOVE #claimUntil, #retryAt" + rm,
		releaseUpd:       "SET #status = :retry, #retryAt = :now REMOVE #claimUntil ADD #attempts :minusOne",
		completeOnlyCond: exists + "(attribute_not_exists(#status) OR NOT (#status IN (:done, :failed)))",
		completeOnlyUpdate: "SET #status = :done, #owner = :owner, #slot = :slot, #token = :token, #doneAt = :now" +
			extra + " REMOVE #claimUntil, #retryAt" + rm + " ADD #attempts :one",
	}
	l.placeholders = map[string][]string{}
	for _, e := range []string{l.x.claimCond, l.x.claimUpdate, l.x.fenceCond, l.x.completeUpdate, l.x.retryUpdate,
		l.x.deadUpdate, l.x.releaseUpd, l.x.completeOnlyCond, l.x.completeOnlyUpdate} {
		l.placeholders[e] = ledgerPlaceholderRE.FindAllString(e, -1)
	}
	return l, nil
}

// ---- expressions ----

var ledgerPlaceholderRE = regexp.MustCompile(`[#:][A-Za-z0-9]+`)

// exprInput returns the names and values an operation's expressions use, out of the ledger's
// placeholders and the values given: DynamoDB rejects unused ones.
func (l *ledgerCore) exprInput(vals map[string]types.AttributeValue, exprs ...string) (map[string]string, map[string]types.AttributeValue) {
	names := map[string]string{}
	used := map[string]types.AttributeValue{}
	for _, e := range exprs {
		ps, ok := l.placeholders[e]
		if !ok {
			ps = ledgerPlaceholderRE.FindAllString(e, -1)
		}
		for _, p := range ps {
			if p[0] == '#' {
				names[p] = l.names[p]
			} else if v, ok := vals[p]; ok {
				used[p] = v
			}
		}
	}
	if len(used) == 0 {
		used = nil
	}
	return names, used
}

func ledgerS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func ledgerN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func ledgerMillis(t time.Time) types.AttributeValue { return ledgerN(t.UnixMilli()) }

func fenceVals(c Claim) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		":claimed": ledgerS(string(StatusClaimed)), ":owner": ledgerS(c.Owner), ":slot": ledgerN(int64(c.Slot)),
		":token": ledgerN(c.Token), ":attempt": ledgerN(int64(c.Attempt)),
	}
}

func (l *ledgerCore) claimRequestVals(r ClaimRequest) map[string]types.AttributeValue {
	vals := map[string]types.AttributeValue{
		":claimed": ledgerS(string(StatusClaimed)), ":retry": ledgerS(string(StatusRetry)),
		":done": ledgerS(string(StatusDone)), ":failed": ledgerS(string(StatusFailed)),
		":owner": ledgerS(r.Owner), ":slot": ledgerN(int64(r.Slot)), ":token": ledgerN(r.Token), ":scope": ledgerS(r.Scope),
		":now": ledgerMillis(r.Now), ":until": ledgerMillis(r.Until), ":one": ledgerN(1),
	}
	if l.row.claimVals != nil {
		l.row.claimVals(r.Key, vals)
	}
	return vals
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

// ---- claims ----

func (l *ledgerCore) claim(ctx context.Context, reqs []ClaimRequest) ([]ClaimOutcome, error) {
	outs := make([]ClaimOutcome, len(reqs))
	rowKeys := make([]Key, len(reqs))
	first := make(map[string]int, len(reqs))
	dupOf := map[int]int{}
	todo := make([]int, 0, len(reqs))
	for i, r := range reqs {
		k, err := l.row.key(r.Key)
		if err != nil {
			return nil, err
		}
		rowKeys[i] = k
		id := l.rowID(k)
		if j, ok := first[id]; ok {
			dupOf[i] = j
			continue
		}
		first[id] = i
		todo = append(todo, i)
	}
	for start := 0; start < len(todo); start += claimBatchSize {
		chunk := todo[start:min(start+claimBatchSize, len(todo))]
		if err := l.claimChunk(ctx, reqs, rowKeys, chunk, outs); err != nil {
			return nil, err
		}
	}
	// A key asked for twice is claimed once; the repeat reports the state it found.
	for i, j := range dupOf {
		if outs[j].Claimed {
			outs[i] = ClaimOutcome{Status: StatusClaimed}
		} else {
			outs[i] = outs[j]
		}
	}
	return outs, nil
}

// claimChunk claims up to 25 items in one transaction. A cancelled transaction names, per item,
// why: items whose condition failed are reported with the state they hold and dropped; the rest
// (cancelled only because another item failed, or conflicting with another transaction) are
// tried again. After claimConflictRounds conflicts the remaining items are claimed one by one.
func (l *ledgerCore) claimChunk(ctx context.Context, reqs []ClaimRequest, rowKeys []Key, chunk []int, outs []ClaimOutcome) error {
	pending := chunk
	conflicts := 0
	for len(pending) > 0 {
		if len(pending) == 1 || conflicts >= claimConflictRounds {
			for _, i := range pending {
				o, err := l.claimOne(ctx, reqs[i], rowKeys[i])
				if err != nil {
					return err
				}
				outs[i] = o
			}
			return nil
		}
		items := make([]types.TransactWriteItem, len(pending))
		for j, i := range pending {
			names, vals := l.exprInput(l.claimRequestVals(reqs[i]), l.x.claimCond, l.x.claimUpdate)
			items[j] = types.TransactWriteItem{Update: &types.Update{
				TableName: aws.String(l.row.table), Key: rowKeys[i],
				ConditionExpression: aws.String(l.x.claimCond), UpdateExpression: aws.String(l.x.claimUpdate),
				ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}}
		}
		out, err := l.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: items, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		})
		if err == nil {
			for _, c := range out.ConsumedCapacity {
				l.addWCU(&c)
			}
			if rerr := l.readBackClaims(ctx, reqs, rowKeys, pending, outs); rerr != nil {
				// The claims landed but their attempt numbers are unknown: give them back, so
				// they use up no attempt.
				sctx, cancel := settleContext(ctx)
				l.unclaimAll(sctx, reqs, rowKeys, pending)
				cancel()
				return rerr
			}
			return nil
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			var tc *types.TransactionConflictException
			if errors.As(err, &tc) {
				conflicts++
				if err := ledgerBackoff(ctx, conflicts); err != nil {
					return err
				}
				continue
			}
			if !refused(err) {
				// Unknown outcome: the transaction is all or nothing; undo whatever landed.
				sctx, cancel := settleContext(ctx)
				l.unclaimAll(sctx, reqs, rowKeys, pending)
				cancel()
			}
			return l.wrapErr("claim (transaction)", l.row.table, err)
		}
		if len(tce.CancellationReasons) != len(pending) {
			// No usable reasons: let single writes sort the items out.
			conflicts = claimConflictRounds
			continue
		}
		var again []int
		conflicted := false
		for j, reason := range tce.CancellationReasons {
			i := pending[j]
			switch code := aws.ToString(reason.Code); code {
			case "ConditionalCheckFailed":
				l.condFailures.Add(1)
				o, err := l.outcomeOfRefused(ctx, reqs[i], rowKeys[i], reason.Item)
				if err != nil {
					return err
				}
				outs[i] = o
			case "", "None":
				again = append(again, i)
			case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
				again = append(again, i)
				conflicted = true
			case "ValidationError":
				// This item cannot take the write (e.g. the inline ledger's attributes would push
				// it past 400 KB): reported on its own, the others are tried again.
				outs[i] = ClaimOutcome{Err: fmt.Errorf("%w: %s", ErrUnprocessable, aws.ToString(reason.Message))}
			default:
				return l.wrapErr("claim (transaction)", l.row.table,
					fmt.Errorf("item %d cancelled with %s: %s: %w", j, code, aws.ToString(reason.Message), err))
			}
		}
		if len(again) == len(pending) && !conflicted {
			// Cancelled with no reason at all: do not loop on it.
			conflicted = true
		}
		pending = again
		if conflicted {
			conflicts++
			if err := ledgerBackoff(ctx, conflicts); err != nil {
				return err
			}
		}
	}
	return nil
}

// claimOne claims one item with one UpdateItem and reads the new attempt number back.
func (l *ledgerCore) claimOne(ctx context.Context, r ClaimRequest, rowKey Key) (ClaimOutcome, error) {
	names, vals := l.exprInput(l.claimRequestVals(r), l.x.claimCond, l.x.claimUpdate)
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(l.row.table), Key: rowKey,
		ConditionExpression: aws.String(l.x.claimCond), UpdateExpression: aws.String(l.x.claimUpdate),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	out, err := l.update(ctx, in)
	if err == nil {
		return ClaimOutcome{Claimed: true, Claim: Claim{
			Key: r.Key, Owner: r.Owner, Slot: r.Slot, Token: r.Token, Until: r.Until,
			Attempt: int(ledgerNum(out.Attributes[l.attrs.attempts])),
		}}, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return l.outcomeOfRefused(ctx, r, rowKey, ccf.Item)
	}
	werr := l.wrapErr("claim", l.row.table, err)
	if refused(err) {
		return ClaimOutcome{}, werr
	}
	// The write may have landed: settle it, so that a claim never learned of uses up no attempt.
	sctx, cancel := settleContext(ctx)
	defer cancel()
	return l.settleClaim(sctx, r, rowKey, werr)
}

// update runs one conditional UpdateItem. It counts capacity and condition failures, and tries
// again (a few times, with backoff) when the item was locked by a transaction in flight: the
// outcome of such a write is known (nothing was written), so trying again is safe.
func (l *ledgerCore) update(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	for conflicts := 0; ; conflicts++ {
		out, err := l.db.UpdateItem(ctx, in)
		if err == nil {
			l.addWCU(out.ConsumedCapacity)
			return out, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			l.condFailures.Add(1)
			return nil, err
		}
		var tc *types.TransactionConflictException
		if !errors.As(err, &tc) || conflicts >= claimConflictRounds {
			return nil, err
		}
		if err := ledgerBackoff(ctx, conflicts+1); err != nil {
			return nil, err
		}
	}
}

// outcomeFromOld tells why a claim's condition failed from the item as it was (ALL_OLD). An item
// that shows the caller's own claim (the same owner, slot, token and expiry: a write that
// succeeded but whose answer was lost and retried) is the caller's. No item at all (the inline
// ledger's item was deleted) is reported as pending, not claimed: there is nothing to do.
func (l *ledgerCore) outcomeFromOld(r ClaimRequest, old map[string]types.AttributeValue) ClaimOutcome {
	if len(old) == 0 {
		return ClaimOutcome{Status: StatusPending}
	}
	st := l.decodeState(old)
	if l.ownsClaim(r, st) {
		return ClaimOutcome{Claimed: true, Claim: Claim{Key: r.Key, Owner: r.Owner, Slot: r.Slot, Token: r.Token, Until: r.Until, Attempt: st.Attempts}}
	}
	switch st.Status {
	case StatusDone, StatusFailed, StatusClaimed, StatusRetry:
		return ClaimOutcome{Status: st.Status}
	default:
		// A state the claim condition does not know: someone else's business; look again later.
		return ClaimOutcome{Status: StatusClaimed}
	}
}

func (l *ledgerCore) ownsClaim(r ClaimRequest, st ItemState) bool {
	return st.Status == StatusClaimed && st.Owner == r.Owner && st.Slot == r.Slot && st.Token == r.Token &&
		st.ClaimUntil.UnixMilli() == r.Until.UnixMilli()
}

// readBackClaims learns the attempt numbers of a transaction's claims, which TransactWriteItems
// does not return, with a consistent read. A row that no longer shows the caller's claim was
// taken over in between (possible only once the claim expired, or by a newer lease token): it is
// reported not claimed, so the attempt number a Claim carries always equals the stored one.
func (l *ledgerCore) readBackClaims(ctx context.Context, reqs []ClaimRequest, rowKeys []Key, idxs []int, outs []ClaimOutcome) error {
	rows, err := l.readRows(ctx, rowKeys, idxs)
	if err != nil {
		return err
	}
	for _, i := range idxs {
		r := reqs[i]
		row := rows[l.rowID(rowKeys[i])]
		st := l.decodeState(row)
		if l.ownsClaim(r, st) {
			outs[i] = ClaimOutcome{Claimed: true, Claim: Claim{Key: r.Key, Owner: r.Owner, Slot: r.Slot, Token: r.Token, Until: r.Until, Attempt: st.Attempts}}
			continue
		}
		outs[i] = l.outcomeFromOld(r, row)
		outs[i].Claimed = false
	}
	return nil
}

// readRows reads state rows by consistent read: one BatchGetItem when the client has it, else
// GetItem calls (up to 8 at a time). The result is keyed by rowID.
func (l *ledgerCore) readRows(ctx context.Context, rowKeys []Key, idxs []int) (map[string]map[string]types.AttributeValue, error) {
	proj := append(append([]string{}, l.row.keyAttrs...), l.attrs.status, l.attrs.owner, l.attrs.slot, l.attrs.token, l.attrs.claimUntil, l.attrs.attempts)
	projExpr, names := ledgerProjection(proj)
	rows := make(map[string]map[string]types.AttributeValue, len(idxs))
	if bg, ok := l.db.(ledgerBatchGetter); ok {
		keys := make([]map[string]types.AttributeValue, len(idxs))
		for j, i := range idxs {
			keys[j] = rowKeys[i]
		}
		req := map[string]types.KeysAndAttributes{l.row.table: {
			Keys: keys, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String(projExpr), ExpressionAttributeNames: names,
		}}
		for round := 0; len(req) > 0; round++ {
			if round > 0 {
				if err := ledgerBackoff(ctx, min(round, 6)); err != nil {
					return nil, err
				}
			}
			out, err := bg.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, l.wrapErr("read claims back", l.row.table, err)
			}
			for _, it := range out.Responses[l.row.table] {
				rows[l.rowID(it)] = it
			}
			req = out.UnprocessedKeys
			if len(req[l.row.table].Keys) == 0 {
				req = nil
			}
		}
		return rows, nil
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, 8)
	)
	for _, i := range idxs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: aws.String(l.row.table), Key: rowKeys[i], ConsistentRead: aws.Bool(true),
				ProjectionExpression: aws.String(projExpr), ExpressionAttributeNames: names,
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = l.wrapErr("read claims back", l.row.table, err)
				}
				return
			}
			rows[l.rowID(rowKeys[i])] = out.Item
		})
	}
	wg.Wait()
	return rows, firstErr
}

func ledgerProjection(attrs []string) (string, map[string]string) {
	names := make(map[string]string, len(attrs))
	ps := make([]string, len(attrs))
	for i, a := range attrs {
		p := "#p" + strconv.Itoa(i)
		names[p] = a
		ps[i] = p
	}
	return strings.Join(ps, ", "), names
}

// ledgerBackoff waits a little, more with every round, with jitter: transactions that conflicted
// must not meet again at once.
func ledgerBackoff(ctx context.Context, round int) error {
	d := time.Duration(2<<min(round, 6)) * time.Millisecond // 4ms, 8ms, ... 128ms
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// ---- fenced transitions ----

func (l *ledgerCore) complete(ctx context.Context, c Claim, now time.Time) error {
	vals := fenceVals(c)
	vals[":done"] = ledgerS(string(StatusDone))
	vals[":now"] = ledgerMillis(now)
	return l.fenced(ctx, "complete", c, l.x.completeUpdate, vals)
}

func (l *ledgerCore) retry(ctx context.Context, c Claim, errText string, retryAt time.Time) error {
	vals := fenceVals(c)
	vals[":retry"] = ledgerS(string(StatusRetry))
	vals[":retryAt"] = ledgerMillis(retryAt)
	vals[":error"] = ledgerS(truncateErrorText(errText))
	return l.fenced(ctx, "retry", c, l.x.retryUpdate, vals)
}

func (l *ledgerCore) deadLetter(ctx context.Context, c Claim, errText string, now time.Time) error {
	vals := fenceVals(c)
	vals[":failed"] = ledgerS(string(StatusFailed))
	vals[":now"] = ledgerMillis(now)
	vals[":error"] = ledgerS(truncateErrorText(errText))
	return l.fenced(ctx, "dead-letter", c, l.x.deadUpdate, vals)
}

func (l *ledgerCore) release(ctx context.Context, c Claim, now time.Time) error {
	vals := fenceVals(c)
	vals[":retry"] = ledgerS(string(StatusRetry))
	vals[":now"] = ledgerMillis(now)
	vals[":minusOne"] = ledgerN(-1)
	return l.fenced(ctx, "release", c, l.x.releaseUpd, vals)
}

// fenced writes update only while c is the item's current claim; else ErrClaimLost.
func (l *ledgerCore) fenced(ctx context.Context, op string, c Claim, update string, vals map[string]types.AttributeValue) error {
	rowKey, err := l.row.key(c.Key)
	if err != nil {
		return err
	}
	names, used := l.exprInput(vals, l.x.fenceCond, update)
	_, err = l.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.row.table), Key: rowKey,
		ConditionExpression: aws.String(l.x.fenceCond), UpdateExpression: aws.String(update),
		ExpressionAttributeNames: names, ExpressionAttributeValues: used,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Refused: either the claim is not current, or the SDK repeated a write whose first
		// answer was lost and which landed (the row then shows exactly this write).
		return l.settleFenced(ctx, op, c, ccf.Item)
	}
	return l.wrapErr(op, l.row.table, err)
}

func (l *ledgerCore) completeOnly(ctx context.Context, r ClaimRequest) (bool, error) {
	rowKey, err := l.row.key(r.Key)
	if err != nil {
		return false, err
	}
	names, vals := l.exprInput(l.claimRequestVals(r), l.x.completeOnlyCond, l.x.completeOnlyUpdate)
	_, err = l.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.row.table), Key: rowKey,
		ConditionExpression: aws.String(l.x.completeOnlyCond), UpdateExpression: aws.String(l.x.completeOnlyUpdate),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
	})
	if err == nil {
		return true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	return false, l.wrapErr("complete", l.row.table, err)
}

// ---- reading state ----

func (l *ledgerCore) state(ctx context.Context, key Key) (ItemState, error) {
	rowKey, err := l.row.key(key)
	if err != nil {
		return ItemState{}, err
	}
	projExpr, names := ledgerProjection(l.attrs.all())
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(l.row.table), Key: rowKey, ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(projExpr), ExpressionAttributeNames: names,
	})
	if err != nil {
		return ItemState{}, l.wrapErr("read state", l.row.table, err)
	}
	return l.decodeState(out.Item), nil
}

func (l *ledgerCore) decodeState(item map[string]types.AttributeValue) ItemState {
	a := l.attrs
	return ItemState{
		Status:     Status(ledgerStr(item[a.status])),
		Owner:      ledgerStr(item[a.owner]),
		Slot:       int(ledgerNum(item[a.slot])),
		Token:      ledgerNum(item[a.token]),
		Scope:      ledgerStr(item[a.scope]),
		Attempts:   int(ledgerNum(item[a.attempts])),
		ClaimUntil: ledgerTime(item[a.claimUntil]),
		RetryAt:    ledgerTime(item[a.retryAt]),
		DoneAt:     ledgerTime(item[a.doneAt]),
		Error:      ledgerStr(item[a.error]),
	}
}

func ledgerStr(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func ledgerNum(v types.AttributeValue) int64 {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(n.Value, 64)
		if ferr != nil {
			return 0
		}
		return int64(f)
	}
	return i
}

func ledgerTime(v types.AttributeValue) time.Time {
	if _, ok := v.(*types.AttributeValueMemberN); !ok {
		return time.Time{}
	}
	return time.UnixMilli(ledgerNum(v))
}

// parallelScan scans a table with summarizeSegments segments; fn sees one page at a time (never
// two at once). The first error stops every segment.
func (l *ledgerCore) parallelScan(ctx context.Context, in dynamodb.ScanInput, fn func(*dynamodb.ScanOutput) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
			cancel(err)
		}
	}
	for seg := range summarizeSegments {
		wg.Go(func() {
			in := in
			in.Segment, in.TotalSegments = aws.Int32(int32(seg)), aws.Int32(summarizeSegments)
			for {
				out, err := l.db.Scan(ctx, &in)
				mu.Lock()
				if err != nil {
					fail(l.wrapErr("scan", aws.ToString(in.TableName), err))
				} else if firstErr == nil {
					if err := fn(out); err != nil {
						fail(err) // the caller's own error, as it is
					}
				}
				stop := firstErr != nil
				mu.Unlock()
				if stop || len(out.LastEvaluatedKey) == 0 {
					return
				}
				in.ExclusiveStartKey = out.LastEvaluatedKey
			}
		})
	}
	wg.Wait()
	return firstErr
}

// countStates adds a page's items to s by their status attribute.
func countLedgerStates(s *Summary, items []map[string]types.AttributeValue, status string) {
	for _, it := range items {
		switch Status(ledgerStr(it[status])) {
		case StatusDone:
			s.Done++
		case StatusFailed:
			s.Failed++
		case StatusClaimed:
			s.Claimed++
		default:
			s.Pending++
		}
	}
}

// ---- capacity and errors ----

func (l *ledgerCore) addWCU(c *types.ConsumedCapacity) {
	if c == nil {
		return
	}
	u := aws.ToFloat64(c.WriteCapacityUnits)
	if u == 0 {
		u = aws.ToFloat64(c.CapacityUnits)
	}
	if u == 0 {
		return
	}
	for {
		old := l.wcuBits.Load()
		if l.wcuBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+u)) {
			return
		}
	}
}

func (l *ledgerCore) consumedWCU() float64 { return math.Float64frombits(l.wcuBits.Load()) }

// wrapErr says which ledger, operation and table an error comes from.
func (l *ledgerCore) wrapErr(op, table string, err error) error {
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return fmt.Errorf("dynapart: %s: %s: table %q does not exist: %w", l.name, op, table, err)
	}
	return fmt.Errorf("dynapart: %s: %s on table %q: %w", l.name, op, table, err)
}

// ---- keys ----

// itemKeyOf returns the key attributes of key (only those, in a new map) after checking that each
// is there and is a string, number or binary.
func (l *ledgerCore) itemKeyOf(key Key) (Key, error) {
	out := make(Key, len(l.keyAttrs))
	for _, name := range l.keyAttrs {
		v, ok := key[name]
		if !ok {
			return nil, fmt.Errorf("dynapart: %s: item key %v lacks key attribute %q", l.name, ledgerKeyNames(key), name)
		}
		switch v.(type) {
		case *types.AttributeValueMemberS, *types.AttributeValueMemberN, *types.AttributeValueMemberB:
		default:
			return nil, fmt.Errorf("dynapart: %s: key attribute %q is a %T, want a string, number or binary", l.name, name, v)
		}
		out[name] = v
	}
	return out, nil
}

func ledgerKeyNames(k Key) []string {
	out := make([]string, 0, len(k))
	for n := range k {
		out = append(out, n)
	}
	return out
}

// rowID identifies a state row by its key, to match BatchGetItem results and repeated requests.
func (l *ledgerCore) rowID(rowKey map[string]types.AttributeValue) string {
	s, err := encodeKeyParts(rowKey, l.row.keyAttrs)
	if err != nil {
		return ""
	}
	return s
}

// encodeKeyParts is the canonical, injective text form of an item key: one part per key
// attribute in attrs order, each "<type>:<length>:<value>" where type is S, N or B, the value is
// the string, the canonical number or the standard base64 of the bytes, and length is the
// value's length in bytes. The length prefix makes the join unambiguous, the type keeps a string
// "abc" apart from the bytes "abc", and numbers are canonical ("1.50" and "15E-1" are the same
// DynamoDB key, so they encode alike).
func encodeKeyParts(key map[string]types.AttributeValue, attrs []string) (string, error) {
	var b strings.Builder
	for i, name := range attrs {
		var typ, val string
		switch v := key[name].(type) {
		case *types.AttributeValueMemberS:
			typ, val = "S", v.Value
		case *types.AttributeValueMemberN:
			n, err := canonicalNumber(v.Value)
			if err != nil {
				return "", fmt.Errorf("dynapart: key attribute %q: %w", name, err)
			}
			typ, val = "N", n
		case *types.AttributeValueMemberB:
			typ, val = "B", base64.StdEncoding.EncodeToString(v.Value)
		case nil:
			return "", fmt.Errorf("dynapart: item key lacks key attribute %q", name)
		default:
			return "", fmt.Errorf("dynapart: key attribute %q is a %T, want a string, number or binary", name, v)
		}
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(typ)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(len(val)))
		b.WriteByte(':')
		b.WriteString(val)
	}
	return b.String(), nil
}

// hashedKeyPart replaces a key encoding too long for a partition key by its SHA-256, under the
// type H that no plain encoding starts with.
func hashedKeyPart(enc string) string {
	sum := sha256.Sum256([]byte(enc))
	return "H:" + hex.EncodeToString(sum[:])
}

// canonicalNumber writes a DynamoDB number in one form per value: plain decimal, no exponent, no
// leading or trailing zeros, no "+", "-0" as "0".
func canonicalNumber(s string) (string, error) {
	orig := s
	bad := func() (string, error) { return "", fmt.Errorf("invalid number %q", orig) }
	s = strings.TrimSpace(s)
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 1000 || e < -1000 {
			return bad()
		}
		mant, exp = s[:i], e
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	if intPart == "" && frac == "" {
		return bad()
	}
	digits := intPart + frac
	for _, c := range digits {
		if c < '0' || c > '9' {
			return bad()
		}
	}
	exp -= len(frac) // value = digits * 10^exp
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil
	}
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	var out string
	switch {
	case exp >= 0:
		out = digits + strings.Repeat("0", exp)
	case -exp < len(digits):
		out = digits[:len(digits)+exp] + "." + digits[len(digits)+exp:]
	default:
		out = "0." + strings.Repeat("0", -exp-len(digits)) + digits
	}
	if neg {
		out = "-" + out
	}
	return out, nil
}

// doneBy reports whether a row (as returned by a failed condition) is done by exactly this claim:
// a completion that succeeded on the server but whose answer was lost, then retried.
func (l *ledgerCore) doneBy(old map[string]types.AttributeValue, c Claim) bool {
	if len(old) == 0 {
		return false
	}
	st := l.decodeState(old)
	return st.Status == StatusDone && st.Owner == c.Owner && st.Slot == c.Slot && st.Token == c.Token && st.Attempts == c.Attempt
}
