/* nvcc's images of tests/unit/image_kernels.cu, as test_image and test_sim
   read them: a file of IMAGE_DIR (set by CMake) with a NUL after its bytes
   (PTX files have none); include after cmocka.h */
#ifndef FERRY_TEST_IMAGE_FILES_H
#define FERRY_TEST_IMAGE_FILES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char *slurp(const char *name, uint64_t *len) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", IMAGE_DIR, name);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = calloc(1, (size_t)n + 1);
  assert_non_null(p);
  assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  if (len) *len = (uint64_t)n;
  return p;
}

#endif
