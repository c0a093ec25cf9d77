# shim parts that need no server: error names/messages, the weak stubs of
# unsupported calls, and cudaDeviceProp built from device attributes.
# stubs.cmake generates its own copy of the stubs into this directory's binary
# dir (a custom command serves only targets of the directory declaring it).
include(${CMAKE_CURRENT_LIST_DIR}/../../shim/runtime/stubs.cmake)
ferry_unit_test(test_errors
  ${CMAKE_CURRENT_LIST_DIR}/test_errors.c
  ${CMAKE_CURRENT_LIST_DIR}/../../shim/core/errors.c
  ${FERRY_STUBS_C})
target_link_libraries(test_errors PRIVATE Threads::Threads)
ferry_unit_test(test_props
  ${CMAKE_CURRENT_LIST_DIR}/test_props.c
  ${CMAKE_CURRENT_LIST_DIR}/../../shim/core/props.c)
# the driver front end as programs reach it: ferry's libcuda.so.1 by dlopen
ferry_unit_test(test_cu_front ${CMAKE_CURRENT_LIST_DIR}/test_cu_front.c)
target_compile_definitions(test_cu_front PRIVATE FERRY_LIBCUDA="$<TARGET_FILE:cuda_front>"
  FERRY_STARTUP_NAMES="${CMAKE_SOURCE_DIR}/shim/driver/runtime_startup.txt")
target_link_libraries(test_cu_front PRIVATE dl)
add_dependencies(test_cu_front cuda_front cudart)
