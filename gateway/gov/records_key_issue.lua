-- records_key_issue.lua - governance write (gateway/gov/records.c).
-- KEYS: client hash, key hash, client key index.  ARGV: id, pairs.
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HSET', KEYS[2], unpack(ARGV, 2))
redis.call('SADD', KEYS[3], ARGV[1])
return 1
