#!/usr/bin/env bash
# tests/run.sh - THE test command (README, .ci/run).  From a fresh clone on
# Debian 12 it installs the dependencies, then runs four stages:
#
#   1. build/       normal build (RelWithDebInfo, -Werror, CUDA auto) and
#                   `ctest` over every label (gpu tests skip with no device)
#   2. build-asan/  ASan+UBSan build (no CUDA) and `ctest -L unit`
#   3. build-fuzz/  clang libFuzzer targets (no CUDA): the seed corpora
#                   replayed (`ctest -L fuzz`), then each fuzzer run for
#                   SLUICE_FUZZ_SECONDS over a scratch copy of its corpus
#   4. summary      one line per stage; exit status 0 only if all passed
#
# Stage 1 also checks that the generated key tables in
# docs/configuration.md match `sluice-worker config-doc` and
# `sluice-gateway config-doc`; `tests/run.sh --update-config-doc`
# rewrites them from a build in build/ and exits.
#
# Stages run even after an earlier one failed, so one run reports every
# failure.  The last line of the output has ctest's summary format and
# totals every ctest test and fuzz run of all stages (a stage that failed
# before it could run its tests counts as one failed test).
#
# Environment:
#   SLUICE_JOBS          parallel build/test jobs (default: nproc)
#   SLUICE_FUZZ_SECONDS  seconds per fuzzer in stage 3 (default 15; 0 skips
#                        the timed runs, the corpus replay still runs)
#   SLUICE_CUDA          AUTO (default), ON or OFF for the normal build
#   SLUICE_SKIP_DEPS=1   do not run deploy/install-deps.sh
#   SLUICE_STAGES        subset of "build asan fuzz" (default: all three)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
config_doc=docs/configuration.md
doc_bins=(worker/sluice-worker gateway/sluice-gateway)

# config_doc_block BIN: the generated block of BIN in docs/configuration.md.
config_doc_block() {
	awk -v b="<!-- BEGIN GENERATED: $(basename "$1") config-doc -->" \
		-v e="<!-- END GENERATED: $(basename "$1") config-doc -->" \
		'$0 == e { f = 0 } f { print } $0 == b { f = 1 }' "$config_doc"
}

# check_config_doc: 0 when every block matches its binary's output.
check_config_doc() {
	local bin ok=0
	for bin in "${doc_bins[@]}"; do
		if ! diff -u <(config_doc_block "$bin") <("build/$bin" config-doc); then
			echo "$config_doc: the block of $(basename "$bin") is stale (run tests/run.sh --update-config-doc)"
			ok=1
		fi
	done
	return $ok
}

if [ "${1:-}" = --update-config-doc ]; then
	for bin in "${doc_bins[@]}"; do
		gen=$(mktemp)
		"build/$bin" config-doc >"$gen"
		awk -v b="<!-- BEGIN GENERATED: $(basename "$bin") config-doc -->" \
			-v e="<!-- END GENERATED: $(basename "$bin") config-doc -->" -v gen="$gen" '
			$0 == b { print; while ((getline l < gen) > 0) print l; skip = 1; next }
			$0 == e { skip = 0 }
			!skip { print }' "$config_doc" >"$config_doc.new"
		mv "$config_doc.new" "$config_doc"
		rm -f "$gen"
	done
	echo "updated $config_doc"
	exit 0
