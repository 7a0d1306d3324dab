package ledger

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/internal/capacity"
)

// claimStatements claims the fresh items of chunk in statement batches, each claim a single
// conditional write (OpClaimFresh, 1 WCU: an UPDATE of the inline ledger's item, an INSERT of the
// table ledger's row); the other items (and fresh ones found with a state
// another claim may take over) are claimed one UpdateItem at a time, as OpClaim's ADD of the attempt
// has no PartiQL form. A claim refused by its condition is settled from the image its answer
// carries, as a single claim's is. A batch the backend refuses as invalid (it lacks PartiQL
// conditions) wrote nothing: its claims are made one at a time too.
func (b *claimBatch) claimStatements(ctx context.Context, chunk []int) error {
	var fresh, general []int
	for _, i := range chunk {
		if b.reqs[i].Fresh {
			fresh = append(fresh, i)
		} else {
			general = append(general, i)
		}
	}
	pending := fresh
	for round := 0; len(pending) > 0; round++ {
		if len(pending) == 1 || round >= claimConflictRounds {
			general = append(general, pending...)
			break
		}
		again, redo, err := b.claimStatementRound(ctx, pending, round)
		if err != nil {
			return err
		}
		general = append(general, redo...)
		pending = again
	}
	return b.claimEach(ctx, general)
}

// claimStatementRound sends one statement batch of the fresh claims pending. again are the claims
// to send again, redo those to make one at a time (as general claims, or all of pending when the
// backend refused the batch as invalid).
func (b *claimBatch) claimStatementRound(ctx context.Context, pending []int, round int) (again, redo []int, _ error) {
	l := b.l
	stmts := make([]types.BatchStatementRequest, len(pending))
	for j, i := range pending {
		s, ok := l.freshClaimStatement(b.rowKeys[i], l.requestVals(b.reqs[i]))
		if !ok {
			return nil, pending, nil
		}
		stmts[j] = s
	}
	answers, err := l.executeStatements(ctx, stmts)
	if round > 0 {
		err = sentBefore(err) // pending are stmtAgain answers: they may have landed
	}
	switch {
	case err != nil && capacity.IsThrottle(err):
		return pending, nil, backoff(ctx, round+1)
	case err != nil && IsValidation(err):
		return nil, pending, nil // nothing was written, and the ledger has fallen back
	case err != nil && refused(err):
		return nil, nil, l.wrapErr("claim (statement batch)", l.row.table, err) // not sent
	case err != nil:
		b.undoSettled(ctx, pending) // unknown outcome: give back whatever landed
		return nil, nil, l.wrapErr("claim (statement batch)", l.row.table, err)
	}
	backoffNeeded := false
	for j, a := range answers {
		i := pending[j]
		if a.Error != nil && a.Error.Code == types.BatchStatementErrorCodeEnumDuplicateItem {
			redo = append(redo, i) // the table ledger's row exists: its claim is an UpdateItem
			continue
		}
		answer, bo := answerOf(a)
		switch answer {
		case stmtDone:
			b.outs[i] = claimed(b.reqs[i], 1) // OpClaimFresh sets attempt 1
		case stmtRefused:
			l.condFailures.Add(1)
			o, err := l.outcomeOfRefused(ctx, b.reqs[i], b.rowKeys[i], a.Error.Item)
			if err != nil {
				return nil, nil, err
			}
			if mayClaimAgain(o) {
				b.reqs[i].Fresh = false
				redo = append(redo, i)
				continue
			}
			b.outs[i] = o
		case stmtInvalid:
			b.outs[i] = ClaimOutcome{Err: fmt.Errorf("%w: %w", ErrUnprocessable, statementErr(a))}
		case stmtDenied:
			l.denied()
			redo = append(redo, i) // an UpdateItem, which the policy may allow
		case stmtFatal:
			return nil, nil, l.wrapErr("claim (statement batch)", l.row.table, statementErr(a))
		case stmtAgain:
			again = append(again, i)
			backoffNeeded = backoffNeeded || bo
		}
	}
	if backoffNeeded {
		if err := backoff(ctx, round+1); err != nil {
			return nil, nil, err
		}
	}
	return again, redo, nil
}
