package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func (l *ledgerCore) claim(ctx context.Context, reqs []ClaimRequest) ([]ClaimOutcome, error) {
	reqs = slices.Clone(reqs) // a fresh request found with a state is made again as a general one
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
			items[j] = l.txUpdate(rowKeys[i], l.claimCondOf(reqs[i]), l.x.claimUpdate, l.claimRequestVals(reqs[i]))
		}
		answer, reasons, err := l.transact(ctx, items)
		switch answer {
		case txDone:
			if rerr := l.claimsLanded(ctx, reqs, rowKeys, pending, outs); rerr != nil {
				// The claims landed but their attempt numbers are unknown: give them back, so
				// they use up no attempt.
				l.unclaimSettled(ctx, reqs, rowKeys, pending)
				return rerr
			}
			return nil
		case txConflict:
			conflicts++
			if err := ledgerBackoff(ctx, conflicts); err != nil {
				return err
			}
			continue
		case txUnexplained:
			// No usable reasons: let single writes sort the items out.
			conflicts = claimConflictRounds
			continue
		case txFailed:
			if !refused(err) {
				// Unknown outcome: the transaction is all or nothing; undo whatever landed.
				l.unclaimSettled(ctx, reqs, rowKeys, pending)
			}
			return l.wrapErr("claim (transaction)", l.row.table, err)
		}
		again, conflicted, redone, err := l.claimReasons(ctx, reqs, rowKeys, pending, reasons, outs, err)
		if err != nil {
			return err
		}
		if len(again) == len(pending) && !conflicted && !redone {
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

// claimReasons reads a cancelled claim transaction's reasons: an item whose condition failed gets
// the state it holds (or, asked for as fresh, is tried again as a general request: redone), an
// item refused as invalid ErrUnprocessable; again are the items to try again (conflicted: after a
// backoff).
func (l *ledgerCore) claimReasons(ctx context.Context, reqs []ClaimRequest, rowKeys []Key, pending []int, reasons []types.CancellationReason, outs []ClaimOutcome, err error) (again []int, conflicted, redone bool, _ error) {
	for j, reason := range reasons {
		i := pending[j]
		code := aws.ToString(reason.Code)
		if retry, conflict := retryableReason(code); retry {
			again = append(again, i)
			conflicted = conflicted || conflict
			continue
		}
		switch code {
		case "ConditionalCheckFailed":
			l.condFailures.Add(1)
			o, err := l.outcomeOfRefused(ctx, reqs[i], rowKeys[i], reason.Item)
			if err != nil {
				return nil, false, false, err
			}
			if reqs[i].fresh && mayClaimAgain(o) {
				reqs[i].fresh = false
				again = append(again, i)
				redone = true
				continue
			}
			outs[i] = o
		case "ValidationError":
			// This item cannot take the write (e.g. the inline ledger's attributes would push
			// it past 400 KB): reported on its own, the others are tried again.
			outs[i] = ClaimOutcome{Err: fmt.Errorf("%w: %s", ErrUnprocessable, aws.ToString(reason.Message))}
		default:
			return nil, false, false, l.wrapErr("claim (transaction)", l.row.table,
				fmt.Errorf("item %d cancelled with %s: %s: %w", j, code, aws.ToString(reason.Message), err))
		}
	}
	return again, conflicted, redone, nil
}

// unclaimSettled gives the claims of a transaction back (see unclaimAll) under a settling write's
// context: nothing is written once ctx's fence (the lease) has ended.
func (l *ledgerCore) unclaimSettled(ctx context.Context, reqs []ClaimRequest, rowKeys []Key, idxs []int) {
	sctx, cancel := settleWriteContext(ctx)
	defer cancel()
	l.unclaimAll(sctx, reqs, rowKeys, idxs)
}

// claimOne claims one item with one UpdateItem and reads the new attempt number back.
func (l *ledgerCore) claimOne(ctx context.Context, r ClaimRequest, rowKey Key) (ClaimOutcome, error) {
	cond := l.claimCondOf(r)
	names, vals := l.exprInput(l.claimRequestVals(r), cond, l.x.claimUpdate)
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(l.row.table), Key: rowKey,
		ConditionExpression: aws.String(cond), UpdateExpression: aws.String(l.x.claimUpdate),
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
		o, err := l.outcomeOfRefused(ctx, r, rowKey, ccf.Item)
		if err == nil && r.fresh && mayClaimAgain(o) {
			r.fresh = false
			return l.claimOne(ctx, r, rowKey)
		}
		return o, err
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

// update runs one conditional UpdateItem; nothing is sent once ctx's fence (the lease the write is
// made for) has ended. It counts condition failures (updateItem counts capacity), and tries
// again (a few times, with backoff) when the item was locked by a transaction in flight: the
// outcome of such a write is known (nothing was written), so trying again is safe.
func (l *ledgerCore) update(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	if fenceEnded(ctx) {
		return nil, fmt.Errorf("update: %w (%w)", errFenceEnded, context.Cause(fenceOf(ctx)))
	}
	for conflicts := 0; ; conflicts++ {
		out, err := l.updateItem(ctx, in)
		if err == nil {
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

// claimCondOf is the condition r's claim is made under.
func (l *ledgerCore) claimCondOf(r ClaimRequest) string {
	if r.fresh {
		return l.x.freshCond
	}
	return l.x.claimCond
}

// mayClaimAgain reports a fresh claim refused because the item has gained a state another claim
// may yet take over (a retry, or a claim that may have expired or be of an older token): it is
// made again under the general condition. Done, failed, gone or the caller's own claim (a
// repeated write whose first answer was lost) are final.
func mayClaimAgain(o ClaimOutcome) bool {
	return !o.Claimed && o.Err == nil && (o.Status == StatusClaimed || o.Status == StatusRetry)
}

// claimsLanded fills in the outcomes of a transaction's claims that all landed: a fresh claim
// made attempt 1 (freshCond), the others' attempts are read back.
func (l *ledgerCore) claimsLanded(ctx context.Context, reqs []ClaimRequest, rowKeys []Key, idxs []int, outs []ClaimOutcome) error {
	var unknown []int
	for _, i := range idxs {
		r := reqs[i]
		if !r.fresh {
			unknown = append(unknown, i)
			continue
		}
		outs[i] = ClaimOutcome{Claimed: true, Claim: Claim{Key: r.Key, Owner: r.Owner, Slot: r.Slot, Token: r.Token, Until: r.Until, Attempt: 1}}
	}
	if len(unknown) == 0 {
		return nil
	}
	return l.readBackClaims(ctx, reqs, rowKeys, unknown, outs)
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
