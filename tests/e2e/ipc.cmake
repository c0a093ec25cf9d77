# CUDA IPC between two programs on one ferry-server (ipc.sh, tests/apps/ipc_pair):
# memory and an event shared, and each refusal in one line
foreach(case pair exporter_killed other_server migrate_waits helper_refused vmm
             vmm_two_gpus vmm_migrate_cancel vmm_helper_refused pool)
  add_test(NAME e2e_ipc_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/ipc.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_ipc_${case} PROPERTIES TIMEOUT 180)
endforeach()
