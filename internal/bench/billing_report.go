package bench

import (
	"fmt"
	"strings"
)

// billingRules says what the billing counter counts and how, for both sections that show its
// figures.
const billingRules = "Cost is counted from the requests sent, by DynamoDB's published billing rules, at a client wrapper that every request of the pass " +
	"goes through (not from the ConsumedCapacity DynamoDB Local reports: 2 WCU for a whole transaction): a single write (PutItem, UpdateItem, " +
	"DeleteItem, a PartiQL write) of an item bills 1 WCU per KB started, also when its condition fails; an item of a BatchWriteItem 1 WCU per KB; " +
	"every item of a TransactWriteItems 2 WCU per KB; a Scan or Query page 1 RCU per 4 KB of the items it evaluated (not only those returned), " +
	"half when eventually consistent; a GetItem or BatchGetItem item 1 RCU per 4 KB (0.5 eventually consistent), a TransactGetItems item 2. " +
	"A request is billed when it succeeded or a condition failed; a throttled or invalid one is not, and the SDK's own retries are not seen. " +
	"Item sizes are estimated without reading anything more: a write's item as the seeded item's size (or the key's) plus the values and " +
	"attribute names the request carries; a read's as what it returned, or the seeded item's size if larger (a projection does not lower the bill). " +
	"Attributes that earlier writes added are not counted, so the largest sizes billed are shown below the table. " +
	"Requests, WCU and RCU per item count every request of the pass (lease table, plan and checkpoints included) divided by the items."

// floors are what exactly-once needs per item in each mode, as the billing table shows them.
var floors = map[string]string{
	VariantPlain:         "– (baseline: marks each item done once)",
	VariantCompleteOnly:  "1 WCU, 1 request",
	VariantClaim:         "2 WCU, 2 requests",
	VariantBatched:       "2 WCU, in requests of up to 25 (0.08 per item)",
	VariantMigrationLoop: "– (baseline: migrates each item once)",
	VariantTransform:     "1 WCU, 1 request: the migration loop's own",
}

// baselineOf is the hand loop a variant's cost is compared with.
func baselineOf(variant string) string {
	if transformVariant(variant) {
		return VariantMigrationLoop
	}
	return VariantPlain
}

func (r *Results) billingSection(w writer) {
	w("## What a job costs by DynamoDB's billing rules\n\n")
	b := r.Billing
	if b == nil {
		pending(w, ScenarioBilling, r.Errors[ScenarioBilling])
		return
	}
	c0 := b.Cells[0]
	w("Each mode and its hand-written loop at concurrency %d over a fresh table of %s items per repetition (the transform and its loop over a table of people), "+
		"interleaved. %s\n\n", c0.Concurrency, num(float64(c0.Items), 0), billingRules)
	w("| job | requests per item | WCU per item | of which the job's table | WCU ÷ its hand loop's | RCU per item | floor (what exactly-once needs) |\n|---|---|---|---|---|---|---|\n")
	var ops []string
	var maxW, maxOther, maxR int
	for _, c := range b.Cells {
		base := b.Cell(baselineOf(c.Variant), c.Concurrency)
		x := "–"
		if base != nil && base != c {
			x = Ratio(c.Cost.WCU, base.Cost.WCU).Counted(2) + "x"
		}
		w("| %s | %s | %s | %s | %s | %s | %s |\n", c.Variant, c.Cost.Requests.Counted(3), c.Cost.WCU.Counted(3), c.Cost.TableWCU.Counted(3),
			x, c.Cost.RCU.Counted(3), floors[c.Variant])
		ops = append(ops, fmt.Sprintf("%s: %s", c.Variant, c.Cost.ByOp))
		maxW, maxOther, maxR = max(maxW, c.Cost.MaxWrite), max(maxOther, c.Cost.MaxOtherWrite), max(maxR, c.Cost.MaxRead)
	}
	w("\nRequests by operation (last repetition): %s. Largest item written, as estimated: %s bytes on the job's tables (1 WCU up to 1 KB), %s bytes on the lease table; "+
		"most bytes read by one request: %s (a read unit is 4 KB).\n\n",
		strings.Join(ops, "; "), num(float64(maxW), 0), num(float64(maxOther), 0), num(float64(maxR), 0))
}

