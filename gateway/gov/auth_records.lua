-- auth_records.lua - the tenant and client records of a key, in one round
-- trip, and the key's revoked flag read again (gateway/gov/auth.c): a
-- revocation between the key lookup and this script is seen here.
-- KEYS[1] tenant hash, KEYS[2] client hash, KEYS[3] key hash.  Returns
-- {HGETALL tenant, HGETALL client, revoked ("1", or "0" when unset)}.
local revoked = redis.call('HGET', KEYS[3], 'revoked')
if not revoked then revoked = '0' end
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]), revoked}
