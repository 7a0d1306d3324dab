package worker

import (
	"context"
	"errors"
	"sync"

	"github.com/dynapart/dynapart/ledger"
)

// Effects are writes a handler returns with its result, committed with the item's completion in
// one atomic write: exactly once, or not at all (see ledger.Effects for what may be written and
// what is refused).
type Effects = ledger.Effects

// EffectHandler processes one claimed item and returns the writes to commit with its completion
// (nil or empty: none). A returned error is a failed attempt as for a Handler, and its effects are
// dropped. A handler may run more than once for an item (a crash, a lost lease), but only one
// run's effects commit.
type EffectHandler func(ctx context.Context, item Item) (*Effects, error)

// WithEffects makes h a Handler for Run, whose successful calls' effects commit with the item's
// completion (in complete-only mode too). A wrapper between Run and it (logging, tracing) may pass
// on the Item Run gave, a copy of it (it2 := it, then change it2.Attrs), or a new Item, as long as
// the context it passes on is Run's or derived from it: the effects find their way back by either.
// Effects returned where neither leads back to Run (the handler called on its own) are an error
// (ErrEffectsNotCarried), not dropped: the item must not be completed without them.
func WithEffects(h EffectHandler) Handler {
	return func(ctx context.Context, item Item) error {
		eff, err := h(ctx, item)
		if err != nil {
			return err
		}
		slot := item.effects
		if slot == nil {
			slot, _ = ctx.Value(effectSlotKey{}).(*effectSlot)
		}
		if slot == nil {
			if eff.Empty() {
				return nil
			}
			return Permanent(ErrEffectsNotCarried)
		}
		slot.set(eff)
		return nil
	}
}

// ErrEffectsNotCarried: a handler made by WithEffects returned effects, but neither its Item nor its
// context came from Run (a wrapper built a new Item and passed another context), so there is no
// completion to commit them with. The attempt fails permanently rather than complete the item
// without them.
var ErrEffectsNotCarried = errors.New("dynapart: the handler's effects cannot reach the completion: " +
	"pass on the Item Run gave (or a copy, it2 := it) or Run's context to the WithEffects handler")

// effectSlotKey is the context key of the handler call's effectSlot (runHandler).
type effectSlotKey struct{}

// effectSlot carries one handler call's effects from WithEffects back to the worker.
type effectSlot struct {
	mu  sync.Mutex
	eff *Effects
}

func (s *effectSlot) set(e *Effects) {
	s.mu.Lock()
	s.eff = e
	s.mu.Unlock()
}

// get is the effects the call returned; nil when none (or the handler was abandoned).
func (s *effectSlot) get() *Effects {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eff
}
