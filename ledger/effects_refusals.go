package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The refusals of an effect-carrying commit: which write DynamoDB refused (or the whole commit,
// or the item's own update), named in an *EffectError, and the commits refused because a table
// they name does not exist.

// unmatchedRefusal reads the reasons of a commit cancelled with reasons that do not match its
// actions one to one: a refusal no retry can help refuses the commit as a whole (an
// *EffectError); a failed condition, whose action is not known, is errUnmatchedCondition (the row
// tells, settleUnmatched); nil when every reason is a conflict, throttling or none: the commit is
// sent again.
func unmatchedRefusal(p *effectPlan, reasons []types.CancellationReason) error {
	var failed error
	for _, r := range reasons {
		code := aws.ToString(r.Code)
		switch again, _ := retryableReason(code); {
		case again:
		case code == "ConditionalCheckFailed":
			failed = errUnmatchedCondition
		default:
			return wholeRefused(p, effectReason(code, ""), reasonErr(r))
		}
	}
	return failed
}

// errUnmatchedCondition: a commit was cancelled for a failed condition, not knowing whose.
var errUnmatchedCondition = errors.New("cancelled for a failed condition of an action not named")

// unsettledRefusal: a commit was cancelled for a write's failed condition while the completion's
// own reason was a conflict or throttling, which says nothing of its condition. An earlier
// attempt of this commit may have landed, its answer lost (the write's condition then fails on
// the commit's own write): the row tells (settleWriteRefused).
type unsettledRefusal struct{ *EffectError }

// settleWriteRefused decides a commit cancelled for a failed condition that may not be the
// completion's (of an action not named, or a write's while the completion's outcome is unknown),
// by a consistent read of the row: applied when it shows this commit (an earlier attempt landed);
// when the completion's own condition holds on it, the failed condition was a write's (refusal:
// nothing of the commit applied); else the completion's, and found is the state it met.
func (l *core) settleWriteRefused(ctx context.Context, cm commit, refusal *EffectError) (bool, ItemState, error) {
	rctx, cancel := settleContext(ctx)
	defer cancel()
	row, err := l.readRow(rctx, "commit", cm.rowKey)
	switch {
	case err != nil:
		return false, ItemState{}, err
	case l.applied(cm.op, row, cm.vals):
		return true, ItemState{}, nil
	case l.ops[cm.op].cond.holds(l.view(row, cm.vals)):
		// No row at all is the table ledger's pending item (its condition holds there); the
		// inline ledger's needs the item to exist.
		return false, ItemState{}, refusal
	}
	return false, l.decodeState(row), nil
}

// missingTableErr is a commit DynamoDB refused because a table it names does not exist: not the
// item's (every item that writes that table meets it, so the worker stops its pass, as for a
// commit IAM denies), naming the tables its writes name (the item's own table exists: it was read).
func (l *core) missingTableErr(p *effectPlan, err error) error {
	var tables []string
	for _, w := range p.writes {
		if t := writeTable(w); t != "" && !slices.Contains(tables, t) {
			tables = append(tables, t)
		}
	}
	if len(tables) == 0 {
		return l.wrapErr("commit", l.row.table, err)
	}
	return fmt.Errorf("dynapart: %s: commit: a table it writes does not exist (its writes name %q), nothing of it applied: %w",
		l.name, tables, err)
}

// writeTable is the table a transaction's write names.
func writeTable(w types.TransactWriteItem) string {
	switch {
	case w.Put != nil:
		return aws.ToString(w.Put.TableName)
	case w.Update != nil:
		return aws.ToString(w.Update.TableName)
	case w.Delete != nil:
		return aws.ToString(w.Delete.TableName)
	case w.ConditionCheck != nil:
		return aws.ToString(w.ConditionCheck.TableName)
	}
	return ""
}

// refusedPart is the EffectError.Write of a commit DynamoDB refused as a whole: the item's update
// when it is the only effect, else WholeCommit.
func refusedPart(p *effectPlan) int {
	if len(p.writes) == 0 {
		return -1
	}
	return WholeCommit
}

// wholeRefused is the *EffectError of a commit DynamoDB refused as a whole for reason (err).
func wholeRefused(p *effectPlan, reason string, err error) *EffectError {
	if part := refusedPart(p); part != -1 {
		return &EffectError{Write: part, Reason: reason, Err: err}
	}
	return itemRefused(p.item, reason, err)
}

func effectReason(code, ccf string) string {
	if code == "ConditionalCheckFailed" {
		return ccf + ": the commit was cancelled, nothing of it applied"
	}
	return "refused by DynamoDB (" + code + "): the commit was cancelled, nothing of it applied"
}

// itemRefused is the refusal of the item's own update (its changes c) for reason, with DynamoDB's
// error err. DynamoDB's "An operand in the update expression has an incorrect data type" names no
// attribute; of the item's changes only an ADD can meet it (a SET or REMOVE takes any type), so the
// error names the attribute the update adds to, or lists them when it adds to more than one.
func itemRefused(c *clauses, reason string, err error) *EffectError {
	e := &EffectError{Write: -1, Reason: reason, Err: err}
	adds := c.addedNames()
	switch {
	case err == nil || len(adds) == 0 || !strings.Contains(err.Error(), "incorrect data type"):
	case len(adds) == 1:
		e.Attr = adds[0]
		e.Reason += " (the update adds to it: ADD takes a number to a number, a set to a set of its type)"
	default:
		quoted := make([]string, len(adds))
		for i, a := range adds {
			quoted[i] = strconv.Quote(a)
		}
		e.Reason += fmt.Sprintf(" (the update adds to %s: ADD takes a number to a number, a set to a set of its type)", strings.Join(quoted, ", "))
	}
	return e
}

// addedNames are the attributes c adds to (its ADD clause); none for nil.
func (c *clauses) addedNames() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, part := range c.add {
		if ph, _, _ := strings.Cut(part, " "); c.names[ph] != "" {
			out = append(out, c.names[ph])
		}
	}
	return out
}

func reasonErr(r types.CancellationReason) error {
	if m := aws.ToString(r.Message); m != "" {
		return errors.New(m)
	}
	return nil
}
