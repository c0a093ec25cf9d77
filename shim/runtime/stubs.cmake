# Weak stubs for every function of libcudart.so.13 (see gen_stubs.sh), so a
# program that imports a call ferry does not implement still loads.
# Include from any CMakeLists: the file is generated into that directory's
# binary dir, so each including directory gets its own rule (CMake attaches a
# custom command only to targets of the directory that declares it).
# Sets:
#   FERRY_STUBS_C      generated C file: add it to the target's sources
#                      together with shim/core/errors.c (ferry_unsupported_call)
#   FERRY_STUB_NAMES   generated list of the stubbed names, one a line, for
#                      checking the version script / coverage
#   FERRY_CUDART_SYMBOLS the committed symbol list it is made from
# Link real implementations as sources or object files, not from a static
# archive: the linker does not pull an archive member to replace a weak
# definition it already has.
set(FERRY_CUDART_SYMBOLS ${CMAKE_CURRENT_LIST_DIR}/cudart_symbols.txt)
set(FERRY_STUBS_C ${CMAKE_CURRENT_BINARY_DIR}/ferry_stubs.c)
set(FERRY_STUB_NAMES ${CMAKE_CURRENT_BINARY_DIR}/ferry_stub_names.txt)
add_custom_command(
  OUTPUT ${FERRY_STUBS_C} ${FERRY_STUB_NAMES}
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/gen_stubs.sh ${FERRY_CUDART_SYMBOLS} ${FERRY_STUBS_C} ${FERRY_STUB_NAMES}
  DEPENDS ${CMAKE_CURRENT_LIST_DIR}/gen_stubs.sh ${FERRY_CUDART_SYMBOLS}
  COMMENT "Generating weak stubs for unsupported CUDA runtime calls"
  VERBATIM)
