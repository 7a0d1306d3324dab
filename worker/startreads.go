package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/lock"
)

// startReads is what a worker reads before it joins its group: the source table's description,
// the lease table's (checked), the ledger table's when there is one, and the group's meta item
// with its slots (lock.Client.ReadGroup: the first acquisition round's view).
// None depends on another, so they are sent together: one round trip to DynamoDB before the first
// acquisition instead of three or four, which a Lambda invocation pays every time. Their errors
// are reported in a fixed order, whichever came back first: the source table, its index (index
// mode), the lease table, the ledger table, the lock client's settings, the group.
type startReads struct {
	source    *types.TableDescription
	sourceErr error
	leaseErr  error
	ledger    *types.TableDescription
	ledgerErr error
	group     lock.GroupState
	groupErr  error
}

// readStart sends the start reads together and waits for all of them; without locks (its
// configuration was refused) the group is not read.
func (w *Worker) readStart(ctx context.Context, locks *lock.Client) *startReads {
	c := w.cfg
	r := &startReads{}
	var wg sync.WaitGroup
	wg.Go(func() { r.source, r.sourceErr = describeTable(ctx, c.Client, c.Table, "Table") })
	wg.Go(func() { r.leaseErr = lock.CheckTable(ctx, describeOnly{c.Client}, c.LeaseTable) })
	if c.Ledger == LedgerTable {
		wg.Go(func() { r.ledger, r.ledgerErr = describeTable(ctx, c.Client, c.LedgerTable, "LedgerTable") })
	}
	if locks != nil {
		// With the group's slots, which the first acquisition round then uses instead of reading.
		wg.Go(func() { r.group, r.groupErr = locks.ReadGroup(ctx, c.Group) })
	}
	wg.Wait()
	return r
}

// readStartThroughOutage is readStart repeated while DynamoDB is out: while every error of the
// reads is one waiting may cure (lock.Retryable: a dropped connection, throttling or server errors
// beyond the SDK's retries), it waits 1s, doubling up to 30s, and reads again, for as long as
// Config.OutageTimeout allows. A worker started during a blip joins its group once DynamoDB is
// back instead of exiting; a wrong table or setting is reported at once (without locks, a refused
// lock configuration, the reads are made once).
func (w *Worker) readStartThroughOutage(ctx context.Context, locks *lock.Client) *startReads {
	var out outage
	for {
		r := w.readStart(ctx, locks)
		err := r.outageErr()
		if err == nil || locks == nil || ctx.Err() != nil {
			return r
		}
		if out.fail(w.cfg.Clock.Now(), w.cfg.OutageTimeout) {
			r.gaveUp(out.failures, w.cfg.OutageTimeout)
			return r
		}
		d := backoff(failedPassBackoff, maxFailedPassBackoff, out.failures)
		w.cfg.Logger.Warn("dynapart: reading the tables at start failed, retrying", "err", err,
			"failures", out.failures, "retry_in", d.String())
		select {
		case <-ctx.Done():
			return r
		case <-w.cfg.Clock.After(d):
		}
	}
}

// gaveUp says, in each of the reads' errors (all retryable), that the worker gave up on them
// after failures attempts over timeout (Config.OutageTimeout).
func (r *startReads) gaveUp(failures int, timeout time.Duration) {
	for _, err := range []*error{&r.sourceErr, &r.leaseErr, &r.ledgerErr, &r.groupErr} {
		if *err != nil {
			*err = fmt.Errorf("dynapart: giving up on the start reads after %d failed attempts in %s (OutageTimeout): %w", failures, timeout, *err)
		}
	}
}

// outageErr is the first of the reads' errors when all of them are retryable (nil when a read
// failed for good or none failed).
func (r *startReads) outageErr() error {
	var first error
	for _, err := range []error{r.sourceErr, r.leaseErr, r.ledgerErr, r.groupErr} {
		if err == nil {
			continue
		}
		if !lock.Retryable(err) {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// leaseTableErr is the lease table check's error as the worker reports it.
func leaseTableErr(err error) error {
	var te *lock.TableError
	if errors.As(err, &te) {
		return &ConfigError{Pkg: "dynapart", Field: "LeaseTable", Reason: te.Error() + " (create it with `dynapart init` or lock.CreateTable)", Err: err}
	}
	return err
}

// sourceDescriptionTTL is how long a pass's scanner uses the description the worker started with;
// a continuous worker's later passes describe the table again (its statistics, which size the
// first pages under a ReadRate, change; DynamoDB refreshes them about every six hours).
const sourceDescriptionTTL = time.Hour

// sourceDescription is the source table's description for a scanner starting at now: the one read
// at start while fresh, else nil (the scanner describes the table itself).
func (e *env) sourceDescription(now time.Time) *types.TableDescription {
	if now.Sub(e.describedAt) > sourceDescriptionTTL {
		return nil
	}
	return e.source
}
