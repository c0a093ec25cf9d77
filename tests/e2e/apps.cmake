# CUDA test programs (tests/apps/*.cu) built exactly as users build theirs,
# with `nvcc -cudart shared`, their CPU twins for the simulation, and the
# end-to-end cases: app -> shim -> tcp -> ferry-server -> executor -> sim.
find_program(FERRY_NVCC nvcc HINTS ${CUDA_HOME}/bin REQUIRED)
set(FERRY_APP_DIR ${CMAKE_BINARY_DIR}/tests/apps)
set(FERRY_APPS vecadd api_tour long_run unsupported arrays migrate_iter migrate_threads multi_gpu
    async_loop device_assert big_copies mempool graphs mapped managed query_cache ipc_pair exit_free
    peer_access pool_ipc)
set(FERRY_APP_BINARIES)
foreach(app ${FERRY_APPS})
  add_custom_command(
    OUTPUT ${FERRY_APP_DIR}/${app}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
    COMMAND ${FERRY_NVCC} -cudart shared -arch=sm_90 -O2 -o ${FERRY_APP_DIR}/${app}
            ${CMAKE_SOURCE_DIR}/tests/apps/${app}.cu
    DEPENDS ${CMAKE_SOURCE_DIR}/tests/apps/${app}.cu ${CMAKE_SOURCE_DIR}/tests/apps/cuda_check.h
            ${CMAKE_SOURCE_DIR}/tests/apps/host_mem_check.h ${CMAKE_SOURCE_DIR}/tests/apps/fill_kernels.h
            ${CMAKE_SOURCE_DIR}/tests/apps/graph_kernels.h
            ${CMAKE_SOURCE_DIR}/tests/apps/file_handoff.h
    COMMENT "nvcc -cudart shared ${app}.cu"
    VERBATIM)
  list(APPEND FERRY_APP_BINARIES ${FERRY_APP_DIR}/${app})
endforeach()
add_custom_target(ferry_apps ALL DEPENDS ${FERRY_APP_BINARIES})

add_library(app_twins MODULE ${CMAKE_SOURCE_DIR}/tests/twins/app_twins.c)
set_target_properties(app_twins PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${FERRY_APP_DIR})

set(FERRY_E2E_CASES vecadd async_loop device_assert query_cache api_tour deferred_refused unsupported rcuda manual_library_path two_devices
    no_config no_server bad_gpu server_killed token arrays busy session_mem_quota metrics exit_free)
foreach(case ${FERRY_E2E_CASES})
  add_test(NAME e2e_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/e2e.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_${case} PROPERTIES TIMEOUT 180)
endforeach()
