package bench

import (
	"context"
	"fmt"
	"slices"

	"github.com/dynapart/dynapart/internal/capacity"
	"github.com/dynapart/dynapart/lock"
)

// PerItem is what a pass's requests cost by DynamoDB's billing rules (billingDB), divided by its
// items: one value per repetition.
type PerItem struct {
	Requests, WCU, RCU Sample // every request of the pass, the lease table's included
	TableWCU, TableRCU Sample // of which on the job's own table
	// The largest item written to the job's table and to the others (the lease table), and the
	// most bytes one request read, in any repetition (bytes, estimated: see billingDB).
	MaxWrite, MaxOtherWrite, MaxRead int
	// ByOp lists the requests of the last repetition by operation.
	ByOp string
}

// add records one repetition's bill of a pass over the n items of table.
func (p *PerItem) add(b Bill, table string, n int) {
	per := func(v float64) float64 { return v / float64(n) }
	all, own := b.Total(), b.Tables[table]
	p.Requests = append(p.Requests, per(float64(b.Requests)))
	p.WCU, p.RCU = append(p.WCU, per(all.WCU)), append(p.RCU, per(all.RCU))
	p.TableWCU, p.TableRCU = append(p.TableWCU, per(own.WCU)), append(p.TableRCU, per(own.RCU))
	for t, tb := range b.Tables {
		if t == table {
			p.MaxWrite = max(p.MaxWrite, tb.MaxWrite)
		} else {
			p.MaxOtherWrite = max(p.MaxOtherWrite, tb.MaxWrite)
		}
		p.MaxRead = max(p.MaxRead, tb.MaxRead)
	}
	p.ByOp = b.ByOpText()
}

// BilledCell is one variant at one concurrency, run through a billing counter: its items/s and
// its cost per item, one value per repetition.
type BilledCell struct {
	Variant            string
	Concurrency, Items int
	ItemsPerSec        Sample
	Cost               PerItem
	CPU                CPUPerItem // this process's and DynamoDB Local's CPU time per item
}

// Billed is a set of cells measured through billing counters.
type Billed struct {
	Cells []*BilledCell
}

// Cell returns the cell of variant at conc, or nil.
func (b *Billed) Cell(variant string, conc int) *BilledCell {
	if b == nil {
		return nil
	}
	for _, c := range b.Cells {
		if c.Variant == variant && c.Concurrency == conc {
			return c
		}
	}
	return nil
}

// MeasureTransform is issue 33's benchmark: the transform job (Run, complete-only, with the
// item's change as an effect) against the hand migration loop, at every concurrency, reps times,
// each pass on a fresh table of people and through a billing counter; and the transform with the
// loop's 4 segments (VariantTransform4), which shows what the default's scan pages cost.
func (e *Env) MeasureTransform(ctx context.Context, items int, concs []int, reps int) (*Billed, error) {
	b := &Billed{}
	for _, c := range concs {
		for _, v := range []string{VariantMigrationLoop, VariantTransform, VariantTransform4} {
			b.Cells = append(b.Cells, &BilledCell{Variant: v, Concurrency: c, Items: ItemsAt(items, c)})
		}
	}
	return b, e.measureBilled(ctx, ScenarioTransform, b, reps)
}

// billingVariants are the variants whose cost the billing scenario reports, each after the hand
// loop it is compared with.
var billingVariants = []string{VariantPlain, VariantCompleteOnly, VariantClaim, VariantBatched, VariantMigrationLoop, VariantTransform}

// MeasureBilling runs every billing variant once per repetition at conc over a fresh table of
// items, through a billing counter.
func (e *Env) MeasureBilling(ctx context.Context, items, conc, reps int) (*Billed, error) {
	b := &Billed{}
	for _, v := range billingVariants {
		b.Cells = append(b.Cells, &BilledCell{Variant: v, Concurrency: conc, Items: items})
	}
	return b, e.measureBilled(ctx, ScenarioBilling, b, reps)
}

// measureBilled runs every cell of b reps times, each on a fresh table, interleaved: rep 1 of
// every cell, then rep 2, ...; odd repetitions run the cells in reverse order, so that neither of
// two cells always runs first.
func (e *Env) measureBilled(ctx context.Context, what string, b *Billed, reps int) error {
	leases := tableName("leases")
	if err := lock.CreateTable(ctx, e.DB, leases); err != nil {
		return err
	}
	defer e.dropTable(leases)
	server := e.serverPID()
	for rep := range reps {
		order := slices.Clone(b.Cells)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			rate, err := e.billedOnce(ctx, leases, server, c)
			if err != nil {
				return fmt.Errorf("%s at concurrency %d: %w", c.Variant, c.Concurrency, err)
			}
			e.logf("%s rep %d/%d: %-20s concurrency %2d: %6.0f items/s, %.3f requests, %.3f WCU, %.3f RCU, CPU µs %s (this process / DynamoDB Local) per item",
				what, rep+1, reps, c.Variant, c.Concurrency, rate, c.Cost.Requests[rep], c.Cost.WCU[rep], c.Cost.RCU[rep], c.CPU.last())
		}
	}
	return nil
}

// billedOnce runs c's variant over a fresh table (of people for the transform variants) through a
// billing counter, records its items/s, cost and CPU time (this process's and DynamoDB Local's,
// server) in c, and returns the items/s. A transform pass must leave every item migrated.
func (e *Env) billedOnce(ctx context.Context, leases string, server int, c *BilledCell) (float64, error) {
	item := seedItem
	if transformVariant(c.Variant) {
		item = personItem
	}
	table, err := e.freshTableOf(ctx, "bill", c.Items, item)
	if err != nil {
		return 0, err
	}
	defer e.dropTable(table)
	db := newBillingDB(e.DB, map[string]int{table: capacity.ItemSize(item(c.Items - 1))})
	meter := startCPU(server)
	rate, _, err := e.runPass(ctx, pass{db: db, table: table, leases: leases, variant: c.Variant, items: c.Items, conc: c.Concurrency})
	if err == nil {
		c.CPU.add(meter, c.Items)
	}
	if err == nil && transformVariant(c.Variant) {
		err = e.checkMigrated(ctx, table, c.Items)
	}
	if err != nil {
		return 0, err
	}
	c.ItemsPerSec = append(c.ItemsPerSec, rate)
	c.Cost.add(db.Bill(), table, c.Items)
	return rate, nil
}
