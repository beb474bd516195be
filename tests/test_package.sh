#!/usr/bin/env bash
# test_package.sh BUILD - `cpack -G DEB` builds the Debian package of
# docs/operations.md: its control fields (name, the shared libraries it
# depends on), its files under /usr and the units naming /usr/bin and
# /etc/sluice.  Then, as root (dpkg writes files owned by other users), the
# package is installed into a scratch root with dpkg --root and the maintainer
# scripts run there: postinst creates the `sluice` user and group once, the
# directories with their owners and modes, the model link and a 0600 pepper;
# a reinstall changes none of them; a purge removes what postinst made but
# the user.  Nothing outside the scratch folder is touched.
set -euo pipefail
bd=$1
tmp=$(mktemp -d /tmp/sluice-package-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

for t in cpack dpkg-deb; do
	command -v $t >/dev/null || { echo "SKIP: $t is not installed"; exit 0; }
done
(cd "$bd" && cpack -G DEB -B "$tmp/out") >"$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log"; exit 1; }
deb=$(ls "$tmp"/out/sluice_*.deb)
info=$(dpkg-deb --info "$deb")
check "package name" 'grep -q "^ Package: sluice$" <<<"$info"'
for lib in libjansson4 libssl3 libhiredis libevent-2.1 libc6 passwd; do
	check "depends on $lib" 'grep "^ Depends:" <<<"$info" | grep -q "$lib"'
done
check "recommends redis-server" 'grep -q "^ Recommends: redis-server" <<<"$info"'
dpkg-deb --contents "$deb" | awk '{ print $6 }' >"$tmp/contents"
for f in usr/bin/sluice-worker usr/bin/sluice-gateway usr/bin/sluicectl usr/bin/sluice-model usr/bin/sluice-bench \
	usr/lib/systemd/system/sluice-gateway.service usr/lib/systemd/system/sluice-worker@.service \
	usr/share/doc/sluice/examples/gateway.json usr/share/doc/sluice/operations.md \
	usr/share/sluice/models/stories260K/stories260K.gguf usr/share/sluice/models/stories260K/LICENSE; do
	check "/$f in the package" 'grep -qx "./$f" "$tmp/contents"'
done
check "nothing outside /usr" '! grep -v "^\./usr/" "$tmp/contents" | grep -qv "^\./$"'
mkdir "$tmp/x"
dpkg-deb -x "$deb" "$tmp/x"
for u in "$tmp"/x/usr/lib/systemd/system/*.service; do
	check "$(basename "$u") names /usr/bin and /etc/sluice" \
		'grep -q "^ExecStart=/usr/bin/sluice-" "$u" && ! grep -q "/usr/local" "$u" && grep -q " /etc/sluice/" "$u"'
done
mkdir "$tmp/ctl"
dpkg-deb -e "$deb" "$tmp/ctl"
for s in postinst prerm postrm; do
	check "$s is an executable sh script" '[ -x "$tmp/ctl/$s" ] && sh -n "$tmp/ctl/$s"'
done

if [ "$(id -u)" -ne 0 ] || ! command -v dpkg >/dev/null || ! command -v useradd >/dev/null; then
	echo "SKIP: the maintainer scripts run only as root with dpkg and useradd"
	exit $fail
fi
r=$tmp/root
mkdir -p "$r/etc" "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$r/var/lib/dpkg/triggers"
touch "$r/var/lib/dpkg/status" "$r/var/lib/dpkg/available"
echo 'root:x:0:0:root:/root:/bin/sh' >"$r/etc/passwd"
echo 'root:x:0:' >"$r/etc/group"
(umask 027 && echo 'root:*:19000:0:99999:7:::' >"$r/etc/shadow" && echo 'root:*::' >"$r/etc/gshadow")
dpkgr() { dpkg --root="$r" --log=/dev/null --force-script-chrootless --force-depends "$@" >>"$tmp/dpkg.log" 2>&1; }
dpkgr -i "$deb" || { cat "$tmp/dpkg.log"; bad "dpkg -i into a scratch root"; exit 1; }
ok "dpkg -i into a scratch root"
uid=$(awk -F: '$1 == "sluice" { print $3 }' "$r/etc/passwd")
gid=$(awk -F: '$1 == "sluice" { print $3 }' "$r/etc/group")
check "sluice user and group created" '[ -n "$uid" ] && [ -n "$gid" ] && [ "$uid" -lt 1000 ]'
check "sluice has no login shell" 'grep -q "^sluice:.*:/var/lib/sluice:/usr/sbin/nologin$" "$r/etc/passwd"'
mode() { stat -c '%a %u %g' "$1"; }
check "/etc/sluice root:sluice 0750" '[ "$(mode "$r/etc/sluice")" = "750 0 $gid" ]'
check "/var/lib/sluice/models sluice:sluice 0750" '[ "$(mode "$r/var/lib/sluice/models")" = "750 $uid $gid" ]'
check "pepper sluice 0600, not empty" '[ "$(mode "$r/etc/sluice/pepper")" = "600 $uid $gid" ] && [ -s "$r/etc/sluice/pepper" ]'
link=$(readlink "$r/var/lib/sluice/models/stories260K")
check "model link names the installed model" '[ -f "$r$link/stories260K.gguf" ]'
check "installed binary inspects the linked model" \
	'"$r/usr/bin/sluice-model" inspect "$r$link/stories260K.gguf" | grep -q "architecture: llama"'
pepper=$(cat "$r/etc/sluice/pepper")
dpkgr -i "$deb" || { cat "$tmp/dpkg.log"; bad "reinstall"; }
check "reinstall: one sluice user, one group" \
	'[ "$(grep -c "^sluice:" "$r/etc/passwd")" = 1 ] && [ "$(grep -c "^sluice:" "$r/etc/group")" = 1 ]'
check "reinstall keeps the pepper" '[ "$(cat "$r/etc/sluice/pepper")" = "$pepper" ]'
dpkgr -P sluice || { cat "$tmp/dpkg.log"; bad "purge"; }
check "purge removes the binaries" '[ ! -e "$r/usr/bin/sluice-gateway" ]'
check "purge removes the pepper and the directories" \
	'[ ! -e "$r/etc/sluice" ] && [ ! -e "$r/var/lib/sluice" ]'
check "purge keeps the user" 'grep -q "^sluice:" "$r/etc/passwd"'
exit $fail
