# Unit tests of migration's parts: the replay log, replay (module_function
# indexes) and mem-sync against the CPU simulation.
ferry_unit_test(test_recorder ${CMAKE_CURRENT_LIST_DIR}/test_recorder.c)
target_link_libraries(test_recorder PRIVATE ferry_recorder)
ferry_unit_test(test_memsync ${CMAKE_CURRENT_LIST_DIR}/test_memsync.c)
target_link_libraries(test_memsync PRIVATE ferry_replay ferry_executor ferry_sim)
ferry_unit_test(test_replay ${CMAKE_CURRENT_LIST_DIR}/test_replay.c)
target_link_libraries(test_replay PRIVATE ferry_replay ferry_recorder ferry_executor ferry_sim)
target_compile_definitions(test_replay PRIVATE UNIT_TWINS="$<TARGET_FILE:ferry_unit_twins>")
add_dependencies(test_replay ferry_unit_twins)
