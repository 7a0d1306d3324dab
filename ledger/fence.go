package ledger

import (
	"context"
)

// A ledger write made for a slot is fenced by the slot's lease: its context is derived from the
// lease's context (the worker's pass.writeContext), so the write and the SDK's own repeats of it stop when
// the lease ends (lost, expired by the holder's clock, or released), and the context carries the
// lease's context as its fence. A settling write (an undo of a claim of unknown outcome) is not
// cut short by a shutdown, but it is never sent once the fence has ended: the claim then stays,
// and the slot's next holder reclaims it at once by its newer token, or it expires. Settling
// reads may outlive the fence: they change nothing.

type fenceKey struct{}

// WithFence returns ctx carrying fence (a lease's context) as the fence of the writes made under
// it: once fence has ended, no write is sent under ctx, not even the SDK's repeat of one sent
// before, and a write of unknown outcome is settled by reads only.
func WithFence(ctx, fence context.Context) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence)
}

// fenceOf is the fence ctx carries, nil when none (a write not made for a slot, e.g. redrive).
func fenceOf(ctx context.Context) context.Context {
	f, _ := ctx.Value(fenceKey{}).(context.Context)
	return f
}

// fenceEnded reports whether ctx carries a fence that has ended: no write may be sent under it.
func fenceEnded(ctx context.Context) bool {
	f := fenceOf(ctx)
	return f != nil && f.Err() != nil
}

// settleWriteContext is the context a settling write runs under: bounded by settleTimeout, not cut
// short by the caller's cancellation (a shutdown must not leave a claim of unknown outcome), but
// cancelled when ctx's fence ends.
func settleWriteContext(ctx context.Context) (context.Context, context.CancelFunc) {
	sctx, cancel := settleContext(ctx)
	f := fenceOf(ctx)
	if f == nil {
		return sctx, cancel
	}
	fctx, fcancel := context.WithCancelCause(sctx)
	stop := context.AfterFunc(f, func() { fcancel(context.Cause(f)) })
	return fctx, func() { stop(); fcancel(nil); cancel() }
}

type admissionKey struct{}

// WithAdmission returns ctx whose writes stop waiting for the write gate (Config.WriteRate) once
// admit ends: a write not yet sent is then not sent, and fails with admit's error, while one sent
// already runs under ctx to its answer. A worker claims under its write context (a stop must not
// cut a claim in flight, whose undo could look before it lands) admitted by its fetch context (a
// stop makes no new claims, however long the gate would have held them).
func WithAdmission(ctx, admit context.Context) context.Context {
	return context.WithValue(ctx, admissionKey{}, admit)
}

// admissionOf is the admission ctx carries, nil when none or when a settling write (settleContext)
// runs under it: a settle or undo is admitted whatever the caller's stop.
func admissionOf(ctx context.Context) context.Context {
	a, _ := ctx.Value(admissionKey{}).(context.Context)
	return a
}

type unqueuedKey struct{}

// Unqueued returns ctx whose writes do not wait in the write gate (Config.WriteRate): each is
// sent at once and its cost charged as debt, which delays the writes after it. For the few writes
// that give an item back after a write the gate held too long (ErrNotSent): waiting behind the
// same queue, they would not be sent either, and the claim left to expire would count an attempt.
func Unqueued(ctx context.Context) context.Context {
	return context.WithValue(ctx, unqueuedKey{}, true)
}

// unqueued reports whether ctx's writes skip the write gate's queue (Unqueued).
func unqueued(ctx context.Context) bool {
	u, _ := ctx.Value(unqueuedKey{}).(bool)
	return u
}
