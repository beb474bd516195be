-- admit: checks every limit of both scopes, then consumes all or nothing.
-- KEYS[1..6]  tenant scope: rpm (GCRA TAT), tpm (GCRA TAT), concurrency
--             (sorted set of lease ids scored by expiry ms), daily (hash),
--             embed rpm, embed tpm (GCRA TATs)
-- KEYS[7..12] client scope: same six
-- ARGV[1..6]  tenant limits: rpm, tpm, concurrency, daily tokens, embed rpm,
--             embed tpm (0 = none; the embed ones 0 unless the request embeds)
-- ARGV[7..12] client limits: same six
-- ARGV[13]    token estimate of this request (>= 0)
-- ARGV[14]    lease id (unique per request)
-- ARGV[15]    lease TTL in ms
-- Returns {allowed 0|1, scope, limit, retry_after_ms (-1: never), now_ms}.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local sec = tonumber(t[1])
local now_us = sec * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)
local WIN = 60000000
local day = math.floor(sec / 86400)
local to_midnight = (day + 1) * 86400000 - now_ms
local cost = tonumber(ARGV[13])
local lease = ARGV[14]
local ttl = tonumber(ARGV[15])
local refused, r_scope, r_limit, r_retry = false, '', '', 0
local writes = {}

local function refuse(scope, limit, retry)
  if not refused or (r_retry ~= -1 and (retry == -1 or retry > r_retry)) then
    r_scope, r_limit, r_retry = scope, limit, retry
  end
  refused = true
end

-- GCRA: a request of n units needs n*T of the span; tat is the theoretical
-- arrival time in us.  Admitted when tat + n*T - span <= now (+ tol).
local function gcra(key, T, span, n, tol, scope, limit)
  if n <= 0 then return end
  if n * T > span + tol then refuse(scope, limit, -1) return end
  local tat = tonumber(redis.call('GET', key) or '0') or 0
  if tat < now_us then tat = now_us end
  local new_tat = tat + n * T
  local wait = new_tat - span - now_us
  if wait > tol then
    local ms = math.ceil(wait / 1000)
    if ms < 1 then ms = 1 end
    refuse(scope, limit, ms)
    return
  end
  writes[#writes + 1] = {1, key, new_tat}
end

local function concurrency(key, lim, scope)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms)
  if redis.call('ZSCORE', key, lease) then
    writes[#writes + 1] = {2, key}
    return
  end
  if redis.call('ZCARD', key) >= lim then
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local hint = 1000
    if first[2] then
      local d = tonumber(first[2]) - now_ms
      if d < hint then hint = d end
    end
    if hint < 1 then hint = 1 end
    refuse(scope, 'concurrency', hint)
    return
  end
  writes[#writes + 1] = {2, key}
end

local function daily(key, lim, n, scope)
  if n > lim then refuse(scope, 'daily_tokens', -1) return end
  local v = redis.call('HMGET', key, 'day', 'used')
  local used = 0
  if tonumber(v[1]) == day then used = tonumber(v[2]) or 0 end
  if used >= lim or used + n > lim then
    refuse(scope, 'daily_tokens', to_midnight)
    return
  end
  writes[#writes + 1] = {3, key, used + n}
end

local SCOPES = {'tenant', 'client'}
for s = 1, 2 do
  local k = (s - 1) * 6
  local rpm, tpm = tonumber(ARGV[k + 1]), tonumber(ARGV[k + 2])
  local cc, dl = tonumber(ARGV[k + 3]), tonumber(ARGV[k + 4])
  local erpm, etpm = tonumber(ARGV[k + 5]), tonumber(ARGV[k + 6])
  if rpm > 0 then
    local T = math.floor(WIN / rpm)
    gcra(KEYS[k + 1], T, rpm * T, 1, 0, SCOPES[s], 'rpm')
  end
  if tpm > 0 then gcra(KEYS[k + 2], WIN / tpm, WIN, cost, 1, SCOPES[s], 'tpm') end
  if cc > 0 then concurrency(KEYS[k + 3], cc, SCOPES[s]) end
  if dl > 0 then daily(KEYS[k + 4], dl, cost, SCOPES[s]) end
  if erpm > 0 then
    local T = math.floor(WIN / erpm)
    gcra(KEYS[k + 5], T, erpm * T, 1, 0, SCOPES[s], 'embed_rpm')
  end
  if etpm > 0 then gcra(KEYS[k + 6], WIN / etpm, WIN, cost, 1, SCOPES[s], 'embed_tpm') end
end
if refused then return {0, r_scope, r_limit, r_retry, now_ms} end

for _, w in ipairs(writes) do
  if w[1] == 1 then
    local px = math.ceil((w[3] - now_us) / 1000) + 1
    redis.call('SET', w[2], string.format('%.3f', w[3]), 'PX', px)
  elseif w[1] == 2 then
    redis.call('ZADD', w[2], now_ms + ttl, lease)
    if redis.call('PTTL', w[2]) < ttl + 1000 then
      redis.call('PEXPIRE', w[2], ttl + 1000)
    end
  else
    redis.call('HSET', w[2], 'day', day, 'used', w[3])
    redis.call('PEXPIRE', w[2], to_midnight + 86400000)
  end
end
return {1, '', '', 0, now_ms}
