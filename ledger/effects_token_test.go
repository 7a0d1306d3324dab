package ledger

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

// sentTx is one TransactWriteItems as sent: its token and what it asked of the answer.
type sentTx struct {
	token    string
	capacity types.ReturnConsumedCapacity
}

// loseTxAnswers makes e's first lose transactions land with their answers lost, and records every
// transaction sent.
func (e *effectsEnv) loseTxAnswers(lose int) func() []sentTx {
	var mu sync.Mutex
	var sent []sentTx
	e.fc.OnCall(func(ctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
		in := c.In.(*dynamodb.TransactWriteItemsInput)
		mu.Lock()
		sent = append(sent, sentTx{aws.ToString(in.ClientRequestToken), in.ReturnConsumedCapacity})
		n := len(sent)
		mu.Unlock()
		out, err := send(ctx, in)
		if err == nil && n <= lose {
			return nil, errors.New("read tcp: connection reset by peer (the answer lost)")
		}
		return out, err
	}, ddbfault.OpTransactWriteItems)
	return func() []sentTx {
		mu.Lock()
		defer mu.Unlock()
		return append([]sentTx(nil), sent...)
	}
}

// TestEffectsCommitWithALongClaimID: a caller of the ledger may give a claim its own id
// (ClaimRequest.ID), a UUID for one. The commit's ClientRequestToken still fits DynamoDB's 36
// characters (it was "dynapart-" and the id: 47, refused, and the item failed for good with its
// effects blamed), and answers lost are repeated under that one token: applied once.
func TestEffectsCommitWithALongClaimID(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"inline", "table"} {
		for _, mode := range []string{"claim", "complete-only"} {
			t.Run(kind+"/"+mode, func(t *testing.T) {
				e := newEffectsEnv(t, kind)
				lcSeeder(t, e.raw, e.source)(lcKey(0))
				sent := e.loseTxAnswers(2)
				r := lcReq(lcKey(0), "A", 0, 1, lcT0)
				r.ID = uuidLike()
				eff := (&Effects{}).Update(e.other, otherKey("c"), Add("n", 1))
				var err error
				if mode == "claim" {
					err = e.l.CompleteWith(ctx, lcMustClaim(t, e.l, r, 1), lcT0, eff)
				} else {
					var res Result
					res, err = e.l.CompleteOnlyWith(ctx, r, eff)
					require.True(t, err != nil || res.Applied, "applied")
				}
				require.NoError(t, err)
				require.Equal(t, "1", numOf(e.get(t, e.other, otherKey("c")), "n"), "applied once")
				require.Equal(t, StatusDone, lcState(t, e.l, lcKey(0)).Status)
				txs := sent()
				require.Len(t, txs, 3, "two answers lost, then the same request again")
				for _, tx := range txs {
					require.LessOrEqual(t, len(tx.token), 36, tx.token)
					require.Equal(t, txs[0].token, tx.token, "one token for the repeats of one commit")
				}
				other := r.ID[:35] + "x" // another id, differing in its last character
				if other == r.ID {
					other = r.ID[:35] + "y"
				}
				require.NotEqual(t, commitToken(r.ID), commitToken(other), "ids that differ, tokens that differ")
			})
		}
	}
}

// uuidLike is a random id as long as a UUID (36 characters). A commit's token is derived from
// its claim's id, and DynamoDB holds a token for 10 minutes across every table of the account:
// each claim needs an id of its own.
func uuidLike() string { return newID() + newID() + "-" + newID()[:3] }

// TestEffectsRepeatIsTheSameRequest: the repeats of a commit whose answer was lost ask for the
// same ReturnConsumedCapacity as its first send. The ledger asks DynamoDB for the consumed
// capacity of one write in 16 and used to ask again at every send, so a repeat could differ from
// the first in that parameter alone, and DynamoDB documents that a token repeated with other
// parameters is refused (IdempotentParameterMismatch), for a commit that had landed.
func TestEffectsRepeatIsTheSameRequest(t *testing.T) {
	ctx := context.Background()
	e := newEffectsEnv(t, "inline")
	c := e.seededClaim(t)
	sent := e.loseTxAnswers(3)
	require.NoError(t, e.l.CompleteWith(ctx, c, lcT0, (&Effects{}).Update(e.other, otherKey("c"), Add("n", 1))))
	txs := sent()
	require.Len(t, txs, 4)
	for _, tx := range txs {
		require.Equal(t, txs[0], tx, "every send of the commit is the same request")
	}
	require.Equal(t, "1", numOf(e.get(t, e.other, otherKey("c")), "n"))
}
