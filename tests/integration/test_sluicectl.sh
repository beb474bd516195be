#!/usr/bin/env bash
# test_sluicectl.sh - drives the built sluicectl against a private
# redis-server: tenants, clients, keys, exit codes, --json, revocation
# published on the channel, no key secret anywhere in Redis, and AUTH
# against a redis-server with requirepass.
#
# usage: test_sluicectl.sh SLUICECTL_BINARY
# Exit 77 (skip) when redis-server, redis-cli or jq is missing.
set -u

CTL_BIN=${1:?usage: test_sluicectl.sh SLUICECTL_BINARY}
for tool in redis-server redis-cli jq openssl; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool not installed"
		exit 77
	fi
done

TMP=$(mktemp -d /tmp/sluice-ctl-XXXXXX)
SOCK=$TMP/r.sock
REDIS_PID=
SUB_PID=
cleanup() {
	[ -n "$SUB_PID" ] && kill "$SUB_PID" 2>/dev/null && wait "$SUB_PID" 2>/dev/null
	[ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }

# expect CODE DESCRIPTION -- command...: runs sluicectl, checks its exit code.
expect() {
	local want=$1 what=$2
	shift 3
	"$CTL_BIN" --redis "unix://$SOCK" "$@" >"$TMP/out" 2>"$TMP/err"
	local got=$?
	if [ "$got" -eq "$want" ]; then
		pass "$what (exit $got)"
	else
		fail "$what: expected exit $want, got $got; stderr: $(cat "$TMP/err")"
	fi
}

rcli() { redis-cli -s "$SOCK" "$@"; }

# Polls `cmd` until it succeeds or the deadline (seconds) passes.
wait_for() {
	local deadline=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -ge "$deadline" ] && return 1
		sleep 0.02 # poll interval, bounded by the deadline
	done
}

redis-server --port 0 --unixsocket "$SOCK" --unixsocketperm 700 --save '' \
	--appendonly no --daemonize no --dir "$TMP" >"$TMP/redis.log" 2>&1 &
REDIS_PID=$!
pong() { [ "$(rcli PING 2>/dev/null)" = "PONG" ]; }
wait_for 10 pong || { echo "redis-server did not answer PING"; exit 1; }

PEPPER=$TMP/pepper
openssl rand -hex 32 >"$PEPPER"
chmod 600 "$PEPPER"

# ---- tenants --------------------------------------------------------------
expect 0 "tenant create" -- tenant create eng --rpm 600 --tpm 100000 --concurrency 8 --queue 16
expect 3 "tenant create twice is a conflict" -- tenant create eng
expect 0 "tenant create with every option" -- tenant create ops --weight 3 --rpm 60 \
	--tpm 5000 --concurrency 2 --queue 0 --daily-tokens 1000000 \
	--max-prompt-tokens 4096 --max-output-tokens 1024
expect 5 "upper-case name refused" -- tenant create Eng
expect 5 "path separator refused" -- tenant create a/b
expect 5 "dot-dot start refused" -- tenant create ..
expect 5 "control character refused" -- tenant create "$(printf 'a\tb')"
expect 5 "64-character name refused" -- tenant create "$(printf 'a%.0s' $(seq 64))"
expect 5 "negative rpm refused" -- tenant create x --rpm -5
expect 5 "zero rpm refused" -- tenant create x --rpm 0
expect 5 "absurd tpm refused" -- tenant create x --tpm 99999999999999
expect 5 "non-numeric weight refused" -- tenant create x --weight 2x
expect 1 "unknown option is a usage error" -- tenant create x --bogus 1
expect 1 "missing value is a usage error" -- tenant create x --rpm
expect 1 "unknown command is a usage error" -- frobnicate
[ "$(rcli EXISTS sluice:tenant:x)" = "0" ] && pass "refused creates wrote nothing" ||
	fail "a refused create left sluice:tenant:x"

expect 0 "tenant list" -- tenant list
grep -q '^eng ' "$TMP/out" && grep -q '^ops ' "$TMP/out" && pass "list shows both tenants" ||
	fail "tenant list: $(cat "$TMP/out")"
expect 0 "tenant list --json" -- --json tenant list
[ "$(jq -r '.[] | select(.name=="ops") | .weight' "$TMP/out")" = "3" ] &&
	[ "$(jq -r '.[] | select(.name=="eng") | .rpm' "$TMP/out")" = "600" ] &&
	pass "json list carries the quotas" || fail "tenant list --json: $(cat "$TMP/out")"
