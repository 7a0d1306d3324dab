package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The machinery both ledgers share (core) lives in this package's files, one concern each:
// machine.go (the transitions), expr.go (their condition and update trees), this file (the core
// and the compiled transitions), values.go (the values of a write), claim.go and claim_batch.go
// (claims), complete_batch.go (batched completions), statement.go and statement_batch.go (a
// transition as a PartiQL statement, and a batch of them), claim_statements.go and
// complete_statements.go (batched claims and completions as statement batches), tx.go (a
// transaction and its cancellation reasons), fenced.go (the fenced transitions), completeonly.go (writes without a claim),
// decode.go (reading state), scan.go (scans and counting), capacity.go (capacity and errors),
// keys.go (key encoding), index.go (leaving the pending index, the scan projection), settle.go
// (settling writes of unknown outcome), gate.go (the write gate every write passes: throttles,
// a write rate) and fence.go (writes end with the lease they are made for). The two ledgers differ
// only in where the state row lives (the item itself, or a row of the ledger table) and in how
// they count and list items.

// Client is every DynamoDB call the ledgers make; any *dynamodb.Client fits, and tests wrap it to
// count or fail calls. When the client also has BatchGetItem (a *dynamodb.Client does), a batched
// claim reads its attempt numbers back in one call instead of one GetItem per item.
type Client interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// batchGetter is the optional fast path for reading many rows.
type batchGetter interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// ErrLedgerTableSchema means an existing ledger table does not have the key the table ledger
// needs (pk, a string, as its only key).
var ErrLedgerTableSchema = errors.New("dynapart: ledger table has the wrong key schema")

const (
	// BatchSize is the most items one batched claim or completion writes in one request.
	BatchSize = 25
	// claimConflictRounds bounds the transaction retries after conflicts; the items still left
	// are then written one UpdateItem at a time.
	claimConflictRounds = 4
	// maxErrorText bounds the stored error text (bytes).
	maxErrorText = 1024
	// summarizeSegments is the parallel scan width of Summarize and DeadLetters.
	summarizeSegments = 4
	// maxLedgerPK is DynamoDB's limit for a partition key (bytes); longer encodings are hashed.
	maxLedgerPK = 2048
)

// rowSpec says where an item's state row lives and what the first write of a row records.
type rowSpec struct {
	// table is the table the state is written to.
	table string
	// key returns the state row's primary key for an item key.
	key func(Key) (Key, error)
	// keyAttrs are the state row's key attribute names (to match BatchGetItem results).
	keyAttrs []string
	// identVals adds the values of the row's identity (shape.ident) for an item key.
	identVals func(itemKey Key, vals values)
}

// attrNames maps the state attributes to their names under prefix.
func attrNames(prefix string) map[attr]string {
	return map[attr]string{
		aStatus: prefix + "status", aOwner: prefix + "owner", aSlot: prefix + "slot", aToken: prefix + "token",
		aScope: prefix + "scope", aClaim: prefix + "claim", aClaimUntil: prefix + "claim_until",
		aAttempts: prefix + "attempts", aRetryAt: prefix + "retry_at", aError: prefix + "error",
		aDoneAt: prefix + "done_at", aFailedAt: prefix + "failed_at",
		aLastError: prefix + "last_error", aRedriven: prefix + "redriven_at", aVersion: prefix + "version",
	}
}

// stateAttrs are the attributes of an item's state, in the order State and DeadLetters read them.
var stateAttrs = []attr{aStatus, aOwner, aSlot, aToken, aScope, aClaim, aClaimUntil, aAttempts, aRetryAt, aError, aDoneAt, aFailedAt, aVersion}

// compiled is a transition rendered for one ledger: its expressions, built once, and the names
// and values they use.
type compiled struct {
	transition
	condExpr, updExpr string
	names             map[string]string // placeholder -> attribute name
	vals              []val
	placeholders      []string // of vals, in order (":" + the symbol)
	// identified: the write carries the caller's claim id (it sets it, or its condition checks
	// it), so a row that shows that id and the update's values shows this very write.
	identified bool
}

func compile(t transition, names map[attr]string) *compiled {
	var cb, ub strings.Builder
	t.cond.render(&cb)
	t.upd.render(&ub)
	u := usage{attrs: map[attr]bool{}, vals: map[val]bool{}}
	t.cond.uses(&u)
	t.upd.uses(&u)
	c := &compiled{transition: t, condExpr: cb.String(), updExpr: ub.String(), names: map[string]string{}}
	for a := range u.attrs {
		c.names["#"+string(a)] = names[a]
	}
	for v := range u.vals {
		c.vals = append(c.vals, v)
		c.placeholders = append(c.placeholders, ":"+string(v))
	}
	c.identified = u.vals[vClaim]
	return c
}

