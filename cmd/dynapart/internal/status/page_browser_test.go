package status_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dynapart/dynapart/cmd/dynapart/internal/clitest"
	"github.com/dynapart/dynapart/cmd/dynapart/internal/status"
	"github.com/dynapart/dynapart/internal/ddbtest"
	"github.com/dynapart/dynapart/lock"
	"github.com/dynapart/dynapart/worker"
)

// TestStatusPageInBrowser checks, in headless Chromium, what a person sees on `status --serve`
// at each stage of a job on DynamoDB Local: two workers for three slots (every item whose key ends
// in 7 is dead-lettered), the group paused and resumed, a third worker that finishes the job. The
// page's server is started before the job and looked at for the first time mid-run: it must show
// samples from before that view, an ETA while items remain (the free slot's share counted at the
// group's rate), the overall bar at the fraction done, slot labels that fit, and no console
// error. It also checks the same page on a worker's --metrics-addr, and saves a screenshot (in the
// test's temp dir; DYNAPART_SCREENSHOT_DIR keeps a copy as status-page.png).
func TestStatusPageInBrowser(t *testing.T) {
	chromium := findChromium(t)
	c := clitest.New(t)
	table, leases := seedTables(t, c, 400)
	group := table + "/default"
	served := time.Now()
	serve := c.Command("status", "--group", group, "--lease-table", leases, "--serve", "127.0.0.1:0", "--interval", "300ms", "--ledger-interval", "3s")
	out, err := serve.StdoutPipe()
	require.NoError(t, err)
	startAndStop(t, serve)
	url := readServeURL(t, out)
	for i := range 2 {
		startWorker(t, c, table, leases, fmt.Sprintf("w%d", i))
	}
	lc := leaseReader(t, leases)
	deadline := time.Now().Add(3 * time.Minute)

	// Mid-run, the first view: nobody has looked at the page before.
	waitForSlots(t, lc, group, deadline, func(handled int64) bool { return handled >= 60 })
	dir := t.TempDir()
	viewed := time.Now()
	dom := viewPage(t, chromium, dir, url)
	requireHistoryBefore(t, dom, served, viewed)
	requireBarMatchesCounts(t, dom)
	require.Regexp(t, `<div class="value" id="eta">(\d+h )?(\d+m )?\d+s</div>`, dom, "an ETA while items remain")
	require.Contains(t, dom, "1 free slot counted at that rate")
	require.Contains(t, dom, `<div class="value state-running" id="group-state">running</div>`)
	require.Contains(t, dom, `<div class="card wide" id="stream-card" hidden="">`, "no stream: no stream card")
	saveScreenshot(t, chromium, dir, url)
	doc := getStatus(t, url+"api/status")
	require.Equal(t, doc.Reads.GroupReads, doc.Reads.LeaseRequests, "one Query per sample, none per view: %+v", doc.Reads)
	require.LessOrEqual(t, doc.Reads.LedgerReads, int64(time.Since(served)/(3*time.Second))+1, "one ledger read per --ledger-interval at most")

	// Paused: marked as such, no ETA.
	c.MustRun("pause", "--group", group, "--lease-table", leases)
	waitForDoc(t, url, deadline, func(d status.Document) bool { return d.Paused })
	dom = viewPage(t, chromium, dir, url)
	require.Contains(t, dom, `<div id="paused-banner" class="banner">`, "the banner shows")
	require.Contains(t, dom, `<div class="value state-paused" id="group-state">paused</div>`)
	require.Contains(t, dom, `<div class="value" id="eta">paused</div>`)
	c.MustRun("resume", "--group", group, "--lease-table", leases)

	// A third worker takes the free slot; once the ledger has been read after the end, the page
	// shows the job done: 360 done, 40 failed, the bar full.
	startWorker(t, c, table, leases, "w2")
	waitForSlots(t, lc, group, deadline, func(handled int64) bool { return handled == 400 })
	end := time.Now()
	doc = waitForDoc(t, url, deadline, func(d status.Document) bool {
		return d.Ledger != nil && d.Ledger.ReadAt != nil && d.Ledger.ReadAt.After(end) && d.Items.Done+d.Items.Failed == 400
	})
	require.Positive(t, doc.Ledger.ReadUnits, "the ledger read's cost")
	var cli status.Document
	require.NoError(t, json.Unmarshal([]byte(c.MustRun("status", "--group", group, "--lease-table", leases, "--table", table, "--json")), &cli))
	require.Equal(t, *doc.Items, *cli.Items)
	dom = viewPage(t, chromium, dir, url)
	requireFinalPage(t, dom, cli)

	requireWorkerPage(t, browserRun{c: c, chromium: chromium, dir: dir, table: table, leases: leases, deadline: deadline}, cli)
}

