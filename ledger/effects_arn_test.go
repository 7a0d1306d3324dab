package ledger

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/ddbfault"
)

func TestTableNamed(t *testing.T) {
	for in, want := range map[string]string{
		"people": "people",
		"arn:aws:dynamodb:eu-west-1:123456789012:table/people":                    "people",
		"arn:aws-cn:dynamodb:cn-north-1:123456789012:table/people":                "people",
		"arn:aws:dynamodb:eu-west-1:123456789012:table/people/index/byName":       "people",
		"arn:aws:dynamodb:eu-west-1:123456789012:table/people/stream/2026-01-01T": "people",
		"arn:aws:s3:::table/people":                                               "arn:aws:s3:::table/people",
		"arn:aws:dynamodb:eu-west-1:123456789012:xx":                              "arn:aws:dynamodb:eu-west-1:123456789012:xx",
		"": "",
	} {
		require.Equal(t, want, tableNamed(in), in)
	}
	require.True(t, sameTable("arn:aws:dynamodb:eu-west-1:123456789012:table/people", "people"))
	require.False(t, sameTable("arn:aws:dynamodb:eu-west-1:123456789012:table/people2", "people"))
	// Every change of every effect compares table names: a plain name costs no allocation.
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = sameTable("people", "orders") }))
}

// tableArn is table's ARN, as DescribeTable gives it.
func tableArn(t *testing.T, db *dynamodb.Client, table string) string {
	t.Helper()
	d, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	require.NotEmpty(t, aws.ToString(d.Table.TableArn))
	return aws.ToString(d.Table.TableArn)
}

// TestEffectsByArnAreCheckedAsByName: DynamoDB accepts a table's ARN wherever a transaction names
// a table, so an effect that names the source or the ledger table by ARN is refused as one that
// names it by name, before anything is written: a ledger attribute of another item (which would
// finish it unhandled), a write to the item itself, a write to the table ledger's rows.
func TestEffectsByArnAreCheckedAsByName(t *testing.T) {
	eachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		e := newEffectsEnv(t, kind)
		a, b := lcKey(0), lcKey(1)
		lcSeeder(t, e.raw, e.source)(a, b)
		ca := lcMustClaim(t, e.l, lcReq(a, "A", 0, 1, lcT0), 1)
		source := tableArn(t, e.raw, e.source)
		bDone := map[string]types.AttributeValue{"dp_status": &types.AttributeValueMemberS{Value: "done"}}
		for k, v := range b {
			bDone[k] = v
		}
		type refusal struct {
			reason string
			eff    *Effects
		}
		cases := []refusal{{"a write to the item itself", (&Effects{}).Update(source, a, Set("x", 1))}}
		if kind == "inline" {
			cases = append(cases, refusal{"a ledger attribute", (&Effects{}).Update(source, b, Set("dp_status", "done"))},
				refusal{"a ledger attribute", (&Effects{}).Put(source, bDone)})
		} else {
			rowB, err := e.l.(*Table).core.row.key(b)
			require.NoError(t, err)
			cases = append(cases, refusal{"a write to the ledger table", (&Effects{}).Update(tableArn(t, e.raw, e.ledger), rowB,
				Set(e.l.(*Table).core.names[aStatus], "done"))})
		}
		for _, c := range cases {
			reason, eff := c.reason, c.eff
			before := e.fc.CallsByOp()
			err := e.l.CompleteWith(ctx, ca, lcT0, eff)
			var ee *EffectError
			require.ErrorAs(t, err, &ee, reason)
			require.Contains(t, ee.Reason, reason)
			require.Equal(t, 0, ee.Write, reason)
			calls := e.fc.CallsByOp()
			for _, op := range ddbfault.WriteOps {
				require.Equal(t, before[op], calls[op], "%s: nothing sent (%s)", reason, op)
			}
		}
		require.Equal(t, StatusPending, lcState(t, e.l, b).Status, "B was never handled")
		require.Equal(t, StatusClaimed, lcState(t, e.l, a).Status)
		require.NotContains(t, e.get(t, e.source, a), "x")
	})
}

// TestEffectsRefusedAsAWholeSayNotWhichWrite: a commit with writes to other items that DynamoDB
// refuses as a whole (a put without its table's key: DynamoDB Local's ValidationException names no
// part) is refused as the whole commit, not as the item's update, with nothing of it applied; a
// backend that names the part it refused (moto's cancellation reasons) gets it named.
func TestEffectsRefusedAsAWholeSayNotWhichWrite(t *testing.T) {
	eachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		e := newEffectsEnv(t, kind)
		lcSeeder(t, e.raw, e.source)(lcKey(0))
		c := lcMustClaim(t, e.l, lcReq(lcKey(0), "A", 0, 1, lcT0), 1)
		eff := (&Effects{}).Update(e.other, otherKey("c"), Add("n", 1)).
			Put(e.other, map[string]types.AttributeValue{"wrong": &types.AttributeValueMemberS{Value: "no pk"}})
		err := e.l.CompleteWith(ctx, c, lcT0, eff)
		var ee *EffectError
		require.ErrorAs(t, err, &ee)
		t.Logf("refused: %v", err)
		require.Contains(t, []int{1, WholeCommit}, ee.Write, "the put, or the whole commit: %v", err)
		if ee.Write == WholeCommit {
			require.Contains(t, err.Error(), "the commit (DynamoDB does not say which of its writes)")
		}
		require.Nil(t, e.get(t, e.other, otherKey("c")), "nothing of the commit applied")
		require.Equal(t, StatusClaimed, lcState(t, e.l, lcKey(0)).Status)
	})
}
