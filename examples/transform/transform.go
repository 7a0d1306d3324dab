package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/worker"
)

// The people table, schema version 1: id (S, the key), name ("Ada Lovelace"), schema_version 1.
// Version 2: first ("Ada"), last ("Lovelace", absent for a one-word name), no name,
// schema_version 2.
const (
	attrID      = "id"
	attrName    = "name"
	attrFirst   = "first"
	attrLast    = "last"
	attrVersion = "schema_version"
)

// Change is what the migration does to one item.
type Change struct {
	Name        string // the name it splits
	First, Last string // Last "" when the name is one word
	// Unversioned: the item has no schema_version (a version 1 item written without one); it is
	// set to 2, where the others' is added to.
	Unversioned bool
}

// Split is the migration of a name: its first word, and the rest (one space between words).
func Split(name string) Change {
	first, last, _ := strings.Cut(strings.Join(strings.Fields(name), " "), " ")
	return Change{Name: name, First: first, Last: last}
}

// ChangeOf is the migration of one item: split its name. false: the item has no name (it is at
// version 2 already, or never had one) and nothing changes.
func ChangeOf(item map[string]types.AttributeValue) (Change, bool) {
	name, ok := item[attrName].(*types.AttributeValueMemberS)
	if !ok {
		return Change{}, false
	}
	c := Split(name.Value)
	_, versioned := item[attrVersion]
	c.Unversioned = !versioned
	return c, true
}

// Effects is the change as an update of the item itself: set first and last, remove name, and add
// one to schema_version. ADD rather than SET on purpose: a step applied twice would show as
// version 3, so a test can see that every item was migrated exactly once. An item without a
// schema_version gets 2 (adding to nothing would give 1).
func (c Change) Effects() *worker.Effects {
	set := []ledger.Change{ledger.Set(attrFirst, c.First)}
	if c.Last != "" {
		set = append(set, ledger.Set(attrLast, c.Last))
	}
	version := ledger.Add(attrVersion, 1)
	if c.Unversioned {
		version = ledger.Set(attrVersion, 2)
	}
	return (&worker.Effects{}).Item(append(set, ledger.Remove(attrName), version)...)
}

// String shows the change, for the dry run.
func (c Change) String() string {
	if c.Last == "" {
		return fmt.Sprintf("name %q -> first %q", c.Name, c.First)
	}
	return fmt.Sprintf("name %q -> first %q, last %q", c.Name, c.First, c.Last)
}

// Handler is the migration's worker handler: the item's change, returned as effects.
func Handler(ctx context.Context, it worker.Item) (*worker.Effects, error) {
	c, ok := ChangeOf(it.Attrs)
	if !ok {
		return nil, nil // nothing to change: the item is only marked done
	}
	return c.Effects(), nil
}

// Job names what a migration runs on.
type Job struct {
	Table  string
	Group  string // "": the default group (<table>/default); a group that has finished does nothing again
	Leases string // the lease table
	// Workers is the number of slots; Migrate runs one worker per slot in its process.
	Workers int
}

// Config is the migration's worker configuration: once over the table, complete-only (no claim:
// the completion, with the item's update merged in, is one conditional UpdateItem per item).
func Config(db worker.DynamoDBClient, j Job) worker.Config {
	return worker.Config{
		Client: db, Table: j.Table, Group: j.Group, LeaseTable: j.Leases, Workers: j.Workers,
		Once: true, CompleteOnly: true, Concurrency: 16,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// Step is the migration as a command for `dynapart work --exec CMD --exec-effects`: it reads one
// item on in (plain JSON, as dynapart writes it) and writes its effects to out, in the
// --exec-effects format ({} when nothing changes).
func Step(in io.Reader, out io.Writer) error {
	var item map[string]any
	if err := json.NewDecoder(in).Decode(&item); err != nil {
		return fmt.Errorf("read the item: %w", err)
	}
	name, ok := item[attrName].(string)
	if !ok {
		_, err := io.WriteString(out, "{}\n")
		return err
	}
	c := Split(name)
	set := map[string]any{attrFirst: c.First}
	if c.Last != "" {
		set[attrLast] = c.Last
	}
	eff := map[string]any{"set": set, "remove": []string{attrName}, "add": map[string]int{attrVersion: 1}}
	if _, versioned := item[attrVersion]; !versioned {
		set[attrVersion] = 2 // adding to nothing would give 1 (see Change.Effects)
		delete(eff, "add")
	}
	return json.NewEncoder(out).Encode(eff)
}

// DryRunCounts is what a dry run found.
type DryRunCounts struct {
	Items       int // items read
	Done        int // done (or dead-lettered) by an earlier run: skipped
	WouldChange int
	Unchanged   int // no name: only marked done
}

// DryRun reads the table as the migration would and prints what it would change (the first
// samples changes), writing nothing.
func DryRun(ctx context.Context, db *dynamodb.Client, table string, out io.Writer, samples int) (DryRunCounts, error) {
	var n DryRunCounts
	l, err := ledger.NewInline(db, table, []string{attrID})
	if err != nil {
		return n, err
	}
	pages := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("scan %s: %w", table, err)
		}
		for _, it := range page.Items {
			n.Items++
			if st, _ := l.StateOf(it); st.Status.Finished() {
				n.Done++
				continue
			}
			c, ok := ChangeOf(it)
			if !ok {
				n.Unchanged++
				continue
			}
			if n.WouldChange++; n.WouldChange <= samples {
				fmt.Fprintf(out, "  %s: %s\n", idOf(it), c)
			}
		}
	}
	return n, nil
}

// idOf is the item's id as the dry run prints it.
func idOf(it map[string]types.AttributeValue) string {
	if v, ok := it[attrID].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return fmt.Sprint(it[attrID])
}
