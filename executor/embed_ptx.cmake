# Turns a PTX file into a C source defining `const char NAME[]`, the text
# and its final NUL, so that the executor carries ferry's own kernels
# without nvcc at build time. Run as: cmake -DIN=... -DOUT=... -DNAME=... -P
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n  "
       bytes "${bytes}")
file(WRITE ${OUT}.tmp "/* generated from ${IN} by executor/embed_ptx.cmake */\n"
     "const char ${NAME}[] = {\n  ${bytes}0x00};\n")
# rewritten only when it changed, so that a re-run rebuilds nothing
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
file(REMOVE ${OUT}.tmp)
