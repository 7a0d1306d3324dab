package ledger

import (
	"errors"
	"sync"

	"github.com/dynapart/dynapart/internal/capacity"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// capacityMeter sums the write capacity the ledger's writes consume, by DynamoDB's billing rules:
// every write DynamoDB bills costs at least its floor (1 WCU per item written, also when its
// condition fails; 2 per item of a transaction; nothing for a throttled or invalid request), and an
// item over 1 KB more, as DynamoDB reports it. Asking
// DynamoDB for a write's consumed capacity is not free: on DynamoDB Local it costs about a fifth of
// the write throughput. So unless every write must be settled on its cost (a write rate is held:
// Config.WriteRate), one write in capacitySample asks, and the total is the floors of all writes
// scaled by what the asking writes cost against their floors: exact for writes of equal size, an
// estimate otherwise. A report below the floor (DynamoDB Local reports 2 WCU for a whole
// transaction, and nothing for a PartiQL batch) counts as the floor. A ledger keeps one meter per
// kind of write (single writes of state rows, single writes of the table ledger's source items,
// transactions, statement batches), whose sizes differ.
type capacityMeter struct {
	mu            sync.Mutex
	writes, asked int64
	floor         float64 // of every write billed
	askedFloor    float64 // of the writes that asked and were answered
	wcu           float64 // of the writes that asked and were answered, each at least its floor
}

// capacitySample: without a write rate, one write in capacitySample asks for its capacity.
const capacitySample = 16

// ask counts a write and says whether it asks for its consumed capacity: every write does when
// every is set (a write rate is held), otherwise the first and one in capacitySample. settle then
// charges it.
func (m *capacityMeter) ask(every bool) types.ReturnConsumedCapacity {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if every || m.writes%capacitySample == 1 {
		return types.ReturnConsumedCapacityTotal
	}
	return types.ReturnConsumedCapacityNone
}

// settle charges an asked write its least charge, billed (0 for a request DynamoDB does not bill:
// throttled or invalid), and records the capacity it was answered with, if any.
func (m *capacityMeter) settle(billed float64, cs []types.ConsumedCapacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.floor += billed
	if cs == nil {
		return
	}
	m.asked++
	m.askedFloor += billed
	m.wcu += max(sumWCU(cs), billed)
}

// total is the estimated WCU of all the writes counted.
func (m *capacityMeter) total() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.askedFloor == 0 {
		return m.floor
	}
	return m.floor * m.wcu / m.askedFloor
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

func (l *core) consumedWCU() float64 {
	return l.meter.total() + l.srcMeter.total() + l.txMeter.total() + l.stmtMeter.total()
}

// billed is what DynamoDB bills a single write or a transaction of floor WCU that ended with err:
// nothing when it was throttled, refused as invalid or conflicted with a transaction (nothing was
// written or checked), else floor (a failed condition is billed too).
func billed(floor float64, err error) float64 {
	if err == nil {
		return floor
	}
	var tc *types.TransactionConflictException
	if err != nil && (capacity.IsThrottle(err) || IsValidation(err) || errors.As(err, &tc)) {
		return 0
	}
	return floor
}
