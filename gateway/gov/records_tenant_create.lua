-- records_tenant_create.lua - governance write (gateway/gov/records.c).
-- KEYS: tenant hash, tenants index.  ARGV: name, field/value pairs.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('SADD', KEYS[2], ARGV[1])
return 1
