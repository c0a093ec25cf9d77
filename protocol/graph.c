/* The graph node blob: writing and a checked walk; layout in graph.h. */
#include "graph.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */

static void le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static int reserve(struct ferry_gbuf *b, size_t extra) {
  if (extra > SIZE_MAX - b->len) return -1;
  if (b->len + extra <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra) {
    if (cap > SIZE_MAX / 2) return -1;
    cap *= 2;
  }
  unsigned char *d = realloc(b->data, cap);
  if (!d) return -1;
  b->data = d;
  b->cap = cap;
  return 0;
}

static size_t payload_size(const struct ferry_gnode *n) {
  switch (n->type) {
  case FERRY_GNODE_EMPTY: return 0;
  case FERRY_GNODE_KERNEL: return 8 * 4 + 4 + (size_t)n->u.kernel.params_len + 4 + n->u.kernel.attrs_len;
  case FERRY_GNODE_MEMSET: return 4 * 8 + 2 * 4;
  case FERRY_GNODE_MEMCPY: return 6 * 8;
  default: return 4; /* the two event nodes */
  }
}

int ferry_graph_put(struct ferry_gbuf *b, const struct ferry_gnode *n) {
  if (n->type >= FERRY_GNODE_TYPES || b->nnodes >= (uint32_t)INT_MAX) return -1;
  if (n->ndeps && !n->deps) return -1;
  for (uint32_t i = 0; i < n->ndeps; i++)
    if (n->deps[i] >= b->nnodes) return -1;
  size_t need = (b->len ? 0 : FERRY_GRAPH_HEADER) + 8 + (size_t)n->ndeps * 4 + payload_size(n);
  if (reserve(b, need)) return -1;
  if (!b->len) {
    le32(b->data, FERRY_GRAPH_MAGIC);
    le32(b->data + 4, FERRY_GRAPH_VERSION);
    b->len = FERRY_GRAPH_HEADER;
  }
  unsigned char *p = b->data + b->len;
  le32(p, n->type);
  le32(p + 4, n->ndeps);
  p += 8;
  for (uint32_t i = 0; i < n->ndeps; i++, p += 4) le32(p, n->deps[i]);
  switch (n->type) {
  case FERRY_GNODE_KERNEL: {
    const uint32_t v[8] = {n->u.kernel.func, n->u.kernel.gx, n->u.kernel.gy, n->u.kernel.gz,
                           n->u.kernel.bx,   n->u.kernel.by, n->u.kernel.bz, n->u.kernel.shmem};
    for (int i = 0; i < 8; i++, p += 4) le32(p, v[i]);
    le32(p, n->u.kernel.params_len);
    if (n->u.kernel.params_len) memcpy(p + 4, n->u.kernel.params, n->u.kernel.params_len);
    p += 4 + n->u.kernel.params_len;
    le32(p, n->u.kernel.attrs_len);
    if (n->u.kernel.attrs_len) memcpy(p + 4, n->u.kernel.attrs, n->u.kernel.attrs_len);
    p += 4 + n->u.kernel.attrs_len;
    break;
  }
  case FERRY_GNODE_MEMSET:
    le64(p, n->u.memset.dst);
    le64(p + 8, n->u.memset.pitch);
    le64(p + 16, n->u.memset.width);
    le64(p + 24, n->u.memset.height);
    le32(p + 32, n->u.memset.value);
    le32(p + 36, n->u.memset.elem);
    p += 40;
    break;
  case FERRY_GNODE_MEMCPY: {
    const uint64_t v[6] = {n->u.memcpy.dst, n->u.memcpy.dpitch, n->u.memcpy.src,
                           n->u.memcpy.spitch, n->u.memcpy.width, n->u.memcpy.height};
    for (int i = 0; i < 6; i++, p += 8) le64(p, v[i]);
    break;
  }
  case FERRY_GNODE_EVENT_RECORD:
  case FERRY_GNODE_EVENT_WAIT:
    le32(p, n->u.event.event);
    p += 4;
    break;
  default: break;
  }
  b->len = (size_t)(p - b->data);
  b->nnodes++;
  le32(b->data + 8, b->nnodes);
  return 0;
}

