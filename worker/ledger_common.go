package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The machinery both ledgers share (ledgerCore) lives in the ledger_*.go files, one concern each:
// this file (the core and its expressions), ledger_expr.go (placeholders and values),
// ledger_claim.go (batched claims), ledger_batch.go (batched completions), ledger_tx.go (a
// transaction and its cancellation reasons, shared by both), ledger_fenced.go (the fenced
// transitions), ledger_decode.go (reading state), ledger_scan.go (scans and counting),
// ledger_capacity.go (capacity and errors), ledger_keys.go (key encoding), ledger_index.go (what
// the worker reads and writes through the ledger: the prefilter's state, the scan projection and
// leaving the pending index), ledger_settle.go (settling writes of unknown outcome) and
// ledger_wlimit.go (the write gate every write passes: throttles, Config.WriteRate). The two
// ledgers differ only in where the state row lives (the item itself, or a row of the ledger
// table) and in how they count and list items.

// LedgerClient is every DynamoDB call the ledgers make; any *dynamodb.Client fits, and tests wrap
// it to count or fail calls. When the client also has BatchGetItem (a *dynamodb.Client does), a
// batched claim reads its attempt numbers back in one call instead of one GetItem per item.
type LedgerClient interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// ledgerBatchGetter is the optional fast path for reading a batch's claims back.
type ledgerBatchGetter interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// ErrLedgerTableSchema means an existing ledger table does not have the key the table ledger
// needs (pk, a string, as its only key).
var ErrLedgerTableSchema = errors.New("dynapart: ledger table has the wrong key schema")

const (
	// claimBatchSize is the most items one TransactWriteItems claims.
	claimBatchSize = 25
	// claimConflictRounds bounds the transaction retries after conflicts; the items still left
	// are then claimed one UpdateItem at a time.
	claimConflictRounds = 4
	// maxErrorText bounds the stored error text (bytes).
	maxErrorText = 1024
	// summarizeSegments is the parallel scan width of Summarize and DeadLetters.
	summarizeSegments = 4
	// maxLedgerPK is DynamoDB's limit for a partition key (bytes); longer encodings are hashed.
	maxLedgerPK = 2048
)

// ledgerRow says where an item's state row lives and what a claim writes besides the state.
type ledgerRow struct {
	// table is the table the state is written to.
	table string
	// key returns the state row's primary key for an item key.
	key func(Key) (Key, error)
	// keyAttrs are the state row's key attribute names (to match BatchGetItem results).
	keyAttrs []string
	// exists, when set, is the attribute that must exist for any write: the inline ledger never
	// creates an item.
	exists string
	// claimSet is more SET clauses (", #a = :a") for claims and complete-only writes, claimVals
	// adds their values and extraNames their placeholders: the table ledger records the job, the
	// source table and the item key on its row.
	claimSet   string
	claimVals  func(itemKey Key, vals map[string]types.AttributeValue)
	extraNames map[string]string
	// removeOnDone are attributes removed when the item is done or failed.
	removeOnDone []string
}

// stateAttrs are the names of the state attributes.
type stateAttrs struct {
	status, owner, slot, token, claimUntil, attempts, retryAt, error, doneAt, failedAt string
	scope                                                                              string
}

func newStateAttrs(prefix string) stateAttrs {
	return stateAttrs{
		status: prefix + "status", owner: prefix + "owner", slot: prefix + "slot", token: prefix + "token",
		claimUntil: prefix + "claim_until", attempts: prefix + "attempts", retryAt: prefix + "retry_at",
		error: prefix + "error", doneAt: prefix + "done_at", failedAt: prefix + "failed_at",
		scope: prefix + "scope",
	}
}

func (a stateAttrs) all() []string {
	return []string{a.status, a.owner, a.slot, a.token, a.claimUntil, a.attempts, a.retryAt, a.error, a.doneAt, a.failedAt, a.scope}
}

// ledgerExprs are one ledger's update and condition expressions, built once.
type ledgerExprs struct {
	claimCond, claimUpdate                 string
	fenceCond                              string // the caller's claim is current
	completeUpdate                         string
	retryUpdate, deadUpdate, releaseUpdate string
	completeOnlyCond, completeOnlyUpdate   string
	completeOnlyLean                       string // the default complete-only write: status and done_at
	// freshCond is the claim and complete-only condition of an item the scan saw with no state
	// (ClaimRequest.fresh): the item still has none. It implies claimCond and completeOnlyCond,
	// and, since no write leaves an attempt count without a status (redrive removes both), that a
	// claim under it makes attempt 1.
	freshCond string
}

// ledgerCore implements the transitions for both ledgers.
type ledgerCore struct {
	db       LedgerClient
	name     string // "inline ledger" or "table ledger", for errors
	keyAttrs []string
	attrs    stateAttrs
	row      ledgerRow
	names    map[string]string // placeholder -> attribute name
	x        ledgerExprs
	// placeholders caches the placeholders each of x's expressions uses.
	placeholders map[string][]string

	meter        capacityMeter // single writes
	txMeter      capacityMeter // transactions
	condFailures atomic.Int64
	gate         *writeGate // every write passes through it; set by the Worker (nil: none)
}

