package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A group may carry a capacity budget on its meta item: the write and read units its workers may
// consume in all (ledger writes and scans), and what they have reported consuming. Holders add
// their consumption every few seconds (AddUsage: one write per holder per interval, not per item)
// and the one that finds the budget reached pauses the group (PauseForBudget), through the same
// pause flag as PauseGroup, with the reason "budget". SetBudget raises or lowers it, never below
// what was consumed.
const (
	attrBudgetWCU    = "budget_wcu"
	attrBudgetRCU    = "budget_rcu"
	attrUsedWCU      = "used_wcu"
	attrUsedRCU      = "used_rcu"
	attrPausedReason = "paused_reason"
)

// The reasons a group is paused (GroupState.PausedReason).
const (
	PausedByOperator = "operator" // PauseGroup
	PausedByBudget   = "budget"   // PauseForBudget: the group reached its budget
)

// Budget is a group's capacity budget and its workers' reported consumption.
type Budget struct {
	MaxWCU, MaxRCU   float64 // 0: no limit on that unit
	UsedWCU, UsedRCU float64 // consumed, as the workers reported it
}

// Set reports whether the group has a budget on either unit.
func (b Budget) Set() bool { return b.MaxWCU > 0 || b.MaxRCU > 0 }

// Reached reports whether the consumption has reached the budget on a unit that has one.
func (b Budget) Reached() bool {
	return b.MaxWCU > 0 && b.UsedWCU >= b.MaxWCU || b.MaxRCU > 0 && b.UsedRCU >= b.MaxRCU
}

// Limits are the budget SetBudget records; a zero field leaves that unit's budget as it is.
type Limits struct{ WCU, RCU float64 }

// BudgetBelowUsageError is SetBudget's refusal of a budget below what the group has consumed;
// nothing was written.
type BudgetBelowUsageError struct {
	Group  string
	Asked  Limits
	Budget Budget // as stored
}

