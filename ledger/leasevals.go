package ledger

import (
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// leaseValues are the values of a request that stay the same for as long as a worker holds its
// lease (its owner, slot, token and scope), made once rather than for every write. Values are
// shared between requests and never written to.
type leaseValues struct {
	key                       leaseKey
	owner, slot, token, scope types.AttributeValue
}

type leaseKey struct {
	owner, scope string
	slot         int
	token        int64
}

// leaseValueCache holds the lease values last asked for: one worker's writes all find them.
type leaseValueCache struct{ last atomic.Pointer[leaseValues] }

// of is the lease values of r.
func (c *leaseValueCache) of(r ClaimRequest) *leaseValues {
	k := leaseKey{owner: r.Owner, scope: r.Scope, slot: r.Slot, token: r.Token}
	if lv := c.last.Load(); lv != nil && lv.key == k {
		return lv
	}
	lv := &leaseValues{key: k, owner: attrS(r.Owner), slot: attrN(int64(r.Slot)), token: attrN(r.Token), scope: attrS(r.Scope)}
	c.last.Store(lv)
	return lv
}
