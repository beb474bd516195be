# lua_embed.cmake - turns one Lua script into a C source file.
# Run as: cmake -DIN=<file.lua> -DOUT=<file.c> -DNAME=<symbol> -P lua_embed.cmake
# The script becomes a NUL-terminated char array named NAME, bytes written
# in hex so that no escaping of the Lua text is needed.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
file(WRITE "${OUT}" "/* Generated from ${NAME}'s .lua file by lua_embed.cmake; do not edit. */\nextern const char ${NAME}[];\nconst char ${NAME}[] = {\n${hex}0x00};\n")
