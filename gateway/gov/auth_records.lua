-- auth_records.lua - the tenant and client records of a key, in one round
-- trip (gateway/gov/auth.c).
-- KEYS[1] tenant hash, KEYS[2] client hash.  Returns {HGETALL tenant,
-- HGETALL client}.
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