// core implements the transitions for both ledgers.
type core struct {
	db       Client
	name     string // "inline ledger" or "table ledger", for errors
	keyAttrs []string
	names    map[attr]string
	row      rowSpec
	ops      map[Op]*compiled
	skew     time.Duration // added to claim_until, taken from the retry_at of a renew or release: see WithMaxClockSkew
	prefix   string        // the inline ledger's attribute prefix ("" for the table ledger)
	source   string        // the table ledger's source table ("" for the inline ledger: row.table)

	meter     capacityMeter // single writes of state rows
	srcMeter  capacityMeter // single writes to another table: the table ledger's source items (LeaveIndex)
	txMeter   capacityMeter // transactions
	stmtMeter capacityMeter // PartiQL statement batches
	reads     readMeter     // reads of state rows
	// noStatements: batched claims and completions go in transactions (WithoutStatementBatches,
	// a client without BatchExecuteStatement, or a backend that failed a statement batch as a
	// whole).
	noStatements atomic.Bool
	stmtFailures atomic.Int64 // statement batches in a row that failed as a whole
	condFailures atomic.Int64
	gate         *WriteGate // every write passes through it (nil: none)
	merged       mergedUpdates
	leaseVals    leaseValueCache
	stateNames   map[string]bool // the attributes of an item's state (see isLedgerAttr)
	removedNames map[string]bool // the attributes done and failed remove (WithRemoveOnDone)
	versioned    bool            // WithVersions: see versions in machine.go
	reserved     []string        // WithReservedTables: tables effects may not write
}

// coreSpec is what a ledger gives newCore.
type coreSpec struct {
	name     string
	keyAttrs []string
	names    map[attr]string
	row      rowSpec
	shape    shape
	opts     options
	prefix   string // inline
	source   string // table
}

func newCore(db Client, s coreSpec) (*core, error) {
	if db == nil {
		return nil, fmt.Errorf("dynapart: %s: nil DynamoDB client", s.name)
	}
	if s.row.table == "" {
		return nil, fmt.Errorf("dynapart: %s: empty table name", s.name)
	}
	if len(s.keyAttrs) == 0 || len(s.keyAttrs) > 2 {
		return nil, fmt.Errorf("dynapart: %s: want 1 or 2 key attributes, got %d", s.name, len(s.keyAttrs))
	}
	seen := map[string]bool{}
	for _, k := range s.keyAttrs {
		if k == "" || seen[k] {
			return nil, fmt.Errorf("dynapart: %s: key attributes %q: empty or repeated name", s.name, s.keyAttrs)
		}
		seen[k] = true
	}
	if s.opts.skew < 0 {
		return nil, fmt.Errorf("dynapart: %s: negative MaxClockSkew %s", s.name, s.opts.skew)
	}
	s.shape.audit = s.opts.audit
	s.shape.versioned = s.opts.versioned
	l := &core{db: db, name: s.name, keyAttrs: append([]string(nil), s.keyAttrs...), names: s.names, row: s.row,
		skew: s.opts.skew, gate: s.opts.gate, ops: map[Op]*compiled{}, prefix: s.prefix, source: s.source,
		versioned: s.opts.versioned, reserved: s.opts.reserved}
	_, batches := db.(statementBatcher)
	l.noStatements.Store(s.opts.noStatements || !batches)
	for op, t := range machine(s.shape) {
		l.ops[op] = compile(t, s.names)
	}
	l.stateNames = map[string]bool{s.names[aLastError]: true, s.names[aRedriven]: true}
	for _, a := range stateAttrs {
		l.stateNames[s.names[a]] = true
	}
	l.removedNames = map[string]bool{}
	for _, a := range s.shape.removeOnDone {
		l.removedNames[s.names[a]] = true
	}
	return l, nil
}

// input is a write of op's transition on rowKey with the values vals (only those it uses are sent).
func (l *core) input(op Op, rowKey Key, vals values) *dynamodb.UpdateItemInput {
	c := l.ops[op]
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(l.row.table), Key: rowKey,
		ConditionExpression: aws.String(c.condExpr), UpdateExpression: aws.String(c.updExpr),
		ExpressionAttributeNames: c.names, ExpressionAttributeValues: c.valuesOf(vals, 0),
	}
	return in
}

// valuesOf is the ExpressionAttributeValues of c's expressions with the values vals, in a map
// with room for extra more.
func (c *compiled) valuesOf(vals values, extra int) map[string]types.AttributeValue {
	if len(c.vals) == 0 && extra == 0 {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(c.vals)+extra)
	for i, s := range c.vals {
		if x := vals.get(s); x != nil {
			out[c.placeholders[i]] = x
		}
	}
	return out
}

// view is row as op's condition and update read it, with the values vals.
func (l *core) view(item map[string]types.AttributeValue, vals values) row {
	return row{attrs: item, names: l.names, vals: vals}
}

// applied reports whether item shows op's write with the values vals: the identity its condition
// checked (for a fenced write, the claim) and every attribute its update sets or removes.
func (l *core) applied(op Op, item map[string]types.AttributeValue, vals values) bool {
	if len(item) == 0 {
		return false
	}
	r := l.view(item, vals)
	c := l.ops[op]
	if !c.identified || !eq(aClaim, vClaim).holds(r) {
		return false
	}
	return c.upd.shows(r)
}

// wrapErr says which ledger, operation and table an error comes from.
func (l *core) wrapErr(op, table string, err error) error {
	if missingTable(err) {
		return fmt.Errorf("dynapart: %s: %s: table %q does not exist: %w", l.name, op, table, err)
	}
	return fmt.Errorf("dynapart: %s: %s on table %q: %w", l.name, op, table, err)
}

// projection is a ProjectionExpression of attrs with its names.
func projection(attrs []string) (string, map[string]string) {
	names := make(map[string]string, len(attrs))
	ps := make([]string, len(attrs))
	for i, a := range attrs {
		p := "#p" + strconv.Itoa(i)
		names[p] = a
		ps[i] = p
	}
	return strings.Join(ps, ", "), names
}
