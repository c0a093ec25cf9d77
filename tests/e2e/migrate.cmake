# Migration end to end, on the CPU simulation: programs start on a
# ferry-server and move, while they run, onto a "local GPU" that is the
# simulation inside the program's own process (FERRY_LOCAL_BACKEND=sim).
# The apps themselves are built by apps.cmake (FERRY_APPS).
add_executable(ctl_client ${CMAKE_CURRENT_LIST_DIR}/ctl_client.c)
set_target_properties(ctl_client PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/e2e)

set(FERRY_MIGRATE_CASES at_random threads control bad_control fail_absent fail_full
    texture fail_reserve fail_replay fail_memsync fail_vars)
foreach(case ${FERRY_MIGRATE_CASES})
  add_test(NAME e2e_migrate_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/migrate.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_migrate_${case} PROPERTIES TIMEOUT 180)
endforeach()
