# ferry's own test programs built with nvcc's default static runtime, which
# reaches ferry only through its libcuda.so.1 (driver front end, export
# tables), and their end-to-end cases (static.sh): the same checks as the
# -cudart shared builds, and the same results.
set(FERRY_STATIC_APPS vecadd api_tour arrays migrate_iter multi_gpu async_loop)
set(FERRY_STATIC_BINARIES)
foreach(app ${FERRY_STATIC_APPS})
  add_custom_command(
    OUTPUT ${FERRY_APP_DIR}/${app}_static
    COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
    COMMAND ${FERRY_NVCC} -arch=sm_90 -O2 -o ${FERRY_APP_DIR}/${app}_static
            ${CMAKE_SOURCE_DIR}/tests/apps/${app}.cu
    DEPENDS ${CMAKE_SOURCE_DIR}/tests/apps/${app}.cu ${CMAKE_SOURCE_DIR}/tests/apps/cuda_check.h
    COMMENT "nvcc ${app}.cu (-cudart static)"
    VERBATIM)
  list(APPEND FERRY_STATIC_BINARIES ${FERRY_APP_DIR}/${app}_static)
endforeach()
add_custom_target(ferry_static_apps ALL DEPENDS ${FERRY_STATIC_BINARIES})

set(FERRY_STATIC_CASES vecadd async_loop api_tour arrays migrate migrate_helper multi_gpu reset no_server)
foreach(case ${FERRY_STATIC_CASES})
  add_test(NAME e2e_static_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/static.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_static_${case} PROPERTIES TIMEOUT 180)
endforeach()
