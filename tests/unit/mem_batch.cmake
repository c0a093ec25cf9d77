# Device-range requests cut to what one call carries (protocol/mem_batch.c):
# a fake call checks each request's bounds and answers from its arguments.
ferry_unit_test(test_mem_batch ${CMAKE_CURRENT_LIST_DIR}/test_mem_batch.c)
target_link_libraries(test_mem_batch PRIVATE ferry_protocol)
