package lock

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// attrPaused is the group's pause flag on its meta item (sk -1): while true, the group's workers
// claim nothing new but keep their slots (see PauseGroup).
const attrPaused = "paused"

// ErrGroupNotFound is returned (wrapped) by PauseGroup, ResumeGroup and ResizeGroup for a group that
// has no meta item (never run, or a typo), with nothing written, and by AcquireSlot and
// TryAcquireSlot joining with n = 0.
var ErrGroupNotFound = errors.New("lock: group not found")

// PauseGroup sets the group's pause flag on its meta item. Holders that watch it (a worker peeks at
// the meta item once per heartbeat, see PeekGroup) stop claiming items but keep their leases. changed is
// false when the group was paused already (a no-op). A group without a meta item gives an error
// wrapping ErrGroupNotFound and nothing is written.
func (c *Client) PauseGroup(ctx context.Context, group string) (changed bool, err error) {
	return c.setPaused(ctx, group, true)
}

// ResumeGroup clears the group's pause flag; changed is false when it was not paused. A group
// without a meta item gives an error wrapping ErrGroupNotFound and nothing is written.
func (c *Client) ResumeGroup(ctx context.Context, group string) (changed bool, err error) {
	return c.setPaused(ctx, group, false)
}

// setPaused writes the flag only on an existing meta item (one conditional UpdateItem) and tells
// from the old value whether it changed.
func (c *Client) setPaused(ctx context.Context, group string, paused bool) (bool, error) {
	if group == "" {
		return false, bad("group", "must not be empty")
	}
	// A pause records the operator as its reason unless the group is paused already (a budget's
	// pause keeps its reason); a resume removes the reason.
	upd := "SET #paused = :p, #reason = if_not_exists(#reason, :operator)"
	if !paused {
		upd = "SET #paused = :p REMOVE #reason"
	}
	vals := map[string]types.AttributeValue{":p": avB(paused)}
	if paused {
		vals[":operator"] = avS(PausedByOperator)
	}
	out, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(c.table),
		Key:                       key(groupPK(group), metaSK),
		UpdateExpression:          aws.String(upd),
		ConditionExpression:       aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#paused": attrPaused, "#pk": attrPK, "#reason": attrPausedReason},
		ExpressionAttributeValues: vals,
		ReturnValues:              types.ReturnValueUpdatedOld,
	})
	if _, ok := conditionFailed(err); ok {
		return false, fmt.Errorf("lock: group %q in %q: %w", group, c.table, ErrGroupNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("lock: set paused=%t on group %q: %w", paused, group, c.tableErr(err))
	}
	return getB(out.Attributes, attrPaused) != paused, nil
}

// GroupPaused reads the group's pause flag with one consistent GetItem of its meta item (a group
// without one is not paused). A worker watching the group reads the whole meta item instead
// (PeekGroup once per heartbeat, GroupState to confirm a change), which also tells of a resize.
func (c *Client) GroupPaused(ctx context.Context, group string) (bool, error) {
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(c.table), Key: key(groupPK(group), metaSK), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#paused"),
		ExpressionAttributeNames: map[string]string{"#paused": attrPaused},
	})
	if err != nil {
		return false, fmt.Errorf("lock: read the pause flag of group %q: %w", group, c.readErr(err))
	}
	return getB(out.Item, attrPaused), nil
}
