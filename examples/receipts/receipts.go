package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/lock"
)

// Status is a delivery status. Its priority is its place in the funnel: a message's status only
// ever moves forward, whatever order the receipts arrive in.
type Status int

// The funnel, in order.
const (
	InGateway Status = iota + 1
	Sent
	Delivered
	Opened
	Clicked
)

// Statuses lists the funnel in order.
var Statuses = []Status{InGateway, Sent, Delivered, Opened, Clicked}

var statusNames = [...]string{"", "IN_GATEWAY", "SENT", "DELIVERED", "OPENED", "CLICKED"}

func (s Status) String() string {
	if s < InGateway || s > Clicked {
		return "NONE"
	}
	return statusNames[s]
}

// Event is one delivery receipt.
type Event struct {
	MessageID string
	Campaign  string
	Status    Status
}

// DB is the DynamoDB calls the receipt consumers make; any *dynamodb.Client fits.
type DB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// The state table (pk id, S) holds one item per message (id = message id: status, prio, campaign)
// and one funnel item per campaign (id = "campaign#<name>": reached_<STATUS> counters, each the
// number of messages that have reached that status or a later one).
const (
	attrID       = "id"
	attrStatus   = "status"
	attrPrio     = "prio"
	attrCampaign = "campaign"
	campaignPK   = "campaign#"
	reachedAttr  = "reached_"
)

// Store applies receipts to the state table.
type Store struct {
	DB    DB
	Table string
}

// ApplyOptimistic moves the message's status forward with one conditional update on its priority
// (a stale or repeated receipt fails the condition and changes nothing), then adds the message to
// every funnel stage it has newly reached. No lock, no read: two writes for a receipt that moves
// the status, one for a stale receipt.
func (s *Store) ApplyOptimistic(ctx context.Context, ev Event) error {
	out, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.Table),
		Key:                       map[string]types.AttributeValue{attrID: avS(ev.MessageID)},
		UpdateExpression:          aws.String("SET #status = :s, #prio = :p, #campaign = :c"),
		ConditionExpression:       aws.String("attribute_not_exists(#prio) OR #prio < :p"),
		ExpressionAttributeNames:  map[string]string{"#status": attrStatus, "#prio": attrPrio, "#campaign": attrCampaign},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": avS(ev.Status.String()), ":p": avN(int(ev.Status)), ":c": avS(ev.Campaign)},
		ReturnValues:              types.ReturnValueUpdatedOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // the message is already at this status or further: nothing to count
	}
	if err != nil {
		return fmt.Errorf("advance %s to %s: %w", ev.MessageID, ev.Status, err)
	}
	return s.addToFunnel(ctx, ev.Campaign, prioOf(out.Attributes), ev.Status)
}

// ApplyPessimistic is the baseline: take a lock per message id, read the message, write the new
// status if it is further along, count it, release the lock. Correct, and the same final state as
// ApplyOptimistic, but every receipt pays the lock's round trips (acquire: a query and a
// conditional write; release: a write), and receipts of one message wait for each other.
func (s *Store) ApplyPessimistic(ctx context.Context, locks *lock.Client, ev Event) (err error) {
	mu := locks.NewMutex("message#" + ev.MessageID)
	if err := mu.Lock(ctx); err != nil {
		return fmt.Errorf("lock %s: %w", ev.MessageID, err)
	}
	held := mu.Lease().Context() // ends if the lock is lost: then write nothing more
	defer func() {
		if held.Err() != nil && err != nil {
			err = fmt.Errorf("%w (lock %s: %w)", err, ev.MessageID, context.Cause(held))
		}
		if uerr := mu.Unlock(context.WithoutCancel(ctx)); uerr != nil && err == nil {
			err = fmt.Errorf("unlock %s: %w", ev.MessageID, uerr)
		}
	}()
	old, err := s.read(held, ev.MessageID)
	if err != nil || old >= ev.Status {
		return err
	}
	if err := s.write(held, ev); err != nil {
		return err
	}
	return s.addToFunnel(held, ev.Campaign, old, ev.Status)
}

// NaiveHooks let a test hold a naive receipt between its read and its write.
type NaiveHooks struct {
	AfterRead  func(Event)
	AfterWrite func(Event)
}

