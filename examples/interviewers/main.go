// Command interviewers replays the "interviewer added twice" incident: a calendar update is
// processed at the same time by a web request and by a background poller, both check whether the
// interviewer is on the interview, both find it is not, and both insert a row.
//
// It runs the naive check-then-insert, then the two fixes: a uniqueness item written in one
// transaction with the row (the missing unique constraint), and an advisory lock.Mutex per
// interview. It prints the duplicates each left and the time per update each costs.
//
// Then it parks calendar updates, each delivered twice, for dynapart workers (child processes of
// this program) whose handler returns the interviewer's row as a put-if-absent effect, committed
// with the delivery's completion: a stale worker's late write (frozen with SIGSTOP past its lease)
// duplicates the row with the naive handler and is refused with the effects; SIGKILLed workers
// leave one row per interview.
//
//	dynapart local &
//	go run ./examples/interviewers --endpoint http://127.0.0.1:8000
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
)

func main() {
	exampleutil.RunIfChild(RunChild) // a worker started by this program: run it and exit
	workerUpdates := flag.Int("worker-updates", 30, "calendar updates (each delivered twice) per dynapart worker run")
	updates := flag.Int("updates", 100, "calendar updates raced by the web request and the poller, per approach")
	single := flag.Int("single", 200, "uncontended updates timed per approach")

	ctx := context.Background()
	// The SIGKILLed workers die at their 2nd and 3rd delivery: 10 updates (20 deliveries) leave them
	// that many; with 5, a worker may finish its share first.
	db, suffix, keep := exampleutil.Setup(ctx, exampleutil.AtLeast{Flag: "worker-updates", Value: workerUpdates, Min: 10},
		exampleutil.AtLeast{Flag: "updates", Value: updates, Min: 1}, exampleutil.AtLeast{Flag: "single", Value: single, Min: 1})
	table, leases := "interviews-"+suffix, "interviews-leases-"+suffix
	if err := exampleutil.CreateTable(ctx, db, table,
		exampleutil.Key{Name: attrInterview, Type: types.ScalarAttributeTypeS},
		exampleutil.Key{Name: attrSK, Type: types.ScalarAttributeTypeS}); err != nil {
		log.Fatal(err)
	}
	if err := lock.CreateTable(ctx, db, leases); err != nil {
		log.Fatal(err)
	}
	err := run(ctx, db, table, leases, *updates, *single)
	var created []string
	if err == nil {
		created, err = workerRuns(ctx, db, suffix, leases, *workerUpdates)
	}
	if !keep {
		exampleutil.DeleteTables(db, append(created, table, leases)...)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// run races the updates through each approach and prints what happened.
func run(ctx context.Context, db *dynamodb.Client, table, leases string, updates, single int) error {
	s := &Store{DB: db, Table: table}
	approaches, err := Approaches(s, db, leases)
	if err != nil {
		return err
	}
	fmt.Printf("%d calendar updates, each processed at once by the web request and the poller\n\n", updates)
	for _, a := range approaches {
		res, err := Race(ctx, s, a.Add, a.Name+"-race", updates, a.Name != "mutex")
		if err != nil {
			return fmt.Errorf("%s: %w", a.Name, err)
		}
		mean, err := MeanUncontended(ctx, a.Add, a.Name+"-single", single)
		if err != nil {
			return fmt.Errorf("%s: %w", a.Name, err)
		}
		fmt.Printf("%-7s %-44s %3d of %d interviews with a duplicate interviewer; %6.1f ms per update raced, %5.1f ms alone\n",
			a.Name, a.What, res.Duplicates, res.Updates, exampleutil.Ms(res.MeanAdd), exampleutil.Ms(mean))
	}
	return nil
}

// Approach is one way of adding an interviewer.
type Approach struct {
	Name, What string
	Add        AddFunc
}

// Approaches returns the naive code and the two fixes. The web request and the poller are
// separate processes, so each has its own lock client (its own owner id).
func Approaches(s *Store, db lock.DynamoDBClient, leaseTable string) ([]Approach, error) {
	var clients [2]*lock.Client
	for i := range clients {
		c, err := lock.New(db, leaseTable, lock.WithPollInterval(20*time.Millisecond),
			lock.WithOwner(fmt.Sprintf("interviewers-%d-%d", os.Getpid(), i)))
		if err != nil {
			return nil, err
		}
		clients[i] = c
	}
	locked := func(ctx context.Context, id, interviewer, source string, _ func()) (bool, error) {
		c := clients[0]
		if source == "poller" {
			c = clients[1]
		}
		return s.AddLocked(ctx, c, id, interviewer, source)
	}
	return []Approach{
		{"naive", "(check, then insert)", s.AddNaive},
		{"unique", "(uniqueness item in a transaction)", s.AddUnique},
		{"mutex", "(lock.Mutex \"interview#<id>\")", locked},
	}, nil
}

// workerRuns parks calendar updates, each delivered twice, and runs dynapart workers (child
// processes of this program) on them: a stale worker with the naive handler and with the effects,
// then SIGKILLed workers with the effects. It returns the tables it created.
func workerRuns(ctx context.Context, db *dynamodb.Client, suffix, leases string, n int) ([]string, error) {
	fmt.Printf("\n%d calendar updates, each delivered twice (web request and poller), parked for dynapart workers\n\n", n)
	var created []string
	runs := []struct {
		name string
		mode Mode
		run  func(context.Context, *dynamodb.Client, string, Tables, Mode, int) (RunOutcome, error)
	}{
		{"stale worker", Naive, StaleRun}, {"stale worker", Effects, StaleRun}, {"2 workers SIGKILLed", Effects, KillRun},
	}
	for i, r := range runs {
		t := Tables{
			Updates: fmt.Sprintf("interviews-updates-%d-%s", i, suffix), Interviews: fmt.Sprintf("interviews-rows-%d-%s", i, suffix),
			Leases: leases,
		}
		created = append(created, t.Updates, t.Interviews)
		err := exampleutil.CreateTable(ctx, db, t.Updates, exampleutil.Key{Name: attrID, Type: types.ScalarAttributeTypeS})
		if err == nil {
			err = exampleutil.CreateTable(ctx, db, t.Interviews, exampleutil.Key{Name: attrInterview, Type: types.ScalarAttributeTypeS},
				exampleutil.Key{Name: attrSK, Type: types.ScalarAttributeTypeS})
		}
		if err != nil {
			return created, err
		}
		out, err := r.run(ctx, db, exampleutil.Endpoint(), t, r.mode, n)
		if err != nil {
			return created, fmt.Errorf("%s, %s: %w", r.name, r.mode, err)
		}
		fmt.Printf("%-19s %-7s %d of %d interviews with a duplicate interviewer (%d rows); %d deliveries done, %d failed\n",
			r.name, r.mode, out.Duplicates, out.Updates, out.Rows, out.Ledger.Done, out.Ledger.Failed)
		for _, said := range out.Said {
			fmt.Printf("%28s %s\n", "", said)
		}
	}
	return created, nil
}
