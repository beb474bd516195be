-- records_key_shorten.lua - governance write (gateway/gov/records.c).
-- KEYS: key hash.  ARGV: until, channel, message.  Sets expires to
-- min(current, until); refuses a revoked key.  Returns {status, tenant,
-- client, new expiry}: status 0 missing, 1 ok, 2 revoked.
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, '', '', 0} end
local k = redis.call('HMGET', KEYS[1], 'tenant', 'client', 'expires', 'revoked')
if k[4] == '1' then return {2, k[1], k[2], 0} end
local exp = tonumber(ARGV[1])
local cur = tonumber(k[3]) or 0
if cur > 0 and cur < exp then exp = cur end
redis.call('HSET', KEYS[1], 'expires', exp)
redis.call('PUBLISH', ARGV[2], ARGV[3])
return {1, k[1], k[2], exp}