func (e *BudgetBelowUsageError) Error() string {
	var parts []string
	if e.Asked.WCU > 0 && e.Asked.WCU < e.Budget.UsedWCU {
		parts = append(parts, fmt.Sprintf("--max-wcu %s is below the %s WCU consumed", num(e.Asked.WCU), num(e.Budget.UsedWCU)))
	}
	if e.Asked.RCU > 0 && e.Asked.RCU < e.Budget.UsedRCU {
		parts = append(parts, fmt.Sprintf("--max-rcu %s is below the %s RCU consumed", num(e.Asked.RCU), num(e.Budget.UsedRCU)))
	}
	return fmt.Sprintf("lock: group %q: budget refused: %s", e.Group, strings.Join(parts, "; "))
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// SetBudget records the group's budget (Limits' non-zero fields) on its meta item, with one
// conditional UpdateItem, and returns the budget as stored. A budget below what the group has
// consumed is refused with a *BudgetBelowUsageError; a group without a meta item gives an error
// wrapping ErrGroupNotFound. Either way nothing is written.
func (c *Client) SetBudget(ctx context.Context, group string, l Limits) (Budget, error) {
	if group == "" {
		return Budget{}, bad("group", "must not be empty")
	}
	if l.WCU < 0 || l.RCU < 0 || l.WCU == 0 && l.RCU == 0 {
		return Budget{}, bad("budget", "want a positive WCU or RCU limit")
	}
	names := map[string]string{"#pk": attrPK}
	vals := map[string]types.AttributeValue{}
	var sets, conds []string
	for _, u := range []struct {
		limit       float64
		budget, use string
		p           string
	}{{l.WCU, attrBudgetWCU, attrUsedWCU, "w"}, {l.RCU, attrBudgetRCU, attrUsedRCU, "r"}} {
		if u.limit == 0 {
			continue
		}
		names["#b"+u.p], names["#u"+u.p] = u.budget, u.use
		vals[":"+u.p] = avF(u.limit)
		sets = append(sets, "#b"+u.p+" = :"+u.p)
		conds = append(conds, "(attribute_not_exists(#u"+u.p+") OR #u"+u.p+" <= :"+u.p+")")
	}
	out, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(c.table), Key: key(groupPK(group), metaSK),
		UpdateExpression:          aws.String("SET " + strings.Join(sets, ", ")),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND " + strings.Join(conds, " AND ")),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
		ReturnValues:              types.ReturnValueAllNew,
		// The refusal's figures come with the answer.
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if cf, ok := conditionFailed(err); ok {
		if len(cf.Item) == 0 {
			return Budget{}, fmt.Errorf("lock: group %q in %q: %w", group, c.table, ErrGroupNotFound)
		}
		return Budget{}, &BudgetBelowUsageError{Group: group, Asked: l, Budget: decodeBudget(cf.Item)}
	}
	if err != nil {
		return Budget{}, fmt.Errorf("lock: set the budget of group %q: %w", group, c.tableErr(err))
	}
	return decodeBudget(out.Attributes), nil
}

// AddUsage adds a holder's consumption since its last report to the group's (one UpdateItem) and
// returns the budget and consumption as they now stand. A group without a meta item gives an
// error wrapping ErrGroupNotFound.
func (c *Client) AddUsage(ctx context.Context, group string, wcu, rcu float64) (Budget, error) {
	out, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(c.table), Key: key(groupPK(group), metaSK),
		UpdateExpression:          aws.String("ADD #uw :w, #ur :r"),
		ConditionExpression:       aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#uw": attrUsedWCU, "#ur": attrUsedRCU},
		ExpressionAttributeValues: map[string]types.AttributeValue{":w": avF(wcu), ":r": avF(rcu)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if _, ok := conditionFailed(err); ok {
		return Budget{}, fmt.Errorf("lock: group %q in %q: %w", group, c.table, ErrGroupNotFound)
	}
	if err != nil {
		return Budget{}, fmt.Errorf("lock: add to the consumption of group %q: %w", group, c.tableErr(err))
	}
	return decodeBudget(out.Attributes), nil
}

// PauseForBudget pauses the group because it reached its budget: it sets the pause flag with the
// reason PausedByBudget, on the condition that the stored consumption has reached the stored
// budget and the group is not paused already (so a raised budget or an operator's pause is left
// alone). changed reports whether it paused the group.
func (c *Client) PauseForBudget(ctx context.Context, group string) (changed bool, err error) {
	_, err = c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(c.table), Key: key(groupPK(group), metaSK),
		UpdateExpression: aws.String("SET #paused = :t, #reason = :budget"),
		ConditionExpression: aws.String("attribute_exists(#pk) AND (attribute_not_exists(#paused) OR #paused = :f) AND " +
			"((#bw > :zero AND #uw >= #bw) OR (#br > :zero AND #ur >= #br))"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#paused": attrPaused, "#reason": attrPausedReason,
			"#bw": attrBudgetWCU, "#uw": attrUsedWCU, "#br": attrBudgetRCU, "#ur": attrUsedRCU},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": avB(true), ":f": avB(false),
			":budget": avS(PausedByBudget), ":zero": avN(0)},
	})
	if _, ok := conditionFailed(err); ok {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock: pause group %q for its budget: %w", group, c.tableErr(err))
	}
	return true, nil
}

// IsBudgetBelowUsage reports a *BudgetBelowUsageError.
func IsBudgetBelowUsage(err error) bool {
	var b *BudgetBelowUsageError
	return errors.As(err, &b)
}

func avF(f float64) types.AttributeValue { return &types.AttributeValueMemberN{Value: num(f)} }

// getF reads a number attribute as a float (0 when missing or not a number).
func getF(m map[string]types.AttributeValue, name string) float64 {
	if n, ok := m[name].(*types.AttributeValueMemberN); ok {
		f, _ := strconv.ParseFloat(n.Value, 64)
		return f
	}
	return 0
}

func decodeBudget(m map[string]types.AttributeValue) Budget {
	return Budget{MaxWCU: getF(m, attrBudgetWCU), MaxRCU: getF(m, attrBudgetRCU), UsedWCU: getF(m, attrUsedWCU), UsedRCU: getF(m, attrUsedRCU)}
}
