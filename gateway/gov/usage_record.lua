-- usage_record.lua - adds one finished request to the usage counters,
-- once per request id.
--
-- KEYS[1]  <ns>usage:{<tenant>}:<YYYY-MM-DD>             tenant day hash
-- KEYS[2]  <ns>usage:{<tenant>}:c:<client>:<YYYY-MM-DD>  client day hash
-- KEYS[3]  <ns>usage:{<tenant>}:done:<request id>        marker
-- ARGV[1]  marker TTL, s
-- ARGV[2]  counter hash TTL, s
-- ARGV[3..] field, increment, field, increment ...
-- Reply: 1 counted, 0 already counted (the marker existed; nothing done).
--
-- The marker and the increments are written together, so a write retried
-- after a gateway restart (same request id) is counted exactly once, and
-- a write that did not happen leaves no marker.
if not redis.call('SET', KEYS[3], '1', 'NX', 'EX', ARGV[1]) then return 0 end
for i = 3, #ARGV - 1, 2 do
  local n = tonumber(ARGV[i + 1])
  if n and n ~= 0 then
    redis.call('HINCRBY', KEYS[1], ARGV[i], n)
    redis.call('HINCRBY', KEYS[2], ARGV[i], n)
  end
end
for k = 1, 2 do
  if redis.call('TTL', KEYS[k]) < 0 then redis.call('EXPIRE', KEYS[k], ARGV[2]) end
end
return 1
