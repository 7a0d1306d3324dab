package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/scan"
	"github.com/dynapart/dynapart/worker"
)

// A phase of a push: the variant it sends and the selection table it reads (pk user_id, N).
type Phase struct {
	Name    string // "A", "B", "winner"
	Variant string // the e-mail it sends
	Table   string
}

// Plan sizes a push with content testing: variants A and B each go to VariantSize random users of
// the list, the winner to "the rest".
type Plan struct {
	Users, VariantSize int
	Seed               uint64
}

// Selections draws the three selections, as the campaign tool did when the push was scheduled:
// A and B are independent random draws from the whole list (so a few users are in both), and the
// winner's list is "everyone who has not had this push yet", which, computed before any e-mail of
// A or B was recorded, is everyone. Every user of A or B is therefore in two or three lists.
func (p Plan) Selections() (a, b, rest []int) {
	r := rand.New(rand.NewPCG(p.Seed, 0x9054))
	draw := func() []int {
		perm := r.Perm(p.Users)[:p.VariantSize]
		for i := range perm {
			perm[i]++ // user ids start at 1
		}
		return perm
	}
	a, b = draw(), draw()
	rest = make([]int, p.Users)
	for i := range rest {
		rest[i] = i + 1
	}
	return a, b, rest
}

// Mailer is the fake e-mail provider: it records every send.
type Mailer struct {
	Delay time.Duration // time one send takes
	mu    sync.Mutex
	sends map[int][]string // user -> variants sent
}