// requireHistoryBefore checks that the page, first viewed at viewed, charts samples taken since
// the server started at served, before that view.
func requireHistoryBefore(t *testing.T, dom string, served, viewed time.Time) {
	t.Helper()
	m := regexp.MustCompile(`<svg id="chart"[^>]* data-samples="(\d+)" data-first-t="(\d+)"`).FindStringSubmatch(dom)
	require.NotNil(t, m, "the chart's samples")
	n, _ := strconv.Atoi(m[1])
	first, _ := strconv.ParseInt(m[2], 10, 64)
	require.Less(t, first, viewed.Add(-2*time.Second).UnixMilli(), "the first sample was taken well before the first view")
	require.GreaterOrEqual(t, first, served.Add(-time.Second).UnixMilli())
	require.Greater(t, n, int(viewed.Sub(served)/(300*time.Millisecond))/3, "samples every 300ms since the start")
	require.Regexp(t, `<polyline class="line" points="[0-9., ]+"`, dom, "the throughput chart is drawn")
	require.NotContains(t, dom, "Waiting for", "no placeholder")
}

// requireBarMatchesCounts checks that the overall bar is as wide as the fraction done the page
// states (done / total), and that every bar's label fits it.
func requireBarMatchesCounts(t *testing.T, dom string) {
	t.Helper()
	done := domNumber(t, dom, `<span id="items-done">([\d,]+)</span>`)
	total := domNumber(t, dom, `<span id="items-total">~?([\d,]+)</span>`)
	require.Positive(t, total)
	require.InDelta(t, float64(done)/float64(total)*100, domWidth(t, dom, "group-bar"), 0.051, "the bar at %d of %d", done, total)
	require.NotContains(t, dom, `data-cut="1"`, "every label fits its box")
	require.Regexp(t, `<div class="txt fits" data-cut="0"( title="")?>[\d,]+ / ~[\d,]+ · [\d.]+%</div>`, dom, "a short label inside each slot's bar")
	require.Contains(t, dom, `paused: <span id="paused">no</span>`)
}

// requireFinalPage checks the page at the end of the job against `status --json --table`.
func requireFinalPage(t *testing.T, dom string, cli status.Document) {
	t.Helper()
	require.Contains(t, dom, `<span id="items-done">360</span>`)
	require.Contains(t, dom, `<span id="items-total">400</span>`)
	require.Equal(t, 90.0, domWidth(t, dom, "group-bar"))
	require.Equal(t, 10.0, domWidth(t, dom, "group-bar-failed"))
	require.Contains(t, dom, `<div class="value" id="eta">done</div>`)
	require.Contains(t, dom, `<span id="items-failed">40</span>`)
	require.Contains(t, dom, `<span class="muted" id="dl-total">40 items</span>`)
	require.Equal(t, 40, strings.Count(dom, `<td class="err">`), "every dead letter listed with its error")
	require.Contains(t, dom, "bad item")
	require.NotContains(t, dom, `data-cut="1"`, "every label fits its box")
	rows := regexp.MustCompile(`<tr data-slot="(\d+)"><td class="slot">\d+</td><td class="owner">([^<]*)</td><td class="token">(\d+)</td>`).FindAllStringSubmatch(dom, -1)
	require.Len(t, rows, 3, "one row per slot")
	for _, r := range rows {
		s, _ := strconv.Atoi(r[1])
		require.Equal(t, cli.Slots[s].Owner, r[2], "slot %d owner", s)
		require.Equal(t, strconv.FormatInt(cli.Slots[s].Token, 10), r[3], "slot %d token", s)
	}
	require.Regexp(t, `Ledger \(inline, [^)]+\) read [^<]* read units`, dom, "the ledger's age and cost")
}

