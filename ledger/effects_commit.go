package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/dynapart/dynapart/internal/capacity"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// This file commits effects with a completion: merged into the completion's UpdateItem when the
// only effect is an update of an inline ledger's item, otherwise as one TransactWriteItems whose
// first item is the completion. The transaction's ClientRequestToken is derived from the claim's
// (or complete-only write's) id, so every repeat of a commit whose answer was lost, the SDK's and
// this file's, is the same request, which DynamoDB applies once. After an answer that says nothing
// was applied (a conflict, throttling, a cancellation for those) the next attempt takes the next
// token (the id and a count): DynamoDB's documentation does not promise that a failed request's
// token may be used again. The completion in the same transaction is the guard either way: its
// condition admits one commit per claim (per write id without a claim), so no two attempts of one
// commit can both land.

// commitRetries bounds the repeats of a commit whose answer was lost (the same token each time).
const commitRetries = 3

// commit is one completion with effects, as sent.
type commit struct {
	op     Op
	rowKey Key
	vals   values
	plan   *effectPlan
	token  string
	claim  Claim // for a *ClaimLostError (fenced commits)
}

func (l *core) completeWith(ctx context.Context, c Claim, now time.Time, eff *Effects) error {
	if eff.Empty() {
		return l.complete(ctx, c, now)
	}
	rowKey, err := l.row.key(c.Key)
	if err != nil {
		return err
	}
	plan, err := l.planEffects(c.Key, eff)
	if err != nil {
		return err
	}
	cm := commit{op: OpComplete, rowKey: rowKey, vals: fenceVals(c).with(vNow, attrMillis(now)), plan: plan,
		token: commitToken(c.ID), claim: c}
	if l.merges(plan) {
		return l.fencedMerged(ctx, cm)
	}
	applied, found, err := l.commitTx(ctx, cm, c.Key)
	if err != nil || applied {
		return err
	}
	return &ClaimLostError{Op: OpComplete, Claim: c, Found: found, where: l.where()}
}

func (l *core) completeOnlyWith(ctx context.Context, r ClaimRequest, eff *Effects) (Result, error) {
	if eff.Empty() {
		return l.completeOnly(ctx, r)
	}
	if r.ID == "" {
		r.ID = newID()
	}
	rowKey, err := l.row.key(r.Key)
	if err != nil {
		return Result{}, err
	}
	plan, err := l.planEffects(r.Key, eff)
	if err != nil {
		return Result{}, err
	}
	cm := commit{op: completeOnlyOp(r), rowKey: rowKey, vals: l.requestVals(r), plan: plan, token: commitToken(r.ID)}
	var res Result
	if l.merges(plan) {
		res, err = l.unclaimedMerged(ctx, cm)
	} else {
		var applied bool
		applied, res.Found, err = l.commitTx(ctx, cm, r.Key)
		res.Applied = applied
	}
	if res.Applied {
		res.Found = ItemState{Status: StatusDone, Claim: r.ID}
	}
	return res, err
}

// commitToken is the ClientRequestToken of the commit of claim (or write) id, before its count
// ("-N", see commitTx): the id itself when it is short (the worker's are 16 characters), else a
// digest of it, so that the token stays within DynamoDB's 36 characters whatever id a caller of
// the ledger gives (ClaimRequest.ID: a UUID has 36).
func commitToken(id string) string {
	if len(id) <= maxTokenID {
		return "dynapart-" + id
	}
	sum := sha256.Sum256([]byte(id))
	return "dynapart-" + base64.RawURLEncoding.EncodeToString(sum[:])[:maxTokenID]
}

// maxTokenID is the longest id a commit's token carries as it is: "dynapart-" (9), the id, and "-"
// with a count of up to 6 digits make 36, the most DynamoDB accepts.
const maxTokenID = 20

// merges reports whether the plan's effects fit in the completion's own UpdateItem: only an update
// of the item, and the item is the state row (the inline ledger).
func (l *core) merges(p *effectPlan) bool { return len(p.writes) == 0 && l.source == "" }

