# quota_embed.cmake - turns the quota Lua scripts into a C source file.
# Run as: cmake -DOUT=<file.c> -DSRC_DIR=<gateway dir> -P quota_embed.cmake
# Each script becomes a NUL-terminated char array named gw_quota_lua_<name>;
# bytes are written in hex so that no escaping of the Lua text is needed.
set(body "/* Generated from gateway/quota_*.lua by quota_embed.cmake; do not edit. */\n")
foreach(name admit finish renew)
  file(READ "${SRC_DIR}/quota_${name}.lua" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
  string(APPEND body "extern const char gw_quota_lua_${name}[];\n")
  string(APPEND body "const char gw_quota_lua_${name}[] = {\n${hex}0x00};\n")
endforeach()
file(WRITE "${OUT}" "${body}")
