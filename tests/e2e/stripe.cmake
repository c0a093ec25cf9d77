# FERRY_STREAMS: large copies striped over several data connections (tests/e2e/stripe.sh).
foreach(case streams kill stranger unreachable migrate silent bad_values)
  add_test(NAME e2e_stripe_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/stripe.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_stripe_${case} PROPERTIES TIMEOUT 180)
endforeach()
