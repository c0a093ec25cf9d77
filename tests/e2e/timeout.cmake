# A call's liveness (FERRY_CALL_TIMEOUT, the server's keepalives), bad
# timeout values, and the handshake's deadline (FERRY_CONNECT_TIMEOUT)
# against a port that accepts and never answers (silent_listener).
add_executable(silent_listener ${CMAKE_CURRENT_LIST_DIR}/silent_listener.c)
set_target_properties(silent_listener PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/e2e)
foreach(case long_call silent_server bad_values silent_hello silent_target)
  add_test(NAME e2e_timeout_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/timeout.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_timeout_${case} PROPERTIES TIMEOUT 180)
endforeach()
