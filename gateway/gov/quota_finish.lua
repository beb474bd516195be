-- finish: releases the lease and reconciles the token estimate with the
-- real count.  Never refuses: tokens already produced are always counted.
-- KEYS[1..12]  as for admit
-- ARGV[1..12]  limits as for admit
-- ARGV[13]     estimate reserved at admission, ARGV[14] real token count
-- ARGV[15]     lease id
-- Returns {leases released, now_ms}.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local sec = tonumber(t[1])
local now_us = sec * 1000000 + tonumber(t[2])
local now_ms = math.floor(now_us / 1000)
local WIN = 60000000
local day = math.floor(sec / 86400)
local to_midnight = (day + 1) * 86400000 - now_ms
local delta = tonumber(ARGV[14]) - tonumber(ARGV[13])
local released = 0
-- a tokens-per-minute TAT moved by the difference (a refund when negative)
local function reconcile(key, lim)
  if lim <= 0 or delta == 0 then return end
  local tat = tonumber(redis.call('GET', key) or '0') or 0
  if delta > 0 and tat < now_us then tat = now_us end
  local new_tat = tat + delta * (WIN / lim)
  if new_tat <= now_us then
    redis.call('DEL', key)
  else
    local px = math.ceil((new_tat - now_us) / 1000) + 1
    redis.call('SET', key, string.format('%.3f', new_tat), 'PX', px)
  end
end
for s = 1, 2 do
  local k = (s - 1) * 6
  local tpm, dl = tonumber(ARGV[k + 2]), tonumber(ARGV[k + 4])
  released = released + redis.call('ZREM', KEYS[k + 3], ARGV[15])
  reconcile(KEYS[k + 2], tpm)
  reconcile(KEYS[k + 6], tonumber(ARGV[k + 6]))
  if dl > 0 and delta ~= 0 then
    local v = redis.call('HMGET', KEYS[k + 4], 'day', 'used')
    local used = nil
    if tonumber(v[1]) == day then
      used = (tonumber(v[2]) or 0) + delta
      if used < 0 then used = 0 end
    elseif delta > 0 then
      used = delta
    end
    if used then
      redis.call('HSET', KEYS[k + 4], 'day', day, 'used', used)
      redis.call('PEXPIRE', KEYS[k + 4], to_midnight + 86400000)
    end
  end
end
return {released, now_ms}
