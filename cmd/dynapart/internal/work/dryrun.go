package work

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/internal/capacity"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// A dry run (work --dry-run) reads each slot's share with the scan package exactly as a run
// would (same plan, mode, partition function, page size and read rate), takes no lease and
// writes nothing. It counts, per slot, the items a run would process: those neither done nor
// failed by the ledger (the inline ledger's state attributes on the item; with --ledger table,
// one consistent read of the ledger table per item), shows a few sample keys and estimates the
// run's read and write capacity.

// dryRunSamples is how many sample keys a slot shows.
const dryRunSamples = 3

// slotDryRun is what one slot's share holds.
type slotDryRun struct {
	Slot    int
	Read    int64 // items of the slot's share
	Pending int64 // items a run would process (no state, claimed, or waiting for a retry)
	Done    int64
	Failed  int64
	Samples []string // keys of pending items, as JSON
	RCU     float64  // read capacity the share's scan consumed, as DynamoDB reported it
	WCU     float64  // estimated write capacity of processing the pending items
	ReadRCU float64  // estimated read capacity of the run's reads besides its scan (itemRCU)
}

// dryRun holds what a dry run needs.
type dryRun struct {
	db       *dynamodb.Client
	f        *workFlags
	plan     scan.Plan
	keyAttrs []string
	ledger   worker.Ledger // nil for the inline ledger: its state is on the scanned items
	// footprints sizes the ledger's writes of a pending item as a run's worker would write them.
	footprints *worker.Footprints
	// finished names the group when a --once run of it would process nothing (dryrun_finished.go).
	finished string
}

func runDryRun(ctx context.Context, g *cli.Globals, f *workFlags, plan scan.Plan, group string, out io.Writer) error {
	db, t, err := g.DescribeSource(ctx, f.cfg.Table)
	if err != nil {
		return err
	}
	d := &dryRun{db: db, f: f, plan: plan, keyAttrs: cli.TableSchema(t).Names()}
	if finished, err := finishedOnceGroup(ctx, g, f, group); err != nil {
		return err
	} else if finished {
		d.finished = group
	}
	if f.cfg.Ledger == worker.LedgerTable {
		lf := f.ledgerFlags()
		if d.ledger, err = lf.Open(ctx, g); err != nil {
			return err
		}
	}
	cfg := f.cfg
	cfg.Client = db
	if d.footprints, err = worker.NewFootprints(cfg, d.keyAttrs); err != nil {
		return err
	}
	var slots []slotDryRun
	for slot := range plan.Slots {
		s, err := d.slot(ctx, slot)
		if err != nil {
			return fmt.Errorf("dry run of slot %d: %w", slot, err)
		}
		slots = append(slots, s)
	}
	return d.print(out, slots)
}

// slot reads one slot's share.
func (d *dryRun) slot(ctx context.Context, slot int) (slotDryRun, error) {
	f := d.f
	sc, err := scan.New(scan.Config{
		Client: d.db, Table: f.cfg.Table, Slot: slot,
		Plan:          d.plan,
		PartitionAttr: f.cfg.PartitionAttr, IndexName: f.cfg.IndexName, ShardAttr: f.cfg.ShardAttr, Shards: f.cfg.Shards,
		ConsistentRead: f.cfg.ConsistentRead, ReadRate: f.cfg.ReadRate, PageLimit: f.cfg.PageSize,
	})
	if err != nil {
		return slotDryRun{}, err
	}
	res := slotDryRun{Slot: slot}
	err = sc.Run(ctx, func(ctx context.Context, p *scan.Page) error {
		for _, it := range p.Items {
			it.Ack()
			if err := d.count(ctx, &res, it.Attrs); err != nil {
				return err
			}
		}
		return nil
	})
	res.RCU = sc.Stats().RCU
	return res, err
}

