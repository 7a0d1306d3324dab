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
)

// TestStatusPageInBrowser runs two workers on DynamoDB Local (every item whose key ends in 7 is
// dead-lettered), serves `status --serve` during the run, loads the page in headless Chromium and
// checks what it renders against `status --json`: the slot rows, the item counts and the dead
// letters. It also checks the same page on a worker's --metrics-addr, and saves a screenshot
// (in the test's temp dir; DYNAPART_SCREENSHOT_DIR keeps a copy).
func TestStatusPageInBrowser(t *testing.T) {
	chromium := findChromium(t)
	c := clitest.New(t)
	table, leases := startFailingRun(t, c)
	group := table + "/default"
	serve := c.Command("status", "--group", group, "--lease-table", leases, "--table", table, "--serve", "127.0.0.1:0", "--interval", "300ms")
	out, err := serve.StdoutPipe()
	require.NoError(t, err)
	startAndStop(t, serve)
	url := readServeURL(t, out)

	// Poll the JSON during the run (this also gives the chart its samples) until every item is
	// done or failed; the workers keep their slots and rescan.
	var doc status.Document
	deadline := time.Now().Add(3 * time.Minute)
	for {
		doc = getStatus(t, url+"api/status")
		if doc.Items != nil && doc.Items.Done+doc.Items.Failed == 400 && len(doc.Throughput.Samples) >= 3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the run did not finish: %+v", doc.Items)
		time.Sleep(300 * time.Millisecond) // the sampling interval of the chart, not a synchronisation
	}
	require.Equal(t, int64(40), doc.Items.Failed, "keys ending in 7")

	var cli status.Document
	require.NoError(t, json.Unmarshal([]byte(c.MustRun("status", "--group", group, "--lease-table", leases, "--table", table, "--json")), &cli))
	require.Len(t, cli.Slots, 2)
	require.Equal(t, *doc.Items, *cli.Items)
	require.False(t, cli.Paused)

	dir := t.TempDir()
	requirePageShows(t, runChromium(t, chromium, dir, "--dump-dom", url), cli)
	saveScreenshot(t, chromium, dir, url)

	// The same page next to a worker's /metrics, with the worker's own stats: a third worker,
	// started now that both slots are held, stands by.
	port := freePort(t)
	startAndStop(t, c.Command("work", "--table", table, "--lease-table", leases, "--workers", "2", "--owner", "standby",
		"--progress", "none", "--metrics-addr", "127.0.0.1:"+port))
	workerURL := "http://127.0.0.1:" + port + "/"
	waitListening(t, "127.0.0.1:"+port)
	wdoc := getStatus(t, workerURL+"api/status")
	for wdoc.Worker == nil || wdoc.Worker.State != "standby" { // idle until its first look for a slot
		require.True(t, time.Now().Before(deadline), "the third worker does not stand by: %+v", wdoc.Worker)
		time.Sleep(300 * time.Millisecond) // the page is re-read every 5 s
		wdoc = getStatus(t, workerURL+"api/status")
	}
	require.Equal(t, "standby", wdoc.Worker.Owner)
	require.Equal(t, *cli.Items, *wdoc.Items)
	wdom := runChromium(t, chromium, dir, "--dump-dom", workerURL)
	require.Contains(t, wdom, `<tr data-stat="state"><td>state</td><td class="mono">standby</td></tr>`)
	require.Len(t, regexp.MustCompile(`<tr data-slot="\d+">`).FindAllString(wdom, -1), 2)
}

