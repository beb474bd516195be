-- records_key_revoke.lua - governance write (gateway/gov/records.c).
-- KEYS: key hash.  ARGV: now, channel, message.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local was = redis.call('HGET', KEYS[1], 'revoked')
if was ~= '1' then
  redis.call('HSET', KEYS[1], 'revoked', '1', 'revoked_at', ARGV[1])
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
if was == '1' then return 2 end
return 1