// count classifies one item of the share.
func (d *dryRun) count(ctx context.Context, res *slotDryRun, attrs map[string]types.AttributeValue) error {
	res.Read++
	st, fp, err := d.footprints.Of(ctx, attrs)
	if err != nil {
		return err
	}
	res.ReadRCU += d.rowRCU(fp)
	switch st.Status {
	case worker.StatusDone:
		res.Done++
		res.WCU += d.finishedWCU(fp)
		return nil
	case worker.StatusFailed:
		res.Failed++
		res.WCU += d.finishedWCU(fp)
		return nil
	}
	scanned := capacity.ItemSize(attrs)
	res.Pending++
	res.WCU += d.itemWCU(fp, scanned)
	res.ReadRCU += d.itemRCU(fp, scanned)
	if len(res.Samples) < dryRunSamples {
		key := worker.Key{}
		for _, k := range d.keyAttrs {
			key[k] = attrs[k]
		}
		k, err := cli.PlainJSON(key)
		if err != nil {
			return err
		}
		res.Samples = append(res.Samples, string(k))
	}
	return nil
}

// writeUnits is what DynamoDB bills a write of an item of size bytes: 1 WCU per KB started.
func writeUnits(size int) float64 { return math.Max(1, math.Ceil(float64(size)/1024)) }

// txFactor is what a write costs against a single one: 2 when claims and completions go in
// transactions (--transaction-batches), whose each write DynamoDB bills twice (approximate: a
// batch of one item is sent as a single write, and a transaction one refused claim cancels is
// billed whole and sent again without it).
func (d *dryRun) txFactor() float64 {
	if d.f.cfg.BatchClaims && d.f.cfg.TransactionBatches {
		return 2
	}
	return 1
}

// itemWCU estimates the write capacity a run spends on one pending item that succeeds at its first
// attempt, by DynamoDB's billing rules: a claim and a completion (one write with --complete-only),
// each billed by the larger of the state row before and after it (fp: the item itself with the
// inline ledger's state, or the item's row of the ledger table as stored), and in index mode the pending index's
// writes and the table ledger's write taking the item out of it. Batched claims and completions
// (--batch-claims) are single writes in statement batches and cost the same.
func (d *dryRun) itemWCU(fp ledger.Footprint, scanned int) float64 {
	wcu := writeUnits(max(fp.Before, fp.CompleteOnly))
	if !d.f.cfg.CompleteOnly {
		wcu = writeUnits(max(fp.Before, fp.Claimed)) + writeUnits(max(fp.Claimed, fp.Done))
	}
	return wcu*d.txFactor() + d.indexWCU(fp, scanned)
}

// indexWCU is what --mode index adds for a pending item: the pending index (every attribute
// projected) is written whenever an item in it is (an entry updated, or deleted when the item
// leaves the index: 1 WCU per KB of the entry); with the table ledger the worker removes the
// item's shard attribute itself after the completion (a write of the item, and the entry's
// deletion), the inline ledger's completion removes it in the same write.
func (d *dryRun) indexWCU(fp ledger.Footprint, scanned int) float64 {
	switch {
	case d.f.cfg.Mode != scan.ModeIndex:
		return 0
	case d.ledger != nil:
		return 2 * writeUnits(scanned)
	case d.f.cfg.CompleteOnly:
		return writeUnits(fp.Before)
	}
	return writeUnits(max(fp.Before, fp.Claimed)) + writeUnits(fp.Claimed)
}

// finishedWCU is the write capacity a run spends on an item already done or failed: with the table
// ledger in claim mode, whose state is not on the scanned item, its claim is sent and refused by
// its condition, which DynamoDB bills by the row's size (fp.Before). Complete-only reads the row
// first.
func (d *dryRun) finishedWCU(fp ledger.Footprint) float64 {
	if d.ledger == nil || d.f.cfg.CompleteOnly {
		return 0
	}
	return writeUnits(fp.Before) * d.txFactor()
}

// rowRCU is the read capacity a run spends on each item of the share besides its scan: with the
// table ledger in complete-only mode, a consistent read of the item's ledger row, done or not,
// before its handler would run (1 RCU per 4 KB started of the row; a missing row costs 1).
func (d *dryRun) rowRCU(fp ledger.Footprint) float64 {
	if d.ledger != nil && d.f.cfg.CompleteOnly {
		return readUnits(fp.Before)
	}
	return 0
}

// readUnits is what DynamoDB bills a consistent read of an item of size bytes: 1 RCU per 4 KB
// started.
func readUnits(size int) float64 { return math.Max(1, math.Ceil(float64(size)/4096)) }

