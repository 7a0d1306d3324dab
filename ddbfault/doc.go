// Package ddbfault is a DynamoDB client wrapper for tests: it counts calls and injects one fault
// at the k-th call, so a test can walk every call of a small run and check that a fault at that
// point breaks none of its guarantees (internal/sweep does this for dynapart's worker).
//
// [Client] wraps any [Next] (a *dynamodb.Client fits) and itself satisfies the client interfaces
// of lock, scan and worker. Arm one [Fault] with [Client.Inject]; the fault fires once, on the
// At-th call that matches its filter (operations and table), and [Client.Injected] reports what
// was hit. The kinds ([Kind]) are what a real network and DynamoDB produce:
//
//   - [ErrorBeforeSend]: the request never leaves (a refused connection);
//   - [LostAnswer]: the request is sent and applied, its answer lost (a reset connection);
//   - [LostAnswerRetried]: as LostAnswer, then the same request is sent again, as the SDK's own
//     retry does, and the caller gets that second answer (for a conditional write: usually
//     ConditionalCheckFailed, carrying the old item when the caller asked for ALL_OLD; for
//     TransactWriteItems the replay carries the same ClientRequestToken, so DynamoDB answers it
//     as the first time: success);
//   - [LostAnswerRetriedNoOld]: as LostAnswerRetried, but the second request does not ask for
//     ReturnValuesOnConditionCheckFailure=ALL_OLD, so the failed condition carries no item (a
//     transaction is re-sent without its token, as a new one that meets its own first write);
//   - [Throttle]: ProvisionedThroughputExceededException, nothing applied;
//   - [ServerError]: an HTTP 500 (InternalServerError), nothing applied;
//   - [DelayedAnswer]: the request is applied, its answer held past the client's timeout
//     ([WithTimeout]) or the caller's context, whichever ends first.
//
// Errors look like the SDK's: a *smithy.OperationError around the cause, so errors.As finds
// *types.ProvisionedThroughputExceededException, *types.InternalServerError, a net.Error, or
// *smithy.CanceledError.
//
//	fc := ddbfault.New(db)
//	fc.Inject(ddbfault.Fault{Kind: ddbfault.LostAnswer, At: 7, Ops: []string{ddbfault.OpUpdateItem}})
//	w, _ := worker.New(worker.Config{Client: fc, Table: "jobs", Workers: 1, Once: true})
//	err := w.Run(ctx, handler)
//	hit, ok := fc.Injected() // which call was hit, if any
//
// [Client.OnSent] observes every request that reached the server with the server's own answer
// (also when the caller was told otherwise): tests use it to count writes that landed.
//
// # Hooks
//
// For what a Fault does not cover, [Client.OnCall] adds a [Hook] around every call of the
// operations it names: one wrapper serves every test, instead of a wrapper type per test. The hook
// gets the [Call] (its number, operation, request and tables) and a [Send] that passes it on; what
// it returns is what the caller gets. It may observe a call (send, then look at the request and
// the answer), delay it (wait before send), fail it before it leaves (return an error without
// send) or after it landed (send, then return an error), or replace it (send another request,
// send it twice, or answer itself). Hooks stand around one another in the order they were added;
// an armed Fault applies inside them, to the first request they send.
//
//	var claims atomic.Int64
//	fc := ddbfault.New(db)
//	fc.OnCall(func(ctx context.Context, c ddbfault.Call, send ddbfault.Send) (any, error) {
//		if in := c.In.(*dynamodb.UpdateItemInput); aws.ToString(in.TableName) == "jobs" {
//			claims.Add(1)
//		}
//		return send(ctx, c.In)
//	}, ddbfault.OpUpdateItem)
package ddbfault
