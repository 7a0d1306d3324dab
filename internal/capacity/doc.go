// Package capacity holds dynapart's callers to a rate of DynamoDB capacity units per second: the
// scanner's reads (scan.Config.ReadRate) and the worker's writes (worker.Config.WriteRate) share
// its token bucket ([Bucket]), its throttle detection ([IsThrottle], [CountThrottles]); the writes
// add an adaptive rate ([AIMD]) that backs off when DynamoDB throttles.
package capacity
