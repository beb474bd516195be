#!/usr/bin/env bash
# install-deps.sh - installs with apt everything Sluice's build, tests and
# quickstart need, on Debian 12 (bookworm) or a close relative.
#
# Idempotent: checks each package with dpkg-query first, prints nothing and
# touches nothing when all are present, runs `apt-get update` only when
# something is missing.  Runs apt as root, or through sudo when not root.
# SLUICE_DEPS_DRY_RUN=1 prints the apt commands instead of running them.
# The CUDA toolkit is not installed here: the build uses nvcc when it finds
# one (/usr/local/cuda/bin or PATH) and builds without CUDA otherwise.
set -euo pipefail

packages=(
	build-essential   # gcc, make, libc headers
	cmake
	pkg-config
	git               # the version string carries the commit
	libevent-dev      # gateway event loop (+ libevent_openssl, _pthreads)
	libssl-dev        # OpenSSL 3: TLS, SHA-256, HMAC, random
	libjansson-dev    # JSON
	libhiredis-dev    # Redis client
	libcmocka-dev     # unit tests
	redis-server      # quickstart and the tests that run a private Redis
	clang             # fuzzers (libFuzzer)
	libclang-rt-dev   # clang's runtimes incl. libclang_rt.fuzzer (bookworm: libclang-rt-14-dev)
	curl              # quickstart and integration tests
	openssl           # self-signed certificate for the quickstart
	ca-certificates
	gnuplot-nox       # bench/ plots
	python3-yaml      # tests/test_k8s_manifests.py
)
# the client compatibility suite (tests/clients/: the official openai and
# ollama npm packages); a Node.js from elsewhere (NodeSource) is kept as is
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
# (test hook) extra package names, to exercise the install path
# shellcheck disable=SC2206
packages+=(${SLUICE_DEPS_EXTRA:-})

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-deps: apt-get not found; install these packages (Debian names) yourself: ${missing[*]}" >&2
	exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
	as_root=()
elif command -v sudo >/dev/null 2>&1; then
	as_root=(sudo)
else
	echo "install-deps: missing packages (${missing[*]}) and not root, and sudo is not installed" >&2
	exit 1
fi

echo "install-deps: installing ${missing[*]}"
run=()
[ "${SLUICE_DEPS_DRY_RUN:-0}" = 1 ] && run=(echo "install-deps: would run:")
export DEBIAN_FRONTEND=noninteractive
"${run[@]}" "${as_root[@]}" apt-get update -qq
"${run[@]}" "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
