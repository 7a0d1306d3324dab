package worker

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// completeOnlyStates reads, in complete-only mode, the ledger state of the items about to be
// handled, since no claim decides for them: items already done or failed are skipped (with the
// table ledger the scan cannot see that, and a later pass would run their handlers again), and the
// others learn which attempt they make.
func (p *pass) completeOnlyStates(ctx context.Context, todo []task) ([]task, error) {
	ps, ok := p.e.ledger.(pageStater)
	if !ok || len(todo) == 0 {
		return todo, nil
	}
	items := make([]map[string]types.AttributeValue, len(todo))
	keys := make([]Key, len(todo))
	for i, t := range todo {
		items[i], keys[i] = t.item.Attrs, t.key
	}
	states, err := ps.pageStates(ctx, items, keys)
	if err != nil {
		return nil, err
	}
	kept := todo[:0]
	for i, t := range todo {
		if st := states[i].Status; st == StatusDone || st == StatusFailed {
			p.w.stats.skipped.Add(1)
			p.w.itemEvent(OutcomeSkipped, t.key, p.lease.Slot(), 0, 0)
			t.item.Ack()
			continue
		}
		t.attempt = states[i].Attempts + 1
		t.fresh = states[i].Status == StatusPending
		kept = append(kept, t)
	}
	return kept, nil
}
