package chaos

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ledgerRow is one item's inline ledger state.
type ledgerRow struct {
	status, owner string
	slot, token   int64
}

// keyString renders a key the way `dynapart work --record` and DYNAPART_KEY do: a plain JSON
// object (for the S and N keys the scenarios use).
func keyString(k map[string]types.AttributeValue) string {
	names := make([]string, 0, len(k))
	for n := range k {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", n)
		switch v := k[n].(type) {
		case *types.AttributeValueMemberS:
			fmt.Fprintf(&b, "%q", v.Value)
		case *types.AttributeValueMemberN:
			b.WriteString(v.Value)
		default:
			fmt.Fprintf(&b, "%q", fmt.Sprint(v))
		}
	}
	b.WriteByte('}')
	return b.String()
}

// readLedger scans the table (consistent) for every item's inline ledger state, keyed by keyString.
func readLedger(ctx context.Context, db *dynamodb.Client, table, keyAttr, prefix string) (map[string]ledgerRow, error) {
	out := map[string]ledgerRow{}
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
		TableName:                aws.String(table),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#k, #st, #o, #sl, #t"),
		ExpressionAttributeNames: map[string]string{"#k": keyAttr, "#st": prefix + "status", "#o": prefix + "owner", "#sl": prefix + "slot", "#t": prefix + "token"},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("chaos: audit scan of %s: %w", table, err)
		}
		for _, it := range page.Items {
			out[keyString(map[string]types.AttributeValue{keyAttr: it[keyAttr]})] = ledgerRow{
				status: sAttr(it, prefix+"status"), owner: sAttr(it, prefix+"owner"),
				slot: nAttr(it, prefix+"slot"), token: nAttr(it, prefix+"token"),
			}
		}
	}
	return out, nil
}

// readLines counts the lines of a file into counts (a missing file is empty).
func readLines(path string, counts map[string]int) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			counts[l]++
		}
	}
	return sc.Err()
}

// audit is the end-of-run check of a scenario.
type audit struct {
	items      int
	ledger     map[string]ledgerRow
	records    map[string]map[string]int // owner -> key -> completions it recorded
	sideEffect map[string]int            // key -> handler runs (nil: no side-effect log)
	permanent  map[string]bool           // keys whose handler always fails permanently
	leases     LeaseReport
	lost       map[[2]int64]bool // leases (slot, token) lost by load (see fixture.countLeaseLosses)
}

// apply fills r's counts and invariant results.
func (a *audit) apply(r *Result) {
	r.Items = a.items
	r.PermanentItems = len(a.permanent)
	for k, row := range a.ledger {
		switch {
		case row.status == "done" && a.permanent[k]:
			r.fail("%s is done, but its handler always fails", k)
		case row.status == "done":
			r.Done++
		case row.status == "failed" && a.permanent[k]:
			r.Failed++
		case row.status == "failed":
			r.Failed++
			r.fail("%s was dead-lettered, but its handler never failed permanently", k)
		}
	}
	r.Missing = a.items - r.Done - r.Failed
	if r.Failed != len(a.permanent) {
		r.fail("%d items dead-lettered, %d fail permanently", r.Failed, len(a.permanent))
	}
	if len(a.ledger) != a.items {
		r.fail("the table holds %d items, %d were seeded", len(a.ledger), a.items)
	}
	// Completions recorded by the workers: a key in two records, or twice in one, was completed
	// twice; a key recorded by A must be owned by A in the ledger.
	total := map[string]int{}
	for owner, keys := range a.records {
		for k, n := range keys {
			total[k] += n
			row, ok := a.ledger[k]
			switch {
			case !ok:
				r.fail("%s recorded a completion of %s, which is not in the table", owner, k)
			case row.status != "done":
				r.fail("%s recorded a completion of %s, whose ledger state is %q", owner, k, row.status)
			case row.owner != owner:
				r.fail("%s recorded a completion of %s, but the ledger says %s completed it", owner, k, row.owner)
			}
		}
	}
	for k, n := range total {
		if n > 1 {
			r.CompletedTwice++
			if r.CompletedTwice <= 5 {
				r.fail("%s completed %d times", k, n)
			}
		}
	}
	// Every done item was completed by the holder of its last claim: the claim's (slot, token)
	// belongs to the owner that the lease history saw holding it.
	mismatch := 0
	for k, row := range a.ledger {
		if row.status != "done" {
			continue
		}
		if total[k] == 0 {
			r.Unrecorded++
		}
		if o, ok := a.leases.Owners[[2]int64{row.slot, row.token}]; ok && o != row.owner {
			mismatch++
			if mismatch <= 5 {
				r.fail("%s done by %s under slot %d token %d, which the lease history gives to %s", k, row.owner, row.slot, row.token, o)
			}
		}
		if a.sideEffect != nil && a.sideEffect[k] == 0 {
			r.fail("%s is done but its handler never ran", k)
		}
	}
	for k, n := range a.sideEffect {
		if n > 1 {
			r.SideEffectDuplicates += n - 1
		}
		if _, ok := a.ledger[k]; !ok {
			r.fail("side effect for unknown key %s", k)
		}
	}
	r.Leases = a.leases
	for _, v := range a.leases.Violations {
		r.fail("lease history: %s", v)
	}
	if r.Takeovers == 0 {
		r.Takeovers = a.leases.Takeovers
	}
}
