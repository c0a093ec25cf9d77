# Driver-API programs (tests/apps/drv_*) for ferry's libcuda.so.1, built as
# users build theirs, and their end-to-end cases (driver.sh). Their CPU
# twins are in tests/twins/app_twins.c (app_twins.so, built by apps.cmake).
#   drv_kernels.{fatbin,cubin,ptx}  the kernels, loaded at run time
#   drv_tour         C, host compiler, -lcuda (the toolkit's stub): no runtime
#   drv_tour_static  the same source through nvcc as CUDA C++, with nvcc's
#                    default -cudart static
#   drv_mixed        nvcc -cudart shared -lcuda: runtime and driver mixed
#   drv_unsupported  C, -lcuda: calls ferry refuses
#   drv_export       C, -lcuda: each entry of the private tables ferry serves
#   drv_mempool      C, -lcuda: stream-ordered allocation and pools (mempool.sh)
#   drv_vmm          C, -lcuda: program VMM, an expandable segment as PyTorch grows one
#   drv_vmm_ipc      C, -lcuda: VMM shareable handles passed to programs it starts (ipc.sh)
#   drv_graphs       C, -lcuda: stream capture and CUDA graphs (graphs.sh runs it)
#   drv_jitlink      C, -lcuda: JIT linking (cuLink*) of drv_jit_step.ptx with
#                    drv_jit_mix.ptx (both nvcc -ptx -rdc=true)
set(FERRY_DRV_SRC ${CMAKE_SOURCE_DIR}/tests/apps)
set(FERRY_DRV_STUBS ${CUDA_HOME}/lib64/stubs)
set(FERRY_DRV_CFLAGS -std=c11 -O2 -Wall -Wextra)
if(FERRY_WERROR)
  list(APPEND FERRY_DRV_CFLAGS -Werror)
endif()

# the kernels three ways: fatbin (sm_90 SASS + compute_90 PTX), cubin, PTX
set(FERRY_DRV_KERNELS ${FERRY_APP_DIR}/drv_kernels)
add_custom_command(
  OUTPUT ${FERRY_DRV_KERNELS}.fatbin ${FERRY_DRV_KERNELS}.cubin ${FERRY_DRV_KERNELS}.ptx
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
  COMMAND ${FERRY_NVCC} -fatbin -gencode arch=compute_90,code=sm_90
          -gencode arch=compute_90,code=compute_90 -o ${FERRY_DRV_KERNELS}.fatbin
          ${FERRY_DRV_SRC}/drv_kernels.cu
  COMMAND ${FERRY_NVCC} -cubin -arch=sm_90 -o ${FERRY_DRV_KERNELS}.cubin ${FERRY_DRV_SRC}/drv_kernels.cu
  COMMAND ${FERRY_NVCC} -ptx -arch=sm_90 -o ${FERRY_DRV_KERNELS}.ptx ${FERRY_DRV_SRC}/drv_kernels.cu
  DEPENDS ${FERRY_DRV_SRC}/drv_kernels.cu
  COMMENT "nvcc -fatbin/-cubin/-ptx drv_kernels.cu"
  VERBATIM)

# drv_jitlink's two PTX pieces: a kernel calling an extern device function, and the function
add_custom_command(
  OUTPUT ${FERRY_APP_DIR}/drv_jit_step.ptx ${FERRY_APP_DIR}/drv_jit_mix.ptx
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
  COMMAND ${FERRY_NVCC} -ptx -rdc=true -arch=sm_90 -o ${FERRY_APP_DIR}/drv_jit_step.ptx
          ${FERRY_DRV_SRC}/drv_jit_step.cu
  COMMAND ${FERRY_NVCC} -ptx -rdc=true -arch=sm_90 -o ${FERRY_APP_DIR}/drv_jit_mix.ptx
          ${FERRY_DRV_SRC}/drv_jit_mix.cu
  DEPENDS ${FERRY_DRV_SRC}/drv_jit_step.cu ${FERRY_DRV_SRC}/drv_jit_mix.cu
  COMMENT "nvcc -ptx -rdc=true drv_jit_step.cu drv_jit_mix.cu"
  VERBATIM)

set(FERRY_DRV_DEPS ${FERRY_DRV_SRC}/drv_check.h ${FERRY_DRV_SRC}/cuda_check.h)
# C programs: the host compiler, cuda.h, the driver stub; nothing of ferry's
foreach(app drv_tour drv_unsupported drv_export drv_mempool drv_vmm drv_vmm_ipc drv_graphs drv_jitlink)
  add_custom_command(
    OUTPUT ${FERRY_APP_DIR}/${app}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
    COMMAND ${CMAKE_C_COMPILER} ${FERRY_DRV_CFLAGS} -I${CUDA_HOME}/include -o ${FERRY_APP_DIR}/${app}
            ${FERRY_DRV_SRC}/${app}.c -L${FERRY_DRV_STUBS} -lcuda
    DEPENDS ${FERRY_DRV_SRC}/${app}.c ${FERRY_DRV_DEPS}
    COMMENT "cc ${app}.c -lcuda"
    VERBATIM)
endforeach()
add_custom_command(
  OUTPUT ${FERRY_APP_DIR}/drv_tour_static
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
  COMMAND ${FERRY_NVCC} -x cu -arch=sm_90 -O2 -o ${FERRY_APP_DIR}/drv_tour_static
          ${FERRY_DRV_SRC}/drv_tour.c -L${FERRY_DRV_STUBS} -lcuda
  DEPENDS ${FERRY_DRV_SRC}/drv_tour.c ${FERRY_DRV_DEPS}
  COMMENT "nvcc -x cu drv_tour.c -lcuda (-cudart static)"
  VERBATIM)
add_custom_command(
  OUTPUT ${FERRY_APP_DIR}/drv_mixed
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
  COMMAND ${FERRY_NVCC} -cudart shared -arch=sm_90 -O2 -o ${FERRY_APP_DIR}/drv_mixed
          ${FERRY_DRV_SRC}/drv_mixed.cu -L${FERRY_DRV_STUBS} -lcuda
  DEPENDS ${FERRY_DRV_SRC}/drv_mixed.cu ${FERRY_DRV_DEPS}
  COMMENT "nvcc -cudart shared drv_mixed.cu -lcuda"
  VERBATIM)
add_custom_target(ferry_driver_apps ALL
  DEPENDS ${FERRY_DRV_KERNELS}.fatbin ${FERRY_APP_DIR}/drv_tour ${FERRY_APP_DIR}/drv_tour_static
          ${FERRY_APP_DIR}/drv_mixed ${FERRY_APP_DIR}/drv_unsupported ${FERRY_APP_DIR}/drv_export
          ${FERRY_APP_DIR}/drv_mempool
          ${FERRY_APP_DIR}/drv_vmm ${FERRY_APP_DIR}/drv_vmm_ipc
          ${FERRY_APP_DIR}/drv_graphs
          ${FERRY_APP_DIR}/drv_jitlink ${FERRY_APP_DIR}/drv_jit_step.ptx)

set(FERRY_DRIVER_CASES tour tour_static mixed unsupported no_config export_tables
    migrate_tour migrate_tour_static migrate_mixed migrate_tour_helper migrate_mixed_helper
    vmm migrate_vmm migrate_vmm_helper jitlink migrate_jitlink migrate_jitlink_helper)
foreach(case ${FERRY_DRIVER_CASES})
  add_test(NAME e2e_driver_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/driver.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_driver_${case} PROPERTIES TIMEOUT 180)
endforeach()
