package ledger

import (
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// capacityMeter sums the write capacity the ledger's writes consume. Asking DynamoDB for a write's
// consumed capacity is not free: on DynamoDB Local it costs about a fifth of the write
// throughput. So unless every write must be settled on its cost (a write rate is held:
// Config.WriteRate), one write in capacitySample asks, and the total is estimated as the asking
// writes' WCU times writes/asked: exact for writes of equal size, an estimate otherwise. A ledger
// keeps one meter for single writes and one for transactions, whose sizes differ.
type capacityMeter struct {
	mu            sync.Mutex
	writes, asked int64
	wcu           float64 // of the writes that asked and were answered
}

// capacitySample: without a write rate, one write in capacitySample asks for its capacity.
const capacitySample = 16

// ask counts a write and says whether it asks for its consumed capacity: every write does when
// every is set (a write rate is held), otherwise the first and one in capacitySample.
func (m *capacityMeter) ask(every bool) types.ReturnConsumedCapacity {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if every || m.writes%capacitySample == 1 {
		return types.ReturnConsumedCapacityTotal
	}
	return types.ReturnConsumedCapacityNone
}

// add records the capacity an asking write was answered with.
func (m *capacityMeter) add(cs []types.ConsumedCapacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked++
	m.wcu += sumWCU(cs)
}

// total is the estimated WCU of all the writes counted.
func (m *capacityMeter) total() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.asked == 0 {
		return 0
	}
	return m.wcu * float64(m.writes) / float64(m.asked)
}

// wcuOf is the write capacity c reports (none: 0).
func wcuOf(c *types.ConsumedCapacity) float64 {
	if c == nil {
		return 0
	}
	if u := aws.ToFloat64(c.WriteCapacityUnits); u != 0 {
		return u
	}
	return aws.ToFloat64(c.CapacityUnits)
}

// sumWCU is the write capacity of one answer's ConsumedCapacity (one per table).
func sumWCU(cs []types.ConsumedCapacity) float64 {
	var u float64
	for i := range cs {
		u += wcuOf(&cs[i])
	}
	return u
}

func (l *core) consumedWCU() float64 { return l.meter.total() + l.txMeter.total() }
