package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

// TestOneEmailPerUserPerPush first reproduces the incident: the three phases' jobs, run at once
// over their overlapping selections, mail every user of A or B two or three times. Then the
// dynapart version, over the same selections and with all three phases running at once, mails
// every user of the list exactly once.
func TestOneEmailPerUserPerPush(t *testing.T) {
	plan := Plan{Users: 1000, VariantSize: 50, Seed: 3}
	db := ddbtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	user := ddbtest.Key{Name: attrUser, Type: "N"}
	phases, err := SetUp(ctx, db, plan, ddbtest.CreateTable(t, db, user), ddbtest.CreateTable(t, db, user), ddbtest.CreateTable(t, db, user))
	require.NoError(t, err)

	a, b, _ := plan.Selections()
	inAorB := map[int]bool{}
	for _, u := range append(append([]int{}, a...), b...) {
		inAorB[u] = true
	}
	require.Less(t, len(inAorB), 2*plan.VariantSize, "the seed must make A and B overlap")

	naive := &Mailer{}
	require.NoError(t, SendNaive(ctx, db, phases, naive))
	r := naive.Report()
	require.Equal(t, plan.Users, r.Users)
	require.Equal(t, plan.Users+2*plan.VariantSize, r.Sent)
	require.Equal(t, 2*plan.VariantSize, r.Duplicates, "every user of A or B is mailed again by the other variant or the winner")
	require.Equal(t, 3, r.Worst, "a user in A, B and the rest gets three e-mails")
	t.Logf("naive: %d e-mails to %d users, %d duplicates", r.Sent, r.Users, r.Duplicates)

	leases := ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(ctx, db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	ledger := ddbtest.TableName(t, "ledger")
	require.NoError(t, worker.CreateLedgerTable(ctx, db, ledger))
	ddbtest.DeleteOnCleanup(t, db, ledger)

	mailer := &Mailer{Delay: time.Millisecond} // a send takes time, so phases meet the same user in flight
	d := Dynapart{DB: db, LeaseTable: leases, LedgerTable: ledger, Push: "42", Workers: 2}
	t0 := time.Now()
	stats, err := d.Send(ctx, phases, mailer, nil)
	require.NoError(t, err)
	r = mailer.Report()
	require.Equal(t, plan.Users, r.Users, "every user of the list is mailed")
	require.Zero(t, r.Duplicates, "no user is mailed twice in one push")
	require.Equal(t, plan.Users, r.Sent)
	require.EqualValues(t, plan.Users, stats.Mailed.Load())
	require.EqualValues(t, 2*plan.VariantSize, stats.AlreadyMailed.Load()+stats.BeingMailedNow.Load(),
		"each extra selection of a user is skipped once")
	t.Logf("dynapart: %d e-mails to %d users, %d duplicates in %s; skipped %d already mailed, %d being mailed",
		r.Sent, r.Users, r.Duplicates, time.Since(t0).Round(time.Millisecond), stats.AlreadyMailed.Load(), stats.BeingMailedNow.Load())

}
