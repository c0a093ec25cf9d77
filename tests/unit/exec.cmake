# Unit tests of the executor (executor/) run against the CPU simulation.
ferry_unit_test(test_exec ${CMAKE_CURRENT_LIST_DIR}/test_exec.c)
target_link_libraries(test_exec PRIVATE ferry_executor ferry_sim)
target_compile_definitions(test_exec PRIVATE UNIT_TWINS="$<TARGET_FILE:ferry_unit_twins>")
add_dependencies(test_exec ferry_unit_twins)
# CUDA graphs (exec_graph.c, sim_graph.c): node blobs instantiated, launched,
# replaced, refused, and rebuilt by replaying the recorder's log
ferry_unit_test(test_graph_exec ${CMAKE_CURRENT_LIST_DIR}/test_graph_exec.c)
target_link_libraries(test_graph_exec PRIVATE ferry_replay ferry_recorder ferry_executor ferry_sim)
target_compile_definitions(test_graph_exec PRIVATE UNIT_TWINS="$<TARGET_FILE:ferry_unit_twins>")
add_dependencies(test_graph_exec ferry_unit_twins)
# JIT linking (exec_link.c): link_complete's answers, failures and malformed requests
ferry_unit_test(test_exec_link ${CMAKE_CURRENT_LIST_DIR}/test_exec_link.c)
target_link_libraries(test_exec_link PRIVATE ferry_executor ferry_sim)
target_compile_definitions(test_exec_link PRIVATE UNIT_TWINS="$<TARGET_FILE:ferry_unit_twins>")
add_dependencies(test_exec_link ferry_unit_twins)
# CUDA IPC in the executor (exec_ipc.c) with a broker in memory
ferry_unit_test(test_exec_ipc ${CMAKE_CURRENT_LIST_DIR}/test_exec_ipc.c)
target_link_libraries(test_exec_ipc PRIVATE ferry_executor ferry_sim)
