# ferry's NVML (libnvidia-ml.so.1) as PyTorch reaches it: tests/apps/nvml_query
# (C, host compiler, nothing of ferry's or NVIDIA's linked: it dlopens both
# libraries) through `ferry run`, and nvml.sh's cases.
set(FERRY_NVML_CFLAGS -std=c11 -O2 -Wall -Wextra)
if(FERRY_WERROR) # an empty generator expression would be an empty argument
  list(APPEND FERRY_NVML_CFLAGS -Werror)
endif()
add_custom_command(
  OUTPUT ${FERRY_APP_DIR}/nvml_query
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_APP_DIR}
  COMMAND ${CMAKE_C_COMPILER} ${FERRY_NVML_CFLAGS}
          -o ${FERRY_APP_DIR}/nvml_query ${CMAKE_SOURCE_DIR}/tests/apps/nvml_query.c -ldl
  DEPENDS ${CMAKE_SOURCE_DIR}/tests/apps/nvml_query.c
  COMMENT "cc nvml_query.c"
  VERBATIM)
add_custom_target(ferry_nvml_apps ALL DEPENDS ${FERRY_APP_DIR}/nvml_query)

foreach(case count_offline count_no_session rcuda answers nvlinks)
  add_test(NAME e2e_nvml_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/e2e/nvml.sh ${CMAKE_BINARY_DIR} ${case})
  set_tests_properties(e2e_nvml_${case} PROPERTIES TIMEOUT 180)
endforeach()
