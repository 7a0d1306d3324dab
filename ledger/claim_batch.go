package ledger

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// claimBatch is one Claim call's requests, their state rows' keys and outcomes.
type claimBatch struct {
	l       *core
	reqs    []ClaimRequest
	rowKeys []Key
	outs    []ClaimOutcome
}

// claimChunk claims up to BatchSize items in one statement batch (see claimStatements) or else in
// one transaction. A cancelled transaction names, per
// item, why: items whose condition failed are reported with the state they hold and dropped; the
// rest (cancelled only because another item failed, or conflicting with another transaction) are
// tried again. After claimConflictRounds conflicts the remaining items are claimed one by one.
func (b *claimBatch) claimChunk(ctx context.Context, chunk []int) error {
	l := b.l
	pending := chunk
	if l.usesStatements() {
		return b.claimStatements(ctx, chunk)
	}
	conflicts := 0
	for len(pending) > 0 {
		if len(pending) == 1 || conflicts >= claimConflictRounds {
			return b.claimEach(ctx, pending)
		}
		items := make([]types.TransactWriteItem, len(pending))
		for j, i := range pending {
			items[j] = l.txUpdate(claimOp(b.reqs[i]), b.rowKeys[i], l.requestVals(b.reqs[i]))
		}
		answer, reasons, err := l.transact(ctx, items)
		switch answer {
		case txDone:
			return b.landed(ctx, pending)
		case txConflict:
			conflicts++
			if err := backoff(ctx, conflicts); err != nil {
				return err
			}
			continue
		case txUnexplained:
			conflicts = claimConflictRounds // no usable reasons: let single writes sort the items out
			continue
		case txFailed:
			if !refused(err) {
				b.undoSettled(ctx, pending) // unknown outcome: the transaction is all or nothing
			}
			return l.wrapErr("claim (transaction)", l.row.table, err)
		}
		again, conflicted, err := b.reasons(ctx, pending, reasons, err)
		if err != nil {
			return err
		}
		pending = again
		if conflicted {
			conflicts++
			if err := backoff(ctx, conflicts); err != nil {
				return err
			}
		}
	}
	return nil
}

// claimEach claims the items idxs one UpdateItem at a time.
func (b *claimBatch) claimEach(ctx context.Context, idxs []int) error {
	for _, i := range idxs {
		o, err := b.l.claimOne(ctx, b.reqs[i], b.rowKeys[i])
		if err != nil {
			return err
		}
		b.outs[i] = o
	}
	return nil
}

// reasons reads a cancelled claim transaction's reasons: an item whose condition failed gets the
// state it holds (or, asked for as fresh, is tried again as a general request), an item refused as
// invalid ErrUnprocessable; again are the items to try again (conflicted: after a backoff). A
// transaction cancelled with no reason at all counts as a conflict, so it is not sent for ever.
func (b *claimBatch) reasons(ctx context.Context, pending []int, reasons []types.CancellationReason, txErr error) (again []int, conflicted bool, _ error) {
	l := b.l
	redone := false
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
			o, err := l.outcomeOfRefused(ctx, b.reqs[i], b.rowKeys[i], reason.Item)
			if err != nil {
				return nil, false, err
			}
			if b.reqs[i].Fresh && mayClaimAgain(o) {
				b.reqs[i].Fresh = false
				again = append(again, i)
				redone = true
				continue
			}
			b.outs[i] = o
		case "ValidationError":
			// This item cannot take the write (e.g. the inline ledger's attributes would push
			// it past 400 KB): reported on its own, the others are tried again.
			b.outs[i] = ClaimOutcome{Err: fmt.Errorf("%w: %s", ErrUnprocessable, aws.ToString(reason.Message))}
		default:
			return nil, false, l.wrapErr("claim (transaction)", l.row.table,
				fmt.Errorf("item %d cancelled with %s: %s: %w", j, code, aws.ToString(reason.Message), txErr))
		}
	}
	if len(again) == len(pending) && !conflicted && !redone {
		conflicted = true
	}
	return again, conflicted, nil
}