// mergedInput is cm's completion UpdateItem with the item's changes merged in.
func (l *core) mergedInput(cm commit) *dynamodb.UpdateItemInput {
	c := l.ops[cm.op]
	m := l.merged.of(c, cm.plan.item)
	vals := c.valuesOf(cm.vals, len(cm.plan.item.values))
	for k, v := range cm.plan.item.values {
		vals[k] = v
	}
	return &dynamodb.UpdateItemInput{TableName: aws.String(l.row.table), Key: cm.rowKey,
		ConditionExpression: aws.String(c.condExpr), UpdateExpression: aws.String(m.expr),
		ExpressionAttributeNames: m.names, ExpressionAttributeValues: vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
}

// fencedMerged sends a fenced completion with the item's changes merged in: one UpdateItem.
func (l *core) fencedMerged(ctx context.Context, cm commit) error {
	_, err := l.update(ctx, l.mergedInput(cm))
	if err == nil {
		return nil
	}
	if IsValidation(err) {
		return itemRefused(cm.plan.item, "the item's update was refused by DynamoDB, nothing of the commit applied", err)
	}
	if accessDenied(err) {
		return l.wrapErr(cm.op.String(), l.row.table, err) // nothing applied
	}
	f := fencedWrite{op: cm.op, c: cm.claim, rowKey: cm.rowKey, vals: cm.vals}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return l.settleFenced(ctx, f, ccf.Item)
	}
	return l.settleCut(ctx, f, l.wrapErr(cm.op.String(), l.row.table, err))
}

// unclaimedMerged sends a complete-only write with the item's changes merged in: one UpdateItem.
func (l *core) unclaimedMerged(ctx context.Context, cm commit) (Result, error) {
	_, err := l.update(ctx, l.mergedInput(cm))
	if err == nil {
		return Result{Applied: true}, nil
	}
	if accessDenied(err) {
		return Result{}, l.wrapErr(cm.op.String(), l.row.table, err) // nothing applied
	}
	if IsValidation(err) {
		return Result{}, itemRefused(cm.plan.item, "the item's update was refused by DynamoDB, nothing of the commit applied", err)
	}
	return l.settleUnclaimed(ctx, cm.op, cm.rowKey, cm.vals, err)
}

// commitTx sends cm as one transaction: the completion, the item's own update (with the table
// ledger: an Update of the source item, which must still exist), the writes. It is sent again on a
// conflict or throttling (after a backoff) and when its answer is lost (the same token), and
// settled by a read when the answer stays unknown. applied false with a nil error: the
// completion's condition failed, and found is what it met.
func (l *core) commitTx(ctx context.Context, cm commit, itemKey Key) (applied bool, found ItemState, err error) {
	items := l.commitItems(cm, itemKey)
	lost, tokens := 0, 0
	var in *dynamodb.TransactWriteItemsInput
	for round := 1; ; round++ {
		if fenceEnded(ctx) {
			return false, ItemState{}, fmt.Errorf("commit: %w (%w)", errFenceEnded, context.Cause(fenceOf(ctx)))
		}
		token := fmt.Sprintf("%s-%d", cm.token, tokens)
		if in == nil || aws.ToString(in.ClientRequestToken) != token {
			in = &dynamodb.TransactWriteItemsInput{TransactItems: items, ClientRequestToken: aws.String(token)}
		}
		// A repeat of a token is the very request (ReturnConsumedCapacity included, which
		// transactItems sets once): DynamoDB refuses a token with other parameters.
		_, err := l.transactItems(ctx, in)
		if err == nil {
			return true, ItemState{}, nil
		}
		if errors.Is(err, ErrNotSent) {
			return l.commitNotSent(ctx, cm, lost+round-1, err) // any earlier round may have landed (throttled after a lost answer)
		}
		retry, applied, found, cerr := l.commitAnswer(cm, len(items), err)
		var unsettled *unsettledRefusal
		switch {
		case errors.Is(cerr, errNoImage):
			return l.settleRefused(ctx, cm)
		case errors.Is(cerr, errUnmatchedCondition):
			return l.settleWriteRefused(ctx, cm, &EffectError{Write: refusedPart(cm.plan),
				Reason: effectReason("ConditionalCheckFailed", "a condition of a write failed"), Err: errUnmatchedCondition})
		case errors.As(cerr, &unsettled):
			return l.settleWriteRefused(ctx, cm, unsettled.EffectError)
		case cerr != nil:
			return false, found, cerr
		case !retry:
			return applied, found, nil
		case ctx.Err() != nil:
			return l.settleCommit(ctx, cm, l.wrapErr("commit", l.row.table, err))
		case unknownOutcome(err):
			if lost++; lost > commitRetries {
				return l.settleCommit(ctx, cm, l.wrapErr("commit", l.row.table, err))
			}
		default:
			tokens++ // nothing applied: the next attempt is a new request
		}
		if berr := backoff(ctx, min(round, 6)); berr != nil {
			return l.settleCommit(ctx, cm, berr)
		}
	}
}

