package worker

import (
	"errors"
	"fmt"
	"math"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func (l *ledgerCore) addWCU(c *types.ConsumedCapacity) {
	u := wcuOf(c)
	if u == 0 {
		return
	}
	for {
		old := l.wcuBits.Load()
		if l.wcuBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+u)) {
			return
		}
	}
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

func (l *ledgerCore) consumedWCU() float64 { return math.Float64frombits(l.wcuBits.Load()) }

// wrapErr says which ledger, operation and table an error comes from.
func (l *ledgerCore) wrapErr(op, table string, err error) error {
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return fmt.Errorf("dynapart: %s: %s: table %q does not exist: %w", l.name, op, table, err)
	}
	return fmt.Errorf("dynapart: %s: %s on table %q: %w", l.name, op, table, err)
}
