# ctest test_mem_hash_ptx: makes the PTX from executor/hash_kernel.cu by the
# steps its opening comment gives and fails unless that is the committed
# executor/hash_kernel.ptx, nvcc's comment lines aside (they name nvcc's own
# build); then ptxas must take the committed file for sm_75.
# Run as: cmake -DNVCC=... -DPTXAS=... -DSOURCE_DIR=... -DWORK_DIR=... -P
set(committed ${SOURCE_DIR}/executor/hash_kernel.ptx)
set(fresh ${WORK_DIR}/hash_kernel.ptx)
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${NVCC} -ptx -arch=compute_75 -I${SOURCE_DIR} -o ${fresh}
                        ${SOURCE_DIR}/executor/hash_kernel.cu
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc -ptx executor/hash_kernel.cu failed (${rc})")
endif()
file(READ ${fresh} made)
string(REGEX REPLACE "\n\\.version [0-9.]+\n" "\n.version 6.3\n" made "${made}")
file(WRITE ${fresh} "${made}")

file(READ ${committed} kept)
foreach(v made kept)
  string(REGEX REPLACE "\n//[^\n]*" "" ${v}_code "\n${${v}}")
endforeach()
if(NOT made_code STREQUAL kept_code)
  message(FATAL_ERROR "executor/hash_kernel.ptx is not what executor/hash_kernel.cu makes: "
                      "make it again (the steps at the top of hash_kernel.cu); this nvcc's is ${fresh}")
endif()

if(PTXAS)
  execute_process(COMMAND ${PTXAS} -arch=sm_75 -o ${WORK_DIR}/hash_kernel.cubin ${committed}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ptxas -arch=sm_75 refuses executor/hash_kernel.ptx (${rc})")
  endif()
endif()
message(STATUS "executor/hash_kernel.ptx is current")
