# Unit tests of the pieces every path relies on: codec, layouts, arena, pools, handles,
# module image sizes.
ferry_unit_test(test_codec ${CMAKE_SOURCE_DIR}/tests/unit/test_codec.c)
target_link_libraries(test_codec PRIVATE ferry_protocol)
ferry_unit_test(test_layout ${CMAKE_SOURCE_DIR}/tests/unit/test_layout.c)
target_link_libraries(test_layout PRIVATE ferry_protocol)
ferry_unit_test(test_arena ${CMAKE_SOURCE_DIR}/tests/unit/test_arena.c)
target_link_libraries(test_arena PRIVATE ferry_common)
# stream-ordered pools' bookkeeping (cudaMallocAsync's reuse, thresholds, attributes)
ferry_unit_test(test_pool ${CMAKE_SOURCE_DIR}/tests/unit/test_pool.c)
target_link_libraries(test_pool PRIVATE ferry_common)
ferry_unit_test(test_handles ${CMAKE_SOURCE_DIR}/tests/unit/test_handles.c)
target_link_libraries(test_handles PRIVATE ferry_common)

# module images as a program has them, made by nvcc from one small source
# (test_image here, the simulation's loader in test_sim)
set(FERRY_TEST_IMAGE_DIR ${CMAKE_BINARY_DIR}/tests/images)
set(FERRY_TEST_IMAGE_SRC ${CMAKE_SOURCE_DIR}/tests/unit/image_kernels.cu)
set(FERRY_TEST_IMAGES)
foreach(kind fatbin cubin ptx)
  set(out ${FERRY_TEST_IMAGE_DIR}/kernels.${kind})
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${FERRY_TEST_IMAGE_DIR}
    COMMAND ${FERRY_NVCC} -arch=sm_90 -${kind} -o ${out} ${FERRY_TEST_IMAGE_SRC}
    DEPENDS ${FERRY_TEST_IMAGE_SRC}
    COMMENT "nvcc -${kind} image_kernels.cu"
    VERBATIM)
  list(APPEND FERRY_TEST_IMAGES ${out})
endforeach()
add_custom_target(ferry_test_images DEPENDS ${FERRY_TEST_IMAGES})
ferry_unit_test(test_image ${CMAKE_SOURCE_DIR}/tests/unit/test_image.c)
target_link_libraries(test_image PRIVATE ferry_common)
target_compile_definitions(test_image PRIVATE IMAGE_DIR="${FERRY_TEST_IMAGE_DIR}")
add_dependencies(test_image ferry_test_images)

# the strict parser of numeric settings (FERRY_* variables)
ferry_unit_test(test_setting ${CMAKE_SOURCE_DIR}/tests/unit/test_setting.c)
target_link_libraries(test_setting PRIVATE ferry_common)
# the graph node blob (protocol/graph.c): round trip and every malformed case
ferry_unit_test(test_graph ${CMAKE_SOURCE_DIR}/tests/unit/test_graph.c)
target_link_libraries(test_graph PRIVATE ferry_protocol)
# cuLink*'s blobs (protocol/jitlink.c): which options travel, round trip, malformed
ferry_unit_test(test_jitlink ${CMAKE_SOURCE_DIR}/tests/unit/test_jitlink.c)
target_link_libraries(test_jitlink PRIVATE ferry_protocol)
# the sealed memfd record of a VMM shareable handle (cuMemExportToShareableHandle)
ferry_unit_test(test_ipc_fd ${CMAKE_SOURCE_DIR}/tests/unit/test_ipc_fd.c)
target_link_libraries(test_ipc_fd PRIVATE ferry_common)
