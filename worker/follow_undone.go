package worker

import (
	"context"
	"errors"

	"github.com/dynapart/dynapart/ledger"
)

// changeUndone reports a claim, right after this worker's Renew of a done item, whose content as
// claimed is the version the item was done at, still the version recorded as handled last: the
// change that made the worker reopen it (a record's image, older than the item) was undone before
// the claim (changed back). That version was handled; running the handler again would handle it
// twice. Only the inline ledger's claim returns the item with its state (t.current), so only it
// can tell; the table ledger reads the item before it renews, which leaves this to a change undone
// between that read and the claim.
func (p *pass) changeUndone(t task, claim Claim) bool {
	if t.reopenedDone == "" || t.current == nil || claim.Version != t.reopenedDone {
		return false
	}
	st, onItem := p.e.ledger.StateOf(t.current)
	return onItem && st.Version == t.reopenedDone
}

// handledAlready finishes a claim whose content is the version the item was done at
// (changeUndone) without running the handler: the completion records that version again. It
// counts as skipped (found handled), not as completed.
func (p *pass) handledAlready(ctx context.Context, t task, claim Claim) {
	c := p.w.cfg
	err := p.e.ledger.CompleteWith(ctx, claim, c.Clock.Now(), nil)
	switch {
	case err == nil:
		t.markFinished()
		p.w.stats.skipped.Add(1)
		p.w.itemEvent(OutcomeSkipped, claim.Key, claim.Slot, claim.Attempt, 0)
	case errors.Is(err, ErrClaimLost):
		p.claimLost(claim, err, 0)
	case errors.Is(err, ledger.ErrNotSent):
		p.notSent(t, claim, err, 0)
	default:
		c.Logger.Error("dynapart: complete an item whose change was undone", "slot", claim.Slot, "err", err)
		p.unknown(claim, 0)
	}
	t.item.Ack()
}