expect 2 "tenant show unknown" -- tenant show nobody
SALT=$(rcli HGET sluice:tenant:eng salt)
[ ${#SALT} -eq 64 ] && pass "tenant salt is 32 random bytes in hex" || fail "salt: '$SALT'"
[ "$SALT" != "$(rcli HGET sluice:tenant:ops salt)" ] && pass "salts differ per tenant" ||
	fail "two tenants share a salt"

# ---- clients ----------------------------------------------------------------
expect 0 "client create" -- client create eng/ci-bot
expect 0 "client create with override" -- client create eng/intern --rpm 10 --concurrency 1
expect 3 "client create twice" -- client create eng/ci-bot
expect 2 "client of an unknown tenant" -- client create nobody/x
expect 5 "client name with a slash" -- client create eng/a/b
expect 1 "weight on a client" -- client create eng/y --weight 2
expect 0 "tenant show" -- --json tenant show eng
[ "$(jq -r '.clients | length' "$TMP/out")" = "2" ] &&
	[ "$(jq -r '.clients[] | select(.name=="intern") | .rpm' "$TMP/out")" = "10" ] &&
	jq -e 'has("salt") | not' "$TMP/out" >/dev/null &&
	pass "tenant show lists clients and overrides, not the salt" ||
	fail "tenant show: $(cat "$TMP/out")"

# ---- keys ---------------------------------------------------------------------
expect 1 "key issue without a pepper" -- key issue eng/ci-bot
chmod 644 "$PEPPER"
expect 5 "key issue with a world-readable pepper" -- --pepper-file "$PEPPER" key issue eng/ci-bot
grep -q "chmod 600" "$TMP/err" && pass "pepper message says how to fix it" || fail "$(cat "$TMP/err")"
chmod 600 "$PEPPER"
expect 2 "key issue for an unknown client" -- --pepper-file "$PEPPER" key issue eng/nobody
expect 5 "key issue with a bad expiry" -- --pepper-file "$PEPPER" key issue eng/ci-bot --expires-in 5y
expect 0 "key issue" -- --pepper-file "$PEPPER" --json key issue eng/ci-bot --expires-in 90d
KEY=$(jq -r .key "$TMP/out")
KID=$(jq -r .key_id "$TMP/out")
[[ "$KEY" =~ ^slk_[0-9A-Za-z]{12}_[0-9A-Za-z]{38}$ ]] && [ "${KEY:4:12}" = "$KID" ] &&
	pass "key has the documented format" || fail "key format: '$KEY' id '$KID'"
SECRET=${KEY:17:32}
expect 0 "second key, plain output" -- --pepper-file "$PEPPER" key issue eng/intern
KEY2=$(sed -n 's/^key: *//p' "$TMP/out")
KID2=$(sed -n 's/^key id: *//p' "$TMP/out")
[ -n "$KEY2" ] && [ "${KEY2:4:12}" = "$KID2" ] && pass "plain output shows key and id" ||
	fail "key issue output: $(cat "$TMP/out")"

# The stored HMAC is HMAC-SHA256(pepper, id || secret), pepper = file bytes
# without the trailing newline.
WANT=$(printf '%s%s' "$KID" "$SECRET" |
	openssl dgst -sha256 -mac HMAC -macopt "key:$(tr -d '\n' <"$PEPPER")" | sed 's/.*= //')
[ "$(rcli HGET "sluice:key:$KID" hmac)" = "$WANT" ] && pass "Redis holds the HMAC" ||
	fail "stored hmac differs from HMAC(pepper, id||secret)"
[ "$(rcli HGET "sluice:key:$KID" client)" = "ci-bot" ] &&
	[ "$(rcli HGET "sluice:key:$KID" tenant)" = "eng" ] && pass "key record names its client" ||
	fail "key record: $(rcli HGETALL "sluice:key:$KID")"

expect 0 "key list" -- key list
grep -q "$KID" "$TMP/out" && grep -q "$KID2" "$TMP/out" && pass "list shows key ids" ||
	fail "key list: $(cat "$TMP/out")"
grep -q "$SECRET" "$TMP/out" && fail "key list shows a secret" || pass "key list shows no secret"
expect 0 "key list for one client, json" -- --json key list eng/ci-bot
[ "$(jq -r 'length' "$TMP/out")" = "1" ] && [ "$(jq -r '.[0].key_id' "$TMP/out")" = "$KID" ] &&
	[ "$(jq -r '.[0].status' "$TMP/out")" = "active" ] && pass "client key list" ||
	fail "key list eng/ci-bot: $(cat "$TMP/out")"
expect 2 "key list for an unknown client" -- key list eng/nobody

# No secret anywhere in Redis: every key name, and every value of every type.
scan_all() {
	local k t
	rcli --scan | while read -r k; do
		echo "$k"
		t=$(rcli TYPE "$k")
		case "$t" in
		string) rcli GET "$k" ;;
		hash) rcli HGETALL "$k" ;;
		set) rcli SMEMBERS "$k" ;;
		zset) rcli ZRANGE "$k" 0 -1 WITHSCORES ;;
		list) rcli LRANGE "$k" 0 -1 ;;
		stream) rcli XRANGE "$k" - + ;;
		*) echo "unknown type $t" ;;
		esac
	done
}
scan_all >"$TMP/dump"
[ "$(grep -c . "$TMP/dump")" -gt 20 ] && pass "Redis dump is not empty" || fail "empty dump"
for s in "$SECRET" "${KEY2:17:32}" "${SECRET:0:16}" "${SECRET:16:16}"; do
	if grep -qF "$s" "$TMP/dump"; then fail "a key secret is stored in Redis"; else pass "secret fragment absent from Redis"; fi
