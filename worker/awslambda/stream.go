package awslambda

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/worker"
)

// StreamHandler returns a Lambda handler (for lambda.Start) for a DynamoDB Streams event source
// mapping on the table, with partial batch responses (FunctionResponseTypes:
// ReportBatchItemFailures): the same per-version ledger as `dynapart work --follow`. Each invocation
// takes a slot of cfg's group (give the stream handler a continuous group of its own, with as many
// slots as the mapping runs batches at once: shards x ParallelizationFactor), resolves every record
// (an item whose content changed is handled once per version, writes that change no content and
// deleted items are not handled; see worker.Worker.HandleRecords), releases the slot, and reports
// the records whose items it could not resolve before the invocation's deadline minus
// DeadlineMargin (a live claim elsewhere, a retry not yet due, a failed handler) as batch item
// failures, so Lambda delivers them again; while the group is paused (`dynapart pause`, or its
// budget reached, to which each invocation on a budgeted group adds what it consumed) every
// record is one.
// cfg.Versions is forced on; the back-fill of the same table (Handler) must set Versions too, so
// that the stream does not handle again what it handled. cfg.Once is forced off and
// DeadlineMargin defaults as in Handler.
func StreamHandler(cfg worker.Config, h worker.Handler) func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		c, err := lambdaConfig(cfg)
		if err != nil {
			return events.DynamoDBEventResponse{}, err
		}
		c.Once, c.Versions = false, true
		w, err := worker.New(c)
		if err != nil {
			return events.DynamoDBEventResponse{}, err
		}
		changes, err := changesOf(ev.Records)
		if err != nil {
			return events.DynamoDBEventResponse{}, err
		}
		unresolved, err := w.HandleRecords(ctx, h, changes)
		if err != nil {
			return events.DynamoDBEventResponse{}, err // the whole batch is delivered again
		}
		var resp events.DynamoDBEventResponse
		for _, i := range unresolved {
			resp.BatchItemFailures = append(resp.BatchItemFailures,
				events.DynamoDBBatchItemFailure{ItemIdentifier: ev.Records[i].Change.SequenceNumber})
		}
		return resp, nil
	}
}

// changesOf is the event's records as worker.Changes.
func changesOf(recs []events.DynamoDBEventRecord) ([]worker.Change, error) {
	out := make([]worker.Change, len(recs))
	for i, r := range recs {
		var err error
		ch := worker.Change{Removed: r.EventName == string(events.DynamoDBOperationTypeRemove)}
		if ch.Keys, err = image(r.Change.Keys); err == nil {
			if ch.OldImage, err = image(r.Change.OldImage); err == nil {
				ch.NewImage, err = image(r.Change.NewImage)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("dynapart: stream record %s: %w", r.Change.SequenceNumber, err)
		}
		out[i] = ch
	}
	return out, nil
}

// image converts a record's image; nil for none.
func image(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	if img == nil {
		return nil, nil
	}
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		av, err := value(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

// value converts one attribute value of the Lambda event's type to the SDK's.
func value(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		l := make([]types.AttributeValue, 0, len(v.List()))
		for _, e := range v.List() {
			av, err := value(e)
			if err != nil {
				return nil, err
			}
			l = append(l, av)
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case events.DataTypeMap:
		m, err := image(v.Map())
		return &types.AttributeValueMemberM{Value: m}, err
	}
	return nil, fmt.Errorf("unknown attribute type %v", v.DataType())
}