elif [ $# -gt 0 ]; then
	echo "usage: tests/run.sh [--update-config-doc]" >&2
	exit 2
fi
jobs=${SLUICE_JOBS:-$(nproc)}
fuzz_seconds=${SLUICE_FUZZ_SECONDS:-15}
cuda=${SLUICE_CUDA:-AUTO}
stages=${SLUICE_STAGES:-build asan fuzz}
logdir=$root/build-logs
mkdir -p "$logdir"

t_start=$(date +%s)
summary=()
failed=0
tests_total=0
tests_failed=0

say() { printf '\n==> %s\n' "$*"; }

# record STATUS NAME SECONDS: one summary line.
record() {
	summary+=("$(printf '%-5s %-62s %5ss' "$1" "$2" "$3")")
	if [ "$1" = FAIL ]; then failed=1; fi
}

# ctest_run LOGNAME ARGS...: runs ctest, echoing its output into
# build-logs/LOGNAME.log too.  Returns ctest's status.
ctest_run() {
	local log=$logdir/$1.log rc=0
	shift
	ctest "$@" 2>&1 | tee "$log" || rc=$?
	return $rc
}

# counts LOGNAME: adds a ctest log's counts to the totals and sets
# count_desc to "N tests, M failed, K skipped".
counts() {
	local log=$logdir/$1.log line n f s
	line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
	if [ -z "$line" ]; then
		if grep -q 'No tests were found' "$log"; then
			count_desc="no tests"
			return
		fi
		tests_total=$((tests_total + 1))
		tests_failed=$((tests_failed + 1))
		count_desc="ctest did not finish"
		return
	fi
	n=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
	f=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$line")
	s=$(grep -cE '^[[:space:]]+[0-9]+ - .*\((Skipped|Not Run|Disabled)\)' "$log" || true)
	tests_total=$((tests_total + n))
	tests_failed=$((tests_failed + f))
	count_desc="$n tests, $f failed, $s skipped"
}

# count_build_failure: a stage that failed before its tests ran counts as
# one failed test in the totals.
count_build_failure() {
	tests_total=$((tests_total + 1))
	tests_failed=$((tests_failed + 1))
}

pass_fail() { [ "$1" -eq 0 ] && echo PASS || echo FAIL; }

want() { [[ " $stages " == *" $1 "* ]]; }

# ---- dependencies ------------------------------------------------------
t0=$(date +%s)
if [ "${SLUICE_SKIP_DEPS:-0}" = 1 ]; then
	record SKIP "dependencies (SLUICE_SKIP_DEPS=1)" 0
elif "$root/deploy/install-deps.sh"; then
	record PASS "dependencies (deploy/install-deps.sh)" $(($(date +%s) - t0))
else
	record FAIL "dependencies (deploy/install-deps.sh)" $(($(date +%s) - t0))
	count_build_failure
fi

# ---- 1. normal build -----------------------------------------------------
stage_build() {
	local t0 rc=0 cuda_on
	t0=$(date +%s)
	say "build/: RelWithDebInfo, -Werror, SLUICE_CUDA=$cuda"
	if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DSLUICE_WERROR=ON -DSLUICE_CUDA="$cuda" -DSLUICE_SANITIZE=OFF \
		-DSLUICE_FUZZ=OFF -DSLUICE_TESTS=ON 2>&1 | tee "$logdir/configure-build.log" &&
		cmake --build build -j"$jobs"; }; then
		record FAIL "build/ configure + build" $(($(date +%s) - t0))
		count_build_failure
		return
	fi
	cuda_on=$(sed -nE 's/.*sluice: CUDA backend (ON|OFF).*/\1/p' "$logdir/configure-build.log" | tail -1)
	record PASS "build/ configure + build (CUDA ${cuda_on:-?})" $(($(date +%s) - t0))

	t0=$(date +%s)
	say "build/: the binaries answer --version"
	if ./build/worker/sluice-worker --version &&
		./build/gateway/sluice-gateway --version &&
		./build/tools/sluicectl --version; then
		record PASS "build/ binaries --version" $(($(date +%s) - t0))
	else
		record FAIL "build/ binaries --version" $(($(date +%s) - t0))
		count_build_failure
	fi

	t0=$(date +%s)
	say "build/: $config_doc matches config-doc"
	if check_config_doc; then
		record PASS "$config_doc key tables up to date" $(($(date +%s) - t0))
	else
		record FAIL "$config_doc key tables up to date" $(($(date +%s) - t0))
		count_build_failure
	fi

	t0=$(date +%s)
	say "build/: ctest (all labels)"
	(cd build && ctest_run ctest-build --output-on-failure -j"$jobs") || rc=$?
	counts ctest-build
	record "$(pass_fail $rc)" "build/ ctest, all labels ($count_desc)" $(($(date +%s) - t0))
}

# ---- 2. ASan + UBSan ---------------------------------------------------
stage_asan() {
	local t0 rc=0
	t0=$(date +%s)
	say "build-asan/: ASan+UBSan, SLUICE_CUDA=OFF"
	if ! { cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DSLUICE_WERROR=ON -DSLUICE_CUDA=OFF -DSLUICE_SANITIZE=ON \
		-DSLUICE_FUZZ=OFF -DSLUICE_TESTS=ON &&
		cmake --build build-asan -j"$jobs"; }; then
		record FAIL "build-asan/ configure + build" $(($(date +%s) - t0))
		count_build_failure
		return
	fi
	record PASS "build-asan/ configure + build" $(($(date +%s) - t0))

	t0=$(date +%s)
	say "build-asan/: ctest -L unit"
	(cd build-asan &&
		ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
		UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
		ctest_run ctest-asan --output-on-failure -L unit -j"$jobs") || rc=$?
	counts ctest-asan
	record "$(pass_fail $rc)" "build-asan/ ctest -L unit ($count_desc)" $(($(date +%s) - t0))
}