func newLedgerCore(db LedgerClient, name string, keyAttrs []string, attrs stateAttrs, row ledgerRow) (*ledgerCore, error) {
	if db == nil {
		return nil, fmt.Errorf("dynapart: %s: nil DynamoDB client", name)
	}
	if row.table == "" {
		return nil, fmt.Errorf("dynapart: %s: empty table name", name)
	}
	if len(keyAttrs) == 0 || len(keyAttrs) > 2 {
		return nil, fmt.Errorf("dynapart: %s: want 1 or 2 key attributes, got %d", name, len(keyAttrs))
	}
	seen := map[string]bool{}
	for _, k := range keyAttrs {
		if k == "" || seen[k] {
			return nil, fmt.Errorf("dynapart: %s: key attributes %q: empty or repeated name", name, keyAttrs)
		}
		seen[k] = true
	}
	l := &ledgerCore{db: db, name: name, keyAttrs: append([]string(nil), keyAttrs...), attrs: attrs, row: row}
	l.names = map[string]string{
		"#status": attrs.status, "#owner": attrs.owner, "#slot": attrs.slot, "#token": attrs.token,
		"#claimUntil": attrs.claimUntil, "#attempts": attrs.attempts, "#retryAt": attrs.retryAt,
		"#error": attrs.error, "#doneAt": attrs.doneAt, "#failedAt": attrs.failedAt, "#scope": attrs.scope,
	}
	for p, n := range row.extraNames {
		l.names[p] = n
	}
	exists := ""
	if row.exists != "" {
		l.names["#exists"] = row.exists
		exists = "attribute_exists(#exists) AND "
	}
	rm := ""
	for i, a := range row.removeOnDone {
		p := "#rm" + strconv.Itoa(i)
		l.names[p] = a
		rm += ", " + p
	}
	removeOnDone := ""
	if rm != "" {
		removeOnDone = " REMOVE " + rm[2:]
	}
	extra := row.claimSet
	// The writes carry what exactly-once needs and no more (DynamoDB Local's cost grows with an
	// update expression's size). claim_until means something only while claimed and retry_at only
	// while in retry (decodeState reads them so, and every condition that reads them tests the
	// status first), so no transition removes them: the next state overwrites or ignores them.
	// A completion sets no owner (the claim it is fenced on wrote it).
	l.x = ledgerExprs{
		// Not done, not failed, and: no state, a retry that is due, or a claim that expired or
		// was made under an older lease token of the caller's slot in the caller's scope (tokens
		// count per group and lease table: another group's token says nothing about this one).
		claimCond: exists + "(attribute_not_exists(#status)" +
			" OR (#status = :retry AND (attribute_not_exists(#retryAt) OR #retryAt <= :now))" +
			" OR (#status = :claimed AND (attribute_not_exists(#claimUntil) OR #claimUntil <= :now" +
			" OR (#slot = :slot AND #token < :token AND #scope = :scope))))",
		claimUpdate: "SET #status = :claimed, #owner = :owner, #slot = :slot, #token = :token, #scope = :scope, #claimUntil = :until" +
			extra + " ADD #attempts :one",
		// status = claimed implies the item exists: the inline ledger needs no exists test here.
		fenceCond:      "#status = :claimed AND #owner = :owner AND #slot = :slot AND #token = :token AND #attempts = :attempt",
		completeUpdate: "SET #status = :done, #doneAt = :now" + removeOnDone,
		retryUpdate:    "SET #status = :retry, #retryAt = :retryAt, #error = :error",
		deadUpdate:     "SET #status = :failed, #error = :error, #failedAt = :now" + removeOnDone,
		releaseUpdate:  "SET #status = :retry, #retryAt = :now ADD #attempts :minusOne",
		// A comparison with a missing attribute is false, so NOT (... IN ...) holds for an item
		// without a status (DynamoDB, DynamoDB Local and moto agree); the shorter condition is
		// cheaper to evaluate.
		completeOnlyCond: exists + "NOT (#status IN (:done, :failed))",
		completeOnlyUpdate: "SET #status = :done, #owner = :owner, #slot = :slot, #token = :token, #doneAt = :now" +
			extra + removeOnDone + " ADD #attempts :one",
		completeOnlyLean: "SET #status = :done, #doneAt = :now" + extra + removeOnDone,
		freshCond:        exists + "attribute_not_exists(#status)",
	}
	l.placeholders = map[string][]string{}
	for _, e := range []string{l.x.claimCond, l.x.claimUpdate, l.x.fenceCond, l.x.completeUpdate, l.x.retryUpdate,
		l.x.deadUpdate, l.x.releaseUpdate, l.x.completeOnlyCond, l.x.completeOnlyUpdate, l.x.completeOnlyLean, l.x.freshCond} {
		l.placeholders[e] = ledgerPlaceholderRE.FindAllString(e, -1)
	}
	return l, nil
}
