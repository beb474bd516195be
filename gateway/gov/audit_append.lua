-- audit_append.lua - appends one hash-chained record to the audit stream.
--
-- KEYS[1]  <ns>audit        the stream
-- KEYS[2]  <ns>audit:head   hash {seq, hash} of the last record
-- ARGV[1]  actor   [A-Za-z0-9][A-Za-z0-9_.@:-]{0,63}
-- ARGV[2]  action  [a-z][a-z_.]{0,31}
-- ARGV[3]  target  [A-Za-z0-9_.:/@>-]{1,160}
-- ARGV[4]  result  [a-z_]{1,16}
-- Reply: {stream id, seq, hash, time}.
--
-- seq = previous seq + 1, prev = previous hash (64 zeros for the first),
-- time = Redis TIME in Unix microseconds, hash = hex SHA-256 of
--   "sluice-audit-v1\nseq=S\nprev=P\nactor=A\naction=X\ntarget=T\ntime=U\nresult=R\n"
-- (docs/audit.md).  Running as one script makes read-head, append and
-- move-head atomic, so concurrent writers form one chain.  The charsets
-- are checked again here: no field can carry free text.
local function ok(s, pat, maxlen)
  return type(s) == 'string' and #s >= 1 and #s <= maxlen and string.match(s, pat) ~= nil
end
if not ok(ARGV[1], '^[%w][%w_.@:%-]*$', 64) then return redis.error_reply('ERR audit: bad actor') end
if not ok(ARGV[2], '^[a-z][a-z_.]*$', 32) then return redis.error_reply('ERR audit: bad action') end
if not ok(ARGV[3], '^[%w_.:/@>%-]+$', 160) then return redis.error_reply('ERR audit: bad target') end
if not ok(ARGV[4], '^[a-z_]+$', 16) then return redis.error_reply('ERR audit: bad result') end

local band, bor, bxor, bnot = bit.band, bit.bor, bit.bxor, bit.bnot
local rshift, lshift, ror, tobit = bit.rshift, bit.lshift, bit.ror, bit.tobit
local K = {
0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2}

-- SHA-256 (FIPS 180-4) with 32-bit words held as LuaBitOp signed integers.
local function sha256(msg)
  local bits = #msg * 8
  msg = msg .. '\128' .. string.rep('\0', (55 - #msg) % 64) .. '\0\0\0\0' ..
        string.char(band(rshift(bits, 24), 255), band(rshift(bits, 16), 255),
                    band(rshift(bits, 8), 255), band(bits, 255))
  local H = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
             0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}
  for i = 1, #msg, 64 do
    local w = {}
    for j = 0, 15 do
      local b1, b2, b3, b4 = string.byte(msg, i + 4 * j, i + 4 * j + 3)
      w[j] = bor(lshift(b1, 24), lshift(b2, 16), lshift(b3, 8), b4)
    end
    for j = 16, 63 do
      local x, y = w[j - 15], w[j - 2]
      local s0 = bxor(ror(x, 7), ror(x, 18), rshift(x, 3))
      local s1 = bxor(ror(y, 17), ror(y, 19), rshift(y, 10))
      w[j] = tobit(w[j - 16] + s0 + w[j - 7] + s1)
    end
    local a, b, c, d, e, f, g, h = H[1], H[2], H[3], H[4], H[5], H[6], H[7], H[8]
    for j = 0, 63 do
      local S1 = bxor(ror(e, 6), ror(e, 11), ror(e, 25))
      local ch = bxor(band(e, f), band(bnot(e), g))
      local t1 = tobit(h + S1 + ch + K[j + 1] + w[j])
      local S0 = bxor(ror(a, 2), ror(a, 13), ror(a, 22))
      local maj = bxor(band(a, b), band(a, c), band(b, c))
      local t2 = tobit(S0 + maj)
      h = g; g = f; f = e; e = tobit(d + t1)
      d = c; c = b; b = a; a = tobit(t1 + t2)
    end
    H[1] = tobit(H[1] + a); H[2] = tobit(H[2] + b)
    H[3] = tobit(H[3] + c); H[4] = tobit(H[4] + d)
    H[5] = tobit(H[5] + e); H[6] = tobit(H[6] + f)
    H[7] = tobit(H[7] + g); H[8] = tobit(H[8] + h)
  end
  local out = {}
  for i = 1, 8 do out[i] = bit.tohex(H[i], 8) end
  return table.concat(out)
end

local head = redis.call('HMGET', KEYS[2], 'seq', 'hash')
local seq = (tonumber(head[1]) or 0) + 1
local prev = head[2] or string.rep('0', 64)
local t = redis.call('TIME')
local time = t[1] .. string.format('%06d', tonumber(t[2]))
local seqs = string.format('%d', seq)
local enc = 'sluice-audit-v1\nseq=' .. seqs .. '\nprev=' .. prev ..
            '\nactor=' .. ARGV[1] .. '\naction=' .. ARGV[2] ..
            '\ntarget=' .. ARGV[3] .. '\ntime=' .. time ..
            '\nresult=' .. ARGV[4] .. '\n'
local hash = sha256(enc)
local id = redis.call('XADD', KEYS[1], '*', 'seq', seqs, 'prev', prev,
                      'actor', ARGV[1], 'action', ARGV[2], 'target', ARGV[3],
                      'time', time, 'result', ARGV[4], 'hash', hash)
redis.call('HSET', KEYS[2], 'seq', seqs, 'hash', hash)
return {id, seqs, hash, time}
