-- records_flag.lua - governance write (gateway/gov/records.c).
-- KEYS: record.  ARGV: 0|1, channel, message.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'disabled', ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
