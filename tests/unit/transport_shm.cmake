# the shm backend (ferry-mhelper's channel): threads and fork()ed processes
# over one memfd; run a second time with FERRY_SHM_SPIN_US=0 so that every
# wait goes through the futex sleep instead of the spin
ferry_unit_test(test_transport_shm ${CMAKE_SOURCE_DIR}/tests/unit/test_transport_shm.c)
target_link_libraries(test_transport_shm PRIVATE ferry_transport Threads::Threads)
add_test(NAME test_transport_shm_spin0 COMMAND test_transport_shm)
set_tests_properties(test_transport_shm_spin0 PROPERTIES TIMEOUT 120 ENVIRONMENT FERRY_SHM_SPIN_US=0)