// commitNotSent is a commit whose round was not sent (err, an ErrNotSent: the write gate held it
// until its context ended). Nothing of the commit applied unless an earlier round's answer was lost
// (lost > 0): that one is settled by a read.
func (l *core) commitNotSent(ctx context.Context, cm commit, lost int, err error) (bool, ItemState, error) {
	werr := l.wrapErr("commit", l.row.table, err)
	if lost == 0 {
		return false, ItemState{}, werr
	}
	return l.settleCommit(ctx, cm, werr)
}

// commitItems are cm's transaction items.
func (l *core) commitItems(cm commit, itemKey Key) []types.TransactWriteItem {
	var first types.TransactWriteItem
	if cm.plan.item != nil && l.source == "" {
		in := l.mergedInput(cm)
		first = types.TransactWriteItem{Update: &types.Update{TableName: in.TableName, Key: in.Key,
			ConditionExpression: in.ConditionExpression, UpdateExpression: in.UpdateExpression,
			ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}}
	} else {
		first = l.txUpdate(cm.op, cm.rowKey, cm.vals)
	}
	items := []types.TransactWriteItem{first}
	if cm.plan.item != nil && l.source != "" {
		items = append(items, l.sourceUpdate(cm.plan.item, itemKey))
	}
	return append(items, cm.plan.writes...)
}

// sourceUpdate is the table ledger's update of the source item key, which must exist (an item
// deleted since is not created again).
func (l *core) sourceUpdate(c *clauses, key Key) types.TransactWriteItem {
	names := map[string]string{"#dpExists": l.keyAttrs[0]}
	maps.Copy(names, c.names)
	return types.TransactWriteItem{Update: &types.Update{TableName: aws.String(l.source), Key: pick(key, l.keyAttrs),
		UpdateExpression: aws.String(c.expr()), ConditionExpression: aws.String("attribute_exists(#dpExists)"),
		ExpressionAttributeNames: names, ExpressionAttributeValues: nilIfEmpty(c.values)}}
}