// Send "sends" variant to user.
func (m *Mailer) Send(ctx context.Context, user int, variant string) error {
	if m.Delay > 0 {
		t := time.NewTimer(m.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sends == nil {
		m.sends = map[int][]string{}
	}
	m.sends[user] = append(m.sends[user], variant)
	return nil
}

// Report counts the sends: Sent e-mails to Users distinct users, Duplicates e-mails beyond the
// first per user, Worst the most e-mails one user got.
type Report struct {
	Sent, Users, Duplicates, Worst int
}

// Report summarises what the mailer sent.
func (m *Mailer) Report() Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	var r Report
	for _, vs := range m.sends {
		r.Users++
		r.Sent += len(vs)
		r.Duplicates += len(vs) - 1
		r.Worst = max(r.Worst, len(vs))
	}
	return r
}

// SendNaive is the code from the incident: each phase's job sends its variant to every user of
// its selection, all three at once, trusting the selections to be disjoint.
func SendNaive(ctx context.Context, db *dynamodb.Client, phases []Phase, mailer *Mailer) error {
	var wg sync.WaitGroup
	errs := make([]error, len(phases))
	for i, ph := range phases {
		wg.Go(func() {
			errs[i] = scanUsers(ctx, db, ph.Table, func(user int) error { return mailer.Send(ctx, user, ph.Variant) })
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Dynapart configures the dynapart version of the push.
type Dynapart struct {
	DB          worker.DynamoDBClient
	LeaseTable  string
	LedgerTable string
	Push        string // the push id: the ledger's job is "push-<id>"
	Workers     int    // workers per phase
}

// Stats counts what the dynapart push did.
type Stats struct {
	Mailed         atomic.Int64 // e-mails sent
	AlreadyMailed  atomic.Int64 // users skipped because another phase had mailed them in this push
	BeingMailedNow atomic.Int64 // users skipped because another phase was mailing them right then
}

// Send runs the three phases at once, each with d.Workers dynapart workers partitioned by user id
// (filter mode: user_id mod Workers), and mails every user at most once per push.
//
// Two ledgers are at work. Each phase's workers keep their own table ledger (job "push-<id>",
// rows per phase table and user; complete-only, one write per user) so that the phase gets
// through its whole selection, across worker crashes and takeovers. And every phase's handler
// reserves the user in the push's ledger before mailing: one row per (push, user) whatever selection the user
// came from, claimed with a conditional write, completed after the send. The first phase to claim
// a user mails them; the others find the row claimed or done and skip. (The worker's own table
// ledger cannot be that shared row: its key is (job, source table, item key), so the same user
// read from two selection tables has two rows. The push ledger is the same TableLedger, opened
// with the logical source name "users" instead of a table name.)
func (d Dynapart) Send(ctx context.Context, phases []Phase, mailer *Mailer, logger *slog.Logger) (*Stats, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	job := "push-" + d.Push
	pushLedger, err := worker.NewTableLedger(d.DB, d.LedgerTable, job, "users", []string{attrUser})
	if err != nil {
		return nil, err
	}
	stats := &Stats{}
	var wg sync.WaitGroup
	errs := make(chan error, len(phases)*d.Workers)
	for p, ph := range phases {
		for range d.Workers {
			w, err := worker.New(worker.Config{
				Client: d.DB, Table: ph.Table, LeaseTable: d.LeaseTable, Workers: d.Workers,
				Mode: scan.ModeFilter, PartitionAttr: attrUser,
				Ledger: worker.LedgerTable, LedgerTable: d.LedgerTable, Job: job,
				// Complete-only: the handler is itself guarded by a conditional write (the claim
				// in the push ledger), so the phase needs no claim of its own, only its completion.
				CompleteOnly: true,
				Once:         true, Concurrency: 8, StandbyPoll: 100 * time.Millisecond, Logger: logger,
			})
			if err != nil {
				return nil, err
			}
			owner := w.Config().Owner
			wg.Go(func() {
				errs <- w.Run(ctx, func(ctx context.Context, it worker.Item) error {
					return d.mailOnce(ctx, pushLedger, owner, p, ph, it, mailer, stats)
				})
			})
		}
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return stats, errors.Join(all...)
}

// mailOnce is the handler: claim (push, user) in the push ledger, send, complete.
func (d Dynapart) mailOnce(ctx context.Context, pushLedger *worker.TableLedger, owner string, phase int, ph Phase, it worker.Item, mailer *Mailer, stats *Stats) error {
	user, err := userOf(it.Key)
	if err != nil {
		return worker.Permanent(err)
	}
	now := time.Now()
	outs, err := pushLedger.Claim(ctx, []worker.ClaimRequest{{
		Key:   worker.Key{attrUser: it.Key[attrUser]},
		Owner: owner,
		// The push ledger lets a newer lease token of the same slot take a claim over at once.
		// The three phases are three lease groups whose slots and tokens are unrelated, so each
		// phase claims under slot numbers of its own: a phase never takes over another's claim
		// before its claim TTL has passed.
		Slot: phase*d.Workers + it.Slot, Token: it.Token,
		Now: now, Until: now.Add(time.Minute),
	}})
	if err != nil {
		return err
	}
	if o := outs[0]; !o.Claimed {
		if o.Found.Status == worker.StatusClaimed {
			stats.BeingMailedNow.Add(1)
		} else {
			stats.AlreadyMailed.Add(1)
		}
		return nil // another phase mails (or mailed) this user in this push
	}
	claim := outs[0].Claim
	// A provider that supports idempotency keys covers a crash between the send and the
	// completion: key it by push and user (it.IdempotencyKey also names the phase's table, so it
	// differs between phases).
	if err := mailer.Send(ctx, user, ph.Variant); err != nil {
		_ = pushLedger.Release(context.WithoutCancel(ctx), claim, time.Now()) // let this or another phase try again
		return err
	}
	stats.Mailed.Add(1)
	return pushLedger.Complete(context.WithoutCancel(ctx), claim, time.Now())
}

const attrUser = "user_id"

func userOf(k worker.Key) (int, error) {
	n, ok := k[attrUser].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("item without a numeric %s", attrUser)
	}
	return strconv.Atoi(n.Value)
}

// scanUsers reads every user id of a selection table.
func scanUsers(ctx context.Context, db *dynamodb.Client, table string, fn func(user int) error) error {
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("scan %s: %w", table, err)
		}
		for _, it := range page.Items {
			u, err := userOf(it)
			if err != nil {
				return err
			}
			if err := fn(u); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteSelection writes users into a selection table (pk user_id, N).
func WriteSelection(ctx context.Context, db *dynamodb.Client, table string, users []int) error {
	items := make([]map[string]types.AttributeValue, 0, len(users))
	for _, u := range users {
		items = append(items, map[string]types.AttributeValue{
			attrUser: &types.AttributeValueMemberN{Value: strconv.Itoa(u)},
			"email":  &types.AttributeValueMemberS{Value: fmt.Sprintf("user%d@example.com", u)},
		})
	}
	return exampleutil.WriteItems(ctx, db, table, items)
}
