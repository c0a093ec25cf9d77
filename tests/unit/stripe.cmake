# striped transfers (protocol/stripe.c): piece arithmetic, and a transfer
# cut into pieces over several tcp connections on loopback, reassembled
ferry_unit_test(test_stripe ${CMAKE_SOURCE_DIR}/tests/unit/test_stripe.c)
target_link_libraries(test_stripe PRIVATE ferry_protocol ferry_transport ferry_common Threads::Threads)
