package scan_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/scan"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

type item = map[string]types.AttributeValue

// makeItems builds n items keyed "id" of keyType (S, N or B). Numeric keys mix negative, long
// (up to 26 digits) and decimal values. "grp", the filter-mode partition attribute, is missing on
// every tenth item and otherwise a number or a string; "size" is a reserved word.
func makeItems(keyType string, n, pad int) []item {
	out := make([]item, n)
	for i := range n {
		var id types.AttributeValue
		switch keyType {
		case "S":
			id = &types.AttributeValueMemberS{Value: fmt.Sprintf("user-%06d", i)}
		case "N":
			var v string
			switch i % 4 {
			case 0:
				v = "-" + strconv.Itoa(i+1)
			case 1:
				v = fmt.Sprintf("%d%020d", i+1, i)
			case 2:
				v = strconv.Itoa(i) + ".25"
			default:
				v = strconv.Itoa(i * 1000)
			}
			id = &types.AttributeValueMemberN{Value: v}
		case "B":
			h := sha256.Sum256([]byte(strconv.Itoa(i)))
			id = &types.AttributeValueMemberB{Value: h[:12]}
		}
		it := item{
			"id":   id,
			"a":    &types.AttributeValueMemberN{Value: strconv.Itoa(i)},
			"size": &types.AttributeValueMemberS{Value: "s" + strconv.Itoa(i%7)},
		}
		switch {
		case i%10 == 0: // no grp: slot 0 in filter mode
		case i%3 == 0:
			it["grp"] = &types.AttributeValueMemberS{Value: "g" + strconv.Itoa(i)}
		default:
			it["grp"] = &types.AttributeValueMemberN{Value: strconv.Itoa(i * 7)}
		}
		if pad > 0 {
			it["pad"] = &types.AttributeValueMemberS{Value: strings.Repeat("x", pad)}
		}
		out[i] = it
	}
	return out
}

// seed writes items with BatchWriteItem, 25 a request, a few requests in flight.
func seed(t testing.TB, db *dynamodb.Client, table string, items []item) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for lo := 0; lo < len(items); lo += 25 {
		batch := items[lo:min(lo+25, len(items))]
		g.Go(func() error {
			reqs := make([]types.WriteRequest, len(batch))
			for i, it := range batch {
				reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
			}
			in := map[string][]types.WriteRequest{table: reqs}
			for len(in) > 0 {
				out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: in})
				if err != nil {
					return err
				}
				in = out.UnprocessedItems
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
}

// keyOf identifies an item by its "id" attribute.
func keyOf(it item) string {
	switch v := it["id"].(type) {
	case *types.AttributeValueMemberS:
		return "S:" + v.Value
	case *types.AttributeValueMemberN:
		return "N:" + v.Value
	case *types.AttributeValueMemberB:
		return "B:" + hex.EncodeToString(v.Value)
	}
	panic(fmt.Sprintf("item without id: %v", it))
}

func keySet(items []item) map[string]item {
	out := make(map[string]item, len(items))
	for _, it := range items {
		out[keyOf(it)] = it
	}
	return out
}

// readAll runs a scanner to the end, acknowledging everything, and returns the items by key; it
// fails the test on a duplicate.
func readAll(t testing.TB, cfg scan.Config) (map[string]item, *scan.Scanner) {
	t.Helper()
	sc, err := scan.New(cfg)
	require.NoError(t, err)
	got := map[string]item{}
	err = sc.Run(context.Background(), func(_ context.Context, p *scan.Page) error {
		for _, it := range p.Items {
			k := keyOf(it.Attrs)
			if _, dup := got[k]; dup {
				return fmt.Errorf("item %s delivered twice", k)
			}
			got[k] = it.Attrs
			it.Ack()
		}
		return nil
	})
	require.NoError(t, err)
	require.True(t, sc.Done())
	return got, sc
}

// seedFromEnv returns $DYNAPART_SEED or a fresh seed, and logs it so a failure can be replayed.
func seedFromEnv(t testing.TB) uint64 {
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("DYNAPART_SEED"); v != "" {
		p, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
		s = p
	}
	t.Logf("seed %d (replay with DYNAPART_SEED=%d)", s, s)
	return s
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// countingClient is a client that counts Scan requests, empty responses and the largest page's
// capacity.
type countingClient struct {
	scan.DynamoDBClient
	mu         sync.Mutex
	calls      int
	empty      int
	maxRCUPage float64
}

func newCountingClient(db ddbfault.Next) *countingClient {
	fc := ddbfault.New(db)
	c := &countingClient{DynamoDBClient: fc}
	fc.OnCall(func(ctx context.Context, call ddbfault.Call, send ddbfault.Send) (any, error) {
		c.mu.Lock()
		c.calls++
		c.mu.Unlock()
		out, err := send(ctx, call.In)
		if err == nil {
			page := out.(*dynamodb.ScanOutput)
			c.mu.Lock()
			if len(page.Items) == 0 {
				c.empty++
			}
			if page.ConsumedCapacity != nil {
				c.maxRCUPage = max(c.maxRCUPage, aws.ToFloat64(page.ConsumedCapacity.CapacityUnits))
			}
			c.mu.Unlock()
		}
		return out, err
	}, ddbfault.OpScan)
	return c
}

func (c *countingClient) counts() (calls, empty int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.empty
}
