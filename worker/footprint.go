package worker

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
)

// Footprints sizes the state rows a worker's ledger writes for each pending item (see
// ledger.Footprint), with the ledger and claim values a worker with the same Config would use:
// work --dry-run bills the ledger's writes by these sizes, as DynamoDB does.
type Footprints struct {
	l interface {
		Footprint(map[string]types.AttributeValue, ledger.ClaimRequest) (ledger.Footprint, error)
	}
	req ClaimRequest
}

// NewFootprints returns the Footprints of a worker with cfg (as given to New: defaults are filled
// in; cfg.Client must be set) over a source table whose key attributes are keyAttrs. It reads and
// writes nothing.
func NewFootprints(cfg Config, keyAttrs []string) (*Footprints, error) {
	d := cfg.withDefaults()
	l, err := ledgerOf(d, keyAttrs)
	if err != nil {
		return nil, err
	}
	fl, ok := l.(interface {
		Footprint(map[string]types.AttributeValue, ledger.ClaimRequest) (ledger.Footprint, error)
	})
	if !ok {
		return nil, fmt.Errorf("dynapart: the %s ledger does not size its writes", d.Ledger)
	}
	now := d.Clock.Now()
	return &Footprints{l: fl, req: ClaimRequest{
		Owner: d.Owner, Slot: max(0, d.Workers-1), Token: 1, Scope: claimScope(d), Now: now, Until: now.Add(d.ClaimTTL),
	}}, nil
}

// Of is item's footprint: its state row's sizes before and after each write that finishes it at
// its first attempt.
func (f *Footprints) Of(item map[string]types.AttributeValue) (ledger.Footprint, error) {
	return f.l.Footprint(item, f.req)
}
