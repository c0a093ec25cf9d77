# Stream capture and graph building on the client (shim/runtime/capture.c,
# graph.c, graph_exec.c, graph_host.c, graph_unroll.c), with the rest of the
# client stood in by the test.
ferry_unit_test(test_capture
  ${CMAKE_CURRENT_LIST_DIR}/test_capture.c
  ${CMAKE_CURRENT_LIST_DIR}/../../shim/runtime/capture.c
  ${CMAKE_CURRENT_LIST_DIR}/../../shim/runtime/graph.c
  ${CMAKE_CURRENT_LIST_DIR}/../../shim/runtime/graph_exec.c
  ${CMAKE_CURRENT_LIST_DIR}/../../shim/runtime/graph_params.c
  ${CMAKE_CURRENT_LIST_DIR}/../../shim/runtime/graph_host.c
  ${CMAKE_CURRENT_LIST_DIR}/../../shim/runtime/graph_unroll.c)
target_link_libraries(test_capture PRIVATE ferry_protocol ferry_common Threads::Threads)
