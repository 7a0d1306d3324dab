package ledger

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// completeBatch completes up to BatchSize claims per TransactWriteItems, each under its own fence.
// A cancelled transaction names, per item, why: an item whose fence failed gets a
// *ClaimLostError and is dropped; the others are tried again. The result has one error per claim
// (nil: done).
func (l *core) completeBatch(ctx context.Context, claims []Claim, now time.Time) []error {
	errs := make([]error, len(claims))
	for lo := 0; lo < len(claims); lo += BatchSize {
		b := completion{l: l, claims: claims, now: now, errs: errs}
		b.chunk(ctx, lo, min(lo+BatchSize, len(claims)))
	}
	return errs
}

// completion is one CompleteBatch call.
type completion struct {
	l      *core
	claims []Claim
	now    time.Time
	errs   []error
}

func (b *completion) write(i int) fencedWrite {
	return fencedWrite{op: OpComplete, c: b.claims[i], vals: fenceVals(b.claims[i]).with(vNow, attrMillis(b.now))}
}

func (b *completion) chunk(ctx context.Context, lo, hi int) {
	l := b.l
	pending := make([]int, 0, hi-lo)
	writes := make([]fencedWrite, hi)
	for i := lo; i < hi; i++ {
		w := b.write(i)
		rowKey, err := l.row.key(w.c.Key)
		if err != nil {
			b.errs[i] = err
			continue
		}
		w.rowKey = rowKey
		writes[i] = w
		pending = append(pending, i)
	}
	if l.usesStatements() {
		b.singles(ctx, b.statements(ctx, pending, writes))
		return
	}
	for round := 0; len(pending) > 0; round++ {
		if len(pending) == 1 || round >= claimConflictRounds {
			b.singles(ctx, pending)
			return
		}
		items := make([]types.TransactWriteItem, len(pending))
		for j, i := range pending {
			items[j] = l.txUpdate(OpComplete, writes[i].rowKey, writes[i].vals)
		}
		answer, reasons, err := l.transact(ctx, items)
		switch answer {
		case txDone:
			return
		case txConflict, txUnexplained:
			if berr := backoff(ctx, round+1); berr != nil {
				setErrs(b.errs, pending, berr)
				return
			}
			continue
		case txFailed:
			// Unknown outcome: each claim stays as it is on the server until its TTL (a
			// transaction the lease's end cut short is settled by reads, see settleCut).
			werr := l.wrapErr("complete (transaction)", l.row.table, err)
			for _, i := range pending {
				b.errs[i] = l.settleCut(ctx, writes[i], werr)
			}
			return
		}
		pending = b.reasons(ctx, pending, writes, reasons)
	}
}

// reasons reads a cancelled completion transaction's reasons; it returns the items to try again.
// An item refused without an image of its row (a backend that leaves it out, a repeat sent without
// asking) is settled by reading the row, as Complete does.
func (b *completion) reasons(ctx context.Context, pending []int, writes []fencedWrite, reasons []types.CancellationReason) []int {
	var again []int
	for j, reason := range reasons {
		i := pending[j]
		if aws.ToString(reason.Code) != "ConditionalCheckFailed" {
			again = append(again, i)
			continue
		}
		b.errs[i] = b.refused(ctx, writes[i], reason.Item)
	}
	return again
}

// refused settles a completion its condition refused, from the image old of its row: nil when the
// row shows it done by this claim already (a retried request whose answer was lost), else a
// *ClaimLostError. An answer without an image (a backend that leaves it out, a repeat sent without
// asking) is settled by reading the row, as Complete does.
func (b *completion) refused(ctx context.Context, w fencedWrite, old map[string]types.AttributeValue) error {
	b.l.condFailures.Add(1)
	return b.l.settleFenced(ctx, w, old)
}

// singles completes the claims idxs one UpdateItem at a time.
func (b *completion) singles(ctx context.Context, idxs []int) {
	if len(idxs) > 1 {
		ctx = inTurn(ctx) // one busy item does not hold up the others; a completion alone waits it out
	}
	for _, i := range idxs {
		b.errs[i] = b.l.complete(ctx, b.claims[i], b.now)
	}
}

// setErrs sets errs[i] = err for each i of idxs.
func setErrs(errs []error, idxs []int, err error) {
	for _, i := range idxs {
		errs[i] = err
	}
}