func (r *Results) transformSection(w writer) {
	w("## A transform job versus the hand-written migration loop\n\n")
	t := r.Transform
	if t == nil {
		pending(w, ScenarioTransform, r.Errors[ScenarioTransform])
		return
	}
	w("A migration of every item of a table of people (id, n, a 100-byte payload and a name `Given7 Family7`): split the name into `first` and `last` and remove it. " +
		"**Run, transform**: one worker, `Once`, complete-only, scanning only the name (`Config.Projection`; the key and the ledger's attributes come with it), with a handler (`worker.WithEffects`) that returns the item's change as an effect " +
		"(`ledger.Set(\"first\", ...)`, `ledger.Set(\"last\", ...)`, `ledger.Remove(\"name\")`), which the inline ledger merges into the completion's own UpdateItem: " +
		"one conditional write per item migrates it and marks it done. **Hand migration loop**: what a team writes without dynapart, a 4-segment parallel scan " +
		"returning only id and name of the items that still have a name, feeding *c* goroutines that each send one UpdateItem `SET first, last REMOVE name` " +
		"if the name is still the one split (a rerun, or an item renamed since the scan, is skipped). " +
		"Each cell is a fresh table, sized as in the throughput matrix, with every variant's requests through the billing counter; after each pass every item must have first and last and no name. " +
		"Ratio = Run's items/s ÷ the loop's in the same repetition; odd repetitions run the cells in reverse order. " +
		"**Run, transform, 4 segments** (not a goal) is Run, transform with `Config.Segments` 4, the loop's own scan, instead of the 64 segments a new group gets by default " +
		"(so that it can be scaled up to 64 workers): on the small tables of low concurrency each of the default's segments is a scan page of a few dozen items, " +
		"and DynamoDB Local spends a few milliseconds on every page.\n\n")
	w("| concurrency | hand migration loop items/s | Run, transform | Run, transform, 4 segments | WCU per item: loop / Run (Run on the job's table) | requests per item: loop / Run / 4 segments | RCU per item: loop / Run / 4 segments | CPU µs per item, this process / DynamoDB Local: loop · Run |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Options.Concurrencies {
		loop, run := t.Cell(VariantMigrationLoop, c), t.Cell(VariantTransform, c)
		if loop == nil || run == nil {
			continue
		}
		seg4, reqs4, rcu4 := "–", "–", "–"
		if s4 := t.Cell(VariantTransform4, c); s4 != nil {
			seg4 = Ratio(s4.ItemsPerSec, loop.ItemsPerSec).X() + "<br>" + s4.ItemsPerSec.Fmt(0, "/s")
			reqs4, rcu4 = s4.Cost.Requests.Counted(3), s4.Cost.RCU.Counted(3)
		}
		w("| %d | %s | %s<br>%s | %s | %s / %s (%s) | %s / %s / %s | %s / %s / %s | %s · %s |\n", c, loop.ItemsPerSec.Fmt(0, ""),
			Ratio(run.ItemsPerSec, loop.ItemsPerSec).GoalX(atLeast(0.9)), run.ItemsPerSec.Fmt(0, "/s"), seg4,
			loop.Cost.WCU.Counted(3), run.Cost.WCU.Counted(3), run.Cost.TableWCU.Counted(3),
			loop.Cost.Requests.Counted(3), run.Cost.Requests.Counted(3), reqs4, loop.Cost.RCU.Counted(3), run.Cost.RCU.Counted(3), rcu4,
			loop.CPU.Fmt(), run.CPU.Fmt())
	}
	w("\nWCU, requests and RCU per item by DynamoDB's billing rules (see the next section for how they are counted): Run's include its lease, plan and checkpoint requests, "+
		"a fixed cost per pass that weighs more on the small tables of low concurrency. CPU µs per item: the CPU time (user and system) this process (the client: Run or the loop, "+
		"and the billing counter both go through) and DynamoDB Local's process used during the pass, divided by its items, medians; the two share the machine's cores, "+
		"so what one process spends more per item the other cannot spend on the next item. Requests of Run by operation (last repetition, c = %d): %s.\n\n",
		r.Options.Concurrencies[len(r.Options.Concurrencies)-1], lastCell(t, VariantTransform).Cost.ByOp)
	r.transformWritesSection(w)
}

