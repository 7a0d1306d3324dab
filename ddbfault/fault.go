package ddbfault

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Kind is a kind of fault.
type Kind string

// The fault kinds; see the package documentation.
const (
	ErrorBeforeSend        Kind = "error-before-send"
	LostAnswer             Kind = "lost-answer"
	LostAnswerRetried      Kind = "lost-answer-retried"
	LostAnswerRetriedNoOld Kind = "lost-answer-retried-no-old"
	Throttle               Kind = "throttle"
	ServerError            Kind = "server-error"
	DelayedAnswer          Kind = "delayed-answer"
)

// Kinds lists every fault kind, in a stable order.
func Kinds() []Kind {
	return []Kind{ErrorBeforeSend, LostAnswer, LostAnswerRetried, LostAnswerRetriedNoOld, Throttle, ServerError, DelayedAnswer}
}

// ParseKind returns the Kind named s.
func ParseKind(s string) (Kind, error) {
	if k := Kind(s); slices.Contains(Kinds(), k) {
		return k, nil
	}
	names := make([]string, 0, len(Kinds()))
	for _, k := range Kinds() {
		names = append(names, string(k))
	}
	return "", fmt.Errorf("ddbfault: unknown fault kind %q (one of %s)", s, strings.Join(names, ", "))
}

// Applied reports whether a request hit by this kind of fault reaches the server.
func (k Kind) Applied() bool {
	switch k {
	case LostAnswer, LostAnswerRetried, LostAnswerRetriedNoOld, DelayedAnswer:
		return true
	}
	return false
}

// The operation names, as DynamoDB's API spells them.
const (
	OpGetItem            = "GetItem"
	OpPutItem            = "PutItem"
	OpUpdateItem         = "UpdateItem"
	OpDeleteItem         = "DeleteItem"
	OpQuery              = "Query"
	OpScan               = "Scan"
	OpDescribeTable      = "DescribeTable"
	OpTransactWriteItems = "TransactWriteItems"
	OpBatchGetItem       = "BatchGetItem"
	OpBatchWriteItem     = "BatchWriteItem"
	// OpBatchExecuteStatement: a batch of PartiQL statements (the ledgers' batched writes).
	OpBatchExecuteStatement = "BatchExecuteStatement"
	OpCreateTable           = "CreateTable"
)

// WriteOps are the operations that change items.
var WriteOps = []string{OpPutItem, OpUpdateItem, OpDeleteItem, OpTransactWriteItems, OpBatchWriteItem, OpBatchExecuteStatement}

// Fault is one fault to inject.
type Fault struct {
	// Kind is what happens to the call. Required.
	Kind Kind
	// At is which matching call is hit: 1 for the first. Required, >= 1.
	At int64
	// Ops limits the matching calls to these operations (OpUpdateItem, ...). Defaults to all.
	Ops []string
	// Table limits the matching calls to those naming this table (a transaction or batch matches
	// when any of its items does). Defaults to every table.
	Table string
}

func (f Fault) String() string {
	s := fmt.Sprintf("%s@%d", f.Kind, f.At)
	if len(f.Ops) > 0 {
		s += "[" + strings.Join(f.Ops, ",") + "]"
	}
	if f.Table != "" {
		s += "{" + f.Table + "}"
	}
	return s
}

func (f Fault) matches(op string, tables []string) bool {
	if len(f.Ops) > 0 && !slices.Contains(f.Ops, op) {
		return false
	}
	return f.Table == "" || slices.Contains(tables, f.Table)
}

// Injection describes the call a fault hit.
type Injection struct {
	Fault Fault
	// Call is the call's number among all calls of the client (1 for the first).
	Call int64
	// Op and Tables name the call; Keys are the item keys it named (for a Scan or Query: none).
	Op     string
	Tables []string
	Keys   []map[string]types.AttributeValue
	// Landed reports whether the request reached the server and was answered there (its outcome
	// is ServerErr; nil when the write was applied).
	Landed    bool
	ServerErr error
}
