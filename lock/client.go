package lock

import (
	"context"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// DynamoDBClient is the DynamoDB calls the lock package makes on the lock table; any
// *dynamodb.Client fits, and tests wrap it to inject faults.
type DynamoDBClient interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Client hands out slot leases and mutexes on one lock table. It is safe for concurrent use.
type Client struct {
	db        DynamoDBClient
	table     string
	owner     string
	ttl       time.Duration
	heartbeat time.Duration
	skew      time.Duration
	margin    time.Duration
	// heartbeatSet and marginSet tell an option's value from the default (derived from the TTL).
	heartbeatSet, marginSet bool
	poll                    time.Duration
	clock                   Clock
	skewImmune              bool
	log                     *slog.Logger

	mu   sync.Mutex
	seen map[itemKey]observation // skew-immune mode: when we first saw each holder's version
	// unsettled holds our acquisition writes whose outcome stayed unknown and that may still land
	// (a request delayed in the network past the client's timeout and past the settling read).
	// acquireRound adopts such a write when it finds it landed, instead of waiting out a lease
	// that we hold and nobody uses.
	unsettled map[itemKey]unsettledTake
	// cursor is, per group pk larger than windowSize, the window the next round reads (nextView).
	cursor map[string]int
	// small is, per group pk, whether the meta item last read showed n <= windowSize: a join round
	// of such a group reads the meta item and the slots in one Query (roundReader).
	small map[string]bool
	// prefetched is, per group pk, the read ReadGroup made for the client's next acquisition round.
	prefetched map[string]prefetch

	hooks testHooks
}

// testHooks let the package's tests wait on events instead of sleeping. Nil in production.
type testHooks struct {
	standby func(group string, wake time.Time) // a standby is about to wait until wake
	renewed func(l *Lease, outcome string)     // a heartbeat renew finished: "ok", "settled", "unknown", "lost"
}

type itemKey struct {
	pk string
	sk int
}

// Option configures a Client.
type Option func(*Client)

// WithOwner sets the owner id written on held items. Default: host-pid-random; it must be unique
// per Client, because fencing compares it.
func WithOwner(id string) Option { return func(c *Client) { c.owner = id } }

// WithLeaseTTL sets how long a lease lives without a renew. Default 10s.
func WithLeaseTTL(d time.Duration) Option { return func(c *Client) { c.ttl = d } }

// WithHeartbeat sets how often a held lease is renewed. Default TTL/3.
func WithHeartbeat(d time.Duration) Option {
	return func(c *Client) { c.heartbeat, c.heartbeatSet = d, true }
}

// WithMaxClockSkew sets how far apart the clocks of two clients may be. A contender takes an
// unreleased slot only once expires_at + skew has passed on its own clock. Default 1s.
func WithMaxClockSkew(d time.Duration) Option { return func(c *Client) { c.skew = d } }

// WithSafetyMargin sets how long before expires_at (by its own clock) the holder cancels its lease
// context, so work stops before anyone else may take the slot. Default max(heartbeat/2, skew).
func WithSafetyMargin(d time.Duration) Option {
	return func(c *Client) { c.margin, c.marginSet = d, true }
}

// WithPollInterval sets how often a standby re-reads the group (or a window of it); each wait is jittered between
// half and the full interval so standbys do not poll in step. Default 1s.
func WithPollInterval(d time.Duration) Option { return func(c *Client) { c.poll = d } }

// WithClock sets the clock for all lease timing. Default: [SystemClock].
func WithClock(clk Clock) Option { return func(c *Client) { c.clock = clk } }

// WithSkewImmune makes a contender take an unreleased slot only after it has watched the slot's
// version stay unchanged for a full TTL on its own clock, instead of trusting expires_at, which
// another machine's clock wrote. Safe under any clock offset, slower to take over.
func WithSkewImmune() Option { return func(c *Client) { c.skewImmune = true } }

// WithLogger sets the logger for lease events. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

const (
	defaultTTL  = 10 * time.Second
	defaultSkew = time.Second
	defaultPoll = time.Second
)

// New returns a Client for the lock table. It does not touch DynamoDB (see CheckTable). Invalid
// options give a *ConfigError naming the option.
func New(db DynamoDBClient, table string, opts ...Option) (*Client, error) {
	c := &Client{db: db, table: table, ttl: defaultTTL, skew: defaultSkew, poll: defaultPoll}
	for _, o := range opts {
		o(c)
	}
	if !c.heartbeatSet {
		c.heartbeat = c.ttl / 3
	}
	if !c.marginSet {
		c.margin = max(c.heartbeat/2, c.skew)
	}
	switch {
	case db == nil:
		return nil, bad("db", "must not be nil")
	case table == "":
		return nil, bad("table", "must not be empty")
	case c.owner == "" && hasOwnerOpt(opts):
		return nil, bad("WithOwner", "must not be empty")
	case c.ttl <= 0:
		return nil, bad("WithLeaseTTL", "must be positive, got %s", c.ttl)
	case c.heartbeat <= 0:
		return nil, bad("WithHeartbeat", "must be positive, got %s", c.heartbeat)
	case c.ttl-c.heartbeat <= c.heartbeat: // not ttl <= 2*heartbeat, which can overflow
		return nil, bad("WithLeaseTTL", "must exceed 2 x heartbeat (%s), got %s", c.heartbeat, c.ttl)
	case c.skew < 0:
		return nil, bad("WithMaxClockSkew", "must not be negative, got %s", c.skew)
	case c.margin < 0:
		return nil, bad("WithSafetyMargin", "must not be negative, got %s", c.margin)
	case c.margin >= c.ttl-c.heartbeat:
		// The first renew happens one heartbeat after acquisition; the lease must still be valid then.
		return nil, bad("WithSafetyMargin", "plus heartbeat (%s) must be less than the TTL (%s), got %s", c.heartbeat, c.ttl, c.margin)
	case c.poll <= 0:
		return nil, bad("WithPollInterval", "must be positive, got %s", c.poll)
	}
	if c.owner == "" {
		c.owner = DefaultOwner()
	}
	if c.clock == nil {
		c.clock = SystemClock{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// hasOwnerOpt tells an explicit WithOwner("") (a bug in the caller) from no WithOwner at all.
func hasOwnerOpt(opts []Option) bool {
	probe := &Client{owner: "\x00unset"}
	for _, o := range opts {
		o(probe)
	}
	return probe.owner != "\x00unset"
}

// Owner returns the owner id this Client writes on the items it holds.
func (c *Client) Owner() string { return c.owner }

// Table returns the lock table's name.
func (c *Client) Table() string { return c.table }

// jitter returns a standby wait in [poll/2, poll]: never longer than one poll interval, so a
// standby's takeover time stays bounded, yet spread so standbys do not query in step (untilFree
// shortens it when a lease seen runs out sooner).
func (c *Client) jitter() time.Duration {
	half := c.poll / 2
	return half + mrand.N(c.poll-half+1)
}

// wait blocks for d on the client's clock or until ctx ends.
func (c *Client) wait(ctx context.Context, group string, d time.Duration) error {
	wake := c.clock.Now().Add(d)
	timer := c.clock.After(d)
	if h := c.hooks.standby; h != nil {
		h(group, wake)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer:
		return nil
	}
}