void ferry_gbuf_free(struct ferry_gbuf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

/* ---- reading ---- */

struct reader {
  const unsigned char *p, *end;
};

static int rd32(struct reader *r, uint32_t *v) {
  if (r->end - r->p < 4) return -1;
  *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
  r->p += 4;
  return 0;
}
static int rd64(struct reader *r, uint64_t *v) {
  uint32_t lo = 0, hi = 0;
  if (r->end - r->p < 8) return -1;
  rd32(r, &lo);
  rd32(r, &hi);
  *v = (uint64_t)hi << 32 | lo;
  return 0;
}
static int rdbytes(struct reader *r, uint32_t *len, const void **ptr) {
  if (rd32(r, len) || (size_t)(r->end - r->p) < *len) return -1;
  *ptr = *len ? r->p : NULL;
  r->p += *len;
  return 0;
}

/* decodes the node at r into n (deps into scratch when it is non-NULL);
   ndeps_max gets the largest dep count seen */
static int read_node(struct reader *r, uint32_t index, struct ferry_gnode *n, uint32_t *scratch,
                     uint32_t *ndeps_max) {
  memset(n, 0, sizeof *n);
  if (rd32(r, &n->type) || rd32(r, &n->ndeps)) return -1;
  if (n->type >= FERRY_GNODE_TYPES) return -1;
  if ((size_t)(r->end - r->p) / 4 < n->ndeps) return -1;
  for (uint32_t i = 0; i < n->ndeps; i++) {
    uint32_t d = 0;
    rd32(r, &d);
    if (d >= index) return -1;
    if (scratch) scratch[i] = d;
  }
  if (n->ndeps > *ndeps_max) *ndeps_max = n->ndeps;
  n->deps = n->ndeps ? scratch : NULL;
  switch (n->type) {
  case FERRY_GNODE_EMPTY: return 0;
  case FERRY_GNODE_KERNEL:
    return rd32(r, &n->u.kernel.func) || rd32(r, &n->u.kernel.gx) || rd32(r, &n->u.kernel.gy) ||
                   rd32(r, &n->u.kernel.gz) || rd32(r, &n->u.kernel.bx) || rd32(r, &n->u.kernel.by) ||
                   rd32(r, &n->u.kernel.bz) || rd32(r, &n->u.kernel.shmem) ||
                   rdbytes(r, &n->u.kernel.params_len, &n->u.kernel.params) ||
                   rdbytes(r, &n->u.kernel.attrs_len, &n->u.kernel.attrs)
               ? -1
               : 0;
  case FERRY_GNODE_MEMSET:
    return rd64(r, &n->u.memset.dst) || rd64(r, &n->u.memset.pitch) || rd64(r, &n->u.memset.width) ||
                   rd64(r, &n->u.memset.height) || rd32(r, &n->u.memset.value) ||
                   rd32(r, &n->u.memset.elem)
               ? -1
               : 0;
  case FERRY_GNODE_MEMCPY:
    return rd64(r, &n->u.memcpy.dst) || rd64(r, &n->u.memcpy.dpitch) || rd64(r, &n->u.memcpy.src) ||
                   rd64(r, &n->u.memcpy.spitch) || rd64(r, &n->u.memcpy.width) ||
                   rd64(r, &n->u.memcpy.height)
               ? -1
               : 0;
  default: return rd32(r, &n->u.event.event);
  }
}

int ferry_graph_walk(const void *blob, size_t len,
                     int (*fn)(void *ctx, uint32_t index, const struct ferry_gnode *n), void *ctx) {
  if (!len) return 0;
  if (!blob) return -1;
  struct reader r = {blob, (const unsigned char *)blob + len};
  uint32_t magic, version, count;
  if (rd32(&r, &magic) || rd32(&r, &version) || rd32(&r, &count)) return -1;
  if (magic != FERRY_GRAPH_MAGIC || version != FERRY_GRAPH_VERSION || count > (uint32_t)INT_MAX)
    return -1;
  /* every node is at least 8 bytes: a count past that is a lie, caught before the loop */
  if ((size_t)(r.end - r.p) / 8 < count) return -1;
  const unsigned char *first = r.p;
  uint32_t ndeps_max = 0;
  struct ferry_gnode n;
  for (uint32_t i = 0; i < count; i++)
    if (read_node(&r, i, &n, NULL, &ndeps_max)) return -1;
  if (r.p != r.end) return -1;
  if (!fn) return (int)count;
  /* second pass: the blob is sound; deps go to scratch (the blob's are unaligned, little-endian) */
  uint32_t *scratch = malloc((ndeps_max ? ndeps_max : 1) * sizeof *scratch);
  if (!scratch) return -1;
  r.p = first;
  int rc = (int)count;
  for (uint32_t i = 0; i < count; i++) {
    read_node(&r, i, &n, scratch, &ndeps_max);
    int v = fn(ctx, i, &n);
    if (v) {
      rc = v;
      break;
    }
  }
  free(scratch);
  return rc;
}
