/* The graph node blob (protocol/graph.c): round trip of every node type,
   the fixed layout, and every way a blob can be malformed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/graph.h"

static const unsigned char params[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
static const unsigned char attrs[5] = {0xa, 0xb, 0xc, 0xd, 0xe};
static const uint32_t deps01[2] = {0, 1};
static const uint32_t deps2[1] = {2};

/* one node of each type: 0 empty, 1 kernel (after 0), 2 memset, 3 memcpy
   (after 0 and 1), 4 record (after 2), 5 wait */
static void sample(struct ferry_gnode n[6]) {
  memset(n, 0, 6 * sizeof *n);
  n[0].type = FERRY_GNODE_EMPTY;
  n[1].type = FERRY_GNODE_KERNEL;
  n[1].ndeps = 1;
  n[1].deps = deps01;
  n[1].u.kernel.func = 3u << 16 | 7;
  n[1].u.kernel.gx = 100;
  n[1].u.kernel.gy = 2;
  n[1].u.kernel.gz = 1;
  n[1].u.kernel.bx = 256;
  n[1].u.kernel.by = 1;
  n[1].u.kernel.bz = 1;
  n[1].u.kernel.shmem = 4096;
  n[1].u.kernel.params = params;
  n[1].u.kernel.params_len = sizeof params;
  n[1].u.kernel.attrs = attrs;
  n[1].u.kernel.attrs_len = sizeof attrs;
  n[2].type = FERRY_GNODE_MEMSET;
  n[2].u.memset.dst = 0x7f0000001000ull;
  n[2].u.memset.pitch = 512;
  n[2].u.memset.width = 100;
  n[2].u.memset.height = 3;
  n[2].u.memset.value = 0xdeadbeef;
  n[2].u.memset.elem = 4;
  n[3].type = FERRY_GNODE_MEMCPY;
  n[3].ndeps = 2;
  n[3].deps = deps01;
  n[3].u.memcpy.dst = 0x7f0000002000ull;
  n[3].u.memcpy.dpitch = 64;
  n[3].u.memcpy.src = 0x7f0000003000ull;
  n[3].u.memcpy.spitch = 128;
  n[3].u.memcpy.width = 60;
  n[3].u.memcpy.height = 5;
  n[4].type = FERRY_GNODE_EVENT_RECORD;
  n[4].ndeps = 1;
  n[4].deps = deps2;
  n[4].u.event.event = 9;
  n[5].type = FERRY_GNODE_EVENT_WAIT;
  n[5].u.event.event = 10;
}

static void build(struct ferry_gbuf *b) {
  struct ferry_gnode n[6];
  sample(n);
  memset(b, 0, sizeof *b);
  for (int i = 0; i < 6; i++) assert_int_equal(ferry_graph_put(b, &n[i]), 0);
  assert_int_equal(b->nnodes, 6);
}

struct seen {
  struct ferry_gnode want[6];
  int count;
};

static int check_node(void *ctx, uint32_t index, const struct ferry_gnode *n) {
  struct seen *s = ctx;
  assert_int_equal(index, s->count);
  const struct ferry_gnode *w = &s->want[index];
  assert_int_equal(n->type, w->type);
  assert_int_equal(n->ndeps, w->ndeps);
  if (w->ndeps) assert_memory_equal(n->deps, w->deps, w->ndeps * sizeof *w->deps);
  switch (n->type) {
  case FERRY_GNODE_KERNEL:
    assert_int_equal(n->u.kernel.func, w->u.kernel.func);
    assert_int_equal(n->u.kernel.gx, w->u.kernel.gx);
    assert_int_equal(n->u.kernel.gy, w->u.kernel.gy);
    assert_int_equal(n->u.kernel.gz, w->u.kernel.gz);
    assert_int_equal(n->u.kernel.bx, w->u.kernel.bx);
    assert_int_equal(n->u.kernel.by, w->u.kernel.by);
    assert_int_equal(n->u.kernel.bz, w->u.kernel.bz);
    assert_int_equal(n->u.kernel.shmem, w->u.kernel.shmem);
    assert_int_equal(n->u.kernel.params_len, w->u.kernel.params_len);
    assert_memory_equal(n->u.kernel.params, w->u.kernel.params, w->u.kernel.params_len);
    assert_int_equal(n->u.kernel.attrs_len, w->u.kernel.attrs_len);
    assert_memory_equal(n->u.kernel.attrs, w->u.kernel.attrs, w->u.kernel.attrs_len);
    break;
  case FERRY_GNODE_MEMSET:
    assert_memory_equal(&n->u.memset, &w->u.memset, sizeof n->u.memset);
    break;
  case FERRY_GNODE_MEMCPY:
    assert_memory_equal(&n->u.memcpy, &w->u.memcpy, sizeof n->u.memcpy);
    break;
  case FERRY_GNODE_EVENT_RECORD:
  case FERRY_GNODE_EVENT_WAIT:
    assert_int_equal(n->u.event.event, w->u.event.event);
    break;
  default: break;
  }
  s->count++;
  return 0;
}

