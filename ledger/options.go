package ledger

import "time"

// Option configures a ledger.
type Option func(*options)

type options struct {
	prefix       string
	removeOnDone []string
	skew         time.Duration
	gate         *WriteGate
	audit        bool
	noStatements bool
	versioned    bool
	reserved     []string
}

// WithPrefix starts the name of every inline state attribute (<prefix>status, <prefix>owner, ...).
// Defaults to "dp_". The table ledger's row attributes have no prefix.
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithRemoveOnDone names attributes the inline ledger removes when an item is done or
// dead-lettered, e.g. the shard attribute of a sparse pending index, so that finished items leave
// the index. They may not be key or state attributes. Defaults to none.
func WithRemoveOnDone(attrs ...string) Option {
	return func(o *options) { o.removeOnDone = append([]string(nil), attrs...) }
}

// WithMaxClockSkew is the clock difference tolerated between the workers that claim items: a
// claim's stored expiry is its Until plus this, so another worker takes it over only once its
// holder's own clock has passed Until; and a renewed item (Renew) or a released claim (Release, or
// the undo of a claim whose answer was lost) is due from that write's time less this, so every
// worker finds it due at once. Defaults to 0 (clocks agree).
func WithMaxClockSkew(d time.Duration) Option { return func(o *options) { o.skew = d } }

// WithWriteGate sends every write through g (see WriteGate). Defaults to none.
func WithWriteGate(g *WriteGate) Option { return func(o *options) { o.gate = g } }

// WithCompleteOnlyAudit makes complete-only writes also record who completed the item (owner,
// slot, token) and count the attempt. Defaults to off: status, done_at and the write's id only.
func WithCompleteOnlyAudit() Option { return func(o *options) { o.audit = true } }

// WithoutStatementBatches writes batched claims and completions as transactions
// (TransactWriteItems, 2 WCU per item) instead of PartiQL statement batches (BatchExecuteStatement,
// 1 WCU per item), for a backend that lacks PartiQL conditions (moto). Defaults to statement
// batches when the client has BatchExecuteStatement.
func WithoutStatementBatches() Option { return func(o *options) { o.noStatements = true } }

// WithVersions makes every write that finishes an item (done or failed) record the content
// version it handled (Claim.Version, see ContentVersion), and enables Renew: a worker that follows
// the table's stream tells a new version of a finished item from one already handled by it.
// Defaults to off (no version attribute is written).
func WithVersions() Option { return func(o *options) { o.versioned = true } }

// WithReservedTables names tables that a handler's effects may not write (by name or ARN), as
// they may not write the table ledger's own table: a worker reserves its lease table, whose
// leases, plan and shard checkpoints a write of another's would break. Defaults to none.
func WithReservedTables(tables ...string) Option {
	return func(o *options) { o.reserved = append(o.reserved, tables...) }
}

func collect(opts []Option) options {
	o := options{prefix: DefaultAttrPrefix}
	for _, f := range opts {
		f(&o)
	}
	return o
}
