package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/ledger"
	"github.com/dynapart/dynapart/worker"
)

// Variant names of the transform scenario (issue 33): migrate every item of a table, splitting
// its name into first and last.
const (
	VariantMigrationLoop = "hand migration loop"
	VariantTransform     = "Run, transform"
	// VariantTransform4 is VariantTransform with Config.Segments 4, the loop's own scan, instead of
	// the default 64 segments a new group gets (so that it can be scaled up to 64 workers). It is
	// not a goal: it shows what the default's 60 more scan pages cost the transform on a small
	// table (the pages of a small table's segments hold a few dozen items each, and DynamoDB Local
	// spends a few milliseconds on every page).
	VariantTransform4 = "Run, transform, 4 segments"
)

// transformSegments is the segment count of VariantTransform4.
const transformSegments = 4

// transformVariant reports whether variant migrates people (personItem) rather than marking items
// done.
func transformVariant(variant string) bool {
	return variant == VariantMigrationLoop || variant == VariantTransform || variant == VariantTransform4
}

// personItem is seedItem with a name to split: "Given<i> Family<i>".
func personItem(i int) map[string]types.AttributeValue {
	it := seedItem(i)
	it["name"] = &types.AttributeValueMemberS{Value: fmt.Sprintf("Given%d Family%d", i, i)}
	return it
}

// splitName is the migration both variants apply: "Ada Lovelace" is first "Ada", last "Lovelace".
func splitName(name string) (first, last string) {
	first, last, _ = strings.Cut(name, " ")
	return first, last
}

// transformEffects is Run's side of the transform, as a user writes it: the item's change
// returned as an effect, which the inline ledger merges into the completion's own UpdateItem (in
// complete-only mode, the one write per item). An item without a name has nothing to migrate.
func transformEffects(_ context.Context, it worker.Item) (*worker.Effects, error) {
	name, ok := it.Attrs["name"].(*types.AttributeValueMemberS)
	if !ok {
		return nil, nil
	}
	first, last := splitName(name.Value)
	return (&worker.Effects{}).Item(ledger.Set("first", first), ledger.Set("last", last), ledger.Remove("name")), nil
}

// migrationWrite is the hand migration loop's write of a scanned item (id and name): set first and
// last and remove name, if the name is still the one split. So a rerun (name gone) or an item
// renamed since the scan is not written twice; name, first and last are reserved words, hence the
// placeholders.
func migrationWrite(table string, it map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	name, _ := it["name"].(*types.AttributeValueMemberS)
	if name == nil {
		name = &types.AttributeValueMemberS{}
	}
	first, last := splitName(name.Value)
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{"id": it["id"]},
		UpdateExpression:         aws.String("SET #f = :f, #l = :l REMOVE #n"),
		ConditionExpression:      aws.String("#n = :n"),
		ExpressionAttributeNames: map[string]string{"#f": "first", "#l": "last", "#n": "name"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":f": &types.AttributeValueMemberS{Value: first}, ":l": &types.AttributeValueMemberS{Value: last}, ":n": name},
	}
}

// migrationLoop is the migration a competent team writes by hand without dynapart: a 4-segment
// parallel scan that returns only the id and name of the items that still have a name (a filter
// does not lower the scan's read units, but a rerun then sends no writes for items migrated
// already), feeding conc goroutines that each send migrationWrite. A failed condition is an item
// migrated or renamed since the scan: skipped, not an error. It returns the items it migrated.
func migrationLoop(ctx context.Context, db plainClient, table string, conc int) (int64, error) {
	scan := dynamodb.ScanInput{TableName: aws.String(table), ProjectionExpression: aws.String("id, #n"),
		FilterExpression: aws.String("attribute_exists(#n)"), ExpressionAttributeNames: map[string]string{"#n": "name"}}
	return handLoop(ctx, db, scan, conc, func(ctx context.Context, it map[string]types.AttributeValue) (bool, error) {
		_, err := db.UpdateItem(ctx, migrationWrite(table, it))
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return false, nil
		}
		return err == nil, err
	})
}

// checkMigrated fails unless all n items of table have first and last and no name.
func (e *Env) checkMigrated(ctx context.Context, table string, n int) error {
	in := &dynamodb.ScanInput{TableName: aws.String(table), Select: types.SelectCount,
		FilterExpression:         aws.String("attribute_exists(#f) AND attribute_exists(#l) AND attribute_not_exists(#n)"),
		ExpressionAttributeNames: map[string]string{"#f": "first", "#l": "last", "#n": "name"}}
	var got int32
	for {
		out, err := e.DB.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("count migrated items: %w", err)
		}
		got += out.Count
		if out.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if int(got) != n {
		return fmt.Errorf("%d of %d items migrated", got, n)
	}
	return nil
}
