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
	// Attrs are the item's attributes as scanned (the projection, if one was configured).
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
	// Attrs: every attribute but the ledger's), when the worker follows the table's stream
	// (Config.Follow): each version of an item is handled once; "" otherwise.
	Version string

	effects *effectSlot // where WithEffects leaves the call's effects
}

// Unmarshal decodes the item's attributes into v (attributevalue.UnmarshalMap).
func (i Item) Unmarshal(v any) error { return attributevalue.UnmarshalMap(i.Attrs, v) }

// idempotencyKey hashes the job name, the source table and the key attributes (sorted by name,
// type-tagged), each part length-prefixed.
func idempotencyKey(job, table string, key Key) string {
	h := sha256.New()
	writePart := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	writePart([]byte(job))
	writePart([]byte(table))
	names := make([]string, 0, len(key))
	for k := range key {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		writePart([]byte(k))
		switch v := key[k].(type) {
		case *types.AttributeValueMemberS:
			writePart(append([]byte("S"), v.Value...))
		case *types.AttributeValueMemberN:
			writePart(append([]byte("N"), v.Value...))
		case *types.AttributeValueMemberB:
			writePart(append([]byte("B"), v.Value...))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
