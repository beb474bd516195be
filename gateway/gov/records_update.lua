-- records_update.lua - governance write (gateway/gov/records.c).
-- KEYS: record.  ARGV[1] channel, ARGV[2] message, ARGV[3] number of
-- field/value pairs n, then n pairs, then the fields to delete.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local n = tonumber(ARGV[3])
for i = 0, n - 1 do
  redis.call('HSET', KEYS[1], ARGV[4 + 2 * i], ARGV[5 + 2 * i])
end
for i = 4 + 2 * n, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
