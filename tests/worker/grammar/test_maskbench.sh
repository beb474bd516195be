#!/usr/bin/env bash
# test_maskbench.sh - the structured-output engine on every 20th MaskBench
# schema (../shared/testdata/maskbench) with the deepseek-llm vocabulary:
# no invalid instance may be accepted (a correctness bug, not a coverage
# gap), the mask must agree with the matcher token by token, and at least
# 93% of the schemas must pass (the full run passes 95%).  Skips (77) when
# ../shared is absent.
# The full run with timings is bench/maskbench.sh.
set -euo pipefail
src=${SLUICE_SOURCE_DIR:?}
bin=${SLUICE_BUILD_DIR:?}/tools/sluice-model
data=$src/../shared/testdata/maskbench
vocab=$src/../shared/testdata/tokenizer/ggml-vocab-deepseek-llm.gguf
if [[ ! -d $data || ! -f $vocab ]]; then
	echo "skip: $data or $vocab absent"
	exit 77
fi
mapfile -t files < <(ls "$data"/*.json | awk 'NR % 20 == 0')
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bin" grammar --vocab "$vocab" "${files[@]}" > "$out"
summary=$(tail -1 "$out")
echo "$summary"
python3 - "$summary" <<'PY'
import json, sys
s = json.loads(sys.argv[1])
assert s["invalid_accepted"] == 0, f"{s['invalid_accepted']} invalid instances accepted"
assert s["inconsistent"] == 0, f"mask and matcher disagree {s['inconsistent']} times"
assert s["passing"] >= 0.93 * s["schemas"], f"only {s['passing']} of {s['schemas']} schemas pass"
PY
