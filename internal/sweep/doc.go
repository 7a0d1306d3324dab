// Package sweep is the deterministic fault sweep: for a small once-run of the worker (a dozen
// items, one or two workers, short timings) it counts the DynamoDB calls of a fault-free run, K,
// then runs again once for every k in 1..K and every fault kind of ddbfault, with that one fault
// at the k-th call, and checks after each run:
//
//   - a once-run that returned nil left every item done or failed;
//   - no item was completed (or dead-lettered) twice: every write that landed is recorded
//     (ddbfault's OnSent), also those whose answer the worker never saw;
//   - an item is dead-lettered only when its handler failed permanently;
//   - a handler's side effect (a successful handler call) repeats only for items in flight at
//     the fault (named by the faulted call, or handled and not yet completed at that moment);
//   - the lease history: each slot's token only grows, and no token has two owners.
//
// A run is named by its Case: combination (ledger, claim mode, scan mode, handler outcome,
// workers), fault kind and k, e.g. "inline.single.segment.succeed.w1/lost-answer-retried/k17".
// Replay one with `go test -run 'TestSweep/<name>' ./internal/sweep/` or
// `go run ./internal/sweep/run -case <name>`.
//
// TestSweep runs a small, seeded sample (make test). make chaos runs every combination with its
// baseline and a seeded sample of faulted runs per combination (Plan.PerCombo, see Sampled: the
// kinds in rotation, k spread over the run), about 10 minutes on 2 cores; the runner
// (./run -stride N) runs the exhaustive sweep, every kind at every stride-th k.
package sweep
