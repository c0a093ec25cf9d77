# CUDA arrays, texture and surface objects: the simulation's driver
# functions and the executor's calls over them.
ferry_unit_test(test_array ${CMAKE_CURRENT_LIST_DIR}/test_array.c)
target_link_libraries(test_array PRIVATE ferry_executor ferry_sim)
