#!/usr/bin/env bash
# test_generate.sh BUILD_DIR - `sluice-worker generate` on generated models of
# every weight type and both architectures: greedy output is the same for 1
# and 2 threads and across runs, counts are printed, an empty prompt starts
# from BOS, chat mode uses the template, and a prompt longer than the
# context is refused with both lengths named.
set -euo pipefail
bd=$1
tmp=$(mktemp -d /tmp/sluice-gen-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
model=$bd/tools/sluice-model
worker=$bd/worker/sluice-worker
fail=0

check() { # name cond...
	local name=$1; shift
	if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}

run() { # model threads [args...] -> stdout in $tmp/out, stderr in $tmp/err
	local m=$1 t=$2; shift 2
	"$worker" generate --model "$m" --threads "$t" --temperature 0 --max-tokens 16 \
		--ignore-eos "$@" >"$tmp/out" 2>"$tmp/err"
}

for spec in F32:llama F16:llama BF16:llama Q8_0:llama Q4_0:llama Q4_1:llama Q5_0:llama \
	    Q5_1:qwen2 IQ4_NL:llama IQ4_XS:llama Q2_K:llama Q3_K_M:llama Q4_K_M:llama \
	    Q5_K:llama Q6_K:llama F16:qwen2 Q8_0:qwen2 Q4_K_M:qwen2 F32:qwen3 Q4_K_M:qwen3; do
	type=${spec%%:*} arch=${spec##*:}
	m=$tmp/tiny-$type-$arch.gguf
	"$model" synth --preset tiny --type "$type" --arch "$arch" --seed 11 -o "$m" >/dev/null
	run "$m" 1 --prompt "The river runs north of the old stone bridge"
	cp "$tmp/out" "$tmp/a"
	check "$type/$arch: 16 tokens generated" grep -q "eval count: *16 token" "$tmp/err"
	check "$type/$arch: prompt counted" grep -qE "prompt eval count: *[1-9][0-9]* token" "$tmp/err"
	check "$type/$arch: some text" test -s "$tmp/a"
	run "$m" 2 --prompt "The river runs north of the old stone bridge"
	check "$type/$arch: 2 threads = 1 thread" cmp -s "$tmp/a" "$tmp/out"
	run "$m" 2 --prompt "The river runs north of the old stone bridge"
	check "$type/$arch: second run identical" cmp -s "$tmp/a" "$tmp/out"
done

m=$tmp/tiny-Q8_0-llama.gguf
run "$m" 2 --prompt ""
check "empty prompt starts from BOS" grep -q "prompt eval count: *1 token" "$tmp/err"
run "$m" 2 --chat --system "be brief" --prompt "hello"
check "chat prompt through the template" grep -qE "prompt eval count: *[1-9][0-9] token" "$tmp/err"
long=$(printf 'word %.0s' $(seq 1 600))
if run "$m" 2 --prompt "$long"; then
	check "over-long prompt refused" false
else
	check "over-long prompt refused, both lengths named" \
		grep -qE "prompt of [0-9]+ tokens .*exceeds the context of 512 tokens|over the limit of" "$tmp/err"
fi
if "$worker" generate --model "$tmp/none.gguf" --prompt x >/dev/null 2>"$tmp/err"; then
	check "missing model refused" false
else
	check "missing model: clear error" grep -q "none.gguf" "$tmp/err"
fi
exit $fail
