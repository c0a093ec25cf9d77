# The installed tree (tests/install/install.sh): `cmake --install` into a
# scratch prefix, and the .deb that cpack builds, unpacked into a scratch
# root; programs run through each, a migration onto the installed helper too.
foreach(case prefix deb)
  add_test(NAME install_${case}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/install/install.sh ${CMAKE_BINARY_DIR} ${case}
                   ${CMAKE_COMMAND} ${CMAKE_CPACK_COMMAND})
  set_tests_properties(install_${case} PROPERTIES TIMEOUT 300)
endforeach()
