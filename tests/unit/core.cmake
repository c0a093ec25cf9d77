# Unit tests of the pieces every path relies on: codec, layouts, arena, handles.
ferry_unit_test(test_codec ${CMAKE_SOURCE_DIR}/tests/unit/test_codec.c)
target_link_libraries(test_codec PRIVATE ferry_protocol)
ferry_unit_test(test_layout ${CMAKE_SOURCE_DIR}/tests/unit/test_layout.c)
target_link_libraries(test_layout PRIVATE ferry_protocol)
ferry_unit_test(test_arena ${CMAKE_SOURCE_DIR}/tests/unit/test_arena.c)
target_link_libraries(test_arena PRIVATE ferry_common)
ferry_unit_test(test_handles ${CMAKE_SOURCE_DIR}/tests/unit/test_handles.c)
target_link_libraries(test_handles PRIVATE ferry_common)
