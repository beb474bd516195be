#!/usr/bin/env bash
# embed.sh MODEL.gguf [LLAMA_SERVER] - embeddings side by side (not CI):
# the whole Sluice service (a private redis-server, sluice-worker on MODEL,
# sluice-gateway with plain_http on loopback, a key from sluicectl) and,
# when LLAMA_SERVER (a llama.cpp `llama-server` binary, built outside the
# repository) is given, `llama-server --embeddings` on the same file, both
# driven by bench-embed with the same load: inputs of 32, 128 and 512
# token ids, 1, 16 and 64 inputs per request, one client, one cell after
# the other, Sluice then llama.cpp per input length (so each pair is
# measured in the same minute).  Both get every core (THREADS, default
# nproc).  llama-server runs its fastest configuration measured here for
# these loads (LLAMA_ARGS, default one slot of 512 tokens, -b/-ub 512: 1.4x
# to 7x the throughput of 16 slots in one 8192-token batch, 4.4x the 4-slot
# 2048 one at 128 tokens x 16; docs/bench.md), our worker its default
# embed_step_tokens (2048).
# Environment: SLUICE_BUILD_DIR (build), THREADS, SECONDS_PER_CELL (5),
# LENS (32,128,512), BATCHES (1,16,64), LLAMA_ARGS.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bd=${SLUICE_BUILD_DIR:-$PWD/build}
model=$(realpath "$1")
llama=${2:-}
threads=${THREADS:-$(nproc)}
secs=${SECONDS_PER_CELL:-5}
lens=${LENS:-32,128,512}
batches=${BATCHES:-1,16,64}
tmp=$(mktemp -d /tmp/sluice-embed-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
redis=$(command -v redis-server || echo /usr/local/bin/redis-server)
"$redis" --port 0 --unixsocket "$tmp/redis.sock" --unixsocketperm 700 --save '' \
	--appendonly no --dir "$tmp" >"$tmp/redis.log" 2>&1 &
pids+=($!)
head -c 48 /dev/urandom | base64 >"$tmp/pepper"
chmod 600 "$tmp/pepper"
cat >"$tmp/worker.json" <<EOF
{"worker": {"name": "w0", "model": "$model", "model_name": "minilm", "socket": "$tmp/w.sock",
  "threads": $threads, "log_level": "warn"}}
EOF
"$bd/worker/sluice-worker" serve --config "$tmp/worker.json" 2>"$tmp/worker.log" &
pids+=($!)
port=$(free_port)
cat >"$tmp/gateway.json" <<EOF
{"gateway": {"listen_addr": "127.0.0.1", "port": $port, "plain_http": true,
  "admin_addr": "127.0.0.1", "admin_port": 0, "pepper_file": "$tmp/pepper", "log_level": "warn",
  "limits": {"body_bytes": "16MiB"},
  "workers": [{"name": "w0", "socket": "$tmp/w.sock", "model": "minilm"}],
  "redis": {"url": "unix://$tmp/redis.sock"}}}
EOF
for _ in $(seq 100); do [ -S "$tmp/redis.sock" ] && break; sleep 0.1; done
"$bd/gateway/sluice-gateway" --config "$tmp/gateway.json" 2>"$tmp/gateway.log" &
pids+=($!)
ctl() { "$bd/tools/sluicectl" --redis "unix://$tmp/redis.sock" --pepper-file "$tmp/pepper" "$@"; }
ctl tenant create bench >/dev/null
ctl client create bench/app >/dev/null
key=$(ctl key issue bench/app | sed -n 's/^key: *//p')
for _ in $(seq 300); do
	curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
	sleep 0.2
done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$tmp"/*.log; exit 1; }
if [ -n "$llama" ]; then
	lport=$(free_port)
	# shellcheck disable=SC2086
	"$llama" -m "$model" --embeddings -t "$threads" ${LLAMA_ARGS:--np 1 -c 512 -b 512 -ub 512} \
		--host 127.0.0.1 --port "$lport" >"$tmp/llama.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 300); do
		curl -sf "http://127.0.0.1:$lport/health" >/dev/null 2>&1 && break
		sleep 0.2
	done
fi
vocab=$("$bd/tools/sluice-model" inspect "$model" 2>/dev/null | sed -n 's/.*vocab[^0-9]*\([0-9][0-9]*\).*/\1/p' | head -1)
echo "# embeddings: $(basename "$model"), $threads threads, $(nproc) cores, $(uname -m)," \
	"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), one client," \
	"${secs}s per cell, vocab ${vocab:-30522}"
first=1
IFS=, read -ra L <<<"$lens"
for len in "${L[@]}"; do
	args=(--lens "$len" --batches "$batches" --seconds "$secs" --vocab "${vocab:-30522}" --model minilm)
	"$bd/bench/bench-embed" --url "http://127.0.0.1:$port" --key "$key" --label sluice "${args[@]}" |
		if [ $first = 1 ]; then cat; else tail -n +2; fi
	first=0
	if [ -n "$llama" ]; then
		"$bd/bench/bench-embed" --url "http://127.0.0.1:$lport" --label llama.cpp "${args[@]}" |
			tail -n +2
	fi
done
