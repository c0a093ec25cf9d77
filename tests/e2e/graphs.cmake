# CUDA graphs end to end (graphs.sh): tests/apps/graphs (built by apps.cmake),
# tests/apps/drv_graphs (driver.cmake), and graphs_rpath, graphs.cu with an
# RPATH to NVIDIA's libcudart.so.13 (ferry_beside_app, beside.cmake).
ferry_beside_app(graphs rpath --disable-new-dtags)
add_custom_target(ferry_graph_apps ALL DEPENDS ${FERRY_APP_DIR}/graphs_rpath)

set(FERRY_GRAPH_CASES runtime driver rpath migrate migrate_helper driver_migrate rpath_migrate)
foreach(case ${FERRY_GRAPH_CASES})
  add_test(NAME e2e_graphs_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/graphs.sh ${CMAKE_BINARY_DIR} ${case}
                   ${FERRY_NVIDIA_LIB})
  set_tests_properties(e2e_graphs_${case} PROPERTIES TIMEOUT 180)
endforeach()
