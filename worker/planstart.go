package worker

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/scan"
)

// planStart is where every unit of the group stood when a plan epoch began. A slot item holds one
// checkpoint, which its first holder under a new plan overwrites, so the positions the old plan
// left would be lost for the units that slot no longer owns. The first holder of an epoch past the
// barrier therefore records them all first, in one item of the lease table (pk "plan#<group>",
// sk the epoch, gzipped JSON; conditional on not existing, so every holder of the epoch reads the
// same one), composed from the latest earlier epoch's planStart and the checkpoints made since. It
// must fit an item (400 KB): about 20,000 segments with short keys.
type planStart struct {
	Scan  string `json:"scan"`            // a scan checkpoint with every unit's cursor (absent: from the beginning)
	Dirty []int  `json:"dirty,omitempty"` // units whose last owner's pass needs another pass
	Pass  int    `json:"pass"`            // the highest pass of the owners it was composed from
}

const planStartPK = "plan#"

// planStartFor returns the planStart of the lease's epoch, composing and storing it when no
// holder of the epoch has yet.
func (w *Worker) planStartFor(ctx context.Context, e *env, epoch int64) (planStart, error) {
	if ps, ok, err := w.readPlanStart(ctx, epoch); err != nil || ok {
		return ps, err
	}
	st, err := e.locks.GroupStatus(ctx, w.cfg.Group)
	if err != nil {
		return planStart{}, err
	}
	sources := w.planSources(e, st)
	prev, prevEpoch, ok, err := w.latestPlanStart(ctx, epoch)
	if err != nil {
		return planStart{}, err
	}
	// A plan start recorded before the group's last reset (lock.ResetGroup) is the previous run's.
	if ok && prevEpoch >= st.ResetEpoch {
		src, err := w.planStartSource(e, prev, prevEpoch)
		if err != nil {
			return planStart{}, err
		}
		sources = append(sources, src)
	}
	ps, err := w.composeStart(e, sources)
	if err != nil {
		return planStart{}, err
	}
	return w.storePlanStart(ctx, epoch, ps)
}

// composeStart takes every unit's cursor from its latest owner among sources.
func (w *Worker) composeStart(e *env, sources []planSource) (planStart, error) {
	var ps planStart
	var cursors []scan.Cursor
	for u := range w.totalUnits(e) {
		src := latestOwner(sources, u)
		if src == nil {
			continue
		}
		ps.Pass = max(ps.Pass, src.pass)
		if src.dirty(u) {
			ps.Dirty = append(ps.Dirty, u)
		}
		if src.pos == nil {
			continue
		}
		if c, ok := src.pos.Cursor(u); ok {
			cursors = append(cursors, c)
		}
	}
	var err error
	ps.Scan, err = scan.EncodeCheckpoint(w.position(e, cursors))
	return ps, err
}

// position is a scan position of the group's table and mode holding cursors.
func (w *Worker) position(e *env, cursors []scan.Cursor) scan.Position {
	pos := scan.Position{Table: w.cfg.Table, Mode: w.cfg.Mode, TotalSegments: w.totalUnits(e), Cursors: cursors}
	if w.cfg.Mode == scan.ModeIndex {
		pos.Index = w.cfg.IndexName
	}
	return pos
}

// planStartSource is a planStart as a source of unit positions: it speaks for every unit, below
// the checkpoints made under its epoch (which started from it).
func (w *Worker) planStartSource(e *env, ps planStart, epoch int64) (planSource, error) {
	pos, err := scan.DecodeCheckpoint(ps.Scan)
	if err != nil {
		return planSource{}, fmt.Errorf("dynapart: the plan start of epoch %d: %w", epoch, err)
	}
	all := make([]int, w.totalUnits(e))
	for i := range all {
		all[i] = i
	}
	dirty := ps.Dirty
	return planSource{epoch: epoch, rank: 0, units: all, pos: &pos, pass: ps.Pass,
		dirty: func(u int) bool { return slices.Contains(dirty, u) }}, nil
}

func planStartKey(group string, epoch int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: planStartPK + group},
		"sk": &types.AttributeValueMemberN{Value: strconv.FormatInt(epoch, 10)},
	}
}