// startFailingRun seeds 400 items and starts two continuous workers for two slots that
// dead-letter every item whose key ends in 7.
func startFailingRun(t *testing.T, c *clitest.CLI) (table, leases string) {
	t.Helper()
	db := ddbtest.Client(t)
	table = ddbtest.TableName(t, "")
	leases = ddbtest.TableName(t, "lease")
	for _, n := range []string{table, leases} {
		ddbtest.DeleteOnCleanup(t, db, n)
	}
	c.MustRun("init", "--table", table, "--key", "id:S", "--lease-table", leases)
	c.MustRun("seed", "--table", table, "--items", "400")
	failing := `sleep 0.02; case "$DYNAPART_KEY" in *7\"*) echo "bad item $DYNAPART_KEY" >&2; exit 65;; esac`
	for i := range 2 {
		p := c.Command("work", "--table", table, "--lease-table", leases, "--workers", "2", "--owner", fmt.Sprintf("w%d", i),
			"--concurrency", "4", "--poll-interval", "1s", "--progress", "none", "--exec", failing)
		startAndStop(t, p)
	}
	return table, leases
}

// requirePageShows checks the page as rendered (dom) against the status document cli: the slot
// rows, the item counts, the dead letters, the progress bars and the chart.
func requirePageShows(t *testing.T, dom string, cli status.Document) {
	t.Helper()
	require.Contains(t, dom, `data-loaded="1"`, "the page's script ran")
	rows := regexp.MustCompile(`<tr data-slot="(\d+)"><td class="slot">\d+</td><td class="owner">([^<]*)</td><td class="token">(\d+)</td>`).FindAllStringSubmatch(dom, -1)
	require.Len(t, rows, 2, "one row per slot")
	for _, r := range rows {
		s, _ := strconv.Atoi(r[1])
		require.Equal(t, cli.Slots[s].Owner, r[2], "slot %d owner", s)
		require.Equal(t, strconv.FormatInt(cli.Slots[s].Token, 10), r[3], "slot %d token", s)
		require.Contains(t, []string{"w0", "w1"}, r[2])
	}
	require.Contains(t, dom, `<span id="items-done">`+strconv.FormatInt(cli.Items.Done, 10)+`</span>`)
	require.Contains(t, dom, `<span id="items-total">400</span>`)
	require.Contains(t, dom, `<span id="items-failed">40</span>`)
	require.Contains(t, dom, `<span class="muted" id="dl-total">40 items</span>`)
	require.Equal(t, 40, strings.Count(dom, `<td class="err">`), "every dead letter listed with its error")
	require.Contains(t, dom, "bad item")
	require.Contains(t, dom, `<div class="value" id="paused">no</div>`)
	// The progress bars use each slot's counts from its checkpoint (status --json's progress).
	require.Len(t, regexp.MustCompile(`<div class="txt">[\d,]+ done · [\d,]+ of ~[\d,]+ scanned`).FindAllString(dom, -1), 2,
		"a progress label per slot: %q", regexp.MustCompile(`<td class="progress">.*?</td>`).FindAllString(dom, -1))
	require.Regexp(t, `<div class="fill" style="width: [1-9][0-9.]*%;">`, dom, "a progress bar drawn from the counts")
	for _, s := range cli.Slots {
		require.NotNil(t, s.Progress, "slot %d progress in status --json", s.Slot)
	}
	require.Contains(t, dom, `<div class="value" id="group-state">running</div>`)
	require.Regexp(t, `<polyline class="line" points="[0-9., ]+"`, dom, "the throughput chart is drawn")
}

// saveScreenshot takes a screenshot of the page in dir (DYNAPART_SCREENSHOT_DIR keeps a copy).
func saveScreenshot(t *testing.T, chromium, dir, url string) {
	t.Helper()
	shot := filepath.Join(dir, "status.png")
	runChromium(t, chromium, dir, "--window-size=1280,1000", "--screenshot="+shot, url)
	info, err := os.Stat(shot)
	require.NoError(t, err)
	require.Greater(t, info.Size(), int64(10_000), "a screenshot with content")
	if keep := os.Getenv("DYNAPART_SCREENSHOT_DIR"); keep != "" {
		b, err := os.ReadFile(shot)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(keep, "status.png"), b, 0o644))
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

// runChromium loads url in headless Chromium with args and returns its stdout.
func runChromium(t *testing.T, chromium, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile, err := os.MkdirTemp(dir, "profile-")
	require.NoError(t, err)
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + profile, "--virtual-time-budget=5000"}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "chromium %v: %s", args, stderr.String())
	return string(out)
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
