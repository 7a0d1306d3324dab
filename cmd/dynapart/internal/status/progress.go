package status

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
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
// passes, the items left and the group's ETA. Estimated (see ShareEstimate).
type groupProgress struct {
	Done    int64 `json:"done"`
	Failed  int64 `json:"failed"`
	Scanned int64 `json:"scanned"`
	// Rate is items read per second in the current passes (the sum over working slots: those a
	// live worker holds; a slot nobody holds reads nothing, whatever its last checkpoint says).
	Rate float64 `json:"rate"`
	// ItemsEstimate is the source table's ItemCount from DescribeTable, an estimate; null when
	// unknown.
	ItemsEstimate *int64 `json:"items_estimate"`
	// Left is the items neither done nor failed: ItemsEstimate - Done - Failed, at least 0; null
	// without an estimate. Fraction is Done / ItemsEstimate (0..1), null without one.
	Left     *int64   `json:"left"`
	Fraction *float64 `json:"fraction"`
	// ETASeconds is the group's: 0 when every slot is finished (or follows the stream, its share
	// read) or nothing is left; else Left at Rate, so the shares of free slots (no worker) count
	// at the rate of the working ones, and no sooner than the slowest working slot's own ETA; null
	// when it cannot be told (no estimate, or no slot reading: WorkingSlots 0 means no worker).
	ETASeconds *float64 `json:"eta_seconds"`
	// FreeSlots counts the slots 0..N-1 neither finished, following nor held: their shares wait
	// for a worker. WorkingSlots counts those a live worker holds, neither finished nor following.
	FreeSlots    int `json:"free_slots"`
	WorkingSlots int `json:"working_slots"`
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
// finished or following the stream: the share was read), nil when unknown; the rate and the ETA
// (the rest of the current pass's reading at that rate) only while a live worker holds the slot:
// the checkpoint of a slot nobody holds is where its last holder stopped, not a pace.
func slotProgressOf(s lock.SlotStatus, share *int64) (p *slotProgress, fraction *float64) {
	read := s.Finished || followsStream(s.Checkpoint)
	if read {
		one := 1.0
		fraction = &one
	}
	if s.Checkpoint == "" {
		return nil, fraction
	}
	sp, err := worker.ParseSlotProgress(s.Checkpoint) // a follow mark is no scan position: an error, the counts kept
	if err != nil && !read && sp.Done == 0 && sp.Scanned == 0 && sp.Elapsed == 0 {
		return nil, fraction
	}
	p = &slotProgress{Done: sp.Done, Failed: sp.Failed, Scanned: sp.Scanned, Pass: sp.Pass + 1,
		ElapsedSeconds: sp.Elapsed.Seconds(), ShareEstimate: share}
	if !read && s.Held {
		p.Rate = sp.Rate()
	}
	switch {
	case read:
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

// groupProgressOf sums the slots' progress; nil when no slot has counts. n is the group's N.
func groupProgressOf(slots []slotDoc, n int, items *int64) *groupProgress {
	g := &groupProgress{ItemsEstimate: items}
	known, finished := false, 0
	var slowest *float64
	for _, s := range slots {
		switch {
		case s.Slot < n && (s.Finished || s.Following): // a following slot's share was read
			finished++
		case s.Slot < n && !s.Held:
			g.FreeSlots++
		case s.Slot < n:
			g.WorkingSlots++
		}
		p := s.Progress
		if p == nil {
			continue
		}
		known = true
		g.Done, g.Failed, g.Scanned = g.Done+p.Done, g.Failed+p.Failed, g.Scanned+p.Scanned
		if s.Finished || s.Following || !s.Held {
			continue
		}
		g.Rate += p.Rate
		if p.ETASeconds != nil && (slowest == nil || *p.ETASeconds > *slowest) {
			slowest = p.ETASeconds
		}
	}
	if !known {
		return nil
	}
	if items != nil {
		left := max(0, *items-g.Done-g.Failed)
		g.Left = &left
		if *items > 0 {
			f := min(1, float64(g.Done)/float64(*items))
			g.Fraction = &f
		}
	}
	g.ETASeconds = groupETA(g.Left, g.Rate, slowest, n > 0 && finished == n)
	return g
}

// groupETA is the time left: 0 when every slot is finished or nothing is left, else left at rate
// (no sooner than slowest, the slowest working slot's ETA); nil when it cannot be told.
func groupETA(left *int64, rate float64, slowest *float64, allFinished bool) *float64 {
	if allFinished {
		zero := 0.0
		return &zero
	}
	if left == nil {
		return nil
	}
	eta := etaOf(*left, rate, false)
	if eta != nil && *eta > 0 && slowest != nil {
		*eta = max(*eta, *slowest)
	}
	return eta
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
	doc.Progress = groupProgressOf(doc.Slots, st.N, r.items)
}

// statusItemsEvery is how often the status page re-reads the table's item count.
const statusItemsEvery = time.Minute

// printProgressText prints each slot's counts, rate and ETA from its checkpoint, the group's sums,
// and a line with the group's fraction done, items left and ETA.
func printProgressText(w io.Writer, slots []lock.SlotStatus, n int, items *int64, paused bool) {
	share := shareOf(items, n)
	docs := make([]slotDoc, len(slots))
	for i, s := range slots {
		docs[i] = slotDoc{slotJSON: slotJSON{Slot: s.Slot, Finished: s.Finished, Held: s.Held}, Following: followsStream(s.Checkpoint)}
		docs[i].Progress, _ = slotProgressOf(s, share)
	}
	g := groupProgressOf(docs, n, items)
	if g == nil {
		return
	}
	note := "share unknown"
	if share != nil {
		note = fmt.Sprintf("share ~%s per slot: the table's item count / N, an estimate", cli.Count(*share, "item"))
	}
	fmt.Fprintf(w, "progress (from the checkpoints; %s):\n", note)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tPASS\tDONE\tFAILED\tSCANNED\tRATE/s\tETA")
	for _, d := range docs {
		if p := d.Progress; p != nil {
			rate, eta := paceText(d)
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%s\t%s\n", d.Slot, p.Pass, p.Done, p.Failed, p.Scanned, rate, eta)
		} else {
			fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t-\t-\n", d.Slot)
		}
	}
	fmt.Fprintf(tw, "group\t\t%d\t%d\t%d\t%.1f\t%s\n", g.Done, g.Failed, g.Scanned, g.Rate, etaText(g.ETASeconds))
	_ = tw.Flush()
	fmt.Fprintln(w, groupSummary(g, paused))
}

// groupSummary is the group's line under the progress table: "group: 4223 of ~20000 done (21.1%),
// 15777 left, ETA 3m12s; 1 slot free, its share counted at the group's rate".
func groupSummary(g *groupProgress, paused bool) string {
	s := fmt.Sprintf("group: %d done", g.Done)
	if g.ItemsEstimate != nil && g.Fraction != nil {
		s = fmt.Sprintf("group: %d of ~%d done (%.1f%%)", g.Done, *g.ItemsEstimate, *g.Fraction*100)
	}
	if g.Left != nil {
		s += fmt.Sprintf(", %d left", *g.Left)
	}
	if g.ETASeconds == nil && g.WorkingSlots == 0 {
		s += ", ETA unknown: no worker holds a slot"
	} else {
		s += ", ETA " + etaText(g.ETASeconds)
	}
	if paused && g.ETASeconds != nil && *g.ETASeconds > 0 {
		s += " once resumed (PAUSED)"
	}
	switch {
	case g.WorkingSlots == 0 && g.FreeSlots == 1:
		s += "; 1 slot free (dynapart work to go on)"
	case g.WorkingSlots == 0 && g.FreeSlots > 1:
		s += fmt.Sprintf("; %d slots free (dynapart work to go on)", g.FreeSlots)
	case g.FreeSlots == 1:
		s += "; 1 slot free, its share counted at the group's rate"
	case g.FreeSlots > 1:
		s += fmt.Sprintf("; %d slots free, their shares counted at the group's rate", g.FreeSlots)
	}
	return s
}

// paceText is a slot row's rate and ETA: "-" for a slot no live worker holds (unless its share is
// read: finished, or following the stream), whose last checkpoint is no pace.
func paceText(d slotDoc) (rate, eta string) {
	if !d.Held && !d.Finished && !d.Following {
		return "-", "no worker"
	}
	return fmt.Sprintf("%.1f", d.Progress.Rate), etaText(d.Progress.ETASeconds)
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