// browserRun is what the checks of a run share.
type browserRun struct {
	c                            *clitest.CLI
	chromium, dir, table, leases string
	deadline                     time.Time
}

// requireWorkerPage checks the same page next to a worker's /metrics, with the worker's own
// stats: a fourth worker, started now that every slot is held, stands by.
func requireWorkerPage(t *testing.T, r browserRun, cli status.Document) {
	t.Helper()
	port := freePort(t)
	startAndStop(t, r.c.Command("work", "--table", r.table, "--lease-table", r.leases, "--owner", "standby",
		"--progress", "none", "--metrics-addr", "127.0.0.1:"+port))
	workerURL := "http://127.0.0.1:" + port + "/"
	waitListening(t, "127.0.0.1:"+port)
	wdoc := waitForDoc(t, workerURL, r.deadline, func(d status.Document) bool {
		return d.Worker != nil && d.Worker.State == "standby" && d.Items != nil
	})
	require.Equal(t, "standby", wdoc.Worker.Owner)
	require.Equal(t, *cli.Items, *wdoc.Items)
	wdom := viewPage(t, r.chromium, r.dir, workerURL)
	require.Contains(t, wdom, `<tr data-stat="state"><td>state</td><td class="mono">standby</td></tr>`)
	require.Len(t, regexp.MustCompile(`<tr data-slot="\d+">`).FindAllString(wdom, -1), 3)
}

// seedTables makes the tables and seeds items.
func seedTables(t *testing.T, c *clitest.CLI, items int) (table, leases string) {
	t.Helper()
	db := ddbtest.Client(t)
	table = ddbtest.TableName(t, "")
	leases = ddbtest.TableName(t, "lease")
	for _, n := range []string{table, leases} {
		ddbtest.DeleteOnCleanup(t, db, n)
	}
	c.MustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases)
	c.MustRun("seed", "--table", table, "--items", strconv.Itoa(items))
	return table, leases
}

// startWorker starts a continuous worker of a three-slot group that handles about 10 items a
// second and dead-letters every item whose key ends in 7 at its first failure.
func startWorker(t *testing.T, c *clitest.CLI, table, leases, owner string) {
	failing := `sleep 0.2; case "$DYNAPART_KEY" in *7\"*) echo "bad item $DYNAPART_KEY" >&2; exit 65;; esac`
	startAndStop(t, c.Command("work", "--table", table, "--lease-table", leases, "--workers", "3", "--owner", owner,
		"--concurrency", "2", "--max-attempts", "1", "--poll-interval", "1s", "--progress", "none", "--exec", failing))
}

// leaseReader reads the lease table as the test's own client (not through the page).
func leaseReader(t *testing.T, leases string) *lock.Client {
	lc, err := lock.New(ddbtest.Client(t), leases)
	require.NoError(t, err)
	return lc
}

// waitForSlots waits until the slots' checkpoints count handled (done + failed) items that ok
// accepts, reading the lease table directly: the page is not looked at.
func waitForSlots(t *testing.T, lc *lock.Client, group string, deadline time.Time, ok func(handled int64) bool) {
	t.Helper()
	for {
		st, err := lc.GroupStatus(context.Background(), group)
		require.NoError(t, err)
		var handled int64
		for _, s := range st.Slots {
			if p, err := worker.ParseSlotProgress(s.Checkpoint); err == nil {
				handled += p.Done + p.Failed
			}
		}
		if ok(handled) {
			return
		}
		require.True(t, time.Now().Before(deadline), "the slots count %d items", handled)
		time.Sleep(200 * time.Millisecond) // polling other processes' checkpoints: no signal to wait on
	}
}

// waitForDoc polls url's /api/status until ok accepts the document.
func waitForDoc(t *testing.T, url string, deadline time.Time, ok func(status.Document) bool) status.Document {
	t.Helper()
	for {
		d := getStatus(t, url+"api/status")
		if ok(d) {
			return d
		}
		require.True(t, time.Now().Before(deadline), "the page never showed it: %+v", d.Throughput)
		time.Sleep(200 * time.Millisecond) // polling another process's page: no signal to wait on
	}
}