// commitAnswer reads a commit's error: retry (a conflict, throttling, or an unknown outcome), the
// completion's condition refused (applied is whether the row shows this very commit), an
// *EffectError naming the write refused, or a plain error, nothing applied, for a commit IAM
// denies, one naming a table that does not exist, or one sent before with other effects.
func (l *core) commitAnswer(cm commit, n int, err error) (retry, applied bool, found ItemState, _ error) {
	var tce *types.TransactionCanceledException
	var ipm *types.IdempotentParameterMismatchException
	if errors.As(err, &ipm) {
		return false, false, ItemState{}, l.wrapErr("commit", l.row.table,
			fmt.Errorf("the commit of this claim was sent before with other effects or another time (a claim commits once; a repeat must be the same request): %w", err))
	}
	if !errors.As(err, &tce) {
		if accessDenied(err) {
			return false, false, ItemState{}, l.wrapErr("commit", l.row.table, err) // nothing applied
		}
		if missingTable(err) {
			return false, false, ItemState{}, l.missingTableErr(cm.plan, err) // nothing applied
		}
		if refused(err) {
			return false, false, ItemState{}, wholeRefused(cm.plan, "the commit was refused by DynamoDB, nothing of it applied", err)
		}
		return true, false, ItemState{}, nil // a conflict, throttling, or an unknown outcome
	}
	if len(tce.CancellationReasons) != n {
		// Not one reason per action (DynamoDB Local gives one for some refusals).
		if rerr := unmatchedRefusal(cm.plan, tce.CancellationReasons); rerr != nil {
			return false, false, ItemState{}, rerr
		}
		return true, false, ItemState{}, nil
	}
	extra := 1 // the item's own update, sent on its own with the table ledger
	if cm.plan.item == nil || l.source == "" {
		extra = 0
	}
	// The completion's reason a conflict or throttling: whether its condition held is not known.
	// None says it held, so no earlier attempt of this commit landed (it would have made it fail).
	completionUnknown := false
	refusal := func(code string, e *EffectError) error {
		if completionUnknown && code == "ConditionalCheckFailed" {
			return &unsettledRefusal{e}
		}
		return e
	}
	for i, r := range tce.CancellationReasons {
		code := aws.ToString(r.Code)
		if again, conflict := retryableReason(code); again {
			completionUnknown = completionUnknown || i == 0 && conflict
			continue
		}
		switch {
		case i == 0 && code == "ConditionalCheckFailed" && len(r.Item) == 0:
			// No image of the row (a backend that leaves it out, a repeat sent without asking):
			// the caller reads it (settleRefused).
			l.condFailures.Add(1)
			return false, false, ItemState{}, errNoImage
		case i == 0 && code == "ConditionalCheckFailed":
			l.condFailures.Add(1)
			return false, l.applied(cm.op, r.Item, cm.vals), l.decodeState(r.Item), nil
		case i == 0 && code == "ValidationError" && cm.plan.item != nil && l.source == "":
			// The item's changes ride on the completion: DynamoDB finding it invalid (an operand of
			// the wrong type, the item past 400 KB) refuses them.
			return false, false, ItemState{}, itemRefused(cm.plan.item, effectReason(code, ""), reasonErr(r))
		case i == 0 && code == "ValidationError":
			// The completion alone is invalid (its attributes take the item past 400 KB): refused
			// for good, as the same write outside a transaction is (IsValidation).
			return false, false, ItemState{}, l.wrapErr("commit", l.row.table, &smithy.GenericAPIError{Code: "ValidationException",
				Message: "the completion cancelled with ValidationError: " + aws.ToString(r.Message), Fault: smithy.FaultClient})
		case i == 0:
			return false, false, ItemState{}, l.wrapErr("commit", l.row.table, fmt.Errorf("the completion cancelled with %s: %s", code, aws.ToString(r.Message)))
		case i <= extra:
			return false, false, ItemState{}, refusal(code, itemRefused(cm.plan.item, effectReason(code, "the item no longer exists"), reasonErr(r)))
		default:
			return false, false, ItemState{}, refusal(code, &EffectError{Write: i - 1 - extra, Reason: effectReason(code, "its condition failed"), Err: reasonErr(r)})
		}
	}
	return true, false, ItemState{}, nil // cancelled only for conflicts or throttling: again
}

// unknownOutcome reports an error after which a request may have been applied: not a conflict, a
// cancellation or throttling (nothing applied), and not a refusal.
func unknownOutcome(err error) bool {
	var tc *types.TransactionConflictException
	var tce *types.TransactionCanceledException
	return !errors.As(err, &tc) && !errors.As(err, &tce) && !capacity.IsThrottle(err) && !refused(err)
}

// settleCommit decides a commit whose answer stayed unknown (err) by a consistent read of the
// state row: the completion landed (and, the transaction being atomic, every effect with it) when
// the row shows it under the commit's id.
func (l *core) settleCommit(ctx context.Context, cm commit, err error) (bool, ItemState, error) {
	rctx, cancel := settleContext(ctx)
	defer cancel()
	row, rerr := l.readRow(rctx, "commit", cm.rowKey)
	if rerr == nil && l.applied(cm.op, row, cm.vals) {
		return true, ItemState{}, nil
	}
	return false, ItemState{}, err
}

// errNoImage: the completion's condition failed and the answer carried no image of the row.
var errNoImage = errors.New("refused without the row's image")

// settleRefused decides a commit whose completion was refused without an image of the row, by a
// consistent read: applied when the row shows this commit (an earlier attempt of it landed).
func (l *core) settleRefused(ctx context.Context, cm commit) (bool, ItemState, error) {
	rctx, cancel := settleContext(ctx)
	defer cancel()
	row, err := l.readRow(rctx, "commit", cm.rowKey)
	if err != nil {
		return false, ItemState{}, err
	}
	return l.applied(cm.op, row, cm.vals), l.decodeState(row), nil
}

func (l *core) where() string { return fmt.Sprintf("%s %q", l.name, l.row.table) }