// landed fills in the outcomes of a transaction's claims that all landed: a fresh claim made
// attempt 1 (OpClaimFresh sets it), the others' attempts are read back.
func (b *claimBatch) landed(ctx context.Context, idxs []int) error {
	var unknown []int
	for _, i := range idxs {
		if b.reqs[i].Fresh {
			b.outs[i] = claimed(b.reqs[i], 1)
			continue
		}
		unknown = append(unknown, i)
	}
	if len(unknown) == 0 {
		return nil
	}
	if err := b.readBack(ctx, unknown); err != nil {
		// The claims landed but their attempt numbers are unknown: give them back, so they use
		// up no attempt.
		b.undoSettled(ctx, unknown)
		return err
	}
	return nil
}

// readBack learns the attempt numbers of a transaction's claims, which TransactWriteItems does not
// return, with a consistent read. A row that no longer shows the caller's claim was taken over in
// between (possible only once the claim expired, or by a newer lease token): it is reported not
// claimed, so the attempt number a Claim carries always equals the stored one.
func (b *claimBatch) readBack(ctx context.Context, idxs []int) error {
	rows, err := b.l.readRows(ctx, b.rowKeys, idxs)
	if err != nil {
		return err
	}
	for _, i := range idxs {
		b.outs[i] = b.l.outcomeFromRow(b.reqs[i], rows[b.l.rowID(b.rowKeys[i])])
	}
	return nil
}

// claimedSoFar are the requests whose claim this call has made (and would report).
func (b *claimBatch) claimedSoFar() []int {
	var idxs []int
	for i, o := range b.outs {
		if o.Claimed {
			idxs = append(idxs, i)
		}
	}
	return idxs
}

// undoSettled gives the claims idxs back (best effort, OpRelease on each claim's id) under a
// settling write's context: nothing is written once ctx's fence (the lease) has ended.
func (b *claimBatch) undoSettled(ctx context.Context, idxs []int) {
	sctx, cancel := settleWriteContext(ctx)
	defer cancel()
	sctx = inTurn(sctx)
	for _, i := range idxs {
		_ = b.l.undo(sctx, b.reqs[i], b.rowKeys[i])
	}
}

// readRows reads state rows by consistent read: one BatchGetItem when the client has it, else
// GetItem calls (up to 8 at a time). The result is keyed by rowID.
func (l *core) readRows(ctx context.Context, rowKeys []Key, idxs []int) (map[string]map[string]types.AttributeValue, error) {
	projExpr, names := projection(append(append([]string{}, l.row.keyAttrs...), l.attrNamesOf(stateAttrs...)...))
	if bg, ok := l.db.(batchGetter); ok {
		return l.batchGetRows(ctx, bg, rowKeys, idxs, projExpr, names)
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, 8)
		rows     = make(map[string]map[string]types.AttributeValue, len(idxs))
	)
	for _, i := range idxs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: aws.String(l.row.table), Key: rowKeys[i], ConsistentRead: aws.Bool(true),
				ProjectionExpression: aws.String(projExpr), ExpressionAttributeNames: names,
				ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = l.wrapErr("read claims back", l.row.table, err)
				}
				return
			}
			l.reads.add(1, out.ConsumedCapacity)
			rows[l.rowID(rowKeys[i])] = out.Item
		})
	}
	wg.Wait()
	return rows, firstErr
}

// batchGetRows reads rows with BatchGetItem, 100 keys at most per call (the caller's limit), and
// again for the keys DynamoDB left unprocessed.
func (l *core) batchGetRows(ctx context.Context, bg batchGetter, rowKeys []Key, idxs []int, projExpr string, names map[string]string) (map[string]map[string]types.AttributeValue, error) {
	keys := make([]map[string]types.AttributeValue, len(idxs))
	for j, i := range idxs {
		keys[j] = rowKeys[i]
	}
	rows := make(map[string]map[string]types.AttributeValue, len(idxs))
	req := map[string]types.KeysAndAttributes{l.row.table: {
		Keys: keys, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String(projExpr), ExpressionAttributeNames: names,
	}}
	for round := 0; len(req) > 0; round++ {
		if round > 0 {
			if err := backoff(ctx, min(round, 6)); err != nil {
				return nil, err
			}
		}
		out, err := bg.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			return nil, l.wrapErr("read claims back", l.row.table, err)
		}
		l.reads.add(len(req[l.row.table].Keys)-len(out.UnprocessedKeys[l.row.table].Keys), batchCapacity(out.ConsumedCapacity)...)
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