// domWidth is the width of the element with id, in percent, as the page set it.
func domWidth(t *testing.T, dom, id string) float64 {
	t.Helper()
	m := regexp.MustCompile(`<div id="` + id + `" class="[^"]*" style="width: ([\d.]+)%;">`).FindStringSubmatch(dom)
	require.NotNil(t, m, "the width of #%s", id)
	w, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return w
}

func domNumber(t *testing.T, dom, pattern string) int64 {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(dom)
	require.NotNil(t, m, pattern)
	n, err := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
	require.NoError(t, err)
	return n
}

// viewPage loads url in Chromium and returns the page as rendered, failing on any console
// message (the page logs nothing: a message is an error or a failed load).
func viewPage(t *testing.T, chromium, dir, url string) string {
	t.Helper()
	dom, console := runChromium(t, chromium, dir, "--window-size=1280,1000", "--dump-dom", url)
	require.Empty(t, console, "console messages")
	require.Contains(t, dom, `data-loaded="1"`, "the page's script ran")
	return dom
}

// saveScreenshot takes a screenshot of the page in dir (DYNAPART_SCREENSHOT_DIR keeps a copy).
func saveScreenshot(t *testing.T, chromium, dir, url string) {
	t.Helper()
	shot := filepath.Join(dir, "status-page.png")
	_, console := runChromium(t, chromium, dir, "--window-size=1280,1040", "--hide-scrollbars", "--screenshot="+shot, url)
	require.Empty(t, console, "console messages")
	info, err := os.Stat(shot)
	require.NoError(t, err)
	require.Greater(t, info.Size(), int64(10_000), "a screenshot with content")
	if keep := os.Getenv("DYNAPART_SCREENSHOT_DIR"); keep != "" {
		b, err := os.ReadFile(shot)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(keep, "status-page.png"), b, 0o644))
	}
}

// findChromium returns the browser, or skips (fails with CI=true) when there is none.
func findChromium(t *testing.T) string {
	for _, name := range []string{os.Getenv("DYNAPART_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if ddbtest.InCI() {
		t.Fatal("no chromium found (install it with `make browser-deps`, or set DYNAPART_CHROMIUM)")
	}
	t.Skip("no chromium found: `make browser-deps` installs it")
	return ""
}

// runChromium loads url in headless Chromium with args and returns its stdout and the console
// messages it logged (Chromium logs them to stderr with --enable-logging=stderr).
func runChromium(t *testing.T, chromium, dir string, args ...string) (stdout string, console []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile, err := os.MkdirTemp(dir, "profile-")
	require.NoError(t, err)
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--enable-logging=stderr", "--v=0", "--user-data-dir=" + profile, "--virtual-time-budget=5000"}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "chromium %v: %s", args, stderr.String())
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") {
			console = append(console, line)
		}
	}
	return string(out), console
}

// startAndStop starts p and, at cleanup, stops it with SIGTERM and waits for it.
func startAndStop(t *testing.T, p *exec.Cmd) {
	t.Helper()
	var stderr strings.Builder
	if p.Stderr == nil {
		p.Stderr = &stderr
	}
	require.NoError(t, p.Start())
	t.Cleanup(func() {
		_ = p.Process.Signal(syscall.SIGTERM)
		_ = p.Wait()
		if t.Failed() {
			t.Logf("%v stderr:\n%s", p.Args[1:3], stderr.String())
		}
	})
}

// waitListening waits until addr accepts connections.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		require.True(t, time.Now().Before(deadline), "%s does not listen: %v", addr, err)
		time.Sleep(50 * time.Millisecond) // polling a port: there is no signal to wait on
	}
}

// freePort is a TCP port free a moment ago on 127.0.0.1.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func readServeURL(t *testing.T, r io.Reader) string {
	t.Helper()
	line, err := bufio.NewReader(r).ReadString('\n')
	require.NoError(t, err)
	m := regexp.MustCompile(`http://\S+/`).FindString(line)
	require.NotEmpty(t, m, "serve printed %q", line)
	go func() { _, _ = io.Copy(io.Discard, r) }()
	return m
}

func getStatus(t *testing.T, url string) status.Document {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var d status.Document
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
	return d
}
