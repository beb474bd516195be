-- records_touch.lua - a key's last_used, written by the gateway that
-- authenticated it (gateway/gov/auth.c), at most once a minute per key.
-- KEYS: key record.  ARGV: Unix seconds.  A key deleted meanwhile is not
-- recreated.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'last_used', ARGV[1])
return 1