done

# ---- revocation ------------------------------------------------------------------
redis-cli -s "$SOCK" SUBSCRIBE sluice:revocations >"$TMP/sub" 2>&1 &
SUB_PID=$!
subscribed() { [ "$(rcli PUBSUB NUMSUB sluice:revocations | tail -n 1)" = "1" ]; }
wait_for 10 subscribed || fail "subscriber did not subscribe"
expect 0 "key revoke" -- key revoke "$KID"
got_revoke() { grep -qx "revoke key $KID" "$TMP/sub"; }
wait_for 5 got_revoke && pass "revocation published" || fail "no message: $(cat "$TMP/sub")"
[ "$(rcli HGET "sluice:key:$KID" revoked)" = "1" ] && pass "key marked revoked" ||
	fail "revoked flag not set"
expect 0 "revoking again is idempotent" -- key revoke "$KID"
expect 2 "revoke an unknown key id" -- key revoke AAAAAAAAAAAA
expect 5 "revoke with a whole key pasted" -- key revoke "$KEY2"
grep -qF "${KEY2:17:32}" "$TMP/err" && fail "error message echoes a secret" ||
	pass "error message does not echo the key"
expect 0 "client disable" -- client disable eng/intern
got_disable() { grep -qx "disable client eng/intern" "$TMP/sub"; }
wait_for 5 got_disable && pass "client disable published" || fail "no disable message"
[ "$(rcli HGET sluice:client:eng/intern disabled)" = "1" ] && pass "client flagged disabled" ||
	fail "disabled flag not set"
expect 0 "client enable" -- client enable eng/intern
[ "$(rcli HGET sluice:client:eng/intern disabled)" = "0" ] && pass "client enabled again" ||
	fail "enable did not clear the flag"
expect 2 "disable an unknown client" -- client disable eng/nobody
expect 0 "key list after revoke" -- --json key list eng/ci-bot
[ "$(jq -r '.[0].status' "$TMP/out")" = "revoked" ] && pass "list shows revoked" ||
	fail "status after revoke: $(cat "$TMP/out")"

# ---- quota updates, tenant cut-off, rotation ----------------------------------------
expect 0 "tenant set" -- tenant set eng --rpm 1200 --daily-tokens 500000 --clear concurrency
[ "$(rcli HGET sluice:tenant:eng rpm)" = "1200" ] &&
	[ "$(rcli HGET sluice:tenant:eng daily_tokens)" = "500000" ] &&
	[ "$(rcli HEXISTS sluice:tenant:eng concurrency)" = "0" ] &&
	pass "tenant set changes and clears fields" || fail "tenant set: $(rcli HGETALL sluice:tenant:eng)"
