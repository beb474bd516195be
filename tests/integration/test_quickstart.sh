#!/usr/bin/env bash
# test_quickstart.sh SRC BUILD - the README's first command as a user runs
# it (deps and build skipped): it ends with a curl that returns an English
# story from the shipped model and prints the curl commands for both APIs;
# it supervises its children (issue 13, finding 17: when its worker died it
# stopped Redis and the gateway too): its worker is killed with SIGKILL and
# the gateway serves again once the supervisor has started a new worker;
# Ctrl-C (TERM) then stops everything it started.  Every wait polls with a
# deadline.
set -u
src=$1 bd=$2
for t in curl redis-server openssl pgrep; do
	command -v $t >/dev/null || { echo "SKIP: $t is not installed"; exit 77; }
done
tmp=$(mktemp -d /tmp/sluice-qs-XXXXXX)
qs_pid=
cleanup() {
	[ -n "$qs_pid" ] && kill -TERM "$qs_pid" 2>/dev/null && wait "$qs_pid" 2>/dev/null
	pkill -KILL -f "$tmp/qs/" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL $*"; tail -n 20 "$tmp/out" "$tmp/qs/worker.log" "$tmp/qs/gateway.log" 2>/dev/null; exit 1; }
ok() { echo "ok   $*"; }
# wait_for SECONDS CMD...: polls CMD every 0.2 s until it succeeds or time is up
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		((SECONDS > end)) && return 1
		sleep 0.2 # poll interval, bounded by the deadline
	done
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
SLUICE_SKIP_DEPS=1 SLUICE_SKIP_BUILD=1 SLUICE_BUILD_DIR="$bd" SLUICE_QUICKSTART_DIR="$tmp/qs" \
	SLUICE_PORT=$port SLUICE_ADMIN_PORT=$(free_port) "$src/deploy/quickstart.sh" >"$tmp/out" 2>&1 &
qs_pid=$!
checked() { grep -qs '^==> check: /api/generate answered' "$tmp/out"; }
wait_for 150 checked || fail "the quickstart did not reach its check"
ok "quickstart checked /api/generate"
grep -q '^==> check: /api/generate answered: {.*"response":"' "$tmp/out" || fail "no response in the check"
# the shipped model: English, not random bytes
grep -q 'there was a little girl named Lily' "$tmp/out" || fail "the check is not the shipped story"
ok "the check is the shipped model's story"
printed() { grep -qs '/v1/chat/completions' "$tmp/out"; }
wait_for 10 printed || fail "no OpenAI curl printed"
ok "curl commands printed for both APIs"
key=$(cat "$tmp/qs/api-key")
model=$(sed -n 's/.*"model_name": "\([^"]*\)".*/\1/p' "$tmp/qs/worker.json")
[ -n "$model" ] || fail "no model name in worker.json"
generate() {
	curl -sf --cacert "$tmp/qs/tls.crt" "https://127.0.0.1:$port/api/generate" \
		-H "Authorization: Bearer $key" \
		-d "{\"model\": \"$model\", \"prompt\": \"Once upon a time\", \"stream\": false,
		     \"options\": {\"temperature\": 0, \"num_predict\": 24}}" 2>/dev/null |
		grep -q '"response":"'
}
generate || fail "generate before the kill"
old=$(pgrep -f "serve --config $tmp/qs/worker.json")
[ -n "$old" ] || fail "no worker process found"
kill -KILL $old
ok "worker $old killed"
restarted() {
	local now
	now=$(pgrep -f "serve --config $tmp/qs/worker.json") || return 1
	[ -n "$now" ] && [ "$now" != "$old" ]
}
wait_for 30 restarted || fail "the worker was not started again"
grep -q "sluice-worker exited (status 137); starting it again" "$tmp/out" ||
	fail "the supervisor did not say why it restarted the worker"
ok "worker started again as $(pgrep -f "serve --config $tmp/qs/worker.json")"
wait_for 60 generate || fail "the gateway did not serve again after the restart"
ok "the gateway serves again"
kill -0 "$qs_pid" 2>/dev/null || fail "the quickstart stopped"
kill -TERM "$qs_pid"
wait "$qs_pid" 2>/dev/null
qs_pid=
gone() { ! pgrep -f "$tmp/qs/" >/dev/null; }
wait_for 30 gone || fail "processes left after Ctrl-C: $(pgrep -af "$tmp/qs/")"
ok "TERM stopped Redis, the worker, the gateway and the supervisors"
