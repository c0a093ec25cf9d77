# bench/shm_raw.c: ferry-mhelper's shm channel against a pipe, a bare futex
# ping-pong and memcpy, between two processes (no GPU needed)
add_executable(ferry-bench-shm ${CMAKE_SOURCE_DIR}/bench/shm_raw.c)
target_link_libraries(ferry-bench-shm PRIVATE ferry_transport)
