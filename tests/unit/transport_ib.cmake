# the ib:// backend: real traffic where an RDMA device exists (the soft-RoCE
# VM of tests/ib), the no-device message everywhere else
if(FERRY_HAVE_IB)
  ferry_unit_test(test_transport_ib ${CMAKE_SOURCE_DIR}/tests/unit/test_transport_ib.c)
  target_link_libraries(test_transport_ib PRIVATE ferry_transport Threads::Threads)
  set_tests_properties(test_transport_ib PROPERTIES TIMEOUT 600)
endif()
