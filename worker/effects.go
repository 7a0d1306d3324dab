package worker

import (
	"context"
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
// completion (in complete-only mode too).
func WithEffects(h EffectHandler) Handler {
	return func(ctx context.Context, item Item) error {
		eff, err := h(ctx, item)
		if err == nil && item.effects != nil {
			item.effects.set(eff)
		}
		return err
	}
}

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
