/* Room in a growing array (common/grow.h). */
#include "common/grow.h"

#include <stdlib.h>

int ferry_grow(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap * 2 : 8;
  while (n < need) n *= 2;
  void *p = realloc(*arr, n * elem);
  if (!p) return -1;
  *arr = p;
  *cap = n;
  return 0;
}