// transformWritesSection reports the completion write alone against the loop's (TransformWrites).
func (r *Results) transformWritesSection(w writer) {
	tw := r.TransformWrites
	if tw == nil {
		return
	}
	w("### The completion write alone\n\n"+
		"What the write costs, apart from the scan, the lease and the worker: the transform's completion write (the ledger's `CompleteOnlyWith` with the item's change, "+
		"the one request Run sends per item, sent by the ledger) against the loop's UpdateItem, with the keys known in advance, *c* in flight, "+
		"in %d rotating blocks of each (%s items a block at the highest concurrency; which goes first rotates) over one fresh table of people per concurrency. "+
		"Both writes are one conditional UpdateItem of 1 WCU; the completion's also sets the item's state: its status, done_at and the write's claim id "+
		"(by which a lost answer is settled), three attributes the loop does not keep, and is built by the ledger (its state values, the effect's expression). "+
		"A third write splits the two: **the loop's write with the state**, the loop's own UpdateItem with those three attributes added (the inline ledger's names, values of their form), sent by the SDK alone. "+
		"Ratios = a block's items/s ÷ the block of the other write next to it, median (min–max) over the pairs: *with the state ÷ loop* is what storing the three attributes costs DynamoDB Local, "+
		"*completion ÷ with the state* what the ledger's side of the same request costs, *completion ÷ loop* both. "+
		"CPU µs per write: this process's and DynamoDB Local's CPU time during the blocks of each write, divided by their writes, medians over the blocks; "+
		"it says which side of the request costs more. The completion ÷ loop ratio bounds the transform's on this instrument; DynamoDB bills and serves both as one write unit.\n\n", tw.Rounds, num(float64(tw.Block), 0))
	w("| concurrency | loop's write items/s | with the state items/s | completion write items/s | with the state ÷ loop | completion ÷ with the state | completion ÷ loop | CPU µs per write, this process / DynamoDB Local: loop · with the state · completion |\n|---|---|---|---|---|---|---|---|\n")
	for _, p := range tw.Points {
		w("| %d | %s | %s | %s | %s | %s | %s | %s · %s · %s |\n", p.Concurrency, p.Loop.Fmt(0, ""), p.State.Fmt(0, ""), p.Ledger.Fmt(0, ""),
			Ratio(p.State, p.Loop).X(), Ratio(p.Ledger, p.State).X(), Ratio(p.Ledger, p.Loop).X(), p.LoopCPU.Fmt(), p.StateCPU.Fmt(), p.LedgerCPU.Fmt())
	}
	w("\n")
}

// lastCell is the variant's cell at the highest concurrency measured (an empty one if none).
func lastCell(b *Billed, variant string) *BilledCell {
	var last *BilledCell
	for _, c := range b.Cells {
		if c.Variant == variant && (last == nil || c.Concurrency > last.Concurrency) {
			last = c
		}
	}
	if last == nil {
		return &BilledCell{}
	}
	return last
}

