package ddbfault_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
	"github.com/dynapart/dynapart/internal/ddbtest"
)

func TestMain(m *testing.M) { ddbtest.Main(m) }

type env struct {
	db    *dynamodb.Client
	fc    *ddbfault.Client
	table string
}

func newEnv(t *testing.T, opts ...ddbfault.Option) *env {
	db := ddbtest.Client(t)
	return &env{db: db, fc: ddbfault.New(db, opts...), table: ddbtest.CreateTable(t, db, ddbtest.Key{Name: "id", Type: "S"})}
}

func (e *env) key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}
}

// putNew is a conditional put that asks for the old item when its condition fails.
func (e *env) putNew(ctx context.Context, id string) error {
	_, err := e.fc.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(e.table), Item: e.key(id),
		ConditionExpression:                 aws.String("attribute_not_exists(id)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

func (e *env) exists(t *testing.T, id string) bool {
	out, err := e.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: e.key(id), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item != nil
}

// TestCountsAndFiresOnce: the fault hits the At-th matching call only, once; other operations do
// not count towards At; Injected names the call.
func TestCountsAndFiresOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.fc.Inject(ddbfault.Fault{Kind: ddbfault.ErrorBeforeSend, At: 2, Ops: []string{ddbfault.OpPutItem}})
	require.NoError(t, e.putNew(ctx, "a"))
	_, err := e.fc.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: e.key("a")})
	require.NoError(t, err)
	_, ok := e.fc.Injected()
	require.False(t, ok, "fired before its call")
	err = e.putNew(ctx, "b")
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.False(t, ddbfault.ErrorBeforeSend.Applied())
	require.False(t, e.exists(t, "b"), "a request failed before sending was applied")
	require.NoError(t, e.putNew(ctx, "c"), "the fault fired twice")
	hit, ok := e.fc.Injected()
	require.True(t, ok)
	require.Equal(t, int64(3), hit.Call)
	require.Equal(t, ddbfault.OpPutItem, hit.Op)
	require.Equal(t, []string{e.table}, hit.Tables)
	require.False(t, hit.Landed)
	require.Equal(t, int64(4), e.fc.Calls())
	require.Equal(t, map[string]int64{ddbfault.OpPutItem: 3, ddbfault.OpGetItem: 1}, e.fc.CallsByOp())
}

// TestKinds: per kind, whether the write was applied and what the caller sees.
func TestKinds(t *testing.T) {
	e := newEnv(t, ddbfault.WithTimeout(50*time.Millisecond))
	ctx := context.Background()
	cases := []struct {
		kind    ddbfault.Kind
		applied bool
		check   func(t *testing.T, err error)
	}{
		{ddbfault.LostAnswer, true, func(t *testing.T, err error) {
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			require.True(t, ddbfault.IsInjected(err))
		}},
		{ddbfault.LostAnswerRetried, true, func(t *testing.T, err error) {
			var ccf *types.ConditionalCheckFailedException
			require.ErrorAs(t, err, &ccf)
			require.NotNil(t, ccf.Item, "the retry asked for ALL_OLD")
			require.False(t, ddbfault.IsInjected(err))
		}},
		{ddbfault.LostAnswerRetriedNoOld, true, func(t *testing.T, err error) {
			var ccf *types.ConditionalCheckFailedException
			require.ErrorAs(t, err, &ccf)
			require.Nil(t, ccf.Item, "ALL_OLD was dropped from the retry")
		}},
		{ddbfault.Throttle, false, func(t *testing.T, err error) {
			var pt *types.ProvisionedThroughputExceededException
			require.ErrorAs(t, err, &pt)
		}},
		{ddbfault.ServerError, false, func(t *testing.T, err error) {
			var ie *types.InternalServerError
			require.ErrorAs(t, err, &ie)
			var oe *smithy.OperationError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, ddbfault.OpPutItem, oe.OperationName)
		}},
		{ddbfault.DelayedAnswer, true, func(t *testing.T, err error) {
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			require.True(t, ne.Timeout())
		}},
	}
	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			id := "k-" + string(c.kind)
			e.fc.Inject(ddbfault.Fault{Kind: c.kind, At: 1, Table: e.table})
			err := e.putNew(ctx, id)
			require.Error(t, err)
			c.check(t, err)
			require.Equal(t, c.applied, e.exists(t, id))
			require.Equal(t, c.applied, c.kind.Applied())
			hit, ok := e.fc.Injected()
			require.True(t, ok)
			require.Equal(t, c.applied, hit.Landed)
			if c.applied {
				require.NoError(t, hit.ServerErr)
			}
		})
	}
}

