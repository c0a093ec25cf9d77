// What tests/apps/mapped.cu and managed.cu share: kernels on memory the
// host also reads and writes (fill_kernels.h), and the checks and checksum
// of the results.
#ifndef FERRY_TESTS_HOST_MEM_CHECK_H
#define FERRY_TESTS_HOST_MEM_CHECK_H

#include <cstdint>
#include <cstdio>

#include "fill_kernels.h"


#define BLOCK 256
static int launches, bad;
static uint64_t hash = 1469598103934665603ull;

static void expect(bool ok, const char *what, int iter) {
  if (!ok) {
    printf("FAIL: %s (iteration %d)\n", what, iter);
    bad++;
  }
}
// FNV-1a of the results: a migrated run must print an unmoved run's
static void fold(const unsigned *p, size_t n) {
  for (size_t i = 0; i < n; i++) hash = (hash ^ p[i]) * 1099511628211ull;
}

// the lines the tests read; the exit status
static int report(void) {
  printf("launches: %d\n", launches);
  printf("checksum: %016llx\n", (unsigned long long)hash);
  printf("%s\n", bad ? "FAILED" : "PASSED");
  return bad ? 1 : 0;
}

#endif