got_update() { grep -qx "update tenant eng" "$TMP/sub"; }
wait_for 5 got_update && pass "quota change published" || fail "no update message"
expect 1 "tenant set with nothing to change" -- tenant set eng
expect 5 "tenant set with a bad value" -- tenant set eng --tpm 0
expect 2 "tenant set unknown" -- tenant set nobody --rpm 5
expect 0 "client set" -- client set eng/intern --tpm 5000 --clear rpm
[ "$(rcli HGET sluice:client:eng/intern tpm)" = "5000" ] &&
	[ "$(rcli HEXISTS sluice:client:eng/intern rpm)" = "0" ] && pass "client set" ||
	fail "client set: $(rcli HGETALL sluice:client:eng/intern)"
expect 0 "tenant disable" -- tenant disable ops
got_tdisable() { grep -qx "disable tenant ops" "$TMP/sub"; }
wait_for 5 got_tdisable && pass "tenant disable published" || fail "no tenant disable message"
[ "$(rcli HGET sluice:tenant:ops disabled)" = "1" ] && pass "tenant flagged disabled" ||
	fail "tenant disabled flag not set"
expect 0 "tenant enable" -- tenant enable ops

expect 0 "key rotate" -- --pepper-file "$PEPPER" --json key rotate "$KID2" --overlap 2h
NEWKEY=$(jq -r .key "$TMP/out")
NEWID=$(jq -r .key_id "$TMP/out")
[ "$(jq -r .replaces "$TMP/out")" = "$KID2" ] && [ "$(rcli HGET "sluice:key:$NEWID" client)" = "intern" ] &&
	pass "rotation issues a key for the same client" || fail "rotate: $(cat "$TMP/out")"
OLDEXP=$(rcli HGET "sluice:key:$KID2" expires)
NOW=$(date +%s)
[ "$OLDEXP" -gt "$NOW" ] && [ "$OLDEXP" -le $((NOW + 7200)) ] &&
	pass "old key expires after the overlap" || fail "old key expires at '$OLDEXP'"
got_rot() { grep -qx "update key $KID2" "$TMP/sub"; }
wait_for 5 got_rot && pass "rotation published" || fail "no update key message"
scan_all >"$TMP/dump2"
grep -qF "${NEWKEY:17:32}" "$TMP/dump2" && fail "rotated key secret stored in Redis" ||
	pass "rotated key secret absent from Redis"
expect 3 "rotate a revoked key" -- --pepper-file "$PEPPER" key rotate "$KID"
expect 2 "rotate an unknown key" -- --pepper-file "$PEPPER" key rotate AAAAAAAAAAAA

# ---- audit log ------------------------------------------------------------------------
# Every mutating command above appended a record; the chain verifies.
expect 0 "audit verify" -- audit verify
grep -q "audit log intact" "$TMP/out" && pass "audit log intact" || fail "verify: $(cat "$TMP/out")"
expect 0 "audit list --json" -- --json audit list --count 1000
NREC=$(jq -r 'length' "$TMP/out")
[ "$NREC" -ge 20 ] && pass "audit holds $NREC records" || fail "audit list: $NREC records"
[ "$(jq -r '[.[] | select(.action=="key.revoke" and .target=="'"$KID"'" and .result=="ok")] | length' "$TMP/out")" -ge 1 ] &&
	pass "key revoke audited" || fail "no key.revoke record"
[ "$(jq -r '[.[] | select(.action=="tenant.create" and .target=="eng" and .result=="conflict")] | length' "$TMP/out")" = "1" ] &&
	pass "refused create audited as conflict" || fail "no conflict record"
[ "$(jq -r '[.[] | select(.action=="key.rotate" and (.target | startswith("'"$KID2"'>")))] | length' "$TMP/out")" = "1" ] &&
	pass "rotation audited as old>new" || fail "no key.rotate record"
[ "$(jq -r '.[0].actor' "$TMP/out")" = "$(id -un)" ] && pass "actor is the OS user" ||
	fail "actor: $(jq -r '.[0].actor' "$TMP/out")"
expect 0 "actor override" -- --actor ops-bot client create eng/audited
[ "$(rcli XREVRANGE sluice:audit + - COUNT 1 | sed -n '7p')" = "ops-bot" ] &&
	pass "--actor recorded" || fail "actor not recorded: $(rcli XREVRANGE sluice:audit + - COUNT 1)"
