# Unit tests of migration's parts: the replay log, replay and mem-sync
# against the CPU simulation.
ferry_unit_test(test_recorder ${CMAKE_CURRENT_LIST_DIR}/test_recorder.c)
target_link_libraries(test_recorder PRIVATE ferry_recorder)
ferry_unit_test(test_memsync ${CMAKE_CURRENT_LIST_DIR}/test_memsync.c)
target_link_libraries(test_memsync PRIVATE ferry_replay ferry_executor ferry_sim)
