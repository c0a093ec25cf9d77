# Mapped (zero-copy) host memory (mapped.sh): tests/apps/mapped (apps.cmake
# builds it) remote with FERRY_STATS checks of the bytes exchanged, and
# migrated mid-loop into the process, onto a ferry-mhelper, between servers
# and from the process back to a server; managed memory (tests/apps/managed)
# remote and moved in every direction.
foreach(case remote migrate migrate_helper servers poll_bound managed managed_racy managed_lost)
  add_test(NAME e2e_mapped_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/mapped.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_mapped_${case} PROPERTIES TIMEOUT 180)
endforeach()
