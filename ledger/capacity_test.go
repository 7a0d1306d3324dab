package ledger

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// TestCapacityMeter: without a write rate, the first write and one in capacitySample after it ask
// for their capacity and the total scales them to every write; with one, every write asks and the
// total is what was reported.
func TestCapacityMeter(t *testing.T) {
	answer := func(m *capacityMeter, every bool, wcu float64) {
		if m.ask(every) == types.ReturnConsumedCapacityTotal {
			m.add([]types.ConsumedCapacity{{CapacityUnits: aws.Float64(wcu)}})
		}
	}
	var sampled capacityMeter
	require.Zero(t, sampled.total())
	for range 2 * capacitySample {
		answer(&sampled, false, 2)
	}
	require.Equal(t, int64(2), sampled.asked, "writes 1 and 1+capacitySample ask")
	require.InDelta(t, 2*2*capacitySample, sampled.total(), 1e-9)

	var always capacityMeter
	for i := range 5 {
		answer(&always, true, float64(i+1))
	}
	require.Equal(t, int64(5), always.asked)
	require.InDelta(t, 15, always.total(), 1e-9)
}
