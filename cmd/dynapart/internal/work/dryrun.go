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
}

func runDryRun(ctx context.Context, g *cli.Globals, f *workFlags, plan scan.Plan, out io.Writer) error {
	db, t, err := g.DescribeSource(ctx, f.cfg.Table)
	if err != nil {
		return err
	}
	d := &dryRun{db: db, f: f, plan: plan, keyAttrs: cli.TableSchema(t).Names()}
	if f.cfg.Ledger == worker.LedgerTable {
		lf := f.ledgerFlags()
		if d.ledger, err = lf.Open(ctx, g); err != nil {
			return err
		}
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
	res.ReadRCU += d.rowRCU()
	key := worker.Key{}
	for _, k := range d.keyAttrs {
		key[k] = attrs[k]
	}
	status := worker.StatusPending
	if d.ledger != nil {
		st, err := d.ledger.State(ctx, key)
		if err != nil {
			return err
		}
		status = st.Status
	} else if s, ok := attrs[d.f.cfg.AttrPrefix+"status"].(*types.AttributeValueMemberS); ok {
		status = worker.Status(s.Value)
	}
	switch status {
	case worker.StatusDone:
		res.Done++
		return nil
	case worker.StatusFailed:
		res.Failed++
		return nil
	}
	res.Pending++
	res.WCU += d.itemWCU(attrs)
	res.ReadRCU += d.itemRCU(attrs)
	if len(res.Samples) < dryRunSamples {
		k, err := cli.PlainJSON(key)
		if err != nil {
			return err
		}
		res.Samples = append(res.Samples, string(k))
	}
	return nil
}

// itemWCU estimates the write capacity a run spends on one item that succeeds at its first
// attempt, by DynamoDB's billing rules: a claim and a completion (one write with --complete-only).
// A write costs 1 WCU per KB of the item written: the item itself for the inline ledger, a small
// ledger row for the table ledger. Batched claims and completions (--batch-claims) are single
// writes in statement batches and cost the same; as transactions (--transaction-batches) each
// costs twice.
func (d *dryRun) itemWCU(attrs map[string]types.AttributeValue) float64 {
	perWrite := 1.0
	if d.ledger == nil {
		perWrite = math.Max(1, math.Ceil(float64(itemSize(attrs))/1024))
	}
	if d.f.cfg.BatchClaims && d.f.cfg.TransactionBatches {
		perWrite *= 2
	}
	if d.f.cfg.CompleteOnly {
		return perWrite
	}
	return 2 * perWrite
}

// rowRCU is the read capacity a run spends on each item of the share besides its scan: with the
// table ledger in complete-only mode, a consistent read of the item's ledger row (1 RCU: a row is
// small), done or not, before its handler would run.
func (d *dryRun) rowRCU() float64 {
	if d.ledger != nil && d.f.cfg.CompleteOnly {
		return 1
	}
	return 0
}

// itemRCU is the read capacity a run spends on a pending item besides its scan: a worker that
// records versions (--versions, --follow) gives the handler the item's content as of its claim,
// read again (consistent: 1 RCU per 4 KB started) unless the claim's own write returns it (the
// inline ledger's single claims; its complete-only writes are fenced on the state scanned).
func (d *dryRun) itemRCU(attrs map[string]types.AttributeValue) float64 {
	cfg := d.f.cfg
	versioned := cfg.Versions || cfg.Follow
	reads := d.ledger != nil || cfg.BatchClaims && !cfg.CompleteOnly
	if !versioned || !reads {
		return 0
	}
	return math.Max(1, math.Ceil(float64(itemSize(attrs))/4096))
}

// itemSize approximates DynamoDB's item size: attribute names plus values.
func itemSize(attrs map[string]types.AttributeValue) int {
	n := 0
	for k, v := range attrs {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return len(x.Value)/2 + 1
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += len(k) + valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberSS:
		return sumLen(x.Value)
	case *types.AttributeValueMemberNS:
		return sumLen(x.Value)
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range x.Value {
			n += len(b)
		}
		return n
	}
	return 1 // BOOL, NULL
}

func sumLen(ss []string) int {
	n := 0
	for _, s := range ss {
		n += len(s)
	}
	return n
}

func (d *dryRun) print(out io.Writer, slots []slotDryRun) error {
	fmt.Fprintf(out, "dry run of %s: %d slots, mode %s, ledger %s (no lease taken, nothing written)\n",
		d.f.cfg.Table, d.plan.Slots, d.plan.Mode, d.f.cfg.Ledger)
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
	fmt.Fprintf(out, "estimated cost of the job: %.0f WCU and %.1f RCU in all (the scans as DynamoDB reported them, "+
		"the ledger's writes at DynamoDB's rates if every item succeeds at its first attempt", total.WCU, total.RCU+total.ReadRCU)
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
	if d.rowRCU() > 0 {
		parts = append(parts, "ledger rows read before the handlers")
	}
	if d.f.cfg.Versions || d.f.cfg.Follow {
		parts = append(parts, "items read again after their claims (--versions)")
	}
	return strings.Join(parts, " and ")
}

func maxRCU(slots []slotDryRun) float64 {
	m := 0.0
	for _, s := range slots {
		m = math.Max(m, s.RCU)
	}
	return m
}
