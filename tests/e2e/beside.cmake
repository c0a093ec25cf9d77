# Programs that load NVIDIA's libcudart.so.13 before anything on the library
# path, as PyTorch's and JAX's libraries do through DT_RPATH, and reach ferry
# only through its libcuda.so.1 (beside.sh): built as such users' programs
# are (-cudart shared with an RPATH to the toolkit, or a RUNPATH), and a C
# program that opens NVIDIA's runtime, then the driver, by hand.
set(FERRY_NVIDIA_LIB ${CUDA_HOME}/lib64)
set(FERRY_BESIDE_BINARIES)
# ferry_beside_app(APP SUFFIX DTAGS): tests/apps/APP.cu as APP_SUFFIX, with
# DTAGS (--disable-new-dtags: DT_RPATH; --enable-new-dtags: DT_RUNPATH)
function(ferry_beside_app app suffix dtags)
  set(out ${FERRY_APP_DIR}/${app}_${suffix})
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
    COMMAND ${FERRY_NVCC} -cudart shared -arch=sm_90 -O2 -Xlinker ${dtags}
            -Xlinker -rpath=${FERRY_NVIDIA_LIB} -o ${out} ${CMAKE_SOURCE_DIR}/tests/apps/${app}.cu
    DEPENDS ${CMAKE_SOURCE_DIR}/tests/apps/${app}.cu ${CMAKE_SOURCE_DIR}/tests/apps/cuda_check.h
    COMMENT "nvcc -cudart shared ${app}.cu (${suffix} to the toolkit's libcudart.so.13)"
    VERBATIM)
  set(FERRY_BESIDE_BINARIES ${FERRY_BESIDE_BINARIES} ${out} PARENT_SCOPE)
endfunction()
foreach(app vecadd api_tour migrate_iter)
  ferry_beside_app(${app} rpath --disable-new-dtags)
endforeach()
ferry_beside_app(migrate_iter runpath --enable-new-dtags)
add_custom_command(
  OUTPUT ${FERRY_APP_DIR}/dlopen_driver
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
  COMMAND ${CMAKE_C_COMPILER} -std=c11 -O2 -Wall -Wextra -I${CUDA_HOME}/include
          -o ${FERRY_APP_DIR}/dlopen_driver ${CMAKE_SOURCE_DIR}/tests/apps/dlopen_driver.c -ldl
  DEPENDS ${CMAKE_SOURCE_DIR}/tests/apps/dlopen_driver.c
  COMMENT "cc dlopen_driver.c"
  VERBATIM)
add_custom_target(ferry_beside_apps ALL DEPENDS ${FERRY_BESIDE_BINARIES} ${FERRY_APP_DIR}/dlopen_driver)

set(FERRY_BESIDE_CASES rpath api_tour_rpath rpath_migrate rpath_migrate_helper runpath dlopen
    nvidia_driver_loaded run_warning)
foreach(case ${FERRY_BESIDE_CASES})
  add_test(NAME e2e_beside_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/beside.sh ${CMAKE_BINARY_DIR} ${case}
                   ${FERRY_NVIDIA_LIB})
  set_tests_properties(e2e_beside_${case} PROPERTIES TIMEOUT 180)
endforeach()
