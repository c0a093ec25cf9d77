# Benchmark programs; bench/run_gpu.sh runs them and writes bench/results/.
add_executable(ferry-bench-tcp ${CMAKE_SOURCE_DIR}/bench/tcp_raw.c)
set(FERRY_BENCH_APP ${CMAKE_BINARY_DIR}/bench/bench_calls)
add_custom_command(
  OUTPUT ${FERRY_BENCH_APP}
  COMMAND ${FERRY_NVCC} -cudart shared -arch=sm_90 -O2 -o ${FERRY_BENCH_APP}
          ${CMAKE_SOURCE_DIR}/bench/apps/bench_calls.cu
  DEPENDS ${CMAKE_SOURCE_DIR}/bench/apps/bench_calls.cu
  COMMENT "nvcc -cudart shared bench_calls.cu"
  VERBATIM)
add_custom_target(ferry_bench_apps ALL DEPENDS ${FERRY_BENCH_APP})
