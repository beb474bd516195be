#!/usr/bin/env bash
# gpu-check.sh - the CUDA backend's device check, in ONE device call.
#
#   bash bench/gpu-check.sh [--bin DIR] [--models DIR] [--budget-s 540]
#                           [--dry-run] [--no-8b]
#
# Binaries: --bin DIR is a build tree (tools/sluice-model, worker/sluice-worker,
# bench/bench-gpu, bench/bench-gpu-serve, tests/worker/test_worker_cuda_*).
# Default: .carry/build when present (made here by bench/gpu-carry.sh, with
# the non-CUDA shared libraries in .carry/lib), else build/ after building it
# here with cmake (needs libevent, jansson, OpenSSL, hiredis, cmocka: the
# device image is not known to have them, hence the carry).
# CUDA libraries (cudart, cuBLAS, cuBLASLt 13) come from the machine:
# /usr/local/cuda*/lib64, or the nvidia-* Python wheels of its python3.
#
# Stages (each with its own timeout; a stage that would pass the budget is
# skipped and said so; every stage prints its result line as it ends):
#   env      nvidia-smi, binaries, missing libraries (ldd)
#   synth    8b BF16, 8b Q8_0 and 1b BF16 models, in the background
#   tests    the gpu-labelled tests (CUDA probe; CUDA backend vs CPU)
#   ceil     device-to-device copy bandwidth; cuBLAS BF16 GEMM rate
#   engine   8b BF16: prefill of 2048 tokens, batch-1 decode; again with the
#            SIMT GEMV (SLUICE_CUDA_GEMV=simt); then Q8_0, 1b
#   serve    sluice-worker serve on 8b BF16: 1, 8, 32, 128 concurrent
#            sequences (64 tokens each); TTFT at 32 x 1024 prompt tokens
# then one table.  Logs go to $OUT/gpu-check/ when $OUT is set (device
# tool), else /tmp/gpu-check/.
#
# --dry-run: no device stages; synthesises the tiny model, runs the serve
# stage against a CPU worker on it (conc 1 and 8, a short TTFT run), prints
# the table with what it has.  This is what can be checked without a GPU.
set -u
T_START=$(date +%s)
BUDGET_S=540
BIN=""
MODELS=""
DRY=0
NO8B=0
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) BIN="$2"; shift 2 ;;
	--models) MODELS="$2"; shift 2 ;;
	--budget-s) BUDGET_S="$2"; shift 2 ;;
	--dry-run) DRY=1; shift ;;
	--no-8b) NO8B=1; shift ;;
	-h|--help) sed -n 2,32p "$0"; exit 0 ;;
	*) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
case "$BUDGET_S" in ''|*[!0-9]*) echo "gpu-check: --budget-s: expected seconds, found '$BUDGET_S'" >&2; exit 2 ;; esac

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOG=${OUT:-/tmp}/gpu-check
mkdir -p "$LOG"
MODELS=${MODELS:-/tmp/sluice-models}
mkdir -p "$MODELS"
declare -A R   # results for the table

elapsed() { echo $(( $(date +%s) - T_START )); }
left() { echo $(( BUDGET_S - $(elapsed) )); }
say() { printf '[%4ss] %s\n' "$(elapsed)" "$*"; }
# stage NAME NEED_S: 0 when NEED_S seconds are left in the budget
stage() {
	if [ "$(left)" -lt "$2" ]; then
		say "$1: skipped (budget: $(left)s left, needs ~$2s)"
		return 1
	fi
	say "$1: start"
	return 0
}
kv() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" "$1" | tail -1; }

# ---- env ---------------------------------------------------------------------
if [ -z "$BIN" ]; then
	if [ -x "$ROOT/.carry/build/worker/sluice-worker" ]; then
		BIN="$ROOT/.carry/build"
	else
		BIN="$ROOT/build"
		if [ ! -x "$BIN/worker/sluice-worker" ]; then
			say "env: no carried binaries; building in $BIN"
			(cmake -S "$ROOT" -B "$BIN" -DSLUICE_CUDA=ON -DSLUICE_CUDA_ARCHS=90 \
				-DCMAKE_BUILD_TYPE=Release >"$LOG/build.log" 2>&1 &&
			 timeout 300 cmake --build "$BIN" -j"$(nproc)" >>"$LOG/build.log" 2>&1) ||
				{ say "env: build failed (tail of $LOG/build.log:)"; tail -20 "$LOG/build.log"; exit 1; }
		fi
	fi
fi
CUDA_LIBS=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/lib; do
	[ -e "$d/libcublasLt.so.13" ] && CUDA_LIBS="$CUDA_LIBS:$d"