func (r *Results) transformGoals() []Goal {
	t := r.Transform
	if t == nil {
		return []Goal{{"Run, transform vs hand migration loop", ">= 0.9x items/s; 1.0 WCU per item", "n/a (not measured)", "–"}}
	}
	concs := r.Options.Concurrencies
	cell, all := goalCells(concs, func(c int) (Sample, bool) {
		loop, run := t.Cell(VariantMigrationLoop, c), t.Cell(VariantTransform, c)
		if loop == nil || run == nil {
			return nil, false
		}
		return Ratio(run.ItemsPerSec, loop.ItemsPerSec), true
	}, atLeast(0.9))
	var parts []string
	atLoop := true
	for _, c := range concs {
		loop, run := t.Cell(VariantMigrationLoop, c), t.Cell(VariantTransform, c)
		if loop == nil || run == nil {
			continue
		}
		ok := roundTo(run.Cost.WCU.Median(), 2) <= roundTo(loop.Cost.WCU.Median(), 2)
		atLoop = atLoop && ok
		mark := ""
		if !ok {
			mark = " ✗"
		}
		parts = append(parts, fmt.Sprintf("c=%d: Run %s (%s on the job's table), loop %s%s", c, run.Cost.WCU.Counted(3), run.Cost.TableWCU.Counted(3),
			loop.Cost.WCU.Counted(3), mark))
	}
	writes := r.transformWritesCells(func(p *TransformWritesPoint) Sample { return Ratio(p.Ledger, p.Loop) })
	state := r.transformWritesCells(func(p *TransformWritesPoint) Sample { return Ratio(p.State, p.Loop) })
	return []Goal{
		{VariantTransform + " vs " + VariantMigrationLoop + ", items/s", ">= 0.9x at every concurrency", cell, verdict(all)},
		{"… its completion write alone vs the loop's write, keys known (no scan), items/s", "reported (the ceiling of the ratio above on DynamoDB Local)", writes, "–"},
		{"… the loop's write with the completion's three state attributes vs the loop's write, items/s", "reported (what storing the item's state costs DynamoDB Local)", state, "–"},
		{VariantTransform + ": WCU per item by DynamoDB's billing rules", "1.0, the loop's own (every write of the job, to 2 decimals)", strings.Join(parts, "<br>"), verdict(atLoop)},
	}
}

// transformWritesCells is a reported goal's cells of the completion write alone (TransformWrites):
// ratio at every concurrency measured.
func (r *Results) transformWritesCells(ratio func(*TransformWritesPoint) Sample) string {
	cells, _ := goalCells(r.Options.Concurrencies, func(c int) (Sample, bool) {
		p := r.TransformWrites.Point(c)
		if p == nil {
			return nil, false
		}
		return ratio(p), true
	}, func(float64) bool { return true })
	if cells == "" {
		return "n/a (not measured)"
	}
	return cells
}

func (r *Results) billingGoals() []Goal {
	b := r.Billing
	if b == nil {
		return []Goal{{"WCU per item by DynamoDB's billing rules, every mode", "at its floor", "n/a (not measured)", "–"}}
	}
	var gs []Goal
	for _, g := range []struct {
		variant, target string
		maxWCU, maxReqs float64
	}{
		{VariantCompleteOnly, "at the floor, 1 (within 5%: the job's own lease and checkpoint writes)", 1.05, 0},
		{VariantClaim, "at the floor, 2 (within 5%)", 2.1, 0},
		{VariantBatched, "<= 2.2 WCU per item in <= 0.15 requests per item (issue 34)", 2.2, 0.15},
	} {
		c := b.Cell(g.variant, BillingConcurrency)
		if c == nil {
			continue
		}
		ok := c.Cost.WCU.Median() <= g.maxWCU && (g.maxReqs == 0 || c.Cost.Requests.Median() <= g.maxReqs)
		gs = append(gs, Goal{g.variant + ": WCU per item by DynamoDB's billing rules", g.target,
			fmt.Sprintf("%s WCU in %s requests per item", c.Cost.WCU.Counted(3), c.Cost.Requests.Counted(3)), verdict(ok)})
	}
	return gs
}
