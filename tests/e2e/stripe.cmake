# FERRY_STREAMS: large copies striped over several data connections (tests/e2e/stripe.sh).
foreach(case streams one_port kill stranger unreachable handoff bounds migrate silent bad_values)
  add_test(NAME e2e_stripe_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/stripe.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_stripe_${case} PROPERTIES TIMEOUT 180)
endforeach()
# one_port: a firewall in the program that lets through the server's port only
add_library(ferry_one_port MODULE ${CMAKE_CURRENT_LIST_DIR}/one_port.c)
target_link_libraries(ferry_one_port PRIVATE dl)
set_target_properties(ferry_one_port PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/e2e)
