# Unit tests of the CPU simulation of the CUDA driver (sim/), with a small
# twins object (tests/twins/unit_twins.c) that the tests dlopen.
add_library(ferry_unit_twins MODULE ${CMAKE_SOURCE_DIR}/tests/twins/unit_twins.c)
set_target_properties(ferry_unit_twins PROPERTIES PREFIX "")

ferry_unit_test(test_sim ${CMAKE_CURRENT_LIST_DIR}/test_sim.c)
target_link_libraries(test_sim PRIVATE ferry_sim ferry_executor)
target_compile_definitions(test_sim PRIVATE UNIT_TWINS="$<TARGET_FILE:ferry_unit_twins>")
add_dependencies(test_sim ferry_unit_twins)
# nvcc's cubin and PTX of tests/unit/image_kernels.cu (core.cmake)
target_compile_definitions(test_sim PRIVATE IMAGE_DIR="${FERRY_TEST_IMAGE_DIR}")
add_dependencies(test_sim ferry_test_images)

# three devices: FERRY_SIM_GPUS is read once per process, so a binary of its own
ferry_unit_test(test_sim_multi ${CMAKE_CURRENT_LIST_DIR}/test_sim_multi.c)
target_link_libraries(test_sim_multi PRIVATE ferry_sim ferry_executor)
target_compile_definitions(test_sim_multi PRIVATE UNIT_TWINS="$<TARGET_FILE:ferry_unit_twins>")
add_dependencies(test_sim_multi ferry_unit_twins)

# a bad FERRY_SIM_GPUS means one device, with one line saying so
add_test(NAME test_sim_bad_gpus COMMAND test_sim)
set_tests_properties(test_sim_bad_gpus PROPERTIES ENVIRONMENT FERRY_SIM_GPUS=9 TIMEOUT 120
  PASS_REGULAR_EXPRESSION "FERRY_SIM_GPUS=9 is not in 1\\.\\.8.*PASSED")

# JIT linking on the simulation (sim/sim_link.c)
ferry_unit_test(test_sim_link ${CMAKE_CURRENT_LIST_DIR}/test_sim_link.c)
target_link_libraries(test_sim_link PRIVATE ferry_sim ferry_executor)
target_compile_definitions(test_sim_link PRIVATE UNIT_TWINS="$<TARGET_FILE:ferry_unit_twins>"
  IMAGE_DIR="${FERRY_TEST_IMAGE_DIR}")
add_dependencies(test_sim_link ferry_unit_twins ferry_test_images)
