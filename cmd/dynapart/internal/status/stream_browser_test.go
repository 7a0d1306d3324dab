package status_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/status"
	"github.com/dynapart/dynapart/lock"
)

// TestStreamCardInBrowser checks, in headless Chromium, the page of a group that follows its
// table's stream: records wait after the shard's position and another reader holds the shard.
// The Stream card shows the lag, the shards table the shard's owner, position and finished flag,
// the slot says it follows the stream, and the stream is read no more often than every 5 s
// however often the page samples. Then a worker that follows the stream with --metrics-addr
// serves the same page with its own stream counters, and /metrics the follow metrics: none while
// the other reader holds the shard, the records and the shard once it is let go.
func TestStreamCardInBrowser(t *testing.T) {
	chromium := findChromium(t)
	f := newFollowedGroup(t)
	written := f.laterRecords(t)
	m := f.holdShard(t, "reader-x")
	served := time.Now()
	serve := f.c.Command("status", "--group", f.group, "--lease-table", f.leases, "--serve", "127.0.0.1:0",
		"--interval", "300ms", "--ledger-interval", "0")
	out, err := serve.StdoutPipe()
	require.NoError(t, err)
	startAndStop(t, serve)
	url := readServeURL(t, out)
	deadline := time.Now().Add(2 * time.Minute)

	doc := waitForDoc(t, url, deadline, func(d status.Document) bool { return d.Reads != nil && d.Reads.GroupReads >= 10 })
	require.NotNil(t, doc.Stream)
	require.Equal(t, f.arn, doc.Stream.ARN)
	require.Len(t, doc.Stream.Shards, 1)
	s := doc.Stream.Shards[0]
	require.Equal(t, "reader-x", s.Owner)
	require.Equal(t, f.position, s.Position)
	require.Positive(t, *doc.Stream.LagSeconds)
	require.LessOrEqual(t, *doc.Stream.LagSeconds, time.Since(written).Seconds()+60)
	reads := int64(time.Since(served)/(5*time.Second)) + 1
	require.Positive(t, doc.Reads.StreamRequests)
	require.LessOrEqual(t, doc.Reads.StreamRequests, 3*reads, "one read of the stream (3 requests for one shard) per 5 s, not per sample: %+v", doc.Reads)

	dom := viewPage(t, chromium, t.TempDir(), url)
	require.Contains(t, dom, `<div class="card wide" id="stream-card">`, "the card shows")
	require.Regexp(t, `<div class="value" id="stream-lag">lag (&lt;1s|(\d+m )?\d+s)</div>`, dom)
	require.Contains(t, dom, `1 shard: 1 read, 0 free, 0 finished · read at `)
	require.Contains(t, dom, `<section id="stream-section">`)
	row := regexp.MustCompile(`<tr data-shard="` + regexp.QuoteMeta(f.shard) + `">.*?</tr>`).FindString(dom)
	require.NotEmpty(t, row, "the shard's row")
	require.Contains(t, row, `<td class="owner">reader-x</td><td class="finished">no</td>`)
	require.Regexp(t, `<td class="position fits" data-cut="0"( title="")?>`+f.position+`</td><td class="lag behind">`, row)
	require.Contains(t, dom, "following the stream · ")
	require.NotContains(t, dom, `data-cut="1"`, "every label fits its box")

	requireFollowingWorkerPage(t, f, m, chromium, deadline)
}

// requireFollowingWorkerPage starts a worker that follows the stream with --metrics-addr while
// the shard is held by reader-x (m), then lets the shard go.
func requireFollowingWorkerPage(t *testing.T, f *followedGroup, m *lock.Mutex, chromium string, deadline time.Time) {
	t.Helper()
	port := freePort(t)
	startAndStop(t, f.c.Command("work", "--table", f.table, "--lease-table", f.leases, "--workers", "1", "--follow", "--owner", "w-follow",
		"--stream-poll", "100ms", "--progress", "none", "--exec", "cat >/dev/null", "--metrics-addr", "127.0.0.1:"+port))
	base := "http://127.0.0.1:" + port + "/"
	waitListening(t, "127.0.0.1:"+port)
	wdoc := waitForDoc(t, base, deadline, func(d status.Document) bool { return d.Worker != nil && d.Worker.Follow != nil })
	require.NotNil(t, wdoc.Stream, "the worker's page reads the stream too")
	require.Equal(t, "reader-x", wdoc.Stream.Shards[0].Owner)
	metrics := metricsText(t, base)
	require.Contains(t, metrics, "\ndynapart_follow_shards 0\n", "the shard is reader-x's")

	require.NoError(t, m.Unlock(context.Background()))
	for !strings.Contains(metricsText(t, base), "\ndynapart_follow_shards 1\n") {
		require.True(t, time.Now().Before(deadline), "the worker never took the shard: %s", metricsText(t, base))
		time.Sleep(200 * time.Millisecond) // polling another process's metrics: no signal to wait on
	}
	waitForDoc(t, base, deadline, func(d status.Document) bool { return d.Worker.Follow.Records >= 2 })
	require.Regexp(t, `\ndynapart_follow_records_total [1-9]\d*\n`, metricsText(t, base))
	wdom := viewPage(t, chromium, t.TempDir(), base)
	require.Regexp(t, `<tr data-stat="stream records"><td>stream records</td><td class="mono">[1-9]\d*</td></tr>`, wdom)
	require.Contains(t, wdom, `<tr data-stat="shards read"><td>shards read</td><td class="mono">1</td></tr>`)
}

// metricsText is the worker's /metrics.
func metricsText(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