expect 5 "bad --actor refused" -- --actor "a b" client create eng/x2
expect 0 "audit list table" -- audit list
grep -q "tenant.create" "$TMP/out" && pass "audit table" || fail "audit list: $(cat "$TMP/out")"
grep -qF "$SECRET" "$TMP/dump" && fail "secret in audit" || true
# Edit one record: delete it and re-add it with a changed field.
MID=$(rcli XRANGE sluice:audit - + COUNT 5 | sed -n '52p') # 4th record's id (17 lines each)
NEXT=$(rcli XRANGE sluice:audit "($MID" + COUNT 1 | head -n 1)
mapfile -t F < <(rcli XRANGE sluice:audit "$MID" "$MID" | tail -n +2)
rcli XDEL sluice:audit "$MID" >/dev/null
F[5]=mallory
rcli XADD sluice:audit '*' "${F[@]}" >/dev/null
expect 6 "audit verify after an edited record" -- audit verify
grep -q "$NEXT" "$TMP/err" && pass "verify names the first bad record ($NEXT)" ||
	fail "verify message: $(cat "$TMP/err")"
expect 6 "audit verify --json after an edit" -- --json audit verify
[ "$(jq -r .intact "$TMP/out")" = "false" ] && pass "json says broken" || fail "$(cat "$TMP/out")"
# A fresh namespace: verify, then XDEL one record.
expect 0 "audited ns: tenant" -- --namespace au: tenant create t1
expect 0 "audited ns: client" -- --namespace au: client create t1/c1
expect 0 "audited ns: disable" -- --namespace au: client disable t1/c1
expect 0 "audit verify (fresh)" -- --namespace au: audit verify
SECOND=$(rcli XRANGE au:audit - + | sed -n '18p')
rcli XDEL au:audit "$SECOND" >/dev/null
expect 6 "audit verify after XDEL" -- --namespace au: audit verify
grep -q "seq" "$TMP/err" && pass "removal detected: $(cat "$TMP/err")" || fail "$(cat "$TMP/err")"

# ---- usage ----------------------------------------------------------------------------
TODAY=$(date -u +%F)
YDAY=$(date -u -d yesterday +%F)
rcli HSET "sluice:usage:{eng}:$TODAY" requests 3 prompt_tokens 30 cached_prompt_tokens 4 completion_tokens 12 errors_quota 1 >/dev/null
rcli HSET "sluice:usage:{eng}:c:ci-bot:$TODAY" requests 2 prompt_tokens 20 completion_tokens 10 >/dev/null
rcli HSET "sluice:usage:{eng}:c:intern:$TODAY" requests 1 prompt_tokens 10 cached_prompt_tokens 4 completion_tokens 2 errors_quota 1 >/dev/null
rcli HSET "sluice:usage:{eng}:$YDAY" requests 5 prompt_tokens 50 completion_tokens 5 errors_worker 2 >/dev/null
expect 0 "usage (all tenants, today)" -- usage
grep -q "^$TODAY  *eng  *\*  *3  *30  *4  *12  *1  *0  *0" "$TMP/out" && pass "usage table" ||
	fail "usage: $(cat "$TMP/out")"
expect 0 "usage csv for a tenant over two days" -- usage eng --from "$YDAY" --to "$TODAY" --format csv
[ "$(head -n 1 "$TMP/out")" = "day,tenant,client,requests,prompt_tokens,cached_prompt_tokens,completion_tokens,errors_auth,errors_quota,errors_bad_request,errors_overloaded,errors_worker,errors_internal,errors_cancelled" ] &&
	pass "csv header" || fail "csv header: $(head -n 1 "$TMP/out")"
grep -qx "$YDAY,eng,\*,5,50,0,5,0,0,0,0,2,0,0" "$TMP/out" &&
	grep -qx "$TODAY,eng,ci-bot,2,20,0,10,0,0,0,0,0,0,0" "$TMP/out" &&
	[ "$(wc -l <"$TMP/out")" = "5" ] && pass "csv rows" || fail "csv: $(cat "$TMP/out")"
expect 0 "usage json for a client" -- usage eng/intern --format json
[ "$(jq -r '.[0].errors_quota' "$TMP/out")" = "1" ] && [ "$(jq -r 'length' "$TMP/out")" = "1" ] &&
	pass "usage json" || fail "usage json: $(cat "$TMP/out")"
