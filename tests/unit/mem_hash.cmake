# mem_hash (executor/exec_hash.c) on the CPU simulation, whose built-in twin
# stands for ferry's hashing kernel; a twins table is loaded in one test to
# show the built-in one is still found.
ferry_unit_test(test_mem_hash ${CMAKE_CURRENT_LIST_DIR}/test_mem_hash.c)
target_link_libraries(test_mem_hash PRIVATE ferry_executor ferry_sim)
target_compile_definitions(test_mem_hash PRIVATE UNIT_TWINS="$<TARGET_FILE:ferry_unit_twins>")
add_dependencies(test_mem_hash ferry_unit_twins)

# the committed executor/hash_kernel.ptx must be what hash_kernel.cu makes
# (the steps at the top of the .cu), so that the two cannot drift apart
if(FERRY_NVCC)
  find_program(FERRY_PTXAS ptxas HINTS ${CUDA_HOME}/bin)
  add_test(NAME test_mem_hash_ptx
           COMMAND ${CMAKE_COMMAND} -DNVCC=${FERRY_NVCC} -DPTXAS=${FERRY_PTXAS}
                   -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/hash_ptx
                   -P ${CMAKE_SOURCE_DIR}/executor/hash_ptx_check.cmake)
  set_tests_properties(test_mem_hash_ptx PROPERTIES TIMEOUT 120)
endif()
