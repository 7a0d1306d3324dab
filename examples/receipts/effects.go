package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// Effects is the dynapart version's mode: receipts parked in an inbox table, processed by
// dynapart workers whose handler returns the message's new status and the funnel's increments as
// effects, committed with the receipt's completion.
const Effects Mode = "effects"

// The inbox table (pk id, S) holds one item per receipt delivered (id "r-<n>": message_id,
// campaign, status, prio); a receipt delivered twice is two items. The workers partition it by
// message_id, so every receipt of a message goes to the same slot.
const (
	attrMessage = "message_id"
	inboxPrefix = "r-"
)

// WriteInbox parks the receipts in the inbox table, one item per delivery.
func WriteInbox(ctx context.Context, db exampleutil.BatchWriter, table string, batches [][]Event) error {
	var items []map[string]types.AttributeValue
	for _, b := range batches {
		for _, ev := range b {
			items = append(items, map[string]types.AttributeValue{
				attrID:       avS(fmt.Sprintf("%s%06d", inboxPrefix, len(items))),
				attrMessage:  avS(ev.MessageID),
				attrCampaign: avS(ev.Campaign),
				attrStatus:   avS(ev.Status.String()),
				attrPrio:     avN(int(ev.Status)),
			})
		}
	}
	return exampleutil.WriteItems(ctx, db, table, items)
}

// eventOf reads a receipt from its inbox item.
func eventOf(it worker.Item) (Event, error) {
	msg, _ := it.Attrs[attrMessage].(*types.AttributeValueMemberS)
	campaign, _ := it.Attrs[attrCampaign].(*types.AttributeValueMemberS)
	prio := Status(numOf(it.Attrs[attrPrio]))
	if msg == nil || campaign == nil || prio < InGateway || prio > Clicked {
		return Event{}, worker.Permanent(fmt.Errorf("receipt %s: no message_id, campaign or valid prio", ledger.KeyText(it.Key)))
	}
	return Event{MessageID: msg.Value, Campaign: campaign.Value, Status: prio}, nil
}

// EffectsOf is a receipt as effects: it reads the message, and when the receipt moves its status
// forward returns the message's new status and one increment of the campaign's counter of every
// stage the message has newly reached. The worker commits them with the receipt's completion in
// one TransactWriteItems: the receipt done, the message moved and the funnel counted, all or
// nothing, once. A receipt that does not move the status returns no effects (it is only done).
//
// The message's update is conditioned on the priority it read: the workers partition the inbox
// by message and handle one receipt at a time, so nothing else moves the message in between; a
// worker that overlaps anyway (a stale one) cancels the whole commit and dead-letters the
// receipt, naming the write, instead of counting twice.
func (s *Store) EffectsOf(ctx context.Context, ev Event) (*worker.Effects, error) {
	old, err := s.read(ctx, ev.MessageID)
	if err != nil || old >= ev.Status {
		return nil, err
	}
	unchanged := expression.Name(attrPrio).AttributeNotExists()
	if old > 0 {
		unchanged = expression.Name(attrPrio).Equal(expression.Value(int(old)))
	}
	e := &worker.Effects{}
	e.AddWrite(ledger.Write{
		Kind: ledger.WriteUpdate, Table: s.Table, Key: ledger.Key{attrID: avS(ev.MessageID)},
		Changes: []ledger.Change{
			ledger.Set(attrStatus, ev.Status.String()), ledger.Set(attrPrio, int(ev.Status)), ledger.Set(attrCampaign, ev.Campaign),
		},
		Condition: &unchanged,
	})
	var counts []ledger.Change
	for st := old + 1; st <= ev.Status; st++ {
		counts = append(counts, ledger.Add(reachedAttr+st.String(), 1))
	}
	return e.Update(s.Table, ledger.Key{attrID: avS(campaignPK + ev.Campaign)}, counts...), nil
}

// Handler is the worker handler of a mode: the plain optimistic apply (its own two writes, then
// the completion), the pessimistic one (a lock per message around them) or the effects.
func (s *Store) Handler(mode Mode, locks *lock.Client) (worker.Handler, error) {
	apply := map[Mode]func(context.Context, Event) error{
		Optimistic:  s.ApplyOptimistic,
		Pessimistic: func(ctx context.Context, ev Event) error { return s.ApplyPessimistic(ctx, locks, ev) },
	}[mode]
	switch {
	case mode == Effects:
		return worker.WithEffects(func(ctx context.Context, it worker.Item) (*worker.Effects, error) {
			ev, err := eventOf(it)
			if err != nil {
				return nil, err
			}
			return s.EffectsOf(ctx, ev)
		}), nil
	case apply != nil:
		return func(ctx context.Context, it worker.Item) error {
			ev, err := eventOf(it)
			if err != nil {
				return err
			}
			return apply(ctx, ev)
		}, nil
	}
	return nil, fmt.Errorf("no worker handler for mode %q", mode)
}

// statusWrite reports whether w writes a message of the state table (not a campaign's funnel):
// the first of the plain and pessimistic versions' two writes.
func statusWrite(state string) func(exampleutil.Write) bool {
	return func(w exampleutil.Write) bool {
		return w.Op != "TransactWriteItems" && w.Touches(state, attrID, campaignPK)
	}
}

// commitWrite reports whether w is an effects commit that writes the state table.
func commitWrite(state string) func(exampleutil.Write) bool {
	return func(w exampleutil.Write) bool { return w.Op == "TransactWriteItems" && w.Touches(state, attrID, "") }
}
