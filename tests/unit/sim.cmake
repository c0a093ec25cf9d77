# Unit tests of the CPU simulation of the CUDA driver (sim/), with a small
# twins object (tests/twins/unit_twins.c) that the tests dlopen.
add_library(ferry_unit_twins MODULE ${CMAKE_SOURCE_DIR}/tests/twins/unit_twins.c)
set_target_properties(ferry_unit_twins PROPERTIES PREFIX "")

ferry_unit_test(test_sim ${CMAKE_CURRENT_LIST_DIR}/test_sim.c)
target_link_libraries(test_sim PRIVATE ferry_sim ferry_executor)
target_compile_definitions(test_sim PRIVATE UNIT_TWINS="$<TARGET_FILE:ferry_unit_twins>")
add_dependencies(test_sim ferry_unit_twins)
