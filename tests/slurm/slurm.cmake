# Slurm integration (slurm/): the policy of ferry-slurm-hook (unit tests,
# Python 3 only), and a real single-node Slurm with the SPANK plugin and the
# hook, on the CPU simulation (tests/slurm/run.sh; root; installs Debian's
# slurmctld, slurmd, slurm-client, munge, libslurm-dev if missing, and
# reports "skipped" (77) where it can neither find nor install them).
# ctest -L slurm runs both; the plugin itself is built by run.sh with cc,
# from slurm/ferry_spank.c, as a site builds it (slurm/Makefile).
find_program(FERRY_PYTHON3 python3)
if(FERRY_PYTHON3)
  add_test(NAME slurm_policy
           COMMAND ${FERRY_PYTHON3} ${CMAKE_SOURCE_DIR}/tests/slurm/test_policy.py)
  set_tests_properties(slurm_policy PROPERTIES TIMEOUT 60 LABELS "slurm;unit")
endif()
add_test(NAME slurm_e2e COMMAND sh ${CMAKE_SOURCE_DIR}/tests/slurm/run.sh ${CMAKE_BINARY_DIR})
# apt-get may take a minute; the three cases about 40 s; RUN_SERIAL: one
# Slurm (and the dpkg lock) at a time, and steady timings for its waits
set_tests_properties(slurm_e2e PROPERTIES TIMEOUT 300 LABELS "slurm;e2e" SKIP_RETURN_CODE 77
                     RUN_SERIAL TRUE)