// ApplyNaive is the code before the fix: read the message, and if the receipt is further along,
// write it and count it. Two receipts of one message that both read before either writes both
// write (the later write wins, so a DELIVERED can be overwritten by a SENT) and both count the
// stages they think are new.
func (s *Store) ApplyNaive(ctx context.Context, ev Event, hooks NaiveHooks) error {
	old, err := s.read(ctx, ev.MessageID)
	if err != nil {
		return err
	}
	if hooks.AfterRead != nil {
		hooks.AfterRead(ev)
	}
	if old >= ev.Status {
		return nil
	}
	if err := s.write(ctx, ev); err != nil {
		return err
	}
	if hooks.AfterWrite != nil {
		hooks.AfterWrite(ev)
	}
	return s.addToFunnel(ctx, ev.Campaign, old, ev.Status)
}

func (s *Store) read(ctx context.Context, id string) (Status, error) {
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.Table), Key: map[string]types.AttributeValue{attrID: avS(id)}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", id, err)
	}
	return prioOf(out.Item), nil
}

func (s *Store) write(ctx context.Context, ev Event) error {
	_, err := s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table), Item: map[string]types.AttributeValue{
		attrID: avS(ev.MessageID), attrStatus: avS(ev.Status.String()), attrPrio: avN(int(ev.Status)), attrCampaign: avS(ev.Campaign),
	}})
	if err != nil {
		return fmt.Errorf("write %s: %w", ev.MessageID, err)
	}
	return nil
}

// addToFunnel adds one to the campaign's reached_<S> counter for every status S in (from, to]:
// increment-only counters, one ADD per write, no read. A message that jumps from SENT to OPENED
// (its DELIVERED receipt still on its way) has reached DELIVERED too.
func (s *Store) addToFunnel(ctx context.Context, campaign string, from, to Status) error {
	if to <= from {
		return nil
	}
	names := map[string]string{}
	var adds []string
	for st := from + 1; st <= to; st++ {
		n := "#r" + strconv.Itoa(int(st))
		names[n] = reachedAttr + st.String()
		adds = append(adds, n+" :one")
	}
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.Table),
		Key:                       map[string]types.AttributeValue{attrID: avS(campaignPK + campaign)},
		UpdateExpression:          aws.String("ADD " + strings.Join(adds, ", ")),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": avN(1)},
	})
	if err != nil {
		return fmt.Errorf("count %s %s..%s: %w", campaign, from, to, err)
	}
	return nil
}

// Funnel is a campaign's counters: Reached[s] messages have reached status s or a later one.
type Funnel struct {
	Reached map[Status]int
}

// Current derives the number of messages whose current status is s: those that reached s minus
// those that went further.
func (f Funnel) Current(s Status) int {
	if s == Clicked {
		return f.Reached[s]
	}
	return f.Reached[s] - f.Reached[s+1]
}

// State is the whole table: each message's status and each campaign's funnel.
type State struct {
	Messages map[string]Status
	Funnels  map[string]Funnel
}

// ReadState scans the state table.
func (s *Store) ReadState(ctx context.Context) (State, error) {
	st := State{Messages: map[string]Status{}, Funnels: map[string]Funnel{}}
	var start map[string]types.AttributeValue
	for {
		out, err := s.DB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(s.Table), ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
		if err != nil {
			return st, fmt.Errorf("scan %s: %w", s.Table, err)
		}
		for _, it := range out.Items {
			id := it[attrID].(*types.AttributeValueMemberS).Value
			if name, ok := strings.CutPrefix(id, campaignPK); ok {
				f := Funnel{Reached: map[Status]int{}}
				for _, status := range Statuses {
					f.Reached[status] = int(numOf(it[reachedAttr+status.String()]))
				}
				st.Funnels[name] = f
				continue
			}
			st.Messages[id] = prioOf(it)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return st, nil
		}
		start = out.LastEvaluatedKey
	}
}

func prioOf(item map[string]types.AttributeValue) Status { return Status(numOf(item[attrPrio])) }

func numOf(v types.AttributeValue) int64 {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	i, _ := strconv.ParseInt(n.Value, 10, 64)
	return i
}

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func avN(n int) types.AttributeValue    { return &types.AttributeValueMemberN{Value: strconv.Itoa(n)} }
