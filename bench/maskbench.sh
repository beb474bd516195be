#!/usr/bin/env bash
# maskbench.sh - the structured-output engine on all of MaskBench
# (../shared/testdata/maskbench, 7,673 schema files) with the deepseek-llm
# vocabulary (102,400 tokens): schemas passing (compiled, every valid
# instance accepted, every invalid one rejected), the table by folder
# prefix, per-token mask time (the full mask over the vocabulary at every
# step, one thread) and compile time percentiles.
#   bench/maskbench.sh [BUILD_DIR]        (default build/)
# Prints the machine, then the table (stderr of the tool) and the summary
# JSON line; the per-file lines go to $OUT (default /tmp/maskbench.jsonl).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
data=$root/../shared/testdata/maskbench
vocab=$root/../shared/testdata/tokenizer/ggml-vocab-deepseek-llm.gguf
out=${OUT:-/tmp/maskbench.jsonl}
[[ -d $data && -f $vocab ]] || { echo "maskbench: $data or $vocab absent" >&2; exit 77; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), one thread"
echo "vocabulary: $(basename "$vocab")"
start=$(date +%s)
"$build/tools/sluice-model" grammar --vocab "$vocab" "$data"/*.json > "$out"
echo "wall: $(($(date +%s) - start)) s"
tail -1 "$out"
