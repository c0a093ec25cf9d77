# CUDA graphs end to end (graphs.sh): tests/apps/graphs (built by apps.cmake),
# tests/apps/drv_graphs (driver.cmake), and graphs_rpath, graphs.cu with an
# RPATH to NVIDIA's libcudart.so.13 (ferry_beside_app, beside.cmake); and
# graphs with host work, which the client plays (host_* cases): graph_host
# (as apps.cmake builds its programs), graph_host_rpath, and drv_graph_host
# (as driver.cmake builds its C programs).
ferry_beside_app(graphs rpath --disable-new-dtags)
ferry_beside_app(graph_host rpath --disable-new-dtags)
add_custom_command(
  OUTPUT ${FERRY_APP_DIR}/graph_host
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
  COMMAND ${FERRY_NVCC} -cudart shared -arch=sm_90 -O2 -o ${FERRY_APP_DIR}/graph_host
          ${CMAKE_SOURCE_DIR}/tests/apps/graph_host.cu
  DEPENDS ${CMAKE_SOURCE_DIR}/tests/apps/graph_host.cu ${CMAKE_SOURCE_DIR}/tests/apps/cuda_check.h
          ${CMAKE_SOURCE_DIR}/tests/apps/graph_kernels.h
  COMMENT "nvcc -cudart shared graph_host.cu"
  VERBATIM)
add_custom_command(
  OUTPUT ${FERRY_APP_DIR}/drv_graph_host
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
  COMMAND ${CMAKE_C_COMPILER} ${FERRY_DRV_CFLAGS} -I${CUDA_HOME}/include -o ${FERRY_APP_DIR}/drv_graph_host
          ${FERRY_DRV_SRC}/drv_graph_host.c -L${FERRY_DRV_STUBS} -lcuda
  DEPENDS ${FERRY_DRV_SRC}/drv_graph_host.c ${FERRY_DRV_DEPS}
  COMMENT "cc drv_graph_host.c -lcuda"
  VERBATIM)
add_custom_target(ferry_graph_apps ALL
  DEPENDS ${FERRY_APP_DIR}/graphs_rpath ${FERRY_APP_DIR}/graph_host ${FERRY_APP_DIR}/graph_host_rpath
          ${FERRY_APP_DIR}/drv_graph_host)

set(FERRY_GRAPH_CASES runtime driver rpath migrate migrate_helper driver_migrate rpath_migrate
    host host_driver host_rpath host_migrate host_migrate_helper host_driver_migrate host_rpath_migrate)
foreach(case ${FERRY_GRAPH_CASES})
  add_test(NAME e2e_graphs_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/graphs.sh ${CMAKE_BINARY_DIR} ${case}
                   ${FERRY_NVIDIA_LIB})
  set_tests_properties(e2e_graphs_${case} PROPERTIES TIMEOUT 180)
endforeach()
