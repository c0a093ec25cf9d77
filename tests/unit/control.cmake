# The control socket (shim/migrate/control.c) against test doubles of the migration
# engine, and the ferry CLI's ls/status/migrate against a program using it.
ferry_unit_test(test_control
  ${CMAKE_SOURCE_DIR}/tests/unit/test_control.c
  ${CMAKE_SOURCE_DIR}/shim/migrate/control.c
  ${CMAKE_SOURCE_DIR}/shim/core/thread.c
  ${CMAKE_SOURCE_DIR}/common/log.c)
target_link_libraries(test_control PRIVATE ${FERRY_JANSSON} Threads::Threads)
target_compile_definitions(test_control PRIVATE FERRY_CLI="$<TARGET_FILE:ferry>"
  FERRY_SCHEMA="${CMAKE_SOURCE_DIR}/docs/ferry-status.schema.json"
  FERRY_CONTROL_DOC="${CMAKE_SOURCE_DIR}/docs/control.md")
add_dependencies(test_control ferry)