done
if [ -z "$CUDA_LIBS" ] && command -v python3 >/dev/null; then
	CUDA_LIBS=$(python3 - <<'EOF' 2>/dev/null
import glob, os, site
dirs = set()
for sp in site.getsitepackages():
    for f in glob.glob(os.path.join(sp, "nvidia", "**", "lib*.so.13*"), recursive=True):
        dirs.add(os.path.dirname(f))
print(":" + ":".join(sorted(dirs)) if dirs else "")
EOF
)
fi
export LD_LIBRARY_PATH="$ROOT/.carry/lib${CUDA_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SYNTH="$BIN/tools/sluice-model"
WORKER="$BIN/worker/sluice-worker"
BGPU="$BIN/bench/bench-gpu"
BSERVE="$BIN/bench/bench-gpu-serve"
say "env: bin=$BIN models=$MODELS log=$LOG budget=${BUDGET_S}s dry_run=$DRY"
if [ "$DRY" = 0 ]; then
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | sed 's/^/  gpu: /'
fi
missing=0
bins="$SYNTH $WORKER $BSERVE"
[ "$DRY" = 0 ] && bins="$bins $BGPU $BIN/tests/worker/test_worker_cuda_probe $BIN/tests/worker/test_worker_cuda_backend"
for b in $bins; do
	if [ ! -x "$b" ]; then say "env: missing binary $b"; missing=1; continue; fi
	nf=$(ldd "$b" 2>&1 | grep "not found" || true)
	[ -n "$nf" ] && { say "env: $b: libraries not found:"; echo "$nf"; missing=1; }
done
[ "$missing" = 1 ] && { say "env: cannot run; stopping"; exit 1; }

# ---- synth (background) ------------------------------------------------------------
# synth MODEL_FILE PRESET TYPE: starts in the background, writes FILE.done at the end
synth_bg() {
	local f="$MODELS/$1"
	[ -f "$f.done" ] && return 0
	( "$SYNTH" synth --preset "$2" --type "$3" --seed 1 -o "$f.tmp" >"$LOG/synth-$1.log" 2>&1 &&
	  mv "$f.tmp" "$f" && touch "$f.done" ) &
}
wait_model() { # FILE MAX_S
	local t=0
	while [ ! -f "$MODELS/$1.done" ] && [ "$t" -lt "$2" ]; do sleep 2; t=$((t + 2)); done
	[ -f "$MODELS/$1.done" ]
}
if [ "$DRY" = 1 ]; then
	synth_bg tiny-F32.gguf tiny F32
	synth_bg tiny-BF16.gguf tiny BF16
else
	synth_bg 1b-BF16.gguf 1b BF16
	if [ "$NO8B" = 0 ]; then
		synth_bg 8b-BF16.gguf 8b BF16
		synth_bg 8b-Q8_0.gguf 8b Q8_0
	fi
fi

# ---- tests --------------------------------------------------------------------------
if [ "$DRY" = 0 ] && stage tests 200; then
	for t in test_worker_cuda_probe test_worker_cuda_backend; do
		SLUICE_BUILD_DIR="$BIN" SLUICE_SOURCE_DIR="$ROOT" timeout 240 \
			"$BIN/tests/worker/$t" >"$LOG/$t.log" 2>&1
		rc=$?
		case $rc in 0) R[$t]=pass ;; 77) R[$t]=skipped ;; 124) R[$t]="TIMEOUT" ;; *) R[$t]="FAIL($rc)" ;; esac
		say "tests: $t ${R[$t]}"
		grep -E "relative L2|greedy|FAIL|Error|error|skipped" "$LOG/$t.log" | head -30 | sed 's/^/    /'
	done
fi

# ---- ceilings -------------------------------------------------------------------------
if [ "$DRY" = 0 ] && stage ceil 40; then
	timeout 60 "$BGPU" membw --gib 4 >"$LOG/membw.log" 2>&1; cat "$LOG/membw.log"
	timeout 60 "$BGPU" gemm --n 8192 >"$LOG/gemm.log" 2>&1; cat "$LOG/gemm.log"
	R[membw]=$(kv "$LOG/membw.log" membw_gbs)
	R[gemm]=$(kv "$LOG/gemm.log" gemm_tflops)
fi

