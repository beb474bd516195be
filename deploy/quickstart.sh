#!/usr/bin/env bash
# quickstart.sh - the README's "run it" command: one machine, everything
# private to build/quickstart/.
#
#   1. installs the dependencies (deploy/install-deps.sh) and builds
#      sluice-worker, sluice-gateway, sluicectl and sluice-model in build/;
#   2. generates a self-signed certificate and a pepper file (mode 0600);
#      the model is the shipped models/stories260K/stories260K.gguf (a real
#      trained 260K-parameter model that writes short stories; MIT) unless
#      SLUICE_MODEL=path.gguf names another;
#   3. starts a private redis-server on a Unix socket, one sluice-worker and
#      sluice-gateway (https://127.0.0.1:${SLUICE_PORT:-8443}), waits for
#      /readyz;
#   4. creates a tenant "demo", a client "demo/cli" and a key with sluicectl,
#      checks that /api/generate answers with a story, and prints working
#      curl commands for /api/generate and /v1/chat/completions.
# The worker and the gateway are supervised: one that exits is started
# again after 1 s (tests/integration/test_quickstart.sh kills the worker).
# Ctrl-C stops everything it started (and only that).
#
# Environment: SLUICE_MODEL (GGUF file), SLUICE_PORT (8443), SLUICE_ADMIN_PORT
# (9464), SLUICE_JOBS (default nproc), SLUICE_CUDA (AUTO, ON, OFF),
# SLUICE_SKIP_DEPS=1 (no apt step), SLUICE_SKIP_BUILD=1 (use the build as is),
# SLUICE_BUILD_DIR (where the binaries are, default build),
# SLUICE_QUICKSTART_DIR (state directory, default build/quickstart),
# SLUICE_QUICKSTART_EXIT_AFTER_CHECK=1 (stop after the check: tests).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
jobs=${SLUICE_JOBS:-$(nproc)}
port=${SLUICE_PORT:-8443}
admin_port=${SLUICE_ADMIN_PORT:-9464}
dir=${SLUICE_QUICKSTART_DIR:-$root/build/quickstart}
pids=()

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[$i]}" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# supervise NAME OUT LOG CMD...: runs CMD (stdout to OUT, stderr appended
# to LOG) and starts it again 1 s after it exits, as systemd's
# Restart=always does: a crashed worker or gateway comes back and the
# others keep serving.  TERM stops the supervisor and its child.
supervise() {
	local name=$1 out=$2 log=$3
	shift 3
	(
		child=
		trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; exit 0' TERM INT
		while :; do
			"$@" >>"$out" 2>>"$log" &
			child=$!
			rc=0
			wait "$child" || rc=$?
			echo "quickstart: $name exited (status $rc); starting it again in 1 s" | tee -a "$log" >&2
			sleep 1
		done
	) &
	pids+=($!)
}

if [ "${SLUICE_SKIP_DEPS:-0}" != 1 ]; then
	deploy/install-deps.sh
fi

if [ "${SLUICE_SKIP_BUILD:-0}" != 1 ]; then
	echo "==> building sluice-worker, sluice-gateway, sluicectl in build/"
	mkdir -p build
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DSLUICE_CUDA="${SLUICE_CUDA:-AUTO}" -DSLUICE_SANITIZE=OFF \
		-DSLUICE_FUZZ=OFF >build/quickstart-configure.log 2>&1 || {
		cat build/quickstart-configure.log
		exit 1
	}
	grep 'sluice: CUDA backend' build/quickstart-configure.log || true
	cmake --build build -j"$jobs" --target sluice-worker sluice-gateway sluicectl sluice-model
fi
build=${SLUICE_BUILD_DIR:-$root/build}
worker_bin=$build/worker/sluice-worker
gateway_bin=$build/gateway/sluice-gateway
ctl_bin=$build/tools/sluicectl

for tool in openssl redis-server curl; do
	command -v "$tool" >/dev/null || { echo "quickstart: $tool is required" >&2; exit 1; }
done

rm -rf "$dir"
mkdir -p "$dir"
chmod 700 "$dir"

echo "==> certificate, pepper, model in $dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
	-subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
	-keyout "$dir/tls.key" -out "$dir/tls.crt" >/dev/null 2>&1
