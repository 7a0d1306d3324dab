// Package progress is the wire format of `dynapart work --progress json`: one Line per line on
// stdout. The CLI writes it; the demo, the chaos suite and the benchmarks read it from the worker
// processes they start, so the format is declared once, here.
package progress

// Line is one progress event of a worker process.
type Line struct {
	Event     string  `json:"event"` // "progress", "lease-acquired", "lease-lost", "first-after-takeover", "exit", ...
	Time      int64   `json:"t_ms"`  // when, Unix ms
	Owner     string  `json:"owner"`
	Slot      int     `json:"slot"` // -1 while standing by
	Token     int64   `json:"token"`
	State     string  `json:"state"`  // "standby", "working", "finished", ...
	Paused    bool    `json:"paused"` // the group is paused (dynapart pause): no claims, slot kept
	Completed int64   `json:"completed"`
	Scanned   int64   `json:"scanned"`
	Retried   int64   `json:"retried"`
	Failed    int64   `json:"dead_lettered"`
	Takeovers int64   `json:"takeovers"`
	RCU       float64 `json:"rcu"`
	WCU       float64 `json:"wcu"`
	// WriteThrottles counts the ledger writes DynamoDB throttled; WriteRateAllowed is the WCU/s
	// --write-rate allows now (less than asked for a while after throttling; 0: unlimited).
	WriteThrottles   int64   `json:"write_throttles"`
	WriteRateAllowed float64 `json:"write_rate_allowed,omitempty"`
	FirstDone        int64   `json:"first_done_ms,omitempty"` // first completion after a takeover, Unix ms
}
