package status

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

func TestThroughputAndETA(t *testing.T) {
	t0 := time.UnixMilli(1_750_000_000_000)
	p := &Page{}
	doc := func(done, failed int64) *Document {
		return &Document{Items: &worker.Summary{Total: 1000, Done: done, Failed: failed}}
	}
	d := doc(100, 0)
	p.addSample(d, t0)
	require.Equal(t, 0.0, d.Throughput.Rate)
	require.Nil(t, d.Throughput.ETASeconds, "no rate yet: no ETA")

	d = doc(300, 0)
	p.addSample(d, t0.Add(10*time.Second))
	require.InDelta(t, 20, d.Throughput.Rate, 1e-9)
	require.InDelta(t, 35, *d.Throughput.ETASeconds, 1e-9, "700 left at 20/s")
	require.InDelta(t, 20, d.Throughput.Samples[1].Rate, 1e-9)

	// The rate is measured over the last 30 s only.
	d = doc(500, 0)
	p.addSample(d, t0.Add(40*time.Second))
	require.InDelta(t, 200.0/30, d.Throughput.Rate, 1e-9)
	require.Equal(t, 30.0, d.Throughput.RateWindow)

	d = doc(990, 10)
	p.addSample(d, t0.Add(50*time.Second))
	require.Equal(t, 0.0, *d.Throughput.ETASeconds, "nothing left")
	require.Len(t, d.Throughput.Samples, 4)

	// Without item counts, a worker's own slot counts are the group's done count.
	w := &Document{Slots: []slotDoc{{Progress: &slotProgress{Done: 7}}, {}}}
	p.addSample(w, t0.Add(60*time.Second))
	require.Equal(t, int64(7), *w.Throughput.Done)
	require.Nil(t, w.Throughput.ETASeconds, "no total: no ETA")
}

// TestStatusPageHandlers serves the page for a group on DynamoDB Local and checks the routes and
// that reads are shared within the interval.
func TestStatusPageHandlers(t *testing.T) {
	ctx := context.Background()
	db := ddbtest.Client(t)
	leases := ddbtest.TableName(t, "lease")
	require.NoError(t, lock.CreateTable(ctx, db, leases))
	ddbtest.DeleteOnCleanup(t, db, leases)
	lc, err := lock.New(db, leases, lock.WithOwner("w-test"))
	require.NoError(t, err)
	lease, err := lc.AcquireSlot(ctx, "g1", 2)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lease.Release(context.Background()) })

	now := time.Now()
	p := newPage(&reader{locks: lc, group: "g1", maxDead: 5}, time.Minute)
	p.now = func() time.Time { return now }
	mux := http.NewServeMux()
	p.Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
	resp, body := get("/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	require.Contains(t, body, `src="assets/app.js"`)
	require.NotContains(t, body, "http://", "no CDN")
	require.NotContains(t, body, "https://", "no CDN")
	for _, a := range []string{"/assets/app.js", "/assets/style.css"} {
		resp, body := get(a)
		require.Equal(t, http.StatusOK, resp.StatusCode, a)
		require.NotEmpty(t, body)
	}
	resp, _ = get("/nope")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	resp, body = get("/api/status")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var d Document
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, 2, d.Workers)
	require.Len(t, d.Slots, 2)
	held := d.Slots[lease.Slot()]
	require.Equal(t, "w-test", held.Owner)
	require.Equal(t, "working", held.State)
	require.Equal(t, "free", d.Slots[1-lease.Slot()].State)
	require.False(t, d.Paused)
	require.Nil(t, d.Items, "no ledger: no counts")
	require.True(t, strings.Contains(body, `"progress":null`), "per-slot progress is a field, null when unknown")

	// Within the interval the same document is served (one read for any number of viewers).
	require.NoError(t, lease.Release(ctx))
	_, body2 := get("/api/status")
	require.JSONEq(t, body, body2)
	now = now.Add(time.Minute)
	_, body3 := get("/api/status")
	require.NoError(t, json.Unmarshal([]byte(body3), &d))
	require.Equal(t, "released", d.Slots[lease.Slot()].State)
}
