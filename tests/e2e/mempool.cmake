# Stream-ordered memory and memory pools (mempool.sh): tests/apps/mempool
# (apps.cmake builds it) and drv_mempool (driver.cmake) remote, with
# FERRY_STATS checks of synchronizations and mappings, and migrated at
# random launches into the process and onto a ferry-mhelper.
foreach(case remote refusals warm migrate migrate_helper)
  add_test(NAME e2e_mempool_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/mempool.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_mempool_${case} PROPERTIES TIMEOUT 180)
endforeach()