// itemRCU is the read capacity a run spends on a pending item besides its scan: a worker that
// records versions (--versions, --follow) gives the handler the item's content as of its claim,
// read again (consistent: 1 RCU per 4 KB started of the item with the state its claim wrote)
// unless the claim's own write returns it (the inline ledger's single claims; its complete-only
// writes are fenced on the state scanned). With the table ledger, claims made in a transaction
// (--transaction-batches) are read back for their attempt numbers (1 RCU per 4 KB of the claimed
// row; approximate: a batch of one item is a single write, which returns them).
func (d *dryRun) itemRCU(fp ledger.Footprint, scanned int) float64 {
	cfg := d.f.cfg
	rcu := 0.0
	if d.ledger != nil && d.txFactor() == 2 {
		rcu += readUnits(fp.Claimed)
	}
	versioned := cfg.Versions || cfg.Follow
	reads := d.ledger != nil || cfg.BatchClaims && !cfg.CompleteOnly
	if !versioned || !reads {
		return rcu
	}
	size := scanned
	if d.ledger == nil {
		size = max(scanned, fp.Claimed)
	}
	return rcu + readUnits(size)
}

func (d *dryRun) print(out io.Writer, slots []slotDryRun) error {
	fmt.Fprintf(out, "dry run of %s: %s, mode %s, ledger %s (no lease taken, nothing written)\n",
		d.f.cfg.Table, cli.Count(d.plan.Slots, "slot"), d.plan.Mode, d.f.cfg.Ledger)
	d.printFinished(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tTO PROCESS\tREAD\tDONE\tFAILED\tRCU\tEST. WCU\tSAMPLE KEYS")
	var total slotDryRun
	for _, s := range slots {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.1f\t%.0f\t%s\n", s.Slot, s.Pending, s.Read, s.Done, s.Failed, s.RCU, s.WCU, strings.Join(s.Samples, " "))
		total.Pending += s.Pending
		total.Read += s.Read
		total.Done += s.Done
		total.Failed += s.Failed
		total.RCU += s.RCU
		total.WCU += s.WCU
		total.ReadRCU += s.ReadRCU
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%d\t%d\t%.1f\t%.0f\t\n", total.Pending, total.Read, total.Done, total.Failed, total.RCU, total.WCU)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %.0f WCU and %.1f RCU in all (the scans as DynamoDB reported them, "+
		"the %s at DynamoDB's rates if every item succeeds at its first attempt, effects not counted", d.costLabel(), total.WCU, total.RCU+total.ReadRCU, d.writesText())
	if d.txFactor() == 2 {
		fmt.Fprint(out, ", approximate with --transaction-batches: a batch of one item is a single write, "+
			"and a transaction one refused claim cancels is billed and sent again without it")
	}
	if total.ReadRCU > 0 {
		fmt.Fprintf(out, ", and %.0f RCU of %s", total.ReadRCU, d.readsText())
	}
	fmt.Fprintln(out, ")")
	if d.f.cfg.ReadRate > 0 {
		fmt.Fprintf(out, "at --read-rate %.0f a slot reads its share in about %s\n", d.f.cfg.ReadRate,
			time.Duration(maxRCU(slots)/d.f.cfg.ReadRate*float64(time.Second)).Round(time.Second))
	}
	return nil
}

// readsText says what a run reads besides its scan (what ReadRCU counts).
func (d *dryRun) readsText() string {
	var parts []string
	if d.ledger != nil && d.f.cfg.CompleteOnly {
		parts = append(parts, "ledger rows read before the handlers")
	}
	if d.ledger != nil && d.txFactor() == 2 {
		parts = append(parts, "ledger rows read back after transacted claims")
	}
	if d.f.cfg.Versions || d.f.cfg.Follow {
		parts = append(parts, "items read again after their claims (--versions)")
	}
	return strings.Join(parts, " and ")
}

// writesText says what the WCU figure counts.
func (d *dryRun) writesText() string {
	switch {
	case d.f.cfg.Mode == scan.ModeIndex && d.ledger != nil:
		return "ledger's writes, the pending index's and the writes taking finished items out of it"
	case d.f.cfg.Mode == scan.ModeIndex:
		return "ledger's writes and the pending index's"
	}
	return "ledger's writes"
}

func maxRCU(slots []slotDryRun) float64 {
	m := 0.0
	for _, s := range slots {
		m = math.Max(m, s.RCU)
	}
	return m
}
