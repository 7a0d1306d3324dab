// Command transform migrates every item of a table, as one command that is safe to rerun: schema
// version 1 of a people table (name "Ada Lovelace") to version 2 (first "Ada", last "Lovelace", no
// name). dynapart workers run over the table once, complete-only, and the handler returns the
// item's change as an effect, merged into the completion: one conditional UpdateItem per item,
// which migrates the item and marks it done together. An interrupted run is finished by running
// it again (items done are skipped); a rerun of a finished job does nothing.
//
// Without --table it creates a demo table, shows the dry run, migrates, and runs again. With
// --table it works on that table; --dry-run prints what would change and writes nothing.
//
//	dynapart local &
//	go run ./examples/transform --endpoint http://127.0.0.1:8000
//	go run ./examples/transform --endpoint http://127.0.0.1:8000 --table people --dry-run
//	go run ./examples/transform --endpoint http://127.0.0.1:8000 --table people
//
// "transform step" is the same migration as a command for `dynapart work --exec CMD
// --exec-effects`: it reads one item (JSON) on stdin and prints its effects (README.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "step" {
		if err := Step(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(65) // dynapart work --exec: a permanent failure, the item is dead-lettered
		}
		return
	}
	table := flag.String("table", "", "the table to migrate (empty: a demo table, created and filled)")
	leases := flag.String("lease-table", "", "the lease table (created if missing; default: dynapart-leases, or a demo one)")
	group := flag.String("group", "", "the workers' group (default <table>/default); a finished group does nothing again: a new one migrates items written since, skipping those done")
	items := flag.Int("items", 1000, "people in the demo table")
	workers := flag.Int("workers", 2, "workers (slots), run in this process")
	dryRun := flag.Bool("dry-run", false, "print what would change, write nothing")
	ctx := context.Background()
	db, suffix, keep := exampleutil.Setup(ctx, exampleutil.AtLeast{Flag: "workers", Value: workers, Min: 1},
		exampleutil.AtLeast{Flag: "items", Value: items, Min: 0})

	j := Job{Table: *table, Group: *group, Leases: *leases, Workers: *workers}
	if j.Table == "" {
		j.Table = "people-" + suffix
		if j.Leases == "" {
			j.Leases = "transform-leases-" + suffix
		}
		if !keep {
			defer exampleutil.DeleteTables(db, j.Table, j.Leases)
		}
		if err := CreatePeople(ctx, db, j.Table, *items); err != nil {
			fail(err, keep, db, j)
		}
	}
	if j.Leases == "" {
		j.Leases = worker.DefaultLeaseTable
	}
	if err := run(ctx, db, j, *dryRun); err != nil {
		fail(err, keep || *table != "", db, j)
	}
}

// fail prints err and exits 1 (a script can tell a failed migration or dry run), deleting the
// demo's tables first unless kept (os.Exit runs no deferred call).
func fail(err error, keep bool, db *dynamodb.Client, j Job) {
	log.Print(err)
	if !keep {
		exampleutil.DeleteTables(db, j.Table, j.Leases)
	}
	os.Exit(1)
}

func run(ctx context.Context, db *dynamodb.Client, j Job, dryRun bool) error {
	fmt.Printf("dry run of %s (nothing is written):\n", j.Table)
	n, err := DryRun(ctx, db, j.Table, os.Stdout, 5)
	if err != nil {
		return err
	}
	fmt.Printf("  %d items: %d would change, %d have no name (only marked done), %d finished by an earlier run (done or dead-lettered)\n",
		n.Items, n.WouldChange, n.Unchanged, n.Done)
	if dryRun {
		return nil
	}
	if err := lock.CreateTable(ctx, db, j.Leases); err != nil {
		return err
	}
	for i, what := range []string{"migration", "the same command again"} {
		t0 := time.Now()
		out, err := Migrate(ctx, db, j)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %d items completed, %d failed, by %d workers in %s\n", what, out.Completed, out.Failed, j.Workers,
			time.Since(t0).Round(time.Millisecond))
		if out.Failed > 0 {
			return fmt.Errorf("%d items could not be migrated and are dead-lettered: see `dynapart failed --table %s`, fix them, then `dynapart redrive --table %s`",
				out.Failed, j.Table, j.Table)
		}
		if i == 0 && out.Completed == 0 && n.WouldChange > 0 {
			fmt.Printf("  nothing migrated: the group %s finished before; items written since need a new --group\n", groupOf(j))
		}
	}
	return nil
}

// groupOf is j's group as the workers name it.
func groupOf(j Job) string {
	if j.Group != "" {
		return j.Group
	}
	return j.Table + "/default"
}

// Outcome is what a migration's workers did.
type Outcome struct {
	Completed int64 // items migrated (and marked done)
	Failed    int64 // items dead-lettered (an item the handler refuses, e.g. a schema_version that is not a number)
}

// Migrate runs one worker per slot, in this process, until the job is finished, and returns what
// they did (nothing when the job had finished before).
func Migrate(ctx context.Context, db worker.DynamoDBClient, j Job) (Outcome, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		out  Outcome
		errs []error
	)
	for range j.Workers {
		w, err := worker.New(Config(db, j))
		if err != nil {
			return Outcome{}, err
		}
		wg.Go(func() {
			err := w.Run(ctx, worker.WithEffects(Handler))
			mu.Lock()
			defer mu.Unlock()
			st := w.Stats()
			out.Completed += st.Completed
			out.Failed += st.DeadLettered
			errs = append(errs, err)
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// demoNames are the names of the demo table, spaces and all.
var demoNames = []string{"Ada Lovelace", "Grace Brewster Hopper", "Cher", "  Alan   Turing ", "Katherine Johnson"}

// CreatePeople creates a people table (id S) with n items at version 1, except every tenth item,
// which is at version 2 already (first, last, no name).
func CreatePeople(ctx context.Context, db *dynamodb.Client, table string, n int) error {
	if err := exampleutil.CreateTable(ctx, db, table, exampleutil.Key{Name: attrID, Type: types.ScalarAttributeTypeS}); err != nil {
		return err
	}
	items := make([]map[string]types.AttributeValue, 0, n)
	for i := range n {
		it := map[string]types.AttributeValue{attrID: &types.AttributeValueMemberS{Value: fmt.Sprintf("p-%05d", i)}}
		name := demoNames[i%len(demoNames)]
		if i%10 == 9 {
			c := Split(name)
			it[attrFirst], it[attrLast] = &types.AttributeValueMemberS{Value: c.First}, &types.AttributeValueMemberS{Value: c.Last}
			it[attrVersion] = &types.AttributeValueMemberN{Value: "2"}
		} else {
			it[attrName], it[attrVersion] = &types.AttributeValueMemberS{Value: name}, &types.AttributeValueMemberN{Value: "1"}
		}
		items = append(items, it)
	}
	return exampleutil.WriteItems(ctx, db, table, items)
}
