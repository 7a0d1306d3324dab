package chaos

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// With Params.Effects, the --exec handler also prints effects (dynapart work --exec-effects):
// the item's own counter "own" + 1, the name of one of nine shared counters set on the item
// ("counter", by the first digit of the key's cksum), and that shared counter + 1 on the counters table.
// The audit then requires, from the tables alone: every done item's own counter is exactly 1 and
// every other item's is missing; every shared counter equals the done items that name it. Side
// effects of the handler may repeat under kills and faults; these must not.

// counters is the scenario's counters table (key pk S).
func (f *fixture) counters() string { return f.table + "-counters" }

// effectsScript prints the effects of one item; it runs after the side-effect log line.
func (f *fixture) effectsScript() string {
	return `; c=c$(printf '%s' "$DYNAPART_KEY" | cksum | cut -c1); ` +
		fmt.Sprintf(`printf '{"set": {"counter": "%%s"}, "add": {"own": 1}, "writes": [{"update": {"table": "%s", "key": {"pk": "%%s"}, "add": {"n": 1}}}]}' "$c" "$c"`, f.counters())
}

// auditEffects checks the effects from the tables (see above).
func (f *fixture) auditEffects(ctx context.Context, r *Result) {
	want := map[string]int64{}
	done, err := 0, error(nil)
	p := dynamodb.NewScanPaginator(f.db, &dynamodb.ScanInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() && err == nil {
		var page *dynamodb.ScanOutput
		if page, err = p.NextPage(ctx); err != nil {
			break
		}
		for _, it := range page.Items {
			own, isDone := nAttr(it, "own"), sAttr(it, "dp_status") == "done"
			switch {
			case isDone && own != 1:
				r.fail("effects: done item %s has own counter %d, want 1", keyString(map[string]types.AttributeValue{"id": it["id"]}), own)
			case !isDone && own != 0:
				r.fail("effects: item %s is %q with own counter %d, want none", keyString(map[string]types.AttributeValue{"id": it["id"]}), sAttr(it, "dp_status"), own)
			case isDone:
				done++
				want[sAttr(it, "counter")]++
			}
		}
	}
	if err != nil {
		r.fail("effects: audit scan: %v", err)
		return
	}
	f.auditCounters(ctx, r, want)
	r.event("effects: %d done items, each with its own counter at 1; %d shared counters checked", done, len(want))
}

// auditCounters compares each shared counter with the done items that name it.
func (f *fixture) auditCounters(ctx context.Context, r *Result, want map[string]int64) {
	out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(f.counters()), ConsistentRead: aws.Bool(true)})
	if err != nil {
		r.fail("effects: counters: %v", err)
		return
	}
	got := map[string]int64{}
	for _, it := range out.Items {
		got[sAttr(it, "pk")] = nAttr(it, "n")
	}
	for name, n := range want {
		if got[name] != n {
			r.fail("effects: shared counter %s is %d, %d done items name it", name, got[name], n)
		}
	}
	for name, n := range got {
		if _, ok := want[name]; !ok {
			r.fail("effects: shared counter %s is %d, no done item names it", name, n)
		}
	}
}
