#!/usr/bin/env bash
# tests/test_layout.sh SOURCE_DIR - the layout rules of docs/architecture.md:
#   1. every source file (.c .h .cu .cuh .lua .cmake .sh .py) under the
#      product folders is named in the map (a backticked full path);
#   2. no file the map names is missing from the tree;
#   3. no hand-written .c file over 1,000 lines and no function over 150
#      lines, except files the map marks *(generated)* or *(kernel)*.
# Exits 1 with one line per violation.
set -euo pipefail
src=${1:?usage: test_layout.sh SOURCE_DIR}
cd "$src"
map=docs/architecture.md
fail=0
# the product's source files: tracked, or new and not ignored
if git rev-parse --git-dir >/dev/null 2>&1; then
	list() { { git ls-files -- "$@"; git ls-files -o --exclude-standard -- "$@"; } | sort -u; }
else
	list() { find "$@" -type f | sort -u; }
fi
files=$(list gateway worker common proto tools bench tests deploy |
	grep -E '\.(c|h|cu|cuh|lua|cmake|sh|py)$' | grep -v '/corpus/' || true)
named=$(grep -oE '^- `[^`]+`' "$map" | sed -E 's/^- `(.*)`$/\1/' | sort -u)
exempt=$(grep -E '^- `[^`]+` \*\((generated|kernel)\)\*' "$map" | sed -E 's/^- `([^`]+)`.*/\1/')

for f in $files; do
	if ! grep -qxF "$f" <<<"$named"; then
		echo "layout: $f is not named in $map (add a line: - \`$f\` — what it owns)"
		fail=1
	fi
done
for f in $named; do
	if [ ! -e "$f" ]; then
		echo "layout: $map names $f, which does not exist"
		fail=1
	fi
done
for f in $files; do
	case $f in *.c|*.h|*.cu|*.cuh) ;; *) continue ;; esac
	if grep -qxF "$f" <<<"$exempt"; then
		continue
	fi
	n=$(wc -l <"$f")
	if [ "${f##*.}" = c ] && [ "$n" -gt 1000 ]; then
		echo "layout: $f has $n lines (at most 1000 for a hand-written .c file)"
		fail=1
	fi
	# a function: a line at column 0 that opens a body, to the next "}" at column 0
	awk -v f="$f" '
		FNR == 1 { inf = 0 }
		/^[A-Za-z_].*\)[ \t]*\{[ \t]*$/ && !inf { inf = 1; start = FNR; next }
		/^\{[ \t]*$/ && !inf { inf = 1; start = FNR; next }
		/^\}/ && inf { inf = 0; if (FNR - start + 1 > 150)
			printf "layout: %s:%d: a function of %d lines (at most 150)\n", f, start, FNR - start + 1 }
	' "$f" | grep . && fail=1
done
exit $fail
