package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// completeBatch completes up to 25 claims per TransactWriteItems, each under its own fence
// condition. A cancelled transaction names, per item, why: an item whose fence failed gets
// ErrClaimLost and is dropped; the others are tried again. The result has one error per claim
// (nil: done).
func (l *ledgerCore) completeBatch(ctx context.Context, claims []Claim, now time.Time) []error {
	errs := make([]error, len(claims))
	for lo := 0; lo < len(claims); lo += claimBatchSize {
		l.completeChunk(ctx, claims, now, lo, min(lo+claimBatchSize, len(claims)), errs)
	}
	return errs
}

func (l *ledgerCore) completeChunk(ctx context.Context, claims []Claim, now time.Time, lo, hi int, errs []error) {
	pending := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		pending = append(pending, i)
	}
	for round := 0; len(pending) > 0; round++ {
		if len(pending) == 1 || round >= claimConflictRounds {
			for _, i := range pending {
				errs[i] = l.complete(ctx, claims[i], now)
			}
			return
		}
		items := make([]types.TransactWriteItem, 0, len(pending))
		for _, i := range pending {
			rowKey, err := l.row.key(claims[i].Key)
			if err != nil {
				errs[i] = err
				continue
			}
			items = append(items, l.txUpdate(rowKey, l.x.fenceCond, l.x.completeUpdate, completeVals(claims[i], now)))
		}
		if len(items) != len(pending) {
			// A key could not be encoded (reported above): complete the others one by one.
			for _, i := range pending {
				if errs[i] == nil {
					errs[i] = l.complete(ctx, claims[i], now)
				}
			}
			return
		}
		answer, reasons, err := l.transact(ctx, items)
		switch answer {
		case txDone:
			return
		case txConflict, txUnexplained:
			if berr := ledgerBackoff(ctx, round+1); berr != nil {
				setErrs(errs, pending, berr)
				return
			}
			continue
		case txFailed:
			// Unknown outcome: each claim stays as it is on the server until its TTL (a
			// transaction the lease's end cut short is settled by reads, see settleCut).
			werr := l.wrapErr("complete (transaction)", l.row.table, err)
			for _, i := range pending {
				errs[i] = l.settleCut(ctx, "complete", claims[i], werr)
			}
			return
		}
		var again []int
		for j, reason := range reasons {
			i := pending[j]
			switch aws.ToString(reason.Code) {
			case "ConditionalCheckFailed":
				c := claims[i]
				if l.doneBy(reason.Item, c) {
					continue // done by this claim already (a retried request whose answer was lost)
				}
				l.condFailures.Add(1)
				errs[i] = fmt.Errorf("%w: complete in %s %q (owner %s, slot %d, token %d, attempt %d)",
					ErrClaimLost, l.name, l.row.table, c.Owner, c.Slot, c.Token, c.Attempt)
			default:
				again = append(again, i)
			}
		}
		pending = again
	}
}

// BatchCompleter is a Ledger that can complete many claims in one request. Both ledgers are.
type BatchCompleter interface {
	// CompleteBatch completes each claim (up to 25 per transaction, each fenced on its claim) and
	// returns one error per claim: nil when done, ErrClaimLost when the claim was not current.
	CompleteBatch(ctx context.Context, claims []Claim, now time.Time) []error
}

// setErrs sets errs[i] = err for each i of idxs.
func setErrs(errs []error, idxs []int, err error) {
	for _, i := range idxs {
		errs[i] = err
	}
}