static void round_trip(void **state) {
  (void)state;
  struct ferry_gbuf b;
  build(&b);
  struct seen s = {.count = 0};
  sample(s.want);
  assert_int_equal(ferry_graph_walk(b.data, b.len, check_node, &s), 6);
  assert_int_equal(s.count, 6);
  assert_int_equal(ferry_graph_walk(b.data, b.len, NULL, NULL), 6);
  ferry_gbuf_free(&b);
  assert_null(b.data);
  assert_int_equal(b.len, 0);
}

/* the bytes are fixed little-endian: a client and server of either byte
   order, and a replay log, read them alike */
static void fixed_layout(void **state) {
  (void)state;
  struct ferry_gbuf b = {0};
  struct ferry_gnode n = {.type = FERRY_GNODE_EVENT_WAIT, .u.event.event = 0x01020304};
  assert_int_equal(ferry_graph_put(&b, &n), 0);
  const unsigned char want[] = {'G', 'R', 'P', 'H', 1, 0, 0, 0, 1, 0, 0, 0,
                                5,   0,   0,   0,   0, 0, 0, 0, 4, 3, 2, 1};
  assert_int_equal(b.len, sizeof want);
  assert_memory_equal(b.data, want, sizeof want);
  ferry_gbuf_free(&b);
}

static void empty_graph(void **state) {
  (void)state;
  struct ferry_gbuf b = {0};
  assert_int_equal(ferry_graph_walk(b.data, b.len, NULL, NULL), 0);
  /* a header that says no nodes is also the empty graph */
  const unsigned char hdr[] = {'G', 'R', 'P', 'H', 1, 0, 0, 0, 0, 0, 0, 0};
  assert_int_equal(ferry_graph_walk(hdr, sizeof hdr, NULL, NULL), 0);
}

static void put_refuses_late_deps(void **state) {
  (void)state;
  struct ferry_gbuf b = {0};
  uint32_t self = 0;
  struct ferry_gnode n = {.type = FERRY_GNODE_EMPTY, .ndeps = 1, .deps = &self};
  assert_int_equal(ferry_graph_put(&b, &n), -1); /* node 0 cannot depend on itself */
  assert_int_equal(b.len, 0);
  n.ndeps = 0;
  assert_int_equal(ferry_graph_put(&b, &n), 0);
  size_t len = b.len;
  self = 1;
  n.ndeps = 1;
  assert_int_equal(ferry_graph_put(&b, &n), -1);
  assert_int_equal(b.len, len);
  assert_int_equal(b.nnodes, 1);
  n.ndeps = 0;
  n.type = FERRY_GNODE_TYPES;
  assert_int_equal(ferry_graph_put(&b, &n), -1);
  ferry_gbuf_free(&b);
}

/* every proper prefix of a sound blob is truncated, and so malformed */
static void truncated(void **state) {
  (void)state;
  struct ferry_gbuf b;
  build(&b);
  for (size_t len = 1; len < b.len; len++) {
    unsigned char *copy = malloc(len); /* exact size: ASan sees any read past it */
    memcpy(copy, b.data, len);
    assert_int_equal(ferry_graph_walk(copy, len, NULL, NULL), -1);
    free(copy);
  }
  ferry_gbuf_free(&b);
}

