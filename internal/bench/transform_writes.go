package bench

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/worker"
)

// TransformWrites attributes the transform's items/s to its write: the completion write alone
// (the ledger's CompleteOnlyWith with the item's change, the one request Run sends per item)
// against the hand migration loop's UpdateItem, with the keys known in advance (no scan, no
// lease, no worker), conc in flight, in rotating blocks of items on one table of people, so
// that DynamoDB Local's drift over the minute hits all alike. The completion write sets three
// attributes the loop's does not (the item's status, done_at and the write's claim id, which
// settles a lost answer); this is what they cost, and so the ceiling of the transform's ratio. A
// third write, the loop's with those three attributes added (State), splits the cost: State ÷
// Loop is what storing the attributes costs DynamoDB Local, Ledger ÷ State what the ledger's
// side of the same request costs.
type TransformWrites struct {
	Block, Rounds int // items per block; blocks of each write per concurrency
	Points        []*TransformWritesPoint
}

// TransformWritesPoint is one concurrency: one items/s value per block, block i of each write next
// to block i of the others (which goes first rotates), so Ratio(Ledger, Loop) pairs them.
type TransformWritesPoint struct {
	Concurrency         int
	Loop, State, Ledger Sample
	// LoopCPU, StateCPU, LedgerCPU: this process's and DynamoDB Local's CPU time per write, one
	// value per block
	LoopCPU, StateCPU, LedgerCPU CPUPerItem
}

// Point is the measurement at concurrency c, or nil.
func (t *TransformWrites) Point(c int) *TransformWritesPoint {
	if t == nil {
		return nil
	}
	for _, p := range t.Points {
		if p.Concurrency == c {
			return p
		}
	}
	return nil
}

// transformWritesBlock is how many items a block writes at concurrency c: enough that the ramp
// up and down of c writes in flight weighs little.
func transformWritesBlock(c int) int { return max(300, 10*c) }

// transformWritesRounds is how many pairs of blocks a run measures at each concurrency: four per
// repetition (a block is a second or less), two in a quick run.
func transformWritesRounds(o Options) int {
	if o.Quick {
		return 2
	}
	return 4 * o.Reps
}

// MeasureTransformWrites measures the three writes at every concurrency, rounds blocks of each, on
// a fresh table per concurrency.
func (e *Env) MeasureTransformWrites(ctx context.Context, concs []int, rounds int) (*TransformWrites, error) {
	tw := &TransformWrites{Rounds: rounds}
	for _, c := range concs {
		p, err := e.transformWritesAt(ctx, c, rounds)
		if err != nil {
			return nil, fmt.Errorf("transform writes at concurrency %d: %w", c, err)
		}
		tw.Points = append(tw.Points, p)
		e.logf("transform writes at concurrency %2d: loop %s, loop with the state %s (%s), completion write %s (%s); CPU µs per write (this process / DynamoDB Local): loop %s, with the state %s, completion %s", c,
			p.Loop.Fmt(0, "/s"), p.State.Fmt(0, "/s"), Ratio(p.State, p.Loop).X(), p.Ledger.Fmt(0, "/s"), Ratio(p.Ledger, p.Loop).X(),
			p.LoopCPU.Fmt(), p.StateCPU.Fmt(), p.LedgerCPU.Fmt())
	}
	if len(concs) > 0 {
		tw.Block = transformWritesBlock(slices.Max(concs))
	}
	return tw, nil
}

// transformWritesAt rotates blocks of the loop's write, the loop's write with the state's
// attributes and the completion write over the items of one fresh table, in order, conc in
// flight.
func (e *Env) transformWritesAt(ctx context.Context, conc, rounds int) (*TransformWritesPoint, error) {
	block := transformWritesBlock(conc)
	const sides = 3 // the writes below
	n := sides * rounds * block
	table, err := e.freshTableOf(ctx, "twrite", n, personItem)
	if err != nil {
		return nil, err
	}
	defer e.dropTable(table)
	l, err := ledger.NewInline(e.DB, table, []string{"id"})
	if err != nil {
		return nil, err
	}
	p := &TransformWritesPoint{Concurrency: conc}
	writes := [sides]struct {
		write func(i int) error
		out   *Sample
		cpu   *CPUPerItem
	}{
		{func(i int) error { _, err := e.DB.UpdateItem(ctx, migrationWrite(table, personItem(i))); return err }, &p.Loop, &p.LoopCPU},
		{func(i int) error {
			_, err := e.DB.UpdateItem(ctx, migrationWriteWithState(table, personItem(i)))
			return err
		}, &p.State, &p.StateCPU},
		{func(i int) error { return completeTransformed(ctx, l, i) }, &p.Ledger, &p.LedgerCPU},
	}
	server := e.serverPID()
	for r := range rounds {
		for k := range writes {
			side := writes[(k+r)%sides] // which goes first rotates
			from := (sides*r + k) * block
			meter := startCPU(server)
			rate, err := inChunks(block, conc, 1, func(i, _ int) error { return side.write(from + i) })
			if err != nil {
				return nil, err
			}
			*side.out = append(*side.out, rate)
			side.cpu.add(meter, block)
		}
	}
	if err := e.checkMigrated(ctx, table, n); err != nil { // every write migrates its items
		return nil, err
	}
	return p, nil
}

// completeTransformed sends Run's completion of person i as the transform's handler returns it:
// complete-only on an item the scan saw without state, with transformEffects' item change.
func completeTransformed(ctx context.Context, l ledger.Ledger, i int) error {
	eff, err := transformEffects(ctx, worker.Item{Attrs: personItem(i)})
	if err != nil {
		return err
	}
	now := time.Now()
	req := ledger.ClaimRequest{Key: keyOf(i), Owner: "bench", Slot: 0, Token: 1, Scope: "bench", Now: now, Until: now, Fresh: true}
	res, err := l.CompleteOnlyWith(ctx, req, eff)
	if err == nil && !res.Applied {
		err = fmt.Errorf("item %d: completion refused (found %s)", i, res.Found.Status)
	}
	return err
}

// migrationWriteWithState is migrationWrite with the three attributes the transform's completion
// write also sets, under the inline ledger's default names and with values of its form: the
// status done, done_at (the time in milliseconds) and a claim id of 16 characters.
func migrationWriteWithState(table string, it map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	in := migrationWrite(table, it)
	in.UpdateExpression = aws.String("SET #f = :f, #l = :l, #st = :st, #da = :da, #cl = :cl REMOVE #n")
	in.ExpressionAttributeNames["#st"], in.ExpressionAttributeNames["#da"], in.ExpressionAttributeNames["#cl"] = "dp_status", "dp_done_at", "dp_claim"
	in.ExpressionAttributeValues[":st"] = &types.AttributeValueMemberS{Value: "done"}
	in.ExpressionAttributeValues[":da"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMilli(), 10)}
	in.ExpressionAttributeValues[":cl"] = &types.AttributeValueMemberS{Value: stateClaimID()}
	return in
}

// stateClaimID is a random id of the ledger's claim ids' length (12 random bytes, base64).
func stateClaimID() string {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
	return base64.RawURLEncoding.EncodeToString(b[:])
}
