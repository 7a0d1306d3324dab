package lock

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// windowSize is the most slots one acquisition round reads. A group of up to windowSize slots is
// read whole by one Query, as it always was; a larger group is read a window at a time, so that a
// standby's poll costs the same whatever n is: at n = 1,000 a whole-group Query reads every slot
// item (tens of RCU per poll, all on one partition key), a window reads 64.
const windowSize = 64

// view is what one acquisition round knows of the group: slots lo..hi-1 of its n (and any slot
// holding an acquisition write of ours whose outcome is unknown), and the meta item. The meta item
// was read no later than the slots, and n is the caller's (checked against it) or, for a join, the
// meta item's: the plan (n, epoch) a take writes is one the meta item held.
type view struct {
	slots  map[int]slotItem
	meta   metaItem
	lo, hi int
	n      int
}

// whole reports whether the view holds every slot of the group.
func (v view) whole() bool { return v.lo == 0 && v.hi == v.n }

// allFinished reports whether every slot lo..hi-1 is finished under the view's plan epoch.
func (v view) allFinished() bool {
	for s := v.lo; s < v.hi; s++ {
		if !v.slots[s].finishedAt(v.meta.epoch) {
			return false
		}
	}
	return true
}

// wholeView is a whole-group read (readAll) as a view: a join's n is the one of the meta item read
// with the slots.
func wholeView(t target, slots map[int]slotItem, meta metaItem) view {
	n := t.n
	if t.join && meta.exists {
		n = meta.n
	}
	return view{slots: slots, meta: meta, lo: 0, hi: n, n: n}
}

// groupReader reads the group for one acquisition round (nextView). A group larger than
// windowSize is read one window at a time, the windows taken in turn from a random first one, so a
// lone standby looks at every slot within ceil(n/windowSize) polls and standbys starting together
// look at different slots. A sweeping round (target.sweep) goes on to the next window until one
// has a slot it may take, or it has read them all: TryAcquireSlot sweeps, and so does a waiting
// standby's first round and its round after one that saw a free slot but lost the races for it
// (the group is in flux: others are taking and releasing slots), so that the few slots left free
// are found at once, not one window per poll. A window whose slots are all finished (a job winding
// down) is followed by the next window, so a poll's cost stays bounded while slots finish; when
// every window a round read was all finished, the whole group is read: only a whole view can say
// the group is finished.
type groupReader struct {
	t       target
	windows int // 0: the group is read whole
	start   int // the round's first window
	read    int // windows read so far in this round
	meta    metaItem
	hasMeta bool // meta was read (it may not exist)
	// first: the round's whole view, read with the meta item by roundReader (nil: read it).
	first *view
	// prefetched: first is ReadGroup's read, which may be up to a poll interval old.
	prefetched bool
	// unfinished: a window read in this round had an unfinished slot, so the group is not finished.
	unfinished bool
}

func (c *Client) newReader(t target) *groupReader {
	r := &groupReader{t: t}
	if !t.mutex && t.n > windowSize {
		r.windows = (t.n + windowSize - 1) / windowSize
	}
	return r
}

// more reports whether a sweeping round has windows left that it has not read.
func (r *groupReader) more() bool { return r.t.sweep && r.read < r.windows }

// nextView reads the round's first view, or, for a sweeping round that found nothing it could
// take in the view before, the next one.
//
// Whether a window has a free slot is judged on the clock as it reads after that window's Query:
// in the skew-immune mode this is when the round starts watching a holder's version, and it must
// not be earlier than the read (a sweep's Queries take a while; so may the SDK's retries).
func (c *Client) nextView(ctx context.Context, r *groupReader) (view, error) {
	t := r.t
	if r.windows == 0 {
		r.read = 1
		if v := r.first; v != nil {
			r.first = nil
			return *v, nil
		}
		slots, meta, err := c.readAll(ctx, t.pk)
		return wholeView(t, slots, meta), err
	}
	first := r.read == 0
	if first {
		r.start = c.nextWindow(t.pk, t.n)
		// A window's finished slots are judged under the plan epoch: read the meta item first,
		// unless the first window (0) brings it.
		if !r.hasMeta && r.start != 0 {
			var err error
			if r.meta, err = c.readMeta(ctx, t.pk); err != nil {
				return view{}, err
			}
			r.hasMeta = true
		}
	}
	var v view
	for r.read < r.windows {
		k := (r.start + r.read) % r.windows
		if r.read > 0 {
			c.setCursor(t.pk, (k+1)%r.windows) // a round that reads on moves the cursor past it
		}
		r.read++
		var err error
		if v, err = c.readWindow(ctx, r, k); err != nil {
			return view{}, err
		}
		r.unfinished = r.unfinished || !v.allFinished()
		// A poll stops at a window with an unfinished slot, a sweep at one with a slot it may take.
		if r.read == r.windows || (!t.sweep && !v.allFinished()) || (t.sweep && c.anyFree(t, v, c.clock.Now())) {
			break
		}
	}
	if !r.unfinished {
		r.read = r.windows // the whole group is read now
		slots, meta, err := c.readAll(ctx, t.pk)
		return wholeView(t, slots, meta), err
	}
	if first {
		if err := c.readUnsettled(ctx, t, v); err != nil {
			return view{}, err
		}
	}
	return v, nil
}

