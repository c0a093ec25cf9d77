# A call's liveness (FERRY_CALL_TIMEOUT, the server's keepalives), and bad timeout values.
foreach(case long_call silent_server bad_values)
  add_test(NAME e2e_timeout_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/timeout.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_timeout_${case} PROPERTIES TIMEOUT 120)
endforeach()
