# Benchmark programs; bench/run_gpu.sh runs them and writes bench/results/.
add_executable(ferry-bench-tcp ${CMAKE_SOURCE_DIR}/bench/tcp_raw.c)
add_executable(ferry-bench-tcp-streams ${CMAKE_SOURCE_DIR}/bench/tcp_streams.c)
target_link_libraries(ferry-bench-tcp-streams PRIVATE Threads::Threads)
set(FERRY_BENCH_APP ${CMAKE_BINARY_DIR}/bench/bench_calls)
add_custom_command(
  OUTPUT ${FERRY_BENCH_APP}
  COMMAND ${FERRY_NVCC} -cudart shared -arch=sm_90 -O2 -o ${FERRY_BENCH_APP}
          ${CMAKE_SOURCE_DIR}/bench/apps/bench_calls.cu
  DEPENDS ${CMAKE_SOURCE_DIR}/bench/apps/bench_calls.cu
  COMMENT "nvcc -cudart shared bench_calls.cu"
  VERBATIM)
# the same program with nvcc's default static runtime: it reaches ferry
# through libcuda.so.1 (bench/run_static_bench_gpu.sh)
add_custom_command(
  OUTPUT ${FERRY_BENCH_APP}_static
  COMMAND ${FERRY_NVCC} -arch=sm_90 -O2 -o ${FERRY_BENCH_APP}_static
          ${CMAKE_SOURCE_DIR}/bench/apps/bench_calls.cu
  DEPENDS ${CMAKE_SOURCE_DIR}/bench/apps/bench_calls.cu
  COMMENT "nvcc bench_calls.cu (-cudart static)"
  VERBATIM)
add_custom_target(ferry_bench_apps ALL DEPENDS ${FERRY_BENCH_APP} ${FERRY_BENCH_APP}_static)

# Migration benchmarks (issue 3): bench/run_migrate_gpu.sh runs them,
# bench/migrate_report.py turns their logs into bench/results/.
add_executable(ferry-bench-record ${CMAKE_SOURCE_DIR}/bench/record_bench.c)
target_link_libraries(ferry-bench-record PRIVATE ferry_recorder ferry_protocol)
set(FERRY_MIG_BENCH_APPS)
foreach(app mig_regions mig_iterative helper_bench)
  add_custom_command(
    OUTPUT ${CMAKE_BINARY_DIR}/bench/${app}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/bench
    COMMAND ${FERRY_NVCC} -cudart shared -arch=sm_90 -O2 -o ${CMAKE_BINARY_DIR}/bench/${app}
            ${CMAKE_SOURCE_DIR}/bench/apps/${app}.cu
    DEPENDS ${CMAKE_SOURCE_DIR}/bench/apps/${app}.cu ${CMAKE_SOURCE_DIR}/tests/apps/cuda_check.h
    COMMENT "nvcc -cudart shared ${app}.cu"
    VERBATIM)
  list(APPEND FERRY_MIG_BENCH_APPS ${CMAKE_BINARY_DIR}/bench/${app})
endforeach()
add_custom_target(ferry_bench_mig_apps ALL DEPENDS ${FERRY_MIG_BENCH_APPS})

# GPU work at native speed (issue 24): kernel times by events and loops of
# asynchronous work, both runtime builds (bench/run_kernel_time_gpu.sh)
set(FERRY_KT ${CMAKE_BINARY_DIR}/bench/kernel_time)
add_custom_command(
  OUTPUT ${FERRY_KT} ${FERRY_KT}_static
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/bench
  COMMAND ${FERRY_NVCC} -cudart shared -arch=sm_90 -O2 -o ${FERRY_KT} ${CMAKE_SOURCE_DIR}/bench/apps/kernel_time.cu
  COMMAND ${FERRY_NVCC} -arch=sm_90 -O2 -o ${FERRY_KT}_static ${CMAKE_SOURCE_DIR}/bench/apps/kernel_time.cu
  DEPENDS ${CMAKE_SOURCE_DIR}/bench/apps/kernel_time.cu ${CMAKE_SOURCE_DIR}/tests/apps/cuda_check.h
  COMMENT "nvcc kernel_time.cu (-cudart shared and static)"
  VERBATIM)
add_custom_target(ferry_bench_kernel_time ALL DEPENDS ${FERRY_KT} ${FERRY_KT}_static)
# CPU twins of their kernels, for runs on the simulation (FERRY_BENCH_SIM=1)
add_library(bench_twins MODULE ${CMAKE_SOURCE_DIR}/bench/twins/bench_twins.c)
set_target_properties(bench_twins PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)

# The math libraries (issue 10): cuBLAS and cuFFT loops and a program that
# mixes cuBLAS with its own kernels, in both runtime builds
# (bench/run_libs_gpu.sh). Like cuda-samples, the libraries are linked
# dynamically; only the CUDA runtime differs.
set(FERRY_LIBS_APPS)
foreach(build shared static)
  set(out ${CMAKE_BINARY_DIR}/bench/bench_libs_${build})
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/bench
    COMMAND ${FERRY_NVCC} -cudart ${build} -arch=sm_90 -O2 -o ${out}
            ${CMAKE_SOURCE_DIR}/bench/apps/bench_libs.cu -lcublas -lcufft
    DEPENDS ${CMAKE_SOURCE_DIR}/bench/apps/bench_libs.cu ${CMAKE_SOURCE_DIR}/tests/apps/cuda_check.h
    COMMENT "nvcc -cudart ${build} bench_libs.cu -lcublas -lcufft"
    VERBATIM)
  list(APPEND FERRY_LIBS_APPS ${out})
endforeach()
add_custom_target(ferry_bench_libs ALL DEPENDS ${FERRY_LIBS_APPS})

# Managed memory (issue 22): a halo-exchanging stencil on cudaMallocManaged
# grids, on demand and prefetched (bench/run_managed_gpu.sh)
set(FERRY_STENCIL ${CMAKE_BINARY_DIR}/bench/managed_stencil)
add_custom_command(
  OUTPUT ${FERRY_STENCIL}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/bench
  COMMAND ${FERRY_NVCC} -cudart shared -arch=sm_90 -O2 -o ${FERRY_STENCIL} ${CMAKE_SOURCE_DIR}/bench/apps/managed_stencil.cu
  DEPENDS ${CMAKE_SOURCE_DIR}/bench/apps/managed_stencil.cu ${CMAKE_SOURCE_DIR}/tests/apps/cuda_check.h
  COMMENT "nvcc -cudart shared managed_stencil.cu"
  VERBATIM)
add_custom_target(ferry_bench_managed ALL DEPENDS ${FERRY_STENCIL})
