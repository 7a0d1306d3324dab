package worker

import (
	"context"
	"sync"
)

// claimsInFlight is how many batched claim transactions a pass runs at once.
const claimsInFlight = 4

// claimPipe runs a pass's batched claims (claimAndSend) in the background, up to claimsInFlight
// at a time, so that one transaction's round trips (the claim and the read-back of its attempts)
// overlap the next page's and the handlers' work instead of holding up the scan. The first error
// is kept: dispatch returns it on its next call, and scanAndHandle once the scan has ended.
type claimPipe struct {
	slots chan struct{}
	wg    sync.WaitGroup

	mu  sync.Mutex
	err error
}

func newClaimPipe() *claimPipe {
	return &claimPipe{slots: make(chan struct{}, claimsInFlight)}
}

// start runs fn in the background once fewer than claimsInFlight are running; it returns the
// pipe's first error instead, or ctx's once ctx ends while waiting.
func (c *claimPipe) start(ctx context.Context, fn func() error) error {
	if err := c.failed(); err != nil {
		return err
	}
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	c.wg.Go(func() {
		defer func() { <-c.slots }()
		if err := fn(); err != nil {
			c.mu.Lock()
			if c.err == nil {
				c.err = err
			}
			c.mu.Unlock()
		}
	})
	return nil
}

// failed is the first error a background claim returned, or nil.
func (c *claimPipe) failed() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// wait waits for the claims running and returns the first error.
func (c *claimPipe) wait() error {
	if c == nil {
		return nil
	}
	c.wg.Wait()
	return c.failed()
}

// batchClaims gives a pass with BatchClaims its claim gate and its claim pipe.
func (p *pass) batchClaims() {
	if p.w.cfg.BatchClaims {
		p.gate = newClaimGate(p.w.cfg.Concurrency, p.w.cfg.ClaimTTL)
		p.claims = newClaimPipe()
	}
}
