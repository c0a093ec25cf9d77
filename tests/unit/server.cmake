# ferry-server robustness: the real binary on the sim backend, abused by a tiny client
ferry_unit_test(test_server_robustness ${CMAKE_SOURCE_DIR}/tests/unit/test_server_robustness.c)
# ferry_session: one case runs session_run itself (a session that reads its own hello)
target_link_libraries(test_server_robustness PRIVATE ferry_session ferry_transport ferry_protocol
                      Threads::Threads)
target_compile_definitions(test_server_robustness PRIVATE FERRY_SERVER_BIN="$<TARGET_FILE:ferry-server>")
add_dependencies(test_server_robustness ferry-server)
