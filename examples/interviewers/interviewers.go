package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dynapart/dynapart/lock"
)

// DB is the DynamoDB calls the calendar store makes; any *dynamodb.Client fits.
type DB interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// The interviews table: pk interview_id (S), sk (S). An interview has one row per interviewer
// (sk "row#<random id>", a surrogate key as the original SQL table had: nothing in the key stops
// the same interviewer from being added twice) and, with the fix, one uniqueness item per
// interviewer (sk "unique#<e-mail>"): the unique constraint the table was missing.
const (
	attrInterview   = "interview_id"
	attrSK          = "sk"
	attrInterviewer = "interviewer"
	attrSource      = "source"
	rowPrefix       = "row#"
	uniquePrefix    = "unique#"
)

// Store keeps the interviewers of each interview.
type Store struct {
	DB    DB
	Table string
}

// Interviewers returns the interviewer of every row of the interview, duplicates included.
func (s *Store) Interviewers(ctx context.Context, interviewID string) ([]string, error) {
	var out []string
	var start map[string]types.AttributeValue
	for {
		page, err := s.DB.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.Table),
			KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :row)"),
			ExpressionAttributeNames:  map[string]string{"#pk": attrInterview, "#sk": attrSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": avS(interviewID), ":row": avS(rowPrefix)},
			ConsistentRead:            aws.Bool(true),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("query interview %s: %w", interviewID, err)
		}
		for _, it := range page.Items {
			if v, ok := it[attrInterviewer].(*types.AttributeValueMemberS); ok {
				out = append(out, v.Value)
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = page.LastEvaluatedKey
	}
}

func (s *Store) has(ctx context.Context, interviewID, interviewer string) (bool, error) {
	all, err := s.Interviewers(ctx, interviewID)
	if err != nil {
		return false, err
	}
	for _, v := range all {
		if v == interviewer {
			return true, nil
		}
	}
	return false, nil
}

func (s *Store) row(interviewID, interviewer, source string) map[string]types.AttributeValue {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return map[string]types.AttributeValue{
		attrInterview:   avS(interviewID),
		attrSK:          avS(rowPrefix + hex.EncodeToString(b[:])),
		attrInterviewer: avS(interviewer),
		attrSource:      avS(source),
	}
}

// AddNaive is the code from the incident: check whether the interviewer is on the interview, and
// insert a row if not. Two processes that check before either inserts both insert. between runs
// after the check and before the insert (nil: nothing); tests use it to hold both processes
// inside the window the incident fell into.
func (s *Store) AddNaive(ctx context.Context, interviewID, interviewer, source string, between func()) (added bool, err error) {
	present, err := s.has(ctx, interviewID, interviewer)
	if err != nil || present {
		return false, err
	}
	if between != nil {
		between()
	}
	_, err = s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table), Item: s.row(interviewID, interviewer, source)})
	if err != nil {
		return false, fmt.Errorf("insert interviewer: %w", err)
	}
	return true, nil
}

// AddUnique is the fix: the row and a uniqueness item (interview, interviewer) are written in one
// transaction, the uniqueness item with attribute_not_exists. Of two processes that both passed
// the check, one transaction commits and the other is cancelled by the condition: added = false,
// nothing written. The check stays as a cheap fast path; the condition is the judge.
func (s *Store) AddUnique(ctx context.Context, interviewID, interviewer, source string, between func()) (added bool, err error) {
	present, err := s.has(ctx, interviewID, interviewer)
	if err != nil || present {
		return false, err
	}
	if between != nil {
		between()
	}
	in := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(s.Table), Item: s.row(interviewID, interviewer, source)}},
		{Put: &types.Put{
			TableName: aws.String(s.Table),
			Item: map[string]types.AttributeValue{
				attrInterview: avS(interviewID), attrSK: avS(uniquePrefix + interviewer), attrSource: avS(source),
			},
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": attrInterview},
		}},
	}}
	for attempt := 1; ; attempt++ {
		_, err = s.DB.TransactWriteItems(ctx, in)
		if err == nil {
			return true, nil
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			return false, fmt.Errorf("insert interviewer: %w", err)
		}
		conflict := false
		for _, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed":
				return false, nil // the other process added the interviewer: the constraint held
			case "TransactionConflict":
				conflict = true
			}
		}
		if !conflict || attempt == 5 {
			return false, fmt.Errorf("insert interviewer: %w", err)
		}
		// Two transactions on the same uniqueness item at the same moment: DynamoDB cancels one
		// with TransactionConflict (not a condition failure). Try again; the condition decides.
		if err := pause(ctx, time.Duration(attempt)*10*time.Millisecond); err != nil {
			return false, err
		}
	}
}

// AddLocked is the alternative: an advisory lock per interview around check-then-insert.
//
// The mutex is named ("interview#<id>") and taken explicitly by every code path that changes an
// interview's interviewers, alone: never implied by another write, never nested in another lock.
// The incident's deadlock came from a lock that was implied: the web request's transaction held
// the calendar row it had just updated (a row lock taken implicitly by the UPDATE) and then waited
// for the interview, while the poller held the interview and waited for the calendar row. A named
// mutex taken alone cannot be part of such a cycle; a lock that hides inside a write can.
func (s *Store) AddLocked(ctx context.Context, locks *lock.Client, interviewID, interviewer, source string) (added bool, err error) {
	mu := locks.NewMutex("interview#" + interviewID)
	if err := mu.Lock(ctx); err != nil {
		return false, fmt.Errorf("lock interview %s: %w", interviewID, err)
	}
	defer func() {
		if uerr := mu.Unlock(context.WithoutCancel(ctx)); uerr != nil && err == nil {
			err = fmt.Errorf("unlock interview %s: %w", interviewID, uerr)
		}
	}()
	// The lease's context ends if the lock is lost (its heartbeat failed): stop before writing.
	held := mu.Lease().Context()
	present, err := s.has(held, interviewID, interviewer)
	if err != nil || present {
		return false, err
	}
	_, err = s.DB.PutItem(held, &dynamodb.PutItemInput{TableName: aws.String(s.Table), Item: s.row(interviewID, interviewer, source)})
	if err != nil {
		return false, fmt.Errorf("insert interviewer: %w", err)
	}
	return true, nil
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
