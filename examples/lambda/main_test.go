package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
	"github.com/dynapart/dynapart/worker/awslambda"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

// TestLambdaInvocationsFinishTheJob drives the Lambda handler with short deadlines, two
// invocations at a time, until it reports the job finished: every item is done exactly once.
func TestLambdaInvocationsFinishTheJob(t *testing.T) {
	const items = 3000
	db := ddbtest.Client(t)
	table := ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})
	leases := ddbtest.TableName(t, "lease")
	ctx := context.Background()
	require.NoError(t, lock.CreateTable(ctx, db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	for lo := 0; lo < items; lo += 25 {
		var reqs []types.WriteRequest
		for i := lo; i < lo+25; i++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("u%05d", i)}, "n": &types.AttributeValueMemberN{Value: strconv.Itoa(i)}}}})
		}
		for len(reqs) > 0 {
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
			require.NoError(t, err)
			reqs = out.UnprocessedItems[table]
		}
	}

	var mu sync.Mutex
	done := map[string]int{}
	cfg := worker.Config{
		Client: db, Table: table, LeaseTable: leases, Workers: 2, Concurrency: 4,
		LeaseTTL: 2 * time.Second, Heartbeat: 500 * time.Millisecond, StandbyPoll: 100 * time.Millisecond,
		CheckpointInterval: 100 * time.Millisecond, DeadlineMargin: 400 * time.Millisecond, DrainTimeout: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks: worker.Hooks{OnItem: func(e worker.ItemEvent) {
			if e.Outcome == worker.OutcomeCompleted {
				mu.Lock()
				done[e.Key["id"].(*types.AttributeValueMemberS).Value]++
				mu.Unlock()
			}
		}},
	}
	handler := awslambda.Handler(cfg, func(context.Context, worker.Item) error {
		time.Sleep(time.Millisecond) // slow enough that one invocation cannot finish a share
		return nil
	})

	invocations, finished := 0, false
	for round := 0; round < 60 && !finished; round++ {
		var wg sync.WaitGroup
		results := make([]awslambda.Result, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ictx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
				defer cancel()
				results[i], errs[i] = handler(ictx, nil)
			}()
		}
		wg.Wait()
		invocations += 2
		for i := range 2 {
			require.NoError(t, errs[i], "invocation %d", invocations-1+i)
			finished = finished || results[i].Finished
		}
	}
	require.True(t, finished, "the job did not finish in %d invocations", invocations)
	require.Greater(t, invocations, 2, "the deadlines must have cut invocations short")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, done, items)
	for k, n := range done {
		require.Equal(t, 1, n, "item %s completed %d times", k, n)
	}
}
