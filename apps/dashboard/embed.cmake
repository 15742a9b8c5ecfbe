# Turns a file into a C array: cmake -DIN=page.html -DOUT=page.c -DNAME=page -P embed.cmake
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE ${OUT} "/* generated from ${IN}; do not edit */\n#include <stddef.h>\nconst unsigned char ${NAME}[] = {${body}};\nconst size_t ${NAME}_len = ${bytes};\n")
