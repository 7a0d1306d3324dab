package scan

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Reading a segment: one Scan (index mode: Query) page after another from the segment's start
// position, each waiting for a backpressure slot and, with ReadRate, for read capacity.

// response is what read needs of a Scan or Query output.
type response struct {
	items    []map[string]types.AttributeValue
	lek      map[string]types.AttributeValue
	scanned  int32
	consumed *types.ConsumedCapacity
}

// readUnlessSkipped asks BeforeSegment (when set) whether to read st, then reads it.
func (s *Scanner) readUnlessSkipped(ctx context.Context, st *stream, out chan<- *Page) error {
	if f := s.cfg.BeforeSegment; f != nil {
		ok, err := f(ctx, st.seg)
		if err != nil {
			return err
		}
		if !ok {
			s.mu.Lock()
			st.skipped = true
			s.mu.Unlock()
			return nil
		}
	}
	return s.read(ctx, st, out)
}

// read reads one segment from its start position to its end, handing pages to out.
func (s *Scanner) read(ctx context.Context, st *stream, out chan<- *Page) error {
	key := st.start
	countOpt := countThrottles(&st.throttles)
	for {
		select { // backpressure: a slot per unacknowledged page
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		limit := s.cfg.PageLimit
		var taken int
		if s.limiter != nil {
			if limit == 0 {
				limit = s.limiter.pageLimit()
			}
			var err error
			if taken, err = s.limiter.wait(ctx, s.limiter.estimate(limit)); err != nil {
				return err
			}
		}
		began := time.Now()
		res, err := s.fetch(ctx, st.seg, key, limit, countOpt)
		took := time.Since(began)
		if err != nil {
			return fmt.Errorf("scan: read segment %d of %q: %w", st.seg, s.cfg.Table, err)
		}
		rcu := consumedRCU(res, s.cfg.ConsistentRead)
		if s.limiter != nil {
			s.limiter.settle(taken, rcu, res.scanned)
		}
		page, ps := s.kept(st, res, rcu, took)
		if len(page.Items) == 0 {
			s.pageAcked(ps) // nothing to deliver: the position may pass it at once
		} else {
			select {
			case out <- page:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if len(res.lek) == 0 {
			return nil
		}
		key = res.lek
	}
}

// kept is the page of res's items this slot keeps (in filter mode those of its partition),
// pending in st until acknowledged; st's statistics count the response (rcu, took).
func (s *Scanner) kept(st *stream, res response, rcu float64, took time.Duration) (*Page, *pageState) {
	page := &Page{Segment: st.seg}
	ps := &pageState{s: s, st: st, end: res.lek}
	var partitioned, unpartitioned int64
	for _, it := range res.items {
		if s.plan.Mode == ModeFilter {
			if _, ok := it[s.cfg.PartitionAttr]; ok {
				partitioned++
			} else {
				unpartitioned++
			}
			if PartitionOf(it, s.cfg.PartitionAttr, s.plan.Slots) != s.cfg.Slot {
				continue
			}
		}
		page.Items = append(page.Items, &Item{Attrs: it, page: ps})
	}
	ps.unacked.Store(int64(len(page.Items)))
	s.mu.Lock()
	defer s.mu.Unlock()
	st.pending = append(st.pending, ps)
	st.stats.Pages++
	st.stats.Scanned += int64(res.scanned)
	st.stats.Returned += int64(len(page.Items))
	st.stats.Partitioned += partitioned
	st.stats.Unpartitioned += unpartitioned
	st.stats.RCU += rcu
	st.stats.Duration += took
	return page, ps
}

func (s *Scanner) fetch(ctx context.Context, seg int, key map[string]types.AttributeValue, limit int32, opt func(*dynamodb.Options)) (response, error) {
	var lim *int32
	if limit > 0 {
		lim = aws.Int32(limit)
	}
	if s.plan.Mode == ModeIndex {
		names := map[string]string{"#shard": s.cfg.ShardAttr}
		for k, v := range s.projNames {
			names[k] = v
		}
		out, err := s.cfg.Client.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.cfg.Table),
			IndexName:                 aws.String(s.cfg.IndexName),
			KeyConditionExpression:    aws.String("#shard = :shard"),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: map[string]types.AttributeValue{":shard": &types.AttributeValueMemberN{Value: strconv.Itoa(seg)}},
			ExclusiveStartKey:         key,
			Limit:                     lim,
			ProjectionExpression:      s.projection,
			ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
		}, opt)
		if err != nil {
			return response{}, err
		}
		return response{out.Items, out.LastEvaluatedKey, out.ScannedCount, out.ConsumedCapacity}, nil
	}
	out, err := s.cfg.Client.Scan(ctx, &dynamodb.ScanInput{
		TableName:                aws.String(s.cfg.Table),
		Segment:                  aws.Int32(int32(seg)),
		TotalSegments:            aws.Int32(int32(s.total)),
		ExclusiveStartKey:        key,
		Limit:                    lim,
		ConsistentRead:           aws.Bool(s.cfg.ConsistentRead),
		ProjectionExpression:     s.projection,
		ExpressionAttributeNames: s.projNames,
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
	}, opt)
	if err != nil {
		return response{}, err
	}
	return response{out.Items, out.LastEvaluatedKey, out.ScannedCount, out.ConsumedCapacity}, nil
}
