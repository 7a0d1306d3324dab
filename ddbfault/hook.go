package ddbfault

import (
	"context"
	"fmt"
	"slices"
)

// Call is one call through a Client, as a [Hook] sees it.
type Call struct {
	N      int64    // the call's number among all calls of the client (1 for the first)
	Op     string   // the operation, e.g. OpUpdateItem
	In     any      // the request, e.g. *dynamodb.UpdateItemInput
	Tables []string // the tables the request names
}

// Send passes a call on (to the hooks added after this one, then to the armed Fault and the
// wrapped client) and returns its answer: out is the operation's output (e.g.
// *dynamodb.UpdateItemOutput), nil when err is not. in is the request to send: the Call's In, or a
// request of the same type made from it.
type Send func(ctx context.Context, in any) (out any, err error)

// Hook stands around each call of the operations it was added for ([Client.OnCall]), and what it
// returns is what the caller gets: out must be nil or the operation's output type. A hook observes
// a call by passing it on with send and returning its answer; it delays one by waiting before
// send; it fails one by returning an error without calling send (the request never leaves) or
// after it (the request is applied, its answer lost); it replaces one by sending another request,
// sending it twice (as the SDK's retry does), or returning an answer of its own.
type Hook func(ctx context.Context, c Call, send Send) (out any, err error)

type hookEntry struct {
	id  int64
	ops []string
	h   Hook
}

// OnCall adds h around every call of the operations ops (all of them when none is given) and
// returns a function that removes it. Hooks stand around one another in the order they were
// added, the first outermost; the armed Fault applies inside all of them, to the first request
// they send. A call counts once (Calls, the Fault's At), however often its hooks send it. Safe to
// use while the client is in use: a call sees the hooks present when it began.
func (c *Client) OnCall(h Hook, ops ...string) (remove func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hookIDs++
	id := c.hookIDs
	c.hooks = append(c.hooks, hookEntry{id: id, ops: ops, h: h})
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.hooks = slices.DeleteFunc(c.hooks, func(e hookEntry) bool { return e.id == id })
	}
}

// hooksFor returns the hooks added for op, outermost first.
func (c *Client) hooksFor(op string) []Hook {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Hook
	for _, e := range c.hooks {
		if len(e.ops) == 0 || slices.Contains(e.ops, op) {
			out = append(out, e.h)
		}
	}
	return out
}

// throughHooks sends k through the hooks added for its operation; deliver sends one request of
// it to the wrapped client (with the armed fault, if any, on the first).
func throughHooks[In, Out any](ctx context.Context, k call[In, Out], n int64, hooks []Hook,
	deliver func(context.Context, *In) (*Out, error)) (*Out, error) {
	send := func(ctx context.Context, in any) (any, error) {
		req, ok := in.(*In)
		if !ok {
			panic(fmt.Sprintf("ddbfault: a hook on %s sent a %T, want %T", k.op, in, req))
		}
		out, err := deliver(ctx, req)
		if out == nil {
			return nil, err
		}
		return out, err
	}
	for i := len(hooks) - 1; i >= 0; i-- {
		h, next := hooks[i], send
		send = func(ctx context.Context, in any) (any, error) {
			return h(ctx, Call{N: n, Op: k.op, In: in, Tables: k.tables}, next)
		}
	}
	out, err := send(ctx, k.in)
	if out == nil {
		return nil, err
	}
	o, ok := out.(*Out)
	if !ok {
		panic(fmt.Sprintf("ddbfault: a hook on %s returned a %T, want %T", k.op, out, o))
	}
	return o, err
}
