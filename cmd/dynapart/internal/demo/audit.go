package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/work"
	"github.com/dynapart/dynapart/worker"
)

// demoAudit is what the demo checks at the end.
type demoAudit struct {
	twice     int            // keys in the record files of two workers, or twice in one
	perWorker map[string]int // done items by the worker that completed them
	sum       worker.Summary // the ledger's counts
	missing   int64          // items not done
}

// audit reads the record files and the ledger. Record files are append-only logs each worker
// writes after every completion it made: a key in two of them was completed twice. The ledger says
// who completed what (a SIGKILL can cut a record line after its completion, never the other way
// round).
func (d *demo) audit(ctx context.Context) (demoAudit, error) {
	var a demoAudit
	counts := map[string]int{}
	for _, p := range d.procs {
		if _, err := work.ReadRecord(p.record, counts); err != nil {
			return a, err
		}
	}
	for _, c := range counts {
		if c > 1 {
			a.twice++
		}
	}
	var err error
	if a.perWorker, err = doneByOwner(ctx, d.db, d.table); err != nil {
		return a, err
	}
	led, err := worker.NewInlineLedger(d.db, d.table, []string{"id"}, worker.InlineOptions{})
	if err != nil {
		return a, err
	}
	if a.sum, err = led.Summarize(ctx); err != nil {
		return a, err
	}
	a.missing = int64(d.f.items) - a.sum.Done
	return a, nil
}

// summary prints the audit and fails unless every item was done exactly once.
func (d *demo) summary(a demoAudit, wall time.Duration) error {
	d.say("\n== summary")
	tw := tabwriter.NewWriter(d.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tITEMS COMPLETED\tEXIT")
	for _, p := range d.procs {
		exit := fmt.Sprint(p.exitCode)
		if p.killed {
			exit = "SIGKILL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", p.owner, a.perWorker[p.owner], exit)
	}
	_ = tw.Flush()
	if d.victim != nil {
		d.sayTakeover()
	}
	resized := d.sayResize()
	items := d.f.items
	d.say("throughput:        %s in %.1fs = %.0f items/s", cli.Count(items, "item"), wall.Seconds(), float64(items)/wall.Seconds())
	d.say("completed twice:   %d", a.twice)
	d.say("missing:           %d", a.missing)
	d.say("verify:            total %d, done %d, pending %d, claimed %d, failed %d", a.sum.Total, a.sum.Done, a.sum.Pending, a.sum.Claimed, a.sum.Failed)
	ok := a.twice == 0 && a.missing == 0 && a.sum.Total == int64(items) && resized
	for _, p := range d.procs {
		if !p.killed && p.exitCode != 0 {
			ok = false
			d.say("worker %s exited with %d (log: %s)", p.owner, p.exitCode, filepath.Join(d.dir, p.owner+".log"))
		}
	}
	if !ok {
		msg := "demo FAILED: not every item was done exactly once"
		if !resized && a.twice == 0 && a.missing == 0 {
			msg = "demo FAILED: the group did not end at the N it was scaled to"
		}
		return &cli.ExitError{Code: cli.ExitRuntime, Msg: msg}
	}
	if d.resize != nil {
		d.say("\nOK: every item done exactly once, despite the SIGKILL and the resize to %s.", cli.Count(d.resize.to, "slot"))
		return nil
	}
	d.say("\nOK: every item done exactly once, despite the SIGKILL.")
	return nil
}

// sayTakeover says which worker took the killed one's slot, and how fast.
func (d *demo) sayTakeover() {
	var taker *demoProc
	for _, p := range d.procs {
		if p != d.victim && !p.firstAt.IsZero() && (taker == nil || p.firstAt.Before(taker.firstAt)) {
			taker = p
		}
	}
	if taker == nil {
		d.say("takeover:          none observed")
		return
	}
	d.say("takeover:          %s took the slot %.1fs after the SIGKILL, first item completed %.1fs after it (lease TTL %s)",
		taker.owner, taker.firstAcq.Sub(d.killTime).Seconds(), taker.firstAt.Sub(d.killTime).Seconds(), d.f.leaseTTL)
}

// doneByOwner counts the done items of the table by the worker that completed them (dp_owner).
func doneByOwner(ctx context.Context, db *dynamodb.Client, table string) (map[string]int, error) {
	out := map[string]int{}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
		TableName:                aws.String(table),
		ProjectionExpression:     aws.String("#o, #s"),
		ExpressionAttributeNames: map[string]string{"#o": "dp_owner", "#s": "dp_status"},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("audit %q: %w", table, err)
		}
		for _, it := range page.Items {
			st, _ := it["dp_status"].(*types.AttributeValueMemberS)
			o, _ := it["dp_owner"].(*types.AttributeValueMemberS)
			if st != nil && st.Value == "done" && o != nil {
				out[o.Value]++
			}
		}
	}
	return out, nil
}
