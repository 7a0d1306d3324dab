package status

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// Progress and ETA without scanning the table: each slot's checkpoint carries its counts (items
// done and failed, items read and working time in the current pass); the share a slot has to read
// is estimated as the source table's ItemCount (DescribeTable; refreshed by DynamoDB about every
// six hours) divided by N.

// tableDescriber is the one call the share estimate needs.
type tableDescriber interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// groupProgress is the group's progress: the sums of the slots' counts, the rate of the current
// passes, and the ETA of the slowest unfinished slot. Estimated (see ShareEstimate).
type groupProgress struct {
	Done    int64 `json:"done"`
	Failed  int64 `json:"failed"`
	Scanned int64 `json:"scanned"`
	// Rate is items read per second in the current passes (the sum over working slots).
	Rate float64 `json:"rate"`
	// ItemsEstimate is the source table's ItemCount from DescribeTable, an estimate; null when
	// unknown.
	ItemsEstimate *int64 `json:"items_estimate"`
	// ETASeconds is when the last unfinished slot's pass should end, at its rate; 0 when every
	// slot is finished; null when a slot's cannot be told.
	ETASeconds *float64 `json:"eta_seconds"`
}

// estimateItems is the source table's item count from DescribeTable (nil when unknown).
func estimateItems(ctx context.Context, db tableDescriber, table string) *int64 {
	if db == nil || table == "" {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := db.DescribeTable(cctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil || out.Table == nil || out.Table.ItemCount == nil {
		return nil
	}
	n := *out.Table.ItemCount
	return &n
}

// shareOf is a slot's share of items: the estimate / N (nil when unknown).
func shareOf(items *int64, n int) *int64 {
	if items == nil || n <= 0 {
		return nil
	}
	s := *items / int64(n)
	return &s
}

// slotProgressOf reads a slot's counts from its checkpoint: nil (unknown) when it has none or it
// cannot be read. fraction is the share's items the slot has moved to done or failed (1 when
// finished), nil when unknown; the ETA is the rest of the current pass's reading at its rate.
func slotProgressOf(s lock.SlotStatus, share *int64) (p *slotProgress, fraction *float64) {
	if s.Finished {
		one := 1.0
		fraction = &one
	}
	if s.Checkpoint == "" {
		return nil, fraction
	}
	sp, err := worker.ParseSlotProgress(s.Checkpoint)
	if err != nil && sp.Done == 0 && sp.Scanned == 0 && sp.Elapsed == 0 {
		return nil, fraction
	}
	p = &slotProgress{Done: sp.Done, Failed: sp.Failed, Scanned: sp.Scanned, Pass: sp.Pass + 1,
		ElapsedSeconds: sp.Elapsed.Seconds(), ShareEstimate: share}
	if !s.Finished {
		p.Rate = sp.Rate()
	}
	switch {
	case s.Finished:
		zero := 0.0
		p.ETASeconds = &zero
	case share != nil && *share > 0:
		f := min(1, float64(sp.Done+sp.Failed)/float64(*share))
		fraction = &f
		if p.Rate > 0 {
			eta := float64(max(0, *share-sp.Scanned)) / p.Rate
			p.ETASeconds = &eta
		}
	}
	return p, fraction
}

// groupProgressOf sums the slots' progress; nil when no slot has counts.
func groupProgressOf(slots []slotDoc, items *int64) *groupProgress {
	g := &groupProgress{ItemsEstimate: items}
	known, etaKnown := false, true
	var eta float64
	for _, s := range slots {
		if s.Finished {
			if s.Progress != nil {
				g.Done, g.Failed, g.Scanned = g.Done+s.Progress.Done, g.Failed+s.Progress.Failed, g.Scanned+s.Progress.Scanned
				known = true
			}
			continue
		}
		if s.Progress == nil {
			etaKnown = false
			continue
		}
		known = true
		p := s.Progress
		g.Done, g.Failed, g.Scanned, g.Rate = g.Done+p.Done, g.Failed+p.Failed, g.Scanned+p.Scanned, g.Rate+p.Rate
		if p.ETASeconds == nil {
			etaKnown = false
		} else {
			eta = max(eta, *p.ETASeconds)
		}
	}
	if !known {
		return nil
	}
	if etaKnown {
		g.ETASeconds = &eta
	}
	return g
}

// fillProgress sets each slot's progress and fraction from its checkpoint and the group's sums.
func (r *reader) fillProgress(ctx context.Context, doc *Document, st *lock.GroupStatus, now time.Time) {
	if r.tables != nil && (r.items == nil || now.Sub(r.itemsAt) > statusItemsEvery) {
		// Until a count is known (the group may not have recorded its table yet) every read tries.
		if items := estimateItems(ctx, r.tables, st.Meta["table"]); items != nil || r.items == nil {
			r.items, r.itemsAt = items, now
		}
	}
	share := shareOf(r.items, st.N)
	for i := range doc.Slots {
		doc.Slots[i].Progress, doc.Slots[i].Fraction = slotProgressOf(st.Slots[i], share)
	}
	doc.Progress = groupProgressOf(doc.Slots, r.items)
}

// statusItemsEvery is how often the status page re-reads the table's item count.
const statusItemsEvery = time.Minute

// printProgressText prints each slot's counts, rate and ETA from its checkpoint, and the group's.
func printProgressText(w io.Writer, slots []lock.SlotStatus, n int, items *int64) {
	share := shareOf(items, n)
	docs := make([]slotDoc, len(slots))
	for i, s := range slots {
		docs[i] = slotDoc{slotJSON: slotJSON{Slot: s.Slot, Finished: s.Finished}}
		docs[i].Progress, _ = slotProgressOf(s, share)
	}
	g := groupProgressOf(docs, items)
	if g == nil {
		return
	}
	note := "share unknown"
	if share != nil {
		note = fmt.Sprintf("share ~%d items per slot: the table's item count / N, an estimate", *share)
	}
	fmt.Fprintf(w, "progress (from the checkpoints; %s):\n", note)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tPASS\tDONE\tFAILED\tSCANNED\tRATE/s\tETA")
	for _, d := range docs {
		if p := d.Progress; p != nil {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.1f\t%s\n", d.Slot, p.Pass, p.Done, p.Failed, p.Scanned, p.Rate, etaText(p.ETASeconds))
		} else {
			fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t-\t-\n", d.Slot)
		}
	}
	fmt.Fprintf(tw, "group\t\t%d\t%d\t%d\t%.1f\t%s\n", g.Done, g.Failed, g.Scanned, g.Rate, etaText(g.ETASeconds))
	_ = tw.Flush()
}

func etaText(s *float64) string {
	switch {
	case s == nil:
		return "?"
	case *s == 0:
		return "done"
	}
	return (time.Duration(*s * float64(time.Second))).Round(time.Second).String()
}