expect 0 "client rows add up to the tenant" -- --json usage eng
[ "$(jq -r '[.[] | select(.client != null) | .requests] | add' "$TMP/out")" = \
  "$(jq -r '.[] | select(.client == null) | .requests' "$TMP/out")" ] &&
	pass "client sums equal the tenant row" || fail "sums: $(cat "$TMP/out")"
expect 5 "usage with a bad day" -- usage --from 2026-02-30
expect 5 "usage --from after --to" -- usage --from "$TODAY" --to "$YDAY"
expect 5 "usage over more than 400 days" -- usage --from 2020-01-01 --to 2026-01-01
expect 2 "usage of an unknown tenant" -- usage nobody
expect 1 "usage with a bad format" -- usage --format xml

# ---- namespace and Redis unavailable ------------------------------------------------
expect 0 "another namespace" -- --namespace staging: tenant create eng
[ "$(rcli EXISTS staging:tenant:eng)" = "1" ] && pass "namespace prefixes keys" ||
	fail "namespace not applied"
expect 5 "bad namespace" -- --namespace "a b" tenant list
"$CTL_BIN" --redis "unix://$TMP/none.sock" tenant list >/dev/null 2>&1
[ $? -eq 4 ] && pass "Redis unavailable exits 4" || fail "Redis unavailable did not exit 4"
"$CTL_BIN" --redis "http://x" tenant list >/dev/null 2>&1
[ $? -eq 1 ] && pass "bad URL is a usage error" || fail "bad URL did not exit 1"

# ---- a Redis with requirepass --------------------------------------------------------
ASOCK=$TMP/auth.sock
redis-server --port 0 --unixsocket "$ASOCK" --unixsocketperm 700 --save '' \
	--appendonly no --daemonize no --dir "$TMP" --requirepass "s3cret-Redis-pw" \
	>"$TMP/redis-auth.log" 2>&1 &
AUTH_PID=$!
apong() { redis-cli -s "$ASOCK" PING 2>&1 | grep -q NOAUTH; }
wait_for 10 apong || fail "redis-server with requirepass did not answer"
printf 's3cret-Redis-pw\n' >"$TMP/redis-pw"
chmod 600 "$TMP/redis-pw"
printf 'wrong-pw\n' >"$TMP/redis-wrong"
chmod 600 "$TMP/redis-wrong"
actl() { "$CTL_BIN" --redis "unix://$ASOCK" "$@" >"$TMP/out" 2>"$TMP/err"; }
actl tenant list
[ $? -eq 4 ] && grep -q NOAUTH "$TMP/err" && pass "no password against requirepass: exit 4, NOAUTH" ||
	fail "no password: $(cat "$TMP/err")"
actl --redis-password-file "$TMP/redis-pw" tenant create authed
[ $? -eq 0 ] && pass "--redis-password-file: AUTH then tenant create" || fail "AUTH: $(cat "$TMP/err")"
SLUICE_REDIS_PASSWORD_FILE=$TMP/redis-pw actl tenant show authed
[ $? -eq 0 ] && pass "\$SLUICE_REDIS_PASSWORD_FILE" || fail "env password: $(cat "$TMP/err")"
actl --redis-password-file "$TMP/redis-wrong" tenant list
[ $? -eq 4 ] && grep -q "Redis refused AUTH: WRONGPASS" "$TMP/err" && ! grep -q wrong-pw "$TMP/err" &&
	pass "wrong password: exit 4, Redis's words, not the password" || fail "wrong: $(cat "$TMP/err")"
chmod 644 "$TMP/redis-pw"
actl --redis-password-file "$TMP/redis-pw" tenant list
[ $? -eq 5 ] && grep -q "mode 0644" "$TMP/err" && ! grep -q s3cret "$TMP/err" &&
	pass "password file readable by others: exit 5" || fail "mode: $(cat "$TMP/err")"
actl --redis-user gw tenant list
[ $? -eq 1 ] && pass "--redis-user without a password file: usage error" || fail "user: $(cat "$TMP/err")"
kill "$AUTH_PID" 2>/dev/null && wait "$AUTH_PID" 2>/dev/null

if [ "$FAILS" -ne 0 ]; then
	echo "$FAILS check(s) failed"
	exit 1
fi
echo "all checks passed"
