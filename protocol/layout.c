/* Parameter layouts: wire form and packing; see layout.h. */
#include "layout.h"

#include <stdlib.h>
#include <string.h>

static int read_u32(const unsigned char **p, const unsigned char *end, uint32_t *v) {
  if (end - *p < 4) return -1;
  memcpy(v, *p, 4);
  *p += 4;
  return 0;
}

int ferry_layout_read(const unsigned char **p, const unsigned char *end, struct ferry_layout *l) {
  memset(l, 0, sizeof *l);
  uint32_t n;
  if (read_u32(p, end, &n)) return -1;
  if (n == FERRY_LAYOUT_ABSENT) return 1;
  if (n > FERRY_MAX_PARAMS || (size_t)(end - *p) < (size_t)n * 8) return -1;
  l->offsets = malloc((n ? n : 1) * sizeof *l->offsets);
  l->sizes = malloc((n ? n : 1) * sizeof *l->sizes);
  if (!l->offsets || !l->sizes) {
    ferry_layout_free(l);
    return -1;
  }
  l->nparams = n;
  for (uint32_t i = 0; i < n; i++) {
    read_u32(p, end, &l->offsets[i]);
    read_u32(p, end, &l->sizes[i]);
    uint64_t param_end = (uint64_t)l->offsets[i] + l->sizes[i];
    if (param_end > FERRY_MAX_PARAM_BYTES) {
      ferry_layout_free(l);
      return -1;
    }
    if (param_end > l->bytes) l->bytes = (uint32_t)param_end;
  }
  return 0;
}

void ferry_layout_free(struct ferry_layout *l) {
  free(l->offsets);
  free(l->sizes);
  memset(l, 0, sizeof *l);
}

int ferry_layout_equal(const struct ferry_layout *a, const struct ferry_layout *b) {
  return a->nparams == b->nparams &&
         !memcmp(a->offsets, b->offsets, a->nparams * sizeof *a->offsets) &&
         !memcmp(a->sizes, b->sizes, a->nparams * sizeof *a->sizes);
}

void ferry_layout_pack(const struct ferry_layout *l, void *const *args, unsigned char *buf) {
  memset(buf, 0, l->bytes);
  for (uint32_t i = 0; i < l->nparams; i++) memcpy(buf + l->offsets[i], args[i], l->sizes[i]);
}
