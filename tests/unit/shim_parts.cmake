# shim parts that need no server: error names/messages, the weak stubs of
# unsupported calls, and cudaDeviceProp built from device attributes.
# stubs.cmake generates its own copy of the stubs into this directory's binary
# dir (a custom command serves only targets of the directory declaring it).
include(${CMAKE_CURRENT_LIST_DIR}/../../shim/stubs.cmake)
ferry_unit_test(test_errors
  ${CMAKE_CURRENT_LIST_DIR}/test_errors.c
  ${CMAKE_CURRENT_LIST_DIR}/../../shim/errors.c
  ${FERRY_STUBS_C})
target_link_libraries(test_errors PRIVATE Threads::Threads)
ferry_unit_test(test_props
  ${CMAKE_CURRENT_LIST_DIR}/test_props.c
  ${CMAKE_CURRENT_LIST_DIR}/../../shim/props.c)