static void trailing_bytes(void **state) {
  (void)state;
  struct ferry_gbuf b;
  build(&b);
  unsigned char *copy = malloc(b.len + 1);
  memcpy(copy, b.data, b.len);
  copy[b.len] = 0;
  assert_int_equal(ferry_graph_walk(copy, b.len + 1, NULL, NULL), -1);
  free(copy);
  ferry_gbuf_free(&b);
}

static int never(void *ctx, uint32_t index, const struct ferry_gnode *n) {
  (void)ctx;
  (void)index;
  (void)n;
  fail_msg("a node of a malformed blob reached the callback");
  return 0;
}

static void expect_malformed(const unsigned char *data, size_t len) {
  unsigned char *copy = malloc(len);
  memcpy(copy, data, len);
  assert_int_equal(ferry_graph_walk(copy, len, never, NULL), -1);
  free(copy);
}

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* offsets into build()'s blob */
#define NODE0 FERRY_GRAPH_HEADER      /* empty: type, ndeps */
#define NODE1 (NODE0 + 8)             /* kernel: type, ndeps, dep */
#define K_PARAMS_LEN (NODE1 + 12 + 32)
#define K_ATTRS_LEN (K_PARAMS_LEN + 4 + sizeof params)

static void malformed_fields(void **state) {
  (void)state;
  struct ferry_gbuf b;
  build(&b);
  unsigned char *m = malloc(b.len);
  struct { size_t off; uint32_t value; const char *what; } cases[] = {
    {0, 0x12345678, "magic"},
    {4, 2, "version"},
    {8, 5, "count short of the nodes"},
    {8, 7, "count past the nodes"},
    {8, 0x7fffffff, "count past any blob"},
    {8, 0xffffffff, "count over INT_MAX"},
    {NODE0, FERRY_GNODE_TYPES, "unknown type"},
    {NODE0, 0xffffffff, "unknown type"},
    {NODE0 + 4, 1, "node 0 with a dep"},
    {NODE1 + 8, 1, "dep on itself"},
    {NODE1 + 8, 5, "dep on a later node"},
    {NODE1 + 4, 0x40000000, "ndeps past the end"},
    {K_PARAMS_LEN, 0xffffffff, "params past the end"},
    {K_PARAMS_LEN, sizeof params + 1, "params one past"},
    {K_ATTRS_LEN, 0xfffffff0, "attrs past the end"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(m, b.data, b.len);
    put32(m + cases[i].off, cases[i].value);
    print_message("malformed: %s\n", cases[i].what);
    expect_malformed(m, b.len);
  }
  free(m);
  ferry_gbuf_free(&b);
  assert_int_equal(ferry_graph_walk(NULL, 12, NULL, NULL), -1);
}

static int stop_at_two(void *ctx, uint32_t index, const struct ferry_gnode *n) {
  (void)n;
  *(int *)ctx += 1;
  return index == 2 ? 42 : 0;
}

static void callback_stops_walk(void **state) {
  (void)state;
  struct ferry_gbuf b;
  build(&b);
  int calls = 0;
  assert_int_equal(ferry_graph_walk(b.data, b.len, stop_at_two, &calls), 42);
  assert_int_equal(calls, 3);
  ferry_gbuf_free(&b);
}

/* many nodes, each depending on all before it (deps scratch grows) */
static void wide_dependencies(void **state) {
  (void)state;
  enum { N = 200 };
  static uint32_t deps[N];
  for (uint32_t i = 0; i < N; i++) deps[i] = i;
  struct ferry_gbuf b = {0};
  for (uint32_t i = 0; i < N; i++) {
    struct ferry_gnode n = {.type = FERRY_GNODE_EMPTY, .ndeps = i, .deps = deps};
    assert_int_equal(ferry_graph_put(&b, &n), 0);
  }
  assert_int_equal(ferry_graph_walk(b.data, b.len, NULL, NULL), N);
  ferry_gbuf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(round_trip),        cmocka_unit_test(fixed_layout),
    cmocka_unit_test(empty_graph),       cmocka_unit_test(put_refuses_late_deps),
    cmocka_unit_test(truncated),         cmocka_unit_test(trailing_bytes),
    cmocka_unit_test(malformed_fields),  cmocka_unit_test(callback_stops_walk),
    cmocka_unit_test(wide_dependencies),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
