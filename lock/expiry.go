package lock

import (
	"errors"
	mrand "math/rand/v2"
	"time"
)

// When a held slot becomes free to take: at once when released, else by expires_at plus
// MaxClockSkew, or with WithSkewImmune once its version has stood still for a full TTL on our own
// clock.

// isFree decides whether a contender may take the item now (see freeFrom).
func (c *Client) isFree(pk string, it slotItem, now time.Time) bool {
	return !now.Before(c.freeFrom(pk, it, now))
}

// freeFrom is the first time a contender may take the item, on our clock (zero: at once).
// Default rule: released, or once expires_at + MaxClockSkew has passed. Skew-immune rule:
// released, or once we have watched the same owner, token, version and expires_at for a full
// TTL on our own clock (a new observation starts the watch at now).
func (c *Client) freeFrom(pk string, it slotItem, now time.Time) time.Time {
	if !it.exists || it.released || it.owner == "" {
		return time.Time{}
	}
	if !c.skewImmune {
		return it.expiresAt.Add(c.skew).Add(time.Nanosecond) // strictly after
	}
	k := itemKey{pk, it.sk}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[itemKey]observation{}
	}
	obs, ok := c.seen[k]
	if !ok || obs.owner != it.owner || obs.token != it.token || obs.version != it.version || !obs.expiresAt.Equal(it.expiresAt) {
		obs = observation{owner: it.owner, token: it.token, version: it.version, expiresAt: it.expiresAt, since: now}
		c.seen[k] = obs
	}
	return obs.since.Add(c.ttl)
}

// untilFree shortens a standby's pause to just past the time a slot it saw held becomes free
// (heldUntil), spread over a tenth of the poll interval so that standbys watching the same slot
// do not all write at once; never shorter than a tenth of the poll interval.
func (c *Client) untilFree(err error, pause time.Duration) time.Duration {
	var h *heldUntil
	if !errors.As(err, &h) {
		return pause
	}
	d := h.freeAt.Sub(c.clock.Now()) + time.Millisecond + mrand.N(c.poll/10+1)
	return min(pause, max(d, c.poll/10))
}

type observation struct {
	owner          string
	token, version int64
	expiresAt      time.Time
	since          time.Time
}
