package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/lock"
)

// spyWrites is a worker's client over db that reports each write on wrote (without blocking).
func spyWrites(db ddbfault.Next, wrote chan<- string) DynamoDBClient {
	fc := ddbfault.New(db)
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		table := ""
		if call.Op != ddbfault.OpTransactWriteItems && call.Op != ddbfault.OpBatchExecuteStatement {
			table = call.Tables[0]
		}
		select {
		case wrote <- call.Op + " " + table:
		default:
		}
		return send(ctx, call.In)
	}, ddbfault.OpPutItem, ddbfault.OpUpdateItem, ddbfault.OpTransactWriteItems, ddbfault.OpBatchExecuteStatement)
	return workerClient(fc)
}

// Issue 31, hole 4: whether a group's workers run once or continuously decides how its slots'
// shares are read (a once-worker's pass marks units that thieves steal; a continuous worker that
// takes over the slot ignores the markers), so it is a group setting like the others on its meta
// item: a worker whose Once differs from the group's is refused by Run with a
// *lock.GroupMismatchError on "meta.once", before it writes anything. Here the group's first
// worker holds slot 0 mid-pass and slot 1 is free for the second.
func TestOnceAndContinuousWorkersOfOneGroupRefused(t *testing.T) {
	for _, groupOnce := range []bool{true, false} {
		t.Run(fmt.Sprintf("group once=%t", groupOnce), func(t *testing.T) {
			f := newFixture(t, 20)
			first := fastTimings(f.config(LedgerInline))
			first.Workers, first.Once, first.Owner = 2, groupOnce, "first"
			w1, err := New(first)
			require.NoError(t, err)
			started, hold := make(chan struct{}, 20), make(chan struct{})
			ctx1, stop1 := context.WithCancel(context.Background())
			done1 := make(chan error, 1)
			go func() {
				done1 <- w1.Run(ctx1, func(ctx context.Context, _ Item) error {
					started <- struct{}{}
					select {
					case <-hold:
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				})
			}()
			defer func() {
				close(hold)
				stop1()
				if err := recvOrFail(t, done1, "the first worker's Run"); !errors.Is(err, context.Canceled) {
					require.NoError(t, err)
				}
			}()
			recvOrFail(t, started, "the first worker's pass to be under way")

			second := first
			second.Once, second.Owner = !groupOnce, "second"
			wrote := make(chan string, 1)
			second.Client = spyWrites(f.db, wrote)
			w2, err := New(second)
			require.NoError(t, err)
			ctx2, stop2 := context.WithCancel(context.Background())
			defer stop2()
			done2 := make(chan error, 1)
			go func() { done2 <- w2.Run(ctx2, func(context.Context, Item) error { return nil }) }()

			select {
			case err := <-done2:
				var gm *lock.GroupMismatchError
				require.ErrorAs(t, err, &gm)
				require.Equal(t, "meta.once", gm.Field)
				require.Zero(t, w2.Stats().Leases)
				require.Zero(t, w2.Stats().Scanned)
				select {
				case op := <-wrote:
					t.Fatalf("the refused worker wrote before it was refused: %s", op)
				default:
				}
			case op := <-wrote:
				stop2()
				<-done2
				t.Fatalf("a worker with Once=%t joined a group whose first worker has Once=%t and wrote (%s) instead of being refused on meta.once",
					second.Once, groupOnce, op)
			case <-time.After(20 * time.Second):
				t.Fatal("the second worker neither wrote nor was refused")
			}
		})
	}
}
