package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dynapart/dynapart/internal/chaos"
)

// modelRun is one line of the model-based test's report (ledger.ModelReportEnv).
type modelRun struct {
	Backend   string `json:"backend"`
	Ledger    string `json:"ledger"`
	Sequences int64  `json:"sequences"`
	Steps     int64  `json:"steps"`
	Failed    bool   `json:"failed"`
	Seed      string `json:"seed"`
	Checks    string `json:"checks"`
	AvgSteps  string `json:"avg_steps"`
}

// runModel runs the ledger's model-based test long (checks sequences of about steps operations
// per ledger and backend, from seed) and the hole check, and writes their section; it returns the
// number of failures.
func runModel(md *bytes.Buffer, endpoint, dir string, seed uint64, checks, steps int) int {
	report := filepath.Join(dir, "model.jsonl")
	// DynamoDB Local takes the full run; moto, an order of magnitude slower, an eighth of it.
	out, err := modelTest(modelTestRun{endpoint: endpoint, report: report, backend: "dynamodb-local",
		tests: "^(TestLedgerModel|TestLedgerModelFindsHoles)$", checks: checks, steps: steps, seed: seed})
	mout, merr := modelTest(modelTestRun{endpoint: endpoint, report: report, backend: "moto",
		tests: "^TestLedgerModel$", checks: max(checks/8, 1), steps: steps, seed: seed})
	out = append(out, mout...)
	failed := 0
	if err = errors.Join(err, merr); err != nil {
		failed++
	}
	fmt.Fprintf(md, "## The item state machine against its model\n\n"+
		"`ledger`'s model-based test (`TestLedgerModel`, pgregory.net/rapid): random sequences of ledger operations "+
		"(claims single and batched, fresh and general; completions single and batched; retries, dead letters, releases, "+
		"abandons; complete-only writes and failures; redrives; another client's resets, rewrites, deletes and recreates) "+
		"by four workers of two groups with stale lease tokens and clocks skewed within the ledger's MaxClockSkew, with lost "+
		"answers (ddbfault: lost, lost and resent, lost and resent without the old image, delayed past the timeout, not sent, "+
		"throttled), on three "+
		"items per sequence; after every step each outcome and each item's stored state is compared with the plain-Go "+
		"model, callers must have been told of each completion once, and no claim may be taken over by expiry before its "+
		"holder's deadline. A violation fails the run and prints the shrunk sequence. moto runs an eighth of the sequences. Replay: "+
		"`go test -run TestLedgerModel ./ledger/ -rapid.checks=%d -rapid.steps=%d -rapid.seed=SEED`.\n\n", checks, steps)
	md.WriteString("| backend | ledger | sequences (incl. shrinking) | steps checked | violations | seed |\n|---|---|---|---|---|---|\n")
	for _, r := range readModelRuns(report) {
		v := "0"
		if r.Failed {
			v = "**1 (see the log)**"
		}
		fmt.Fprintf(md, "| %s | %s | %d | %d | %s | %s |\n", r.Backend, r.Ledger, r.Sequences, r.Steps, v, r.Seed)
	}
	md.WriteString("\n`TestLedgerModelFindsHoles` puts holes of issue 31 back into the machine one at a time; the test must find each:\n\n```\n")
	for _, l := range strings.Split(string(out), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "--- ") && strings.Contains(t, "FindsHoles/") || strings.HasPrefix(t, "modelholes_test.go") {
			md.WriteString(t + "\n")
		}
	}
	md.WriteString("```\n\n")
	if err != nil {
		fmt.Fprintf(md, "The run failed: %s\n\n", lastLine(string(out)))
	}
	return failed
}

// modelTestRun is one go test run of the model-based test.
type modelTestRun struct {
	endpoint, report, backend, tests string
	checks, steps                    int
	seed                             uint64
}

func modelTest(r modelTestRun) ([]byte, error) {
	root, _ := chaos.ModuleRoot()
	cmd := exec.Command("go", "test", "-count=1", "-v", "-timeout", "90m", "-run", r.tests, "./ledger/",
		fmt.Sprintf("-rapid.checks=%d", r.checks), fmt.Sprintf("-rapid.steps=%d", r.steps), fmt.Sprintf("-rapid.seed=%d", r.seed), "-rapid.nofailfile")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "DYNAPART_TEST_ENDPOINT="+r.endpoint, "DYNAPART_MODEL_REPORT="+r.report, "DYNAPART_TEST_BACKENDS="+r.backend)
	return cmd.CombinedOutput()
}

func readModelRuns(path string) []modelRun {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var runs []modelRun
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r modelRun
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			runs = append(runs, r)
		}
	}
	return runs
}
