package worker

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sort"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Handler processes one claimed item. Returning nil completes it; an error is a failed attempt
// (see Permanent and RetryAfter); a panic is recovered and counted as a failed attempt.
type Handler func(ctx context.Context, item Item) error

// Item is one claimed item as the handler sees it.
type Item struct {
	// Key is the item's primary key.
	Key Key
	// Attrs are the item's attributes as scanned (the projection, if one was configured); with
	// Versions (implied by Follow), a claimed item's as of its claim (returned by it or read after
	// it), and a complete-only item's of the table ledger as read after its row.
	Attrs map[string]types.AttributeValue
	// Attempt is 1 for the first claim of the item, +1 for every later one.
	Attempt int
	// Slot is the slot the item was claimed under.
	Slot int
	// Token is the fencing token of the slot lease the claim was made under: a side effect store
	// may refuse writes from older tokens.
	Token int64
	// IdempotencyKey is stable for the item within a job and source table (the same on every
	// attempt): use it to make side effects idempotent (an e-mail provider's idempotency key, a
	// conditional put). It hashes the job, the source table and the item's key, so items of two
	// tables with the same key value get different keys, under the default job too.
	IdempotencyKey string
	// Claim is the id of the claim (unique to it; empty in complete-only mode): with Token it
	// identifies this attempt, also after a release gave an attempt number back.
	Claim string
	// Version is the version of the item's content the handler has (ledger.ContentVersion of
	// Attrs: every attribute but the ledger's), when the worker records versions (Config.Versions,
	// implied by Follow): each version of an item is handled once; "" otherwise.
	Version string

	effects *effectSlot // where WithEffects leaves the call's effects
}

// Unmarshal decodes the item's attributes into v (attributevalue.UnmarshalMap).
func (i Item) Unmarshal(v any) error { return attributevalue.UnmarshalMap(i.Attrs, v) }

// idempotencyKey hashes the job name, the source table and the key attributes (sorted by name,
// type-tagged), each part length-prefixed. Built in one buffer, on the stack for usual keys: every
// item gets one.
func idempotencyKey(job, table string, key Key) string {
	var buf [256]byte
	b := appendPart(buf[:0], "", job)
	b = appendPart(b, "", table)
	for _, k := range sortedNames(key) {
		b = appendPart(b, "", k)
		switch v := key[k].(type) {
		case *types.AttributeValueMemberS:
			b = appendPart(b, "S", v.Value)
		case *types.AttributeValueMemberN:
			b = appendPart(b, "N", v.Value)
		case *types.AttributeValueMemberB:
			b = appendPart(b, "B", string(v.Value))
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// appendPart appends tag+s to b, prefixed with its length (4 bytes, big-endian).
func appendPart(b []byte, tag, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(tag)+len(s)))
	return append(append(b, tag...), s...)
}

// sortedNames is key's attribute names in order (a key has one or two).
func sortedNames(key Key) []string {
	names := make([]string, 0, 2)
	for k := range key {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