// TestDelayedAnswerEndsWithTheContext: a held answer returns when the caller's context ends, as
// a cancelled SDK call does, and the write is applied.
func TestDelayedAnswerEndsWithTheContext(t *testing.T) {
	e := newEnv(t, ddbfault.WithTimeout(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	e.fc.OnSent(func(s ddbfault.Sent) {
		if s.Faulted {
			cancel() // the write has landed; the caller gives up while the answer is held
		}
	})
	e.fc.Inject(ddbfault.Fault{Kind: ddbfault.DelayedAnswer, At: 1})
	_, err := e.fc.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(e.table), Key: e.key("d"),
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: "1"}}})
	var ce *smithy.CanceledError
	require.ErrorAs(t, err, &ce)
	require.True(t, errors.Is(err, context.Canceled))
	require.True(t, e.exists(t, "d"), "the write did not land")
}

// TestTransactionRetry: the SDK's retry of a transaction repeats its token, so DynamoDB answers
// the replay with success; the no-ALL_OLD retry is a new transaction, cancelled by the first
// one's write, and its cancellation reason carries no item.
func TestTransactionRetry(t *testing.T) {
	for _, kind := range []ddbfault.Kind{ddbfault.LostAnswerRetried, ddbfault.LostAnswerRetriedNoOld} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t)
			var sent []ddbfault.Sent
			e.fc.OnSent(func(s ddbfault.Sent) { sent = append(sent, s) })
			e.fc.Inject(ddbfault.Fault{Kind: kind, At: 1, Ops: ddbfault.WriteOps})
			_, err := e.fc.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{
				Put: &types.Put{TableName: aws.String(e.table), Item: e.key("t"), ConditionExpression: aws.String("attribute_not_exists(id)"),
					ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}}}})
			require.Len(t, sent, 2, "the request and its retry")
			require.True(t, sent[0].Faulted)
			require.NoError(t, sent[0].Err)
			require.True(t, sent[1].Retry)
			if kind == ddbfault.LostAnswerRetried {
				require.NoError(t, err, "the replay of an applied transaction")
				return
			}
			var tc *types.TransactionCanceledException
			require.ErrorAs(t, err, &tc)
			require.Len(t, tc.CancellationReasons, 1)
			require.Nil(t, tc.CancellationReasons[0].Item)
		})
	}
}

func TestParseKind(t *testing.T) {
	for _, k := range ddbfault.Kinds() {
		got, err := ddbfault.ParseKind(string(k))
		require.NoError(t, err)
		require.Equal(t, k, got)
	}
	_, err := ddbfault.ParseKind("nope")
	require.Error(t, err)
}

// TestHooks: a hook sees each call of its operations in order with the ones added before it
// outside; it can observe, fail before sending, fail after the write landed, send twice and
// answer itself; an armed fault applies inside the hooks; a removed hook sees nothing more.
func TestHooks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var seen []string
	e.fc.OnCall(func(ctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
		seen = append(seen, fmt.Sprintf("outer %d %s", c.N, c.Op))
		return send(ctx, c.In)
	})
	mode := ""
	errRefused := errors.New("refused by the hook")
	remove := e.fc.OnCall(func(ctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
		seen = append(seen, "inner "+c.Op)
		switch mode {
		case "before":
			return nil, errRefused
		case "after":
			_, _ = send(ctx, c.In)
			return nil, errRefused
		case "twice":
			if _, err := send(ctx, c.In); err != nil {
				return nil, err
			}
			return send(ctx, c.In)
		case "answer":
			return &dynamodb.PutItemOutput{}, nil
		}
		return send(ctx, c.In)
	}, ddbfault.OpPutItem)

	_, err := e.fc.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: e.key("a")})
	require.NoError(t, err)
	require.Equal(t, []string{"outer 1 GetItem"}, seen, "the inner hook is for PutItem only")

	mode = "before"
	require.ErrorIs(t, e.putNew(ctx, "b"), errRefused)
	require.False(t, e.exists(t, "b"))
	mode = "after"
	require.ErrorIs(t, e.putNew(ctx, "c"), errRefused)
	require.True(t, e.exists(t, "c"))
	mode = "twice"
	var ccf *types.ConditionalCheckFailedException
	require.ErrorAs(t, e.putNew(ctx, "d"), &ccf, "the second put meets the first")
	mode = "answer"
	require.NoError(t, e.putNew(ctx, "c"), "the hook's own answer")

	mode = ""
	var sent []ddbfault.Sent
	e.fc.OnSent(func(s ddbfault.Sent) { sent = append(sent, s) })
	e.fc.Inject(ddbfault.Fault{Kind: ddbfault.LostAnswer, At: 1, Ops: []string{ddbfault.OpPutItem}})
	err = e.putNew(ctx, "f")
	require.True(t, ddbfault.IsInjected(err), "the fault applies inside the hooks")
	require.True(t, e.exists(t, "f"))
	require.Len(t, sent, 1)
	require.True(t, sent[0].Faulted)

	remove()
	seen = nil
	require.NoError(t, e.putNew(ctx, "g"))
	require.Equal(t, []string{"outer 7 PutItem"}, seen)
	require.Equal(t, int64(7), e.fc.Calls(), "a call sent twice counts once")
}
