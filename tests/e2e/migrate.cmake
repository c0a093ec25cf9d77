# Migration end to end, on the CPU simulation: programs start on a
# ferry-server and move, while they run, onto a "local GPU" that is the
# simulation inside the program's own process (FERRY_LOCAL_BACKEND=sim).
# The apps themselves are built by apps.cmake (FERRY_APPS).
add_executable(ctl_client ${CMAKE_CURRENT_LIST_DIR}/ctl_client.c)
set_target_properties(ctl_client PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/e2e)

set(FERRY_MIGRATE_CASES at_random threads control bad_control fail_absent fail_full
    texture fail_reserve fail_replay fail_memsync fail_vars bad_at status_during to_server
    to_server_fail prepare precopy from_process)
foreach(case ${FERRY_MIGRATE_CASES})
  add_test(NAME e2e_migrate_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/migrate.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_migrate_${case} PROPERTIES TIMEOUT 180)
endforeach()

# the same with every migration onto a ferry-mhelper (shared-memory channel,
# pinned and pageable copies through shared host memory)
foreach(case at_random threads control prepare precopy)
  add_test(NAME e2e_migrate_${case}_helper
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/migrate.sh ${CMAKE_BINARY_DIR} ${case}_helper)
  set_tests_properties(e2e_migrate_${case}_helper PROPERTIES TIMEOUT 180)
endforeach()

# programs that start on a local GPU (FERRY_DEVICES=local:N), in a
# ferry-mhelper, and move to servers and back
foreach(case round_trip mixed errors)
  add_test(NAME e2e_migrate_local_start_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/local_start.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_migrate_local_start_${case} PROPERTIES TIMEOUT 180)
endforeach()

# multi-GPU programs: several vGPUs, moved one by one, in-process and helpers
set(FERRY_MULTIGPU_CASES remote orders policies control helper_killed program_killed bad_input
    helper_faults peer peer_refused peer_migrate)
foreach(case ${FERRY_MULTIGPU_CASES})
  add_test(NAME e2e_multigpu_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/multigpu.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_multigpu_${case} PROPERTIES TIMEOUT 240)
endforeach()
