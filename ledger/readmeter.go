package ledger

import (
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// readMeter sums the read capacity of the ledger's reads of state rows (Ledger.ConsumedRCU): the
// table ledger's rows read before complete-only handlers or back after transacted claims, and
// any row read to settle a write. Every read asks DynamoDB what it consumed (one answer per
// request of up to 100 rows, so asking costs little; the inline ledger's reads are billed by the
// whole item, which the projection the ledger reads does not show); a read answered without a
// figure counts its floor, 1 RCU per row asked for (consistent, and a missing row costs as much).
type readMeter struct {
	mu  sync.Mutex
	rcu float64
}

// add charges one read request of rows rows, answered with cs (nil: no figure).
func (m *readMeter) add(rows int, cs ...*types.ConsumedCapacity) {
	var reported float64
	for _, c := range cs {
		if c != nil {
			reported += max(aws.ToFloat64(c.ReadCapacityUnits), aws.ToFloat64(c.CapacityUnits))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rcu += max(reported, float64(rows))
}

func (m *readMeter) total() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rcu
}

// batchCapacity is the ConsumedCapacity entries of a BatchGetItem answer, as pointers.
func batchCapacity(cs []types.ConsumedCapacity) []*types.ConsumedCapacity {
	out := make([]*types.ConsumedCapacity, len(cs))
	for i := range cs {
		out[i] = &cs[i]
	}
	return out
}
