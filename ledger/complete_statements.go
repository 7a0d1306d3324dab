package ledger

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/internal/capacity"
)

// statements completes the claims pending in statement batches, each completion a single
// conditional write (OpComplete under the claim's fence, 1 WCU), answered and settled on its own.
// It returns the claims left to complete one at a time: those still throttled or conflicting after
// claimConflictRounds, those DynamoDB called invalid (a single write names the error), or all of
// them when the backend refused the batch as invalid.
func (b *completion) statements(ctx context.Context, pending []int, writes []fencedWrite) []int {
	l := b.l
	// Invalid in a statement (a single write names the error), or a key already in the batch
	// (DynamoDB refuses a batch that names a key twice).
	var single []int
	pending, single = distinctRows(l, pending, writes)
	for round := 0; len(pending) > 1 && round < claimConflictRounds; round++ {
		stmts := make([]types.BatchStatementRequest, len(pending))
		for j, i := range pending {
			s, ok := l.statement(OpComplete, writes[i].rowKey, writes[i].vals)
			if !ok {
				return append(single, pending...)
			}
			stmts[j] = s
		}
		answers, err := l.executeStatements(ctx, stmts)
		if round > 0 {
			err = sentBefore(err) // pending are stmtAgain answers: they may have landed
		}
		switch {
		case err != nil && capacity.IsThrottle(err):
			if berr := backoff(ctx, round+1); berr != nil {
				setErrs(b.errs, pending, berr)
				return nil
			}
			continue
		case err != nil && IsValidation(err):
			return append(single, pending...) // nothing was written, and the ledger has fallen back
		case err != nil:
			// Unknown outcome: each claim is settled by a read, as a transaction's is.
			werr := l.wrapErr("complete (statement batch)", l.row.table, err)
			for _, i := range pending {
				b.errs[i] = l.settleCut(ctx, writes[i], werr)
			}
			return nil
		}
		var again []int
		backoffNeeded := false
		for j, a := range answers {
			i := pending[j]
			answer, bo := answerOf(a)
			switch answer {
			case stmtDone:
			case stmtRefused:
				b.errs[i] = b.refused(ctx, writes[i], a.Error.Item)
			case stmtFatal:
				b.errs[i] = l.wrapErr("complete (statement batch)", l.row.table, statementErr(a))
			case stmtInvalid:
				single = append(single, i)
			case stmtDenied:
				l.denied()
				single = append(single, i)
			case stmtAgain:
				again = append(again, i)
				backoffNeeded = backoffNeeded || bo
			}
		}
		pending = again
		if backoffNeeded && len(pending) > 0 {
			if berr := backoff(ctx, round+1); berr != nil {
				setErrs(b.errs, pending, berr)
				return nil
			}
		}
	}
	return append(single, pending...)
}

// distinctRows splits idxs into the first completion of each row and the repeats.
func distinctRows(l *core, idxs []int, writes []fencedWrite) (first, repeats []int) {
	seen := make(map[string]bool, len(idxs))
	for _, i := range idxs {
		id := l.rowID(writes[i].rowKey)
		if seen[id] {
			repeats = append(repeats, i)
			continue
		}
		seen[id] = true
		first = append(first, i)
	}
	return first, repeats
}
