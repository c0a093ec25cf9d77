# The client's rooms and their one-way doors (tests/layout/doors.sh), on the
# sources and on the objects of the five rooms of libferry-client.so.0
add_test(NAME layout_doors
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/layout/doors.sh ${CMAKE_SOURCE_DIR}
                 "core=$<JOIN:$<TARGET_OBJECTS:ferry_client_core>,:>"
                 "migrate=$<JOIN:$<TARGET_OBJECTS:ferry_client_migrate>,:>"
                 "runtime=$<JOIN:$<TARGET_OBJECTS:ferry_client_runtime>,:>"
                 "driver=$<JOIN:$<TARGET_OBJECTS:ferry_client_driver>,:>"
                 "nvml=$<JOIN:$<TARGET_OBJECTS:ferry_client_nvml>,:>")
set_tests_properties(layout_doors PROPERTIES TIMEOUT 120)
