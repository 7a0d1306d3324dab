// Package chaos proves dynapart's guarantees under the failures production brings, against
// DynamoDB Local: worker processes killed with SIGKILL and frozen with SIGSTOP, a worker cut off
// DynamoDB past its lease and reconnected (partition.go), two groups on one table at once
// (twogroups.go), a fleet scaled up and down with `dynapart scale` mid-job with a SIGKILL while
// it re-plans, in every mode (resize.go), `work --follow` workers back-filling and following a
// table's stream while it changes, with a SIGKILL of the shard reader and a SIGSTOP (follow.go,
// checked per version: every latest version handled, none after a newer one, none twice but for
// runs a fault cut off), a fault-injecting proxy (throttling, HTTP 500, connection resets, responses lost or delayed past the client's
// timeout), DynamoDB Local stopped and restarted with -dbPath, and clock skew between workers.
//
// Every scenario takes a seed (printed, so a failure can be replayed) and returns counts: items
// total, done, completed twice (must be 0), missing (must be 0; with failing handlers, flaky.go,
// an item whose handler always fails must end dead-lettered and no other item may), side-effect duplicates (allowed
// only for items in flight at a kill, freeze or fault, and bounded), takeovers and wall time. The
// invariant checks read the ledger, the workers' completion records and the lease history, every
// write to the slot items read from the lease table's DynamoDB stream: no two holders of a slot at once, tokens strictly increasing, every done
// item completed by the holder of its last claim.
//
// The short version runs in `make test` (chaos_test.go); the long one is `make chaos`
// (./run), which writes RELIABILITY.md. badinput_test.go is the bad-input catalogue,
// iam_test.go checks the code calls only what examples/iam/policy.json grants, logs_test.go that
// no credentials or item contents reach info-level logs.
package chaos
