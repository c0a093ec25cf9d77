# transport: URL parsing, the backend registry, and tcp over loopback
ferry_unit_test(test_transport_url ${CMAKE_SOURCE_DIR}/tests/unit/test_transport_url.c)
target_link_libraries(test_transport_url PRIVATE ferry_transport)
ferry_unit_test(test_transport_tcp ${CMAKE_SOURCE_DIR}/tests/unit/test_transport_tcp.c)
target_link_libraries(test_transport_tcp PRIVATE ferry_transport Threads::Threads)
