package sweep

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ddbfault"
)

// recorder watches one run: handler calls, the writes that landed, the items in flight when the
// fault fired, and the slot acquisitions.
type recorder struct {
	leaseTable string

	mu       sync.Mutex
	calls    map[string]int  // handler calls per item
	effects  map[string]int  // successful handler calls per item: the side effects
	open     map[string]bool // handled (or being handled) and not yet settled by a landed write
	settled  map[string]int  // landed writes that moved the item to done or failed
	inFlight map[string]bool // at the fault: open items and the items the faulted call named
	fired    bool
	acquired map[string][]acquisition // slot (pk/sk) -> acquisitions in landing order
	tokens   map[string]bool          // ClientRequestTokens of transactions that landed
}

type acquisition struct {
	owner string
	token string
}

func newRecorder(leaseTable string) *recorder {
	return &recorder{leaseTable: leaseTable, calls: map[string]int{}, effects: map[string]int{}, open: map[string]bool{},
		settled: map[string]int{}, inFlight: map[string]bool{}, acquired: map[string][]acquisition{}, tokens: map[string]bool{}}
}

var (
	idPattern = regexp.MustCompile(`it\d{4}`)
	digits    = regexp.MustCompile(`\d+`)
)

// ids finds the item ids in keys (inline: the id; table ledger: the end of pk).
func ids(keys ...map[string]types.AttributeValue) []string {
	var out []string
	for _, k := range keys {
		for _, v := range k {
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				out = append(out, idPattern.FindAllString(s.Value, -1)...)
			}
		}
	}
	return out
}

func (r *recorder) handlerStart(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[id]++
	r.open[id] = true
}

func (r *recorder) handlerEnd(id string, err error) {
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.effects[id]++
}

func (r *recorder) onInject(in ddbfault.Injection) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fired = true
	for id := range r.open {
		r.inFlight[id] = true
	}
	if r.leaseTable != "" && containsTable(in.Tables, r.leaseTable) {
		return // a lease write names slots, not items
	}
	for _, id := range ids(in.Keys...) {
		r.inFlight[id] = true
	}
}

func containsTable(ts []string, t string) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// settles reports whether an update moves an item to done or failed.
func settles(expr *string) bool {
	e := aws.ToString(expr)
	return strings.Contains(e, "= :done") || strings.Contains(e, "= :failed")
}

func (r *recorder) onSent(s ddbfault.Sent) {
	if s.Err != nil {
		return
	}
	switch in := s.In.(type) {
	case *dynamodb.UpdateItemInput:
		if aws.ToString(in.TableName) == r.leaseTable {
			if v, ok := in.ExpressionAttributeValues[":acq"]; ok && v != nil {
				r.acquire(slotName(in.Key), sVal(in.ExpressionAttributeValues[":owner"]), nVal(in.ExpressionAttributeValues[":token"]))
			}
			return
		}
		if settles(in.UpdateExpression) {
			r.settle(ids(in.Key))
		}
	case *dynamodb.PutItemInput:
		if aws.ToString(in.TableName) == r.leaseTable && in.Item["acquired_at"] != nil {
			r.acquire(slotName(in.Item), sVal(in.Item["owner"]), nVal(in.Item["token"]))
		}
	case *dynamodb.TransactWriteItemsInput:
		if s.Retry && in.ClientRequestToken != nil || r.landedBefore(in.ClientRequestToken) {
			return // the repeat of a transaction that was applied: DynamoDB does not apply it again
		}
		for _, it := range in.TransactItems {
			if it.Update != nil && settles(it.Update.UpdateExpression) {
				r.settle(ids(it.Update.Key))
			}
		}
	}
}

// landedBefore reports (and notes) a transaction token that landed before: DynamoDB answers its
// repeats, within ten minutes, without applying them again.
func (r *recorder) landedBefore(token *string) bool {
	if token == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := r.tokens[*token]
	r.tokens[*token] = true
	return seen
}

func (r *recorder) settle(items []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range items {
		r.settled[id]++
		delete(r.open, id)
	}
}

func (r *recorder) acquire(slot, owner, token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acquired[slot] = append(r.acquired[slot], acquisition{owner: owner, token: token})
}

func slotName(k map[string]types.AttributeValue) string { return sVal(k["pk"]) + "/" + nVal(k["sk"]) }

func sVal(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func nVal(v types.AttributeValue) string {
	if n, ok := v.(*types.AttributeValueMemberN); ok {
		return n.Value
	}
	return ""
}

// leaseViolations checks the acquisitions: per slot, tokens strictly increase, and no token is
// taken by two owners.
func (r *recorder) leaseViolations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	slots := make([]string, 0, len(r.acquired))
	for s := range r.acquired {
		slots = append(slots, s)
	}
	sort.Strings(slots)
	for _, s := range slots {
		var last int64 = -1
		owners := map[int64]string{}
		for _, a := range r.acquired[s] {
			var tok int64
			if _, err := fmt.Sscan(a.token, &tok); err != nil {
				out = append(out, fmt.Sprintf("lease %s: acquisition with an unreadable token %q", s, a.token))
				continue
			}
			if o, ok := owners[tok]; ok && o != a.owner {
				out = append(out, fmt.Sprintf("lease %s: token %d taken by %s and %s", s, tok, o, a.owner))
			}
			owners[tok] = a.owner
			if tok < last {
				out = append(out, fmt.Sprintf("lease %s: token %d acquired after token %d", s, tok, last))
			}
			last = max(last, tok)
		}
	}
	return out
}
