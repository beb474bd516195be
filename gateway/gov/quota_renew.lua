-- renew: extends a lease still held (a long stream).
-- KEYS[1..]  concurrency sets holding the lease
-- ARGV[1]    lease id, ARGV[2] lease TTL in ms
-- Returns how many of the sets still held the lease (0: it expired).
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local n = 0
for i = 1, #KEYS do
  local score = redis.call('ZSCORE', KEYS[i], ARGV[1])
  if score and tonumber(score) > now_ms then
    redis.call('ZADD', KEYS[i], now_ms + ttl, ARGV[1])
    if redis.call('PTTL', KEYS[i]) < ttl + 1000 then
      redis.call('PEXPIRE', KEYS[i], ttl + 1000)
    end
    n = n + 1
  end
end
return n