# ---- 3. fuzzers --------------------------------------------------------
stage_fuzz() {
	local t0 rc=0 targets=() t what corpus scratch log
	if ! command -v clang >/dev/null 2>&1; then
		record SKIP "build-fuzz/ (clang not installed)" 0
		return
	fi
	t0=$(date +%s)
	say "build-fuzz/: clang, SLUICE_FUZZ=ON, SLUICE_CUDA=OFF"
	if ! cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_WERROR=ON \
		-DSLUICE_CUDA=OFF -DSLUICE_SANITIZE=OFF -DSLUICE_FUZZ=ON \
		-DSLUICE_TESTS=ON; then
		record FAIL "build-fuzz/ configure" $(($(date +%s) - t0))
		count_build_failure
		return
	fi
	# build only the fuzz targets (the unit tests are built and run above)
	mapfile -t targets < <(cmake --build build-fuzz --target help |
		sed -nE 's/^\.\.\. (fuzz_[A-Za-z0-9_]+)( .*)?$/\1/p' | sort -u)
	if [ ${#targets[@]} -eq 0 ]; then
		record SKIP "build-fuzz/ (no fuzz_* targets yet)" $(($(date +%s) - t0))
		return
	fi
	# one target at a time: several targets in one make run can build a
	# shared dependency twice at once (seen as a lost .d file)
	local built=1
	for t in "${targets[@]}"; do
		cmake --build build-fuzz -j"$jobs" --target "$t" || { built=0; break; }
	done
	if [ "$built" -ne 1 ]; then
		record FAIL "build-fuzz/ build ${targets[*]}" $(($(date +%s) - t0))
		count_build_failure
		return
	fi
	record PASS "build-fuzz/ build (${#targets[@]} targets)" $(($(date +%s) - t0))

	t0=$(date +%s)
	say "build-fuzz/: seed corpora replayed (ctest -L fuzz)"
	(cd build-fuzz && ctest_run ctest-fuzz --output-on-failure -L fuzz -j"$jobs") || rc=$?
	counts ctest-fuzz
	record "$(pass_fail $rc)" "build-fuzz/ ctest -L fuzz ($count_desc)" $(($(date +%s) - t0))

	[ "$fuzz_seconds" -gt 0 ] || return 0
	for t in "${targets[@]}"; do
		t0=$(date +%s)
		what=${t#fuzz_}
		corpus=$root/tests/fuzz/corpus/$what
		scratch=$(mktemp -d "${TMPDIR:-/tmp}/sluice-fuzz-$what.XXXXXX")
		log=$logdir/$t.log
		[ -d "$corpus" ] && cp -r "$corpus/." "$scratch/"
		mkdir -p "$scratch/artifacts"
		say "$t: ${fuzz_seconds}s over $(find "$scratch" -maxdepth 1 -type f | wc -l) seeds"
		tests_total=$((tests_total + 1))
		if UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
			"./build-fuzz/tests/fuzz/$t" -max_total_time="$fuzz_seconds" \
			-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
			-artifact_prefix="$scratch/artifacts/" "$scratch" >"$log" 2>&1; then
			grep -E '^stat::number_of_executed_units|^Done [0-9]+ runs' "$log" | tail -1 || true
			record PASS "$t ${fuzz_seconds}s" $(($(date +%s) - t0))
		else
			tail -40 "$log"
			mkdir -p build-fuzz/artifacts
			cp -r "$scratch/artifacts/." build-fuzz/artifacts/ 2>/dev/null || true
			echo "$t: failed; full log $log, reproducers in build-fuzz/artifacts/"
			tests_failed=$((tests_failed + 1))
			record FAIL "$t ${fuzz_seconds}s (see $log)" $(($(date +%s) - t0))
		fi
		rm -rf "$scratch"
	done
}

want build && stage_build
want asan && stage_asan
want fuzz && stage_fuzz

# ---- summary -------------------------------------------------------------
say "summary ($(($(date +%s) - t_start))s, $jobs jobs, logs in build-logs/)"
printf '  %s\n' "${summary[@]}"
if [ "$failed" -ne 0 ] || [ "$tests_failed" -ne 0 ]; then
	echo "tests/run.sh: FAILED"
else
	echo "tests/run.sh: all stages passed"
fi
pct=100
[ "$tests_total" -gt 0 ] && pct=$(( (tests_total - tests_failed) * 100 / tests_total ))
echo "$pct% tests passed, $tests_failed tests failed out of $tests_total"
[ "$failed" -eq 0 ] && [ "$tests_failed" -eq 0 ]
