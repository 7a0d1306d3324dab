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
// completion (in complete-only mode too). The effects find their way back through the Item: a
// wrapper between Run and it (logging, tracing, decoding) passes on the Item Run gave, or a copy of
// it (it2 := it, then change it2.Attrs); a new Item built from its fields has no way back, and
// effects returned for it fail the attempt permanently (ErrEffectsNotCarried) rather than be
// dropped while the item completes. Two calls that both return effects for one Item fail the
// attempt too (ErrEffectsTwice): return them from one.
func WithEffects(h EffectHandler) Handler {
	return func(ctx context.Context, item Item) error {
		eff, err := h(ctx, item)
		switch {
		case err != nil:
			return err
		case eff.Empty():
			return nil // nothing to carry (another call's effects stay)
		case item.effects == nil:
			return Permanent(ErrEffectsNotCarried)
		case !item.effects.set(eff):
			return Permanent(ErrEffectsTwice)
		}
		return nil
	}
}

// ErrEffectsNotCarried: a handler made by WithEffects returned effects for an Item that did not
// come from Run (a wrapper built a new one), so there is no completion to commit them with. The
// attempt fails permanently rather than complete the item without them.
var ErrEffectsNotCarried = errors.New("dynapart: the handler's effects cannot reach the completion: " +
	"pass on the Item Run gave, or a copy of it (it2 := it), not a new Item")

// ErrEffectsTwice: two calls of WithEffects handlers returned effects for one Item (a router
// calling two of them); keeping one would drop the other's. Return them from one call.
var ErrEffectsTwice = errors.New("dynapart: two WithEffects calls returned effects for one item: return them from one")

// effectSlot carries one handler call's effects from WithEffects back to the worker.
type effectSlot struct {
	mu  sync.Mutex
	eff *Effects
}

// set keeps e (non-empty), unless the slot holds other effects already: false then.
func (s *effectSlot) set(e *Effects) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eff != nil && s.eff != e {
		return false
	}
	s.eff = e
	return true
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
