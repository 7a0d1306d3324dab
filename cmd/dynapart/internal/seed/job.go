package seed

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/cli"
)

// Job writes items start..start+items-1 of demo data into a table. An item whose key exists is
// left as it is (its content and its ledger state: a seed must not undo a job's work), unless
// Overwrite is set.
type Job struct {
	DB                                   *dynamodb.Client
	Table                                string
	Schema                               cli.KeySchema
	start, Items, PayloadBytes, Parallel int
	// Overwrite replaces items that exist, with BatchWriteItem (25 items a request); otherwise each
	// item is one PutItem conditioned on its key not existing. A table created empty for the job
	// (the demo's) has nothing to replace: Overwrite only makes it faster.
	Overwrite bool
}

// counts are what a job has done so far: items written, and items left alone because they existed.
type counts struct{ written, existed atomic.Int64 }

// Run writes the items, showing progress on stderr, and says how many it wrote and how many it
// left alone.
func (j Job) Run(ctx context.Context, stderr io.Writer) error {
	var n counts
	prog := newProgress(stderr, "seed "+j.Table, &n, int64(j.Items))
	batches := make(chan []map[string]types.AttributeValue)
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() error { return j.produce(ectx, batches) })
	write := j.putNew
	if j.Overwrite {
		write = j.batchWrite
	}
	for range j.Parallel {
		eg.Go(func() error {
			for items := range batches {
				if err := write(ectx, items, &n); err != nil {
					return fmt.Errorf("seed %q: %w", j.Table, err)
				}
			}
			return nil
		})
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		prog.show(stop)
	}()
	err := eg.Wait()
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "seeded %s into %q\n", cli.Count(n.written.Load(), "item"), j.Table)
	if e := n.existed.Load(); e > 0 {
		fmt.Fprintf(stderr, "%s already existed and were left as they are, content and state (--overwrite replaces them)\n", cli.Count(e, "item"))
	}
	return nil
}

// produce sends the items in batches of 25 until all are sent or ctx is done.
func (j Job) produce(ctx context.Context, batches chan<- []map[string]types.AttributeValue) error {
	defer close(batches)
	payload := strings.Repeat("x", j.PayloadBytes)
	for lo := j.start; lo < j.start+j.Items; lo += 25 {
		hi := min(lo+25, j.start+j.Items)
		items := make([]map[string]types.AttributeValue, 0, hi-lo)
		for i := lo; i < hi; i++ {
			items = append(items, j.item(i, payload))
		}
		select {
		case batches <- items:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// item is demo item i.
func (j Job) item(i int, payload string) map[string]types.AttributeValue {
	ks := j.Schema
	item := map[string]types.AttributeValue{
		"n":       &types.AttributeValueMemberN{Value: strconv.Itoa(i)},
		"grp":     &types.AttributeValueMemberS{Value: "g" + strconv.Itoa(i%10)},
		"payload": &types.AttributeValueMemberS{Value: payload},
	}
	item[ks.Partition.Name] = demoKey(ks.Partition.Type, i)
	if ks.Sort.Name != "" {
		item[ks.Sort.Name] = demoKey(ks.Sort.Type, i)
	}
	return item
}

// demoKey is the key value of item i.
func demoKey(t types.ScalarAttributeType, i int) types.AttributeValue {
	switch t {
	case types.ScalarAttributeTypeN:
		return &types.AttributeValueMemberN{Value: strconv.Itoa(i)}
	case types.ScalarAttributeTypeB:
		b := make([]byte, 8)
		binary.BigEndian.PutUint64(b, uint64(i))
		return &types.AttributeValueMemberB{Value: b}
	default:
		return &types.AttributeValueMemberS{Value: fmt.Sprintf("item-%08d", i)}
	}
}
