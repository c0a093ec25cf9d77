# ferry-server robustness: the real binary on the sim backend, abused by a tiny client
ferry_unit_test(test_server_robustness ${CMAKE_SOURCE_DIR}/tests/unit/test_server_robustness.c)
# ferry_session: one case runs session_run itself (a session that reads its own hello)
target_link_libraries(test_server_robustness PRIVATE ferry_session ferry_transport ferry_protocol
                      Threads::Threads)
target_compile_definitions(test_server_robustness PRIVATE FERRY_SERVER_BIN="$<TARGET_FILE:ferry-server>")
add_dependencies(test_server_robustness ferry-server)
# CUDA graphs through the real binary (sim backend with the unit twins): a
# graph launched 100 times, re-sent, and malformed blobs ending only their session
ferry_unit_test(test_graph_session ${CMAKE_SOURCE_DIR}/tests/unit/test_graph_session.c)
target_link_libraries(test_graph_session PRIVATE ferry_transport ferry_protocol Threads::Threads)
target_compile_definitions(test_graph_session PRIVATE FERRY_SERVER_BIN="$<TARGET_FILE:ferry-server>"
                           UNIT_TWINS="$<TARGET_FILE:ferry_unit_twins>")
add_dependencies(test_graph_session ferry-server ferry_unit_twins)
# the broker in ferry-server's parent (server/broker.c) and a session's end
# of it (server/broker_client.c): CUDA IPC's table, FERRY_STREAMS' keys,
# every malformed message, requests served and data connections handed
# over a socketpair with descriptors passed
ferry_unit_test(test_broker ${CMAKE_SOURCE_DIR}/tests/unit/test_broker.c
                ${CMAKE_SOURCE_DIR}/server/broker.c ${CMAKE_SOURCE_DIR}/server/broker_client.c)
target_link_libraries(test_broker PRIVATE ferry_common Threads::Threads)
