package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/examples/internal/exampleutil"
	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/worker"
)

// Mode is the handler dynapart workers run on the calendar updates.
type Mode string

// The handlers.
const (
	// Naive is the incident's code as a worker handler: AddNaive (check, then insert a row with a
	// surrogate key), then the worker completes the update.
	Naive Mode = "naive"
	// Effects checks, and returns the row (keyed by the interviewer) as a put-if-absent effect that
	// the worker commits with the update's completion.
	Effects Mode = "effects"
)

// The updates table (pk id, S) is the inbox of calendar updates: each update is delivered twice,
// once by the web request and once by the poller (id "u-<n>#<source>": interview_id, interviewer,
// source). The workers partition it by interview_id, so both copies go to the same slot.
const (
	attrID     = "id"
	updateStem = "u-"
)

// Update is one delivery of a calendar update: add Interviewer to Interview.
type Update struct {
	Interview, Interviewer, Source string
}

// Sources are the two deliverers of every calendar update.
var Sources = []string{"web-request", "poller"}

// WriteUpdates parks n calendar updates, each delivered by both sources: update i adds
// interviewer i%7 to interview "<prefix>-<i>".
func WriteUpdates(ctx context.Context, db exampleutil.BatchWriter, table, prefix string, n int) error {
	var items []map[string]types.AttributeValue
	for i := range n {
		for _, src := range Sources {
			items = append(items, map[string]types.AttributeValue{
				attrID:          avS(fmt.Sprintf("%s%04d#%s", updateStem, i, src)),
				attrInterview:   avS(fmt.Sprintf("%s-%04d", prefix, i)),
				attrInterviewer: avS(fmt.Sprintf("interviewer%d@example.com", i%7)),
				attrSource:      avS(src),
			})
		}
	}
	return exampleutil.WriteItems(ctx, db, table, items)
}

func updateOf(it worker.Item) (Update, error) {
	var u Update
	for attr, dst := range map[string]*string{attrInterview: &u.Interview, attrInterviewer: &u.Interviewer, attrSource: &u.Source} {
		v, ok := it.Attrs[attr].(*types.AttributeValueMemberS)
		if !ok {
			return u, worker.Permanent(fmt.Errorf("update %s: no %s", ledger.KeyText(it.Key), attr))
		}
		*dst = v.Value
	}
	return u, nil
}

// AddWithEffects is the dynapart version: check whether the interviewer is on the interview, and
// if not return the interviewer's row, keyed by the interviewer (sk "row#<e-mail>"), as a
// put-if-absent effect. The worker commits it with the update's completion, in one transaction:
// the row exists once, and only with the update done. The check spares the second copy of an
// update a failed commit; the condition is the judge. between (nil: nothing) runs between the
// check and the return, for tests.
func (s *Store) AddWithEffects(ctx context.Context, u Update, between func()) (*worker.Effects, error) {
	present, err := s.has(ctx, u.Interview, u.Interviewer)
	if err != nil || present {
		return nil, err
	}
	if between != nil {
		between()
	}
	return (&worker.Effects{}).PutIfAbsent(s.Table, map[string]types.AttributeValue{
		attrInterview:   avS(u.Interview),
		attrSK:          avS(rowPrefix + u.Interviewer),
		attrInterviewer: avS(u.Interviewer),
		attrSource:      avS(u.Source),
	}), nil
}

// Handler is the worker handler of mode; between is passed on to the add.
func (s *Store) Handler(mode Mode, between func()) (worker.Handler, error) {
	switch mode {
	case Naive:
		return func(ctx context.Context, it worker.Item) error {
			u, err := updateOf(it)
			if err == nil {
				_, err = s.AddNaive(ctx, u.Interview, u.Interviewer, u.Source, between)
			}
			return err
		}, nil
	case Effects:
		return worker.WithEffects(func(ctx context.Context, it worker.Item) (*worker.Effects, error) {
			u, err := updateOf(it)
			if err != nil {
				return nil, err
			}
			return s.AddWithEffects(ctx, u, between)
		}), nil
	}
	return nil, fmt.Errorf("no handler for mode %q", mode)
}

// insertWrite reports whether w writes a row of the interviews table: the naive handler's insert
// or the effects' commit.
func insertWrite(mode Mode, table string) func(exampleutil.Write) bool {
	op := "PutItem"
	if mode == Effects {
		op = "TransactWriteItems"
	}
	return func(w exampleutil.Write) bool { return w.Op == op && w.Touches(table, attrSK, "") }
}
