#!/usr/bin/env bash
# test_deploy_configs.sh SRC BUILD - every example configuration shipped in
# deploy/ (examples/*.json and the JSON embedded in k8s/config.yaml) passes
# `check-config` of the binary it is for.
set -euo pipefail
src=$1 bd=$2
tmp=$(mktemp -d /tmp/sluice-deploy-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # file
	local bin=$bd/worker/sluice-worker
	case $(basename "$1") in gateway*) bin=$bd/gateway/sluice-gateway ;; esac
	if "$bin" check-config "$1" >/dev/null; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}
for f in "$src"/deploy/examples/*.json; do check "$f"; done
# the ConfigMap: each "  name.json: |" block, indented 4 spaces
awk -v dir="$tmp" '
	/^  [A-Za-z0-9_.-]+\.json: \|$/ { name = $1; sub(":", "", name); out = dir "/" name; next }
	out && /^    / { print substr($0, 5) > out; next }
	{ out = "" }' "$src/deploy/k8s/config.yaml"
n=0
for f in "$tmp"/*.json; do check "$f"; n=$((n + 1)); done
[ "$n" -ge 2 ] || { echo "FAIL no JSON found in deploy/k8s/config.yaml"; fail=1; }
exit $fail