# ---- engine ------------------------------------------------------------------------------
engine() { # NAME FILE WAIT_S NEED_S [GEMV]: GEMV=simt keeps BF16 decode on the SIMT kernel
	local n=$1 f=$2
	stage "engine $n" "$4" || return 1
	if ! wait_model "$f" "$3"; then say "engine $n: model not ready ($f)"; return 1; fi
	SLUICE_CUDA_GEMV=${5:-} timeout $(( $4 + 60 )) "$BGPU" engine --model "$MODELS/$f" --prompt 2048 --gen 64 --reps 2 \
		>"$LOG/engine-$n.log" 2>&1
	say "engine $n: rc=$?"; cat "$LOG/engine-$n.log"
	R[dec_$n]=$(kv "$LOG/engine-$n.log" decode_tok_s)
	R[gbs_$n]=$(kv "$LOG/engine-$n.log" decode_gbs)
	R[pre_$n]=$(kv "$LOG/engine-$n.log" prefill_tok_s)
	R[tfl_$n]=$(kv "$LOG/engine-$n.log" prefill_tflops)
}
if [ "$DRY" = 0 ]; then
	[ "$NO8B" = 0 ] && engine 8b-BF16 8b-BF16.gguf 300 90
	# the same model with decode on the SIMT GEMV: the tensor-core kernel's ratio, side by side
	[ "$NO8B" = 0 ] && engine 8b-BF16-simt 8b-BF16.gguf 30 70 simt
fi

# ---- serve ---------------------------------------------------------------------------------
serve_stage() { # NAME FILE BACKEND CONCS TTFT_CONC GEN TTFT_TOKENS KV_JSON
	local n=$1 f=$2 be=$3 concs=$4 tconc=$5 gen=$6 ttok=$7 kvj=$8 sock="$LOG/worker.sock" pid rc
	stage "serve $n" 120 || return 1
	if ! wait_model "$f" 120; then say "serve $n: model not ready ($f)"; return 1; fi
	rm -f "$sock"
	cat >"$LOG/worker-$n.json" <<EOF
{"worker": {"model": "$MODELS/$f", "socket": "$sock", "backend": "$be",
 $kvj, "max_running": 128, "step_tokens": 2048, "max_waiting": 4096}}
EOF
	"$WORKER" serve --config "$LOG/worker-$n.json" >"$LOG/worker-$n.log" 2>&1 &
	pid=$!
	for c in $concs; do
		[ "$(left)" -lt 20 ] && { say "serve $n conc=$c: skipped (budget)"; continue; }
		timeout 120 "$BSERVE" --socket "$sock" --conc "$c" --prompt-words 16 --gen "$gen" \
			--timeout-s 100 >"$LOG/serve-$n-$c.log" 2>&1
		rc=$?
		say "serve $n conc=$c rc=$rc: $(cat "$LOG/serve-$n-$c.log" | tail -1)"
		R[s_${n}_$c]="$(kv "$LOG/serve-$n-$c.log" decode_tok_s) $(kv "$LOG/serve-$n-$c.log" itl_p50_ms) $(kv "$LOG/serve-$n-$c.log" itl_p99_ms)"
	done
	if [ "$(left)" -ge 30 ]; then
		# calibrate words -> tokens with one short request, then aim at ttok tokens
		timeout 60 "$BSERVE" --socket "$sock" --conc 1 --prompt-words 40 --gen 1 \
			>"$LOG/serve-$n-cal.log" 2>&1
		local pt words
		pt=$(kv "$LOG/serve-$n-cal.log" prompt_tokens); pt=${pt%.*}
		words=$(( ${pt:-0} > 0 ? 40 * ttok / pt : ttok / 3 ))
		timeout 120 "$BSERVE" --socket "$sock" --conc "$tconc" --prompt-words "$words" --gen 4 \
			--timeout-s 100 >"$LOG/serve-$n-ttft.log" 2>&1
		say "serve $n ttft conc=$tconc words=$words: $(tail -1 "$LOG/serve-$n-ttft.log")"
		R[ttft_$n]="$tconc $(kv "$LOG/serve-$n-ttft.log" prompt_tokens) $(kv "$LOG/serve-$n-ttft.log" ttft_p50_ms) $(kv "$LOG/serve-$n-ttft.log" ttft_p99_ms)"
	fi
	kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
	grep -m1 worker_ready "$LOG/worker-$n.log" | cut -c1-600 | sed 's/^/    /'
	# host time per emitted token (sampling + emit) against forward time, all runs together
	local tl
	tl=$(grep -m1 worker_totals "$LOG/worker-$n.log")
	R[tot_$n]=$(echo "$tl" | sed -n 's/.*"steps":\([0-9]*\).*"decode_tokens":\([0-9]*\).*"forward_ns":\([0-9]*\).*"emit_ns":\([0-9]*\).*/\1 \2 \3 \4/p')
}
if [ "$DRY" = 1 ]; then
	# tiny model: 512-token context, so the TTFT prompt is 256 tokens; 64 MiB of KV
	serve_stage tiny-cpu tiny-BF16.gguf cpu "1 8" 8 16 256 '"kv_cache_bytes": 67108864, "threads": 2' 
	SERVE_N=tiny-cpu
