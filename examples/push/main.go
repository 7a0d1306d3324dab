// Command push replays the "two e-mails from one push" incident: a push with content testing sends
// variant A and variant B to 1,000 random users each and the winner to the rest of a 25,000-user
// list, three jobs at once over selections that overlap. The rule: a user never gets more than one
// e-mail per push.
//
// It runs the naive jobs, then the dynapart version (each phase partitioned by user id over
// several workers, every send reserved in a ledger keyed by push and user), and prints the sends,
// the users mailed and the duplicates of each.
//
//	dynapart local &
//	go run ./examples/push --endpoint http://127.0.0.1:8000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

func main() {
	plan := Plan{Seed: 1}
	flag.IntVar(&plan.Users, "users", 25000, "users on the list")
	flag.IntVar(&plan.VariantSize, "variant-size", 1000, "users per test variant (A and B)")
	workers := flag.Int("workers", 3, "dynapart workers per phase")

	ctx := context.Background()
	db, suffix, keep := exampleutil.Setup(ctx)
	var tables []string
	cleanup := func() {
		if !keep {
			exampleutil.DeleteTables(db, tables...)
		}
	}
	if err := run(ctx, db, suffix, plan, *workers, &tables); err != nil {
		log.Print(err)
		cleanup()
		os.Exit(1)
	}
	cleanup()
}

func run(ctx context.Context, db *dynamodb.Client, suffix string, plan Plan, workers int, tables *[]string) error {
	sel := []string{"push-" + suffix + "-A", "push-" + suffix + "-B", "push-" + suffix + "-winner"}
	for _, name := range sel {
		*tables = append(*tables, name)
		if err := exampleutil.CreateTable(ctx, db, name, exampleutil.Key{Name: attrUser, Type: types.ScalarAttributeTypeN}); err != nil {
			return err
		}
	}
	phases, err := SetUp(ctx, db, plan, sel[0], sel[1], sel[2])
	if err != nil {
		return err
	}
	leases, ledger := "push-leases-"+suffix, "push-ledger-"+suffix
	*tables = append(*tables, leases, ledger)
	if err := lock.CreateTable(ctx, db, leases); err != nil {
		return err
	}
	if err := worker.CreateLedgerTable(ctx, db, ledger); err != nil {
		return err
	}
	fmt.Printf("push to %d users: variant A to %d, variant B to %d, the winner to the rest; three jobs at once\n\n",
		plan.Users, plan.VariantSize, plan.VariantSize)

	naive := &Mailer{}
	t0 := time.Now()
	if err := SendNaive(ctx, db, phases, naive); err != nil {
		return err
	}
	r := naive.Report()
	fmt.Printf("naive:    %6d e-mails to %6d users, %5d duplicates (worst: %d e-mails to one user) in %s\n",
		r.Sent, r.Users, r.Duplicates, r.Worst, time.Since(t0).Round(time.Millisecond))

	mailer := &Mailer{}
	t0 = time.Now()
	d := Dynapart{DB: db, LeaseTable: leases, LedgerTable: ledger, Push: suffix, Workers: workers}
	stats, err := d.Send(ctx, phases, mailer, nil)
	if err != nil {
		return err
	}
	r = mailer.Report()
	fmt.Printf("dynapart: %6d e-mails to %6d users, %5d duplicates (worst: %d e-mails to one user) in %s\n",
		r.Sent, r.Users, r.Duplicates, r.Worst, time.Since(t0).Round(time.Millisecond))
	fmt.Printf("          %d workers per phase; %d users skipped as already mailed in this push, %d as being mailed by another phase\n",
		workers, stats.AlreadyMailed.Load(), stats.BeingMailedNow.Load())
	return nil
}

// SetUp writes the plan's selections into the three selection tables (pk user_id, N) and returns
// the phases that read them.
func SetUp(ctx context.Context, db *dynamodb.Client, plan Plan, tableA, tableB, tableWinner string) ([]Phase, error) {
	a, b, rest := plan.Selections()
	phases := []Phase{
		{Name: "A", Variant: "subject A", Table: tableA},
		{Name: "B", Variant: "subject B", Table: tableB},
		{Name: "winner", Variant: "winning subject", Table: tableWinner},
	}
	for i, users := range [][]int{a, b, rest} {
		if err := WriteSelection(ctx, db, phases[i].Table, users); err != nil {
			return nil, err
		}
	}
	return phases, nil
}
