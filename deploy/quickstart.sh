#!/usr/bin/env bash
# quickstart.sh - the README's "run it" command.
#
# Installs the dependencies (deploy/install-deps.sh), builds the three
# binaries in build/ (CUDA when nvcc is found) and shows what they are.
# The service itself (private Redis, a worker on a synthetic model, a
# gateway with a self-signed certificate, a tenant, a key and a working
# curl) is added here by the issues that follow; until then this script
# builds and prints the versions.
#
# Environment: SLUICE_JOBS (default nproc), SLUICE_CUDA (AUTO, ON, OFF),
# SLUICE_SKIP_DEPS=1 to skip the apt step.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs=${SLUICE_JOBS:-$(nproc)}

if [ "${SLUICE_SKIP_DEPS:-0}" != 1 ]; then
	deploy/install-deps.sh
fi

echo "==> building sluice-worker, sluice-gateway, sluicectl in build/"
mkdir -p build
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DSLUICE_CUDA="${SLUICE_CUDA:-AUTO}" -DSLUICE_SANITIZE=OFF \
	-DSLUICE_FUZZ=OFF >build/quickstart-configure.log 2>&1 || {
	cat build/quickstart-configure.log
	exit 1
}
grep 'sluice: CUDA backend' build/quickstart-configure.log || true
cmake --build build -j"$jobs" --target sluice-worker sluice-gateway sluicectl

echo
echo "==> built"
./build/worker/sluice-worker --version
./build/gateway/sluice-gateway --version
./build/tools/sluicectl --version
cat <<'MSG'

The binaries build and run; the service itself (Redis, a worker on a
synthetic model, a gateway over TLS, a tenant and a key, and a curl that
works) arrives with the next issues, and this script will start it.
Run the tests with: tests/run.sh
MSG