// latestPlanStart is the planStart of the latest epoch before epoch that has one, with one
// consistent Query. It is not always epoch-1: an epoch none of whose holders got past the barrier
// (the group was resized again first, or no worker ran in it) has none, and the positions the
// planStart before it holds for units no slot checkpoint speaks for since must not be lost.
// Checkpoints made under the epochs in between rank above it (see latestOwner).
func (w *Worker) latestPlanStart(ctx context.Context, epoch int64) (planStart, int64, bool, error) {
	out, err := w.cfg.Client.Query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(w.cfg.LeaseTable),
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk < :epoch"),
		ExpressionAttributeNames: map[string]string{"#pk": "pk", "#sk": "sk"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":    &types.AttributeValueMemberS{Value: planStartPK + w.cfg.Group},
			":epoch": &types.AttributeValueMemberN{Value: strconv.FormatInt(epoch, 10)},
		},
		ScanIndexForward: aws.Bool(false),
		Limit:            aws.Int32(1),
		ConsistentRead:   aws.Bool(true),
	})
	if err != nil {
		return planStart{}, 0, false, fmt.Errorf("dynapart: read the plan start before epoch %d: %w", epoch, err)
	}
	if len(out.Items) == 0 {
		return planStart{}, 0, false, nil
	}
	it := out.Items[0]
	sk, ok := it["sk"].(*types.AttributeValueMemberN)
	if !ok {
		return planStart{}, 0, false, errors.New("dynapart: malformed plan start (no epoch)")
	}
	prev, err := strconv.ParseInt(sk.Value, 10, 64)
	if err != nil {
		return planStart{}, 0, false, fmt.Errorf("dynapart: malformed plan start epoch %q", sk.Value)
	}
	ps, err := decodePlanStart(it)
	return ps, prev, err == nil, err
}

func (w *Worker) readPlanStart(ctx context.Context, epoch int64) (planStart, bool, error) {
	out, err := w.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(w.cfg.LeaseTable), Key: planStartKey(w.cfg.Group, epoch), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return planStart{}, false, fmt.Errorf("dynapart: read the plan start of epoch %d: %w", epoch, err)
	}
	if len(out.Item) == 0 {
		return planStart{}, false, nil
	}
	ps, err := decodePlanStart(out.Item)
	return ps, err == nil, err
}

// storePlanStart stores ps unless another holder stored the epoch's first; it returns the stored one.
func (w *Worker) storePlanStart(ctx context.Context, epoch int64, ps planStart) (planStart, error) {
	item := planStartKey(w.cfg.Group, epoch)
	blob, err := encodePlanStart(ps)
	if err != nil {
		return planStart{}, err
	}
	item["start"] = &types.AttributeValueMemberB{Value: blob}
	_, err = w.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(w.cfg.LeaseTable), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		got, ok, err := w.readPlanStart(ctx, epoch)
		if err == nil && !ok {
			err = errors.New("dynapart: the plan start vanished")
		}
		return got, err
	}
	if err != nil {
		return planStart{}, fmt.Errorf("dynapart: store the plan start of epoch %d: %w", epoch, err)
	}
	return ps, nil
}

func encodePlanStart(ps planStart) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(ps); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decodePlanStart(item map[string]types.AttributeValue) (planStart, error) {
	b, ok := item["start"].(*types.AttributeValueMemberB)
	if !ok {
		return planStart{}, errors.New("dynapart: malformed plan start (no start attribute)")
	}
	zr, err := gzip.NewReader(bytes.NewReader(b.Value))
	if err != nil {
		return planStart{}, fmt.Errorf("dynapart: malformed plan start: %w", err)
	}
	var ps planStart
	if err := json.NewDecoder(io.LimitReader(zr, 64<<20)).Decode(&ps); err != nil {
		return planStart{}, fmt.Errorf("dynapart: malformed plan start: %w", err)
	}
	return ps, nil
}

// startFrom is the slot's checkpoint under plan, from the epoch's planStart.
func (w *Worker) startFrom(e *env, ps planStart, units []int, out slotCheckpoint) (slotCheckpoint, error) {
	pos, err := scan.DecodeCheckpoint(ps.Scan)
	if err != nil {
		return slotCheckpoint{}, fmt.Errorf("dynapart: the plan start: %w", err)
	}
	var cursors []scan.Cursor
	for _, u := range units {
		if c, ok := pos.Cursor(u); ok {
			cursors = append(cursors, c)
		}
		out.dirty = out.dirty || slices.Contains(ps.Dirty, u)
	}
	out.pass = max(out.pass, ps.Pass)
	out.scan, err = scan.EncodeCheckpoint(w.position(e, cursors))
	return out, err
}
