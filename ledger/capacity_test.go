package ledger

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// TestCapacityMeter: without a write rate, the first write and one in capacitySample after it ask
// for their capacity and the total scales every write's floor by what the asking ones cost against
// theirs; with one, every write asks and the total is what was reported. A report below the floor
// (DynamoDB Local's 2 WCU for a whole transaction, or none at all) counts as the floor.
func TestCapacityMeter(t *testing.T) {
	answer := func(m *capacityMeter, every bool, floor, wcu float64) {
		var cs []types.ConsumedCapacity
		if m.ask(every) == types.ReturnConsumedCapacityTotal {
			cs = []types.ConsumedCapacity{{CapacityUnits: aws.Float64(wcu)}}
		}
		m.settle(floor, cs)
	}
	var sampled capacityMeter
	require.Zero(t, sampled.total())
	for range 2 * capacitySample {
		answer(&sampled, false, 1, 2)
	}
	require.Equal(t, int64(2), sampled.asked, "writes 1 and 1+capacitySample ask")
	require.InDelta(t, 2*2*capacitySample, sampled.total(), 1e-9)

	var always capacityMeter
	for i := range 5 {
		answer(&always, true, 1, float64(i+1))
	}
	require.Equal(t, int64(5), always.asked)
	require.InDelta(t, 15, always.total(), 1e-9)

	var tx capacityMeter // 10 transactions of 25 items, each reported as 2 WCU
	for range 10 {
		answer(&tx, true, 50, 2)
	}
	require.InDelta(t, 500, tx.total(), 1e-9, "2 WCU per item of a transaction, whatever is reported")

	var silent capacityMeter // a batch whose answers report nothing
	for range 3 {
		silent.ask(true)
		silent.settle(25, nil)
	}
	silent.ask(true)
	silent.settle(billed(25, &types.ProvisionedThroughputExceededException{}), nil)
	require.InDelta(t, 75, silent.total(), 1e-9, "1 WCU per statement when nothing is reported, none for a throttled request")
}