// readWindow reads window k of the group; window 0 brings the meta item with it when the round had
// not read it yet (a round keeps the plan it read first).
func (c *Client) readWindow(ctx context.Context, r *groupReader, k int) (view, error) {
	v := view{lo: k * windowSize, hi: min((k+1)*windowSize, r.t.n), n: r.t.n}
	slots, meta, err := c.readRange(ctx, r.t.pk, v.lo, v.hi, !r.hasMeta)
	if err != nil {
		return view{}, err
	}
	v.slots = slots
	if v.lo == 0 && !r.hasMeta {
		r.meta, r.hasMeta = meta, true
	}
	v.meta = r.meta
	return v, nil
}

// anyFree reports whether the window has a slot the round may take.
func (c *Client) anyFree(t target, v view, now time.Time) bool {
	for s := v.lo; s < v.hi; s++ {
		it := v.slots[s]
		it.sk = s
		if !it.finishedAt(v.meta.epoch) && c.isFree(t.pk, it, now) {
			return true
		}
	}
	return false
}

// nextWindow returns the window to read for pk and moves the client's cursor on to the next one.
func (c *Client) nextWindow(pk string, n int) int {
	windows := (n + windowSize - 1) / windowSize
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cursor == nil {
		c.cursor = map[string]int{}
	}
	k, ok := c.cursor[pk]
	if !ok {
		k = mrand.N(windows)
	}
	k %= windows
	c.cursor[pk] = (k + 1) % windows
	return k
}

func (c *Client) setCursor(pk string, k int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cursor[pk] = k
}

// readRange reads slots lo..hi-1 with one consistent Query on the sort key (more only past 1 MB);
// from lo = 0 and withMeta it includes the meta item (sk -1).
func (c *Client) readRange(ctx context.Context, pk string, lo, hi int, withMeta bool) (map[int]slotItem, metaItem, error) {
	from := lo
	if from == 0 && withMeta {
		from = metaSK
	}
	in := &dynamodb.QueryInput{
		TableName:                aws.String(c.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": avS(pk), ":lo": avN(int64(from)), ":hi": avN(int64(hi - 1)),
		},
		ConsistentRead: aws.Bool(true),
	}
	slots, meta, err := c.query(ctx, in, fmt.Sprintf("%q %d..%d", pk, lo, hi-1))
	c.noteSize(pk, meta)
	return slots, meta, err
}

// readMeta reads the group's meta item with a consistent GetItem.
func (c *Client) readMeta(ctx context.Context, pk string) (metaItem, error) {
	return c.readMetaWith(ctx, pk, true)
}

// readMetaWith reads the group's meta item with a GetItem, consistent or not.
func (c *Client) readMetaWith(ctx context.Context, pk string, consistent bool) (metaItem, error) {
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(c.table), Key: key(pk, metaSK), ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return metaItem{}, fmt.Errorf("lock: read %s meta: %w", pk, c.readErr(err))
	}
	meta := decodeMeta(out.Item)
	c.noteSize(pk, meta)
	return meta, nil
}

// readUnsettled reads, one consistent GetItem each, the slots outside the window that hold an
// acquisition write of ours whose outcome is unknown, so that adoptLanded sees them every round as
// it does with a whole-group read.
func (c *Client) readUnsettled(ctx context.Context, t target, v view) error {
	c.mu.Lock()
	var missing []int
	for k := range c.unsettled {
		if k.pk == t.pk && k.sk >= 0 && k.sk < t.n && (k.sk < v.lo || k.sk >= v.hi) {
			missing = append(missing, k.sk)
		}
	}
	c.mu.Unlock()
	for _, s := range missing {
		it, err := c.readSlot(ctx, t.pk, s)
		if err != nil {
			return err
		}
		v.slots[s] = it
	}
	return nil
}
