#!/usr/bin/env bash
# test_install.sh BUILD - `cmake --install BUILD --prefix SCRATCH` puts the
# binaries, the systemd units, the example configurations, the shipped model
# and the docs where docs/operations.md says; the installed units name the
# prefix's binaries and pass `systemd-analyze verify` (when systemd-analyze
# is there); the installed binaries run and check the installed examples.
set -euo pipefail
bd=$1
tmp=$(mktemp -d /tmp/sluice-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

cmake --install "$bd" --prefix "$tmp/p" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
for f in bin/sluice-worker bin/sluice-gateway bin/sluicectl bin/sluice-model bin/sluice-bench \
	lib/systemd/system/sluice-gateway.service lib/systemd/system/sluice-worker@.service \
	share/doc/sluice/examples/gateway.json share/doc/sluice/examples/worker-gpu0.json \
	share/sluice/models/stories260K/stories260K.gguf share/sluice/models/stories260K/LICENSE \
	share/doc/sluice/operations.md share/doc/sluice/README.md; do
	if [ -e "$tmp/p/$f" ]; then ok "$f"; else bad "$f is not installed"; fi
done
for u in "$tmp"/p/lib/systemd/system/*.service; do
	if grep -q '/usr/local/bin' "$u" || ! grep -q "^ExecStart=$tmp/p/bin/" "$u"; then
		bad "$(basename "$u"): ExecStart does not name the prefix's binary"
	else
		ok "$(basename "$u") names $tmp/p/bin"
	fi
	if command -v systemd-analyze >/dev/null 2>&1; then
		if (cd "$tmp" && systemd-analyze verify "$u") >"$tmp/verify.log" 2>&1; then
			ok "systemd-analyze verify $(basename "$u")"
		else
			cat "$tmp/verify.log"
			bad "systemd-analyze verify $(basename "$u")"
		fi
	fi
done
if "$tmp/p/bin/sluice-gateway" check-config "$tmp/p/share/doc/sluice/examples/gateway.json" >/dev/null &&
	"$tmp/p/bin/sluice-worker" check-config "$tmp/p/share/doc/sluice/examples/worker-gpu0.json" >/dev/null; then
	ok "installed binaries check the installed examples"
else
	bad "installed binaries check the installed examples"
fi
"$tmp/p/bin/sluice-model" inspect "$tmp/p/share/sluice/models/stories260K/stories260K.gguf" |
	grep -q 'architecture: llama' && ok "installed model inspects" || bad "installed model inspects"
exit $fail
