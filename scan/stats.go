package scan

import "time"

// SegmentStats describes the reading of one segment (index mode: one shard).
type SegmentStats struct {
	Segment   int
	Scanned   int64         // items DynamoDB evaluated (ScannedCount)
	Returned  int64         // items kept for this slot and delivered
	RCU       float64       // read capacity consumed, as DynamoDB reported it
	Throttles int64         // attempts DynamoDB throttled (the SDK retried them)
	Pages     int64         // responses
	Duration  time.Duration // time spent in requests, SDK retries included
	// Filter mode: the items read that carry Config.PartitionAttr, and those that lack it (each
	// goes to partition 0; all of them lacking it is likely a misspelt attribute).
	Partitioned, Unpartitioned int64
}

// Stats sums the segments. Duration is the wall time Run has been reading.
type Stats struct {
	Segments  []SegmentStats
	Scanned   int64
	Returned  int64
	RCU       float64
	Throttles int64
	Pages     int64
	Duration  time.Duration
	// Partitioned, Unpartitioned: as SegmentStats'.
	Partitioned, Unpartitioned int64
}

// Stats returns the reading statistics so far; safe to call while Run runs.
func (s *Scanner) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out Stats
	out.Segments = make([]SegmentStats, len(s.streams))
	for i, st := range s.streams {
		ss := st.stats
		ss.Throttles = st.throttles.Load()
		out.Segments[i] = ss
		out.Scanned += ss.Scanned
		out.Returned += ss.Returned
		out.RCU += ss.RCU
		out.Throttles += ss.Throttles
		out.Pages += ss.Pages
		out.Partitioned += ss.Partitioned
		out.Unpartitioned += ss.Unpartitioned
	}
	switch {
	case !s.finished.IsZero():
		out.Duration = s.finished.Sub(s.started)
	case !s.started.IsZero():
		out.Duration = time.Since(s.started)
	}
	return out
}
