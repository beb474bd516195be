# lua_embed.cmake - turns Lua scripts into one C source file.
# Run as: cmake -DOUT=<file.c> -DSCRIPTS="<name>=<file.lua>;..." -P lua_embed.cmake
# Each script becomes a NUL-terminated char array named gw_lua_src_<name>,
# bytes written in hex so that no escaping of the Lua text is needed.
# gateway/redis/lua.c indexes them (enum gw_lua_script).
set(body "/* Generated from the gateway Lua scripts by gateway/redis/lua_embed.cmake; do not edit. */\n")
foreach(pair ${SCRIPTS})
  string(REGEX REPLACE "^([a-z_]+)=(.*)$" "\\1" name "${pair}")
  string(REGEX REPLACE "^([a-z_]+)=(.*)$" "\\2" path "${pair}")
  file(READ "${path}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
  string(APPEND body "extern const char gw_lua_src_${name}[];\n")
  string(APPEND body "const char gw_lua_src_${name}[] = {\n${hex}0x00};\n")
endforeach()
file(WRITE "${OUT}" "${body}")