elif [ "$NO8B" = 0 ]; then
	serve_stage 8b-BF16 8b-BF16.gguf cuda "1 8 32 128" 32 64 1024 '"kv_cache_fraction": 0.9' 
	SERVE_N=8b-BF16
else
	serve_stage 1b-BF16 1b-BF16.gguf cuda "1 8 32 128" 32 64 1024 '"kv_cache_fraction": 0.9' 
	SERVE_N=1b-BF16
fi

# ---- more engine rows while budget remains ---------------------------------------------------
if [ "$DRY" = 0 ]; then
	[ "$NO8B" = 0 ] && engine 8b-Q8_0 8b-Q8_0.gguf 60 70
	engine 1b-BF16 1b-BF16.gguf 30 40
fi

# ---- the table -----------------------------------------------------------------------------------
frac() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.0f%%", 100 * a / b }'; }
echo
echo "=== gpu-check ($(elapsed)s; logs in $LOG) ==="
printf '%-34s %s\n' "test_worker_cuda_probe" "${R[test_worker_cuda_probe]:-not run}"
printf '%-34s %s\n' "test_worker_cuda_backend" "${R[test_worker_cuda_backend]:-not run}"
printf '%-34s %s\n' "copy bandwidth (GB/s, r+w)" "${R[membw]:-not run}"
printf '%-34s %s\n' "cuBLAS BF16 GEMM (TFLOP/s)" "${R[gemm]:-not run}"
for n in 8b-BF16 8b-BF16-simt 8b-Q8_0 1b-BF16; do
	[ -z "${R[dec_$n]:-}" ] && continue
	printf '%-34s %s tok/s, %s GB/s = %s of copy bw (target >= 85%% for 8b-BF16)\n' \
		"$n batch-1 decode" "${R[dec_$n]}" "${R[gbs_$n]}" "$(frac "${R[gbs_$n]}" "${R[membw]:-}")"
	printf '%-34s %s tok/s, %s TFLOP/s = %s of GEMM rate (target >= 50%%)\n' \
		"$n prefill 2048" "${R[pre_$n]}" "${R[tfl_$n]}" "$(frac "${R[tfl_$n]}" "${R[gemm]:-}")"
done
if [ -n "${SERVE_N:-}" ]; then
	printf '%-34s %12s %10s %10s\n' "$SERVE_N serve: concurrent seqs" "decode tok/s" "ITL p50 ms" "ITL p99 ms"
	for c in 1 8 32 128; do
		[ -z "${R[s_${SERVE_N}_$c]:-}" ] && continue
		set -- ${R[s_${SERVE_N}_$c]}
		printf '%-34s %12s %10s %10s\n' "  $c" "${1:--}" "${2:--}" "${3:--}"
	done
	if [ -n "${R[s_${SERVE_N}_1]:-}" ] && [ -n "${R[s_${SERVE_N}_128]:-}" ]; then
		printf '%-34s %s (target >= 20x)\n' "  128 vs 1 throughput" \
			"$(awk -v a="$(echo ${R[s_${SERVE_N}_128]} | cut -d' ' -f1)" -v b="$(echo ${R[s_${SERVE_N}_1]} | cut -d' ' -f1)" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "-" }')"
	fi
	if [ -n "${R[tot_$SERVE_N]:-}" ]; then
		set -- ${R[tot_$SERVE_N]}
		printf '%-34s %s steps, %s decode tokens: forward %s s, sample+emit %s s (%s us a token)\n' "  scheduler time" "$1" "$2" \
			"$(awk -v a="$3" 'BEGIN { printf "%.2f", a / 1e9 }')" "$(awk -v a="$4" 'BEGIN { printf "%.2f", a / 1e9 }')" \
			"$(awk -v a="$4" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f", a / b / 1e3; else print "-" }')"
	fi
	if [ -n "${R[ttft_$SERVE_N]:-}" ]; then
		set -- ${R[ttft_$SERVE_N]}
		printf '%-34s conc %s, %s prompt tokens: p50 %s ms, p99 %s ms\n' "  TTFT" "${1:--}" "${2:--}" "${3:--}" "${4:--}"
	fi
fi