chmod 600 "$dir/tls.key"
(umask 077 && head -c 48 /dev/urandom | base64 >"$dir/pepper")
model=${SLUICE_MODEL:-$root/models/stories260K/stories260K.gguf}
[ -f "$model" ] || { echo "quickstart: SLUICE_MODEL: expected a GGUF file, found no file at '$model'" >&2; exit 1; }
model_name=$(basename "$model" .gguf)

echo "==> redis-server on $dir/redis.sock"
redis-server --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 \
	--save '' --appendonly no --dir "$dir" --logfile "$dir/redis.log" &
pids+=($!)

cat >"$dir/worker.json" <<JSON
{"worker": {"name": "worker-0", "model": "$model", "model_name": "$model_name",
            "socket": "$dir/worker.sock", "kv_cache_bytes": "64MiB"}}
JSON
echo "==> sluice-worker ($model_name)"
: >"$dir/worker.log"
supervise sluice-worker /dev/null "$dir/worker.log" "$worker_bin" serve --config "$dir/worker.json"

cat >"$dir/gateway.json" <<JSON
{"gateway": {"listen_addr": "127.0.0.1", "port": $port,
             "tls_cert_file": "$dir/tls.crt", "tls_key_file": "$dir/tls.key",
             "admin_addr": "127.0.0.1", "admin_port": $admin_port,
             "pepper_file": "$dir/pepper",
             "workers": [{"name": "worker-0", "socket": "$dir/worker.sock"}],
             "ping_interval_ms": 2000,
             "redis": {"url": "unix://$dir/redis.sock"}}}
JSON
echo "==> sluice-gateway on https://127.0.0.1:$port (admin http://127.0.0.1:$admin_port/metrics)"
: >"$dir/gateway.out"
: >"$dir/gateway.log"
supervise sluice-gateway "$dir/gateway.out" "$dir/gateway.log" "$gateway_bin" --config "$dir/gateway.json"

ctl() { "$ctl_bin" --redis "unix://$dir/redis.sock" --pepper-file "$dir/pepper" "$@"; }

deadline=$((SECONDS + 120))
until curl -sf --cacert "$dir/tls.crt" "https://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
	if ((SECONDS > deadline)); then
		echo "quickstart: the gateway did not become ready; logs in $dir" >&2
		tail -n 5 "$dir/worker.log" "$dir/gateway.log" >&2 || true
		exit 1
	fi
	for pid in "${pids[@]}"; do
		kill -0 "$pid" 2>/dev/null || { echo "quickstart: a process exited; logs in $dir" >&2; exit 1; }
	done
	sleep 0.2
done

echo "==> tenant demo, client demo/cli, a key"
ctl tenant create demo >/dev/null
ctl client create demo/cli >/dev/null
key=$(ctl key issue demo/cli | sed -n 's/^key: *//p')
[ -n "$key" ] || { echo "quickstart: key issue failed" >&2; exit 1; }
(umask 077 && printf '%s\n' "$key" >"$dir/api-key")

out=$(curl -sS --cacert "$dir/tls.crt" "https://127.0.0.1:$port/api/generate" \
	-H "Authorization: Bearer $key" \
	-d "{\"model\": \"$model_name\", \"prompt\": \"Once upon a time\", \"stream\": false, \"options\": {\"temperature\": 0, \"num_predict\": 48}}")
if ! printf '%s' "$out" | grep -q '"response"'; then
	echo "quickstart: /api/generate did not answer as expected: $out" >&2
	exit 1
fi
echo "==> check: /api/generate answered: $out"

cat <<MSG

Sluice is running (logs and state in $dir).  Your API key (shown once, also
saved in $dir/api-key):

  $key

Ollama API:
  curl --cacert $dir/tls.crt https://127.0.0.1:$port/api/generate \\
    -H "Authorization: Bearer $key" \\
    -d '{"model": "$model_name", "prompt": "Once upon a time", "stream": false}'

OpenAI API:
  curl --cacert $dir/tls.crt https://127.0.0.1:$port/v1/chat/completions \\
    -H "Authorization: Bearer $key" \\
    -d '{"model": "$model_name", "messages": [{"role": "user", "content": "Once upon a time"}]}'

Metrics: curl http://127.0.0.1:$admin_port/metrics
A worker or gateway that exits is started again (as under systemd).
Ctrl-C stops Redis, the worker and the gateway.
MSG

if [ "${SLUICE_QUICKSTART_EXIT_AFTER_CHECK:-0}" = 1 ]; then
	exit 0
fi
wait -n "${pids[@]}" || true
echo "quickstart: a process exited; logs in $dir" >&2
exit 1
