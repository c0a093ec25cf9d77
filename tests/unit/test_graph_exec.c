/*
 * CUDA graphs in the executor, on the CPU simulation (issue 21): a node
 * blob instantiated under an exec id and launched many times, re-sent with
 * the same id (updated in place or replaced; a failed replacement keeps the
 * old graph), the errors of bad blobs and handles, a device reset; and the
 * recorder's copy of the instantiate replayed on a fresh session, which
 * then runs the graph alike.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "executor/exec.h"
#include "protocol/graph.h"
#include "recorder/recorder.h"
#include "replay/replay.h"

#define MiB (1ull << 20)
#define ARENA 0x200000000000ull
#define ARENA_SIZE (1ull << 40)
#define A ARENA               /* int[1000], incremented by the kernel nodes */
#define B (ARENA + 1 * MiB)   /* A copied here */
#define C (ARENA + MiB + MiB / 2) /* 16-bit memset, 2D */
#define MODULE 3
#define INC (MODULE << 16 | 0)
#define MISSING (MODULE << 16 | 1)
#define EVENT 5
#define STREAM 16

enum { OK = 0, INVALID_VALUE = 1, INVALID_DEVICE_FUNC = 98, INVALID_HANDLE = 400 };

static const struct ferry_driver *drv;
static struct ferry_exec *ex;
static struct ferry_recorder rec;

/* every successful RECORD call goes to the log, as the client's call path does */
static int call(unsigned c, const void *args, void *rets, const void *bulk, uint64_t n) {
  struct ferry_bulk b = {.in = bulk, .in_len = n};
  int rc = ferry_exec_call_mem(ex, c, args, rets, &b);
  if (!rc) assert_int_equal(ferry_record(&rec, c, args, rets, bulk, n), 0);
  return rc;
}

static const unsigned char fatbin[32] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 16};

/* memory, module 3 (inc, then a name the twins lack), event 5, stream 16 */
static void session_state(void) {
  struct ferry_mem_map_args m = {ARENA, 2 * MiB};
  struct ferry_mem_map_rets mr;
  assert_int_equal(call(FERRY_CALL_mem_map, &m, &mr, NULL, 0), OK);
  static const char funcs[] = "_Z3incPii\0_Z7missingv";
  struct ferry_module_load_args l = {.module = MODULE, .func_names = {funcs, sizeof funcs}};
  struct ferry_module_load_rets lr;
  assert_int_equal(call(FERRY_CALL_module_load, &l, &lr, fatbin, sizeof fatbin), OK);
  struct ferry_event_create_args e = {EVENT, 0};
  struct ferry_event_create_rets er;
  assert_int_equal(call(FERRY_CALL_event_create, &e, &er, NULL, 0), OK);
  struct ferry_stream_create_args s = {STREAM, 0, 0};
  struct ferry_stream_create_rets sr;
  assert_int_equal(call(FERRY_CALL_stream_create, &s, &sr, NULL, 0), OK);
}

static int open_exec(void) {
  char err[256];
  ex = ferry_exec_open(drv, 0, ARENA, ARENA_SIZE, err, sizeof err);
  return ex ? 0 : -1;
}

static int setup(void **state) {
  (void)state;
  char err[256];
  drv = ferry_driver_sim(UNIT_TWINS, err, sizeof err);
  if (!drv || open_exec()) return -1;
  ferry_recorder_init(&rec);
  session_state();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ferry_exec_close(ex);
  ferry_recorder_destroy(&rec);
  return 0;
}

/* ---- blobs ---- */

struct inc_params {
  unsigned char b[12];
};
static struct inc_params inc_params(uint64_t p, int32_t n) {
  struct inc_params x;
  memcpy(x.b, &p, 8);
  memcpy(x.b + 8, &n, 4);
  return x;
}

static struct ferry_gnode kernel(uint32_t func, const struct inc_params *p, uint32_t ndeps,
                                 const uint32_t *deps) {
  struct ferry_gnode n = {.type = FERRY_GNODE_KERNEL, .ndeps = ndeps, .deps = deps};
  n.u.kernel.func = func;
  n.u.kernel.gx = 4, n.u.kernel.gy = 1, n.u.kernel.gz = 1;
  n.u.kernel.bx = 256, n.u.kernel.by = 1, n.u.kernel.bz = 1;
  n.u.kernel.params = p->b;
  n.u.kernel.params_len = sizeof p->b;
  return n;
}

/* inc(A, n) twice in a row, A copied to B after, a 2D 16-bit memset of C
   beside them, event 5 recorded after all and waited on: 6 nodes */
static void standard_graph(struct ferry_gbuf *b, int32_t n, uint32_t func2) {
  static const uint32_t d0[] = {0}, d1[] = {1}, d23[] = {2, 3}, d4[] = {4};
  struct inc_params p = inc_params(A, n);
  struct ferry_gnode k0 = kernel(INC, &p, 0, NULL), k1 = kernel(func2, &p, 1, d0);
  struct ferry_gnode cp = {.type = FERRY_GNODE_MEMCPY, .ndeps = 1, .deps = d1};
  cp.u.memcpy.dst = B, cp.u.memcpy.dpitch = 4000, cp.u.memcpy.src = A, cp.u.memcpy.spitch = 4000;
  cp.u.memcpy.width = 4000, cp.u.memcpy.height = 1;
  struct ferry_gnode ms = {.type = FERRY_GNODE_MEMSET};
  ms.u.memset.dst = C, ms.u.memset.pitch = 64, ms.u.memset.width = 10, ms.u.memset.height = 3;
  ms.u.memset.value = 0xbeef, ms.u.memset.elem = 2;
  struct ferry_gnode rec_node = {.type = FERRY_GNODE_EVENT_RECORD, .ndeps = 2, .deps = d23};
  rec_node.u.event.event = EVENT;
  struct ferry_gnode wait = {.type = FERRY_GNODE_EVENT_WAIT, .ndeps = 1, .deps = d4};
  wait.u.event.event = EVENT;
  memset(b, 0, sizeof *b);
  const struct ferry_gnode *all[] = {&k0, &k1, &cp, &ms, &rec_node, &wait};
  for (size_t i = 0; i < 6; i++) assert_int_equal(ferry_graph_put(b, all[i]), 0);
}

static int instantiate(uint32_t exec, const struct ferry_gbuf *b) {
  struct ferry_graph_instantiate_args a = {.exec = exec, .nodes = {b->data, (uint32_t)b->len}};
  struct ferry_graph_instantiate_rets r;
  return call(FERRY_CALL_graph_instantiate, &a, &r, NULL, 0);
}

static int launch(uint32_t exec, uint32_t stream) {
  struct ferry_graph_launch_args a = {exec, stream};
  struct ferry_graph_launch_rets r;
  return call(FERRY_CALL_graph_launch, &a, &r, NULL, 0);
}

static int destroy(uint32_t exec) {
  struct ferry_graph_exec_destroy_args a = {exec};
  struct ferry_graph_exec_destroy_rets r;
  return call(FERRY_CALL_graph_exec_destroy, &a, &r, NULL, 0);
}

static const int32_t *dev(uint64_t addr) { return (const int32_t *)(uintptr_t)addr; }

static void check_memset(void) {
  const unsigned char *c = (const unsigned char *)(uintptr_t)C;
  for (int row = 0; row < 3; row++) {
    for (int x = 0; x < 10; x++) {
      uint16_t v;
      memcpy(&v, c + row * 64 + x * 2, 2);
      assert_int_equal(v, 0xbeef);
    }
    assert_int_equal(c[row * 64 + 20], 0); /* past the width: untouched */
  }
}

/* ---- tests ---- */

static void launches_a_hundred_times(void **state) {
  (void)state;
  struct ferry_gbuf b;
  standard_graph(&b, 1000, INC);
  assert_int_equal(instantiate(7, &b), OK);
  ferry_gbuf_free(&b); /* the driver copied every parameter */
  for (int i = 0; i < 100; i++) assert_int_equal(launch(7, i % 2 ? STREAM : 0), OK);
  assert_int_equal(ferry_exec_take_async_error(ex), OK);
  for (int i = 0; i < 1000; i++) {
    assert_int_equal(dev(A)[i], 200);
    assert_int_equal(dev(B)[i], 200);
  }
  assert_int_equal(dev(A)[1000], 0);
  check_memset();
  struct ferry_graph_upload_args u = {7, STREAM};
  struct ferry_graph_upload_rets ur;
  assert_int_equal(call(FERRY_CALL_graph_upload, &u, &ur, NULL, 0), OK);
  assert_int_equal(destroy(7), OK);
}

/* cudaGraphExecUpdate's path: the same exec id again */
static void resend_replaces(void **state) {
  (void)state;
  memset((void *)(uintptr_t)A, 0, 4096);
  struct ferry_gbuf b;
  standard_graph(&b, 1000, INC);
  assert_int_equal(instantiate(8, &b), OK);
  ferry_gbuf_free(&b);
  assert_int_equal(launch(8, 0), OK);
  /* the same topology, new parameters: updated in place */
  standard_graph(&b, 500, INC);
  assert_int_equal(instantiate(8, &b), OK);
  ferry_gbuf_free(&b);
  assert_int_equal(launch(8, 0), OK);
  assert_int_equal(dev(A)[499], 4);
  assert_int_equal(dev(A)[500], 2);
  /* another topology (one node more): a new executable graph */
  standard_graph(&b, 100, INC);
  struct ferry_gnode extra = {.type = FERRY_GNODE_EMPTY};
  assert_int_equal(ferry_graph_put(&b, &extra), 0);
  assert_int_equal(instantiate(8, &b), OK);
  ferry_gbuf_free(&b);
  assert_int_equal(launch(8, 0), OK);
  assert_int_equal(dev(A)[99], 6);
  assert_int_equal(dev(A)[100], 4);
  /* a replacement that fails leaves the last one in place */
  standard_graph(&b, 1000, MISSING);
  assert_int_equal(instantiate(8, &b), INVALID_DEVICE_FUNC);
  ferry_gbuf_free(&b);
  assert_null(ferry_exec_violation(ex));
  assert_int_equal(launch(8, 0), OK);
  assert_int_equal(dev(A)[99], 8);
  assert_int_equal(dev(A)[100], 4);
  assert_int_equal(ferry_exec_take_async_error(ex), OK);
  assert_int_equal(destroy(8), OK);
}

static void bad_blobs_and_handles(void **state) {
  (void)state;
  struct ferry_gbuf b;
  standard_graph(&b, 10, INC);
  /* truncated: refused before any node is built, as a broken client */
  struct ferry_graph_instantiate_args a = {.exec = 9, .nodes = {b.data, (uint32_t)b.len - 1}};
  struct ferry_graph_instantiate_rets r;
  assert_int_equal(call(FERRY_CALL_graph_instantiate, &a, &r, NULL, 0), INVALID_VALUE);
  assert_non_null(ferry_exec_violation(ex));
  assert_non_null(strstr(ferry_exec_violation(ex), "node blob is malformed"));
  assert_int_equal(launch(9, 0), INVALID_HANDLE); /* nothing was made */
  assert_string_equal(ferry_exec_violation(ex), "graph exec id 9 was never created");
  assert_int_equal(ferry_exec_take_async_error(ex), INVALID_HANDLE); /* launches latch */
  assert_int_equal(destroy(9), INVALID_HANDLE);
  a.exec = 1u << 22; /* past the id bound */
  a.nodes.len = (uint32_t)b.len;
  assert_int_equal(call(FERRY_CALL_graph_instantiate, &a, &r, NULL, 0), INVALID_VALUE);
  ferry_gbuf_free(&b);

  /* a node naming an event or a kernel the client never made */
  struct ferry_gnode ev = {.type = FERRY_GNODE_EVENT_RECORD, .u.event.event = 77};
  memset(&b, 0, sizeof b);
  assert_int_equal(ferry_graph_put(&b, &ev), 0);
  assert_int_equal(instantiate(10, &b), INVALID_HANDLE);
  assert_string_equal(ferry_exec_violation(ex), "event id 77 was never created");
  ferry_gbuf_free(&b);
  struct inc_params p = inc_params(A, 1);
  struct ferry_gnode k = kernel(9u << 16, &p, 0, NULL);
  assert_int_equal(ferry_graph_put(&b, &k), 0);
  assert_int_equal(instantiate(10, &b), INVALID_HANDLE);
  ferry_gbuf_free(&b);
  /* short parameters; a bad launch configuration */
  k = kernel(INC, &p, 0, NULL);
  k.u.kernel.params_len = 8;
  assert_int_equal(ferry_graph_put(&b, &k), 0);
  assert_int_equal(instantiate(10, &b), INVALID_VALUE);
  ferry_gbuf_free(&b);
  k = kernel(INC, &p, 0, NULL);
  k.u.kernel.bx = 2048;
  assert_int_equal(ferry_graph_put(&b, &k), 0);
  assert_int_equal(instantiate(10, &b), INVALID_VALUE);
  ferry_gbuf_free(&b);
  /* a memset of 3-byte elements */
  struct ferry_gnode ms = {.type = FERRY_GNODE_MEMSET};
  ms.u.memset.dst = C, ms.u.memset.width = 4, ms.u.memset.height = 1, ms.u.memset.elem = 3;
  assert_int_equal(ferry_graph_put(&b, &ms), 0);
  assert_int_equal(instantiate(10, &b), INVALID_VALUE);
  ferry_gbuf_free(&b);
  /* the empty graph is a graph */
  assert_int_equal(instantiate(10, &b), OK);
  assert_int_equal(launch(10, 0), OK);
  assert_int_equal(destroy(10), OK);
}

static struct ferry_gbuf with_attr(CUlaunchAttributeID id) {
  struct inc_params p = inc_params(A, 1000);
  CUlaunchAttribute at;
  memset(&at, 0, sizeof at);
  at.id = id;
  if (id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) at.value.cooperative = 1;
  if (id == CU_LAUNCH_ATTRIBUTE_PRIORITY) at.value.priority = -1;
  struct ferry_gnode k = kernel(INC, &p, 0, NULL);
  k.u.kernel.attrs = &at;
  k.u.kernel.attrs_len = sizeof at;
  struct ferry_gbuf b = {0};
  assert_int_equal(ferry_graph_put(&b, &k), 0);
  return b;
}

/* kernel node attributes: plain values go on the node, others are refused */
static void kernel_attributes(void **state) {
  (void)state;
  memset((void *)(uintptr_t)A, 0, 4096);
  CUlaunchAttributeID ok[] = {CU_LAUNCH_ATTRIBUTE_COOPERATIVE, CU_LAUNCH_ATTRIBUTE_PRIORITY,
                              CU_LAUNCH_ATTRIBUTE_IGNORE};
  for (size_t i = 0; i < 3; i++) {
    struct ferry_gbuf b = with_attr(ok[i]);
    assert_int_equal(instantiate(11, &b), OK);
    ferry_gbuf_free(&b);
    assert_int_equal(launch(11, 0), OK);
  }
  assert_int_equal(dev(A)[999], 3);
  /* an event handle in a value, a stream-only attribute */
  CUlaunchAttributeID bad[] = {CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT,
                               CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY};
  for (size_t i = 0; i < 2; i++) {
    struct ferry_gbuf b = with_attr(bad[i]);
    assert_int_equal(instantiate(12, &b), INVALID_VALUE);
    ferry_gbuf_free(&b);
  }
  assert_int_equal(destroy(11), OK);
}

/* the log keeps the newest blob of each live exec and none of a destroyed one */
static int count_instantiates(void *ctx, const struct ferry_record *r) {
  if (r->call == FERRY_CALL_graph_instantiate) ++*(int *)ctx;
  return 0;
}

/* what migration does: the log replayed on a fresh session, whose graphs
   then run as the source's did */
static void replay_rebuilds_graphs(void **state) {
  (void)state;
  struct ferry_gbuf b;
  standard_graph(&b, 1000, INC);
  assert_int_equal(instantiate(20, &b), OK);
  ferry_gbuf_free(&b);
  standard_graph(&b, 300, INC); /* replaced: only this blob is replayed */
  assert_int_equal(instantiate(20, &b), OK);
  ferry_gbuf_free(&b);
  standard_graph(&b, 5, INC);
  assert_int_equal(instantiate(21, &b), OK);
  ferry_gbuf_free(&b);
  assert_int_equal(destroy(21), OK); /* destroyed: not replayed */
  int n = 0;
  ferry_recorder_foreach(&rec, count_instantiates, &n);
  assert_int_equal(n, 1);

  /* the target: a second session (the sim's arena is this process's, so
     the source goes first, as a migrated program's does) */
  ferry_exec_close(ex);
  assert_int_equal(open_exec(), 0);
  struct ferry_target t = ferry_exec_target(ex);
  struct ferry_replay_stats st;
  char err[256] = "";
  assert_int_equal(ferry_replay(&rec, &t, NULL, &st, err, sizeof err), 0);
  memset((void *)(uintptr_t)A, 0, 4096);
  assert_int_equal(launch(20, STREAM), OK);
  assert_int_equal(ferry_exec_take_async_error(ex), OK);
  assert_int_equal(dev(A)[299], 2);
  assert_int_equal(dev(A)[300], 0);
  assert_int_equal(dev(B)[299], 2);
  check_memset();
  assert_int_equal(launch(21, 0), INVALID_HANDLE);
}

/* a reset ends every executable graph with the rest of the context */
static void reset_ends_graphs(void **state) {
  (void)state;
  struct ferry_gbuf b;
  standard_graph(&b, 10, INC);
  assert_int_equal(instantiate(30, &b), OK);
  ferry_gbuf_free(&b);
  struct ferry_device_reset_args a = {0};
  struct ferry_device_reset_rets r;
  assert_int_equal(call(FERRY_CALL_device_reset, &a, &r, NULL, 0), OK);
  assert_int_equal(launch(30, 0), INVALID_HANDLE);
  assert_int_equal(ferry_recorder_live(&rec), 0);
  session_state(); /* for the tests after */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(launches_a_hundred_times),
      cmocka_unit_test(resend_replaces),
      cmocka_unit_test(bad_blobs_and_handles),
      cmocka_unit_test(kernel_attributes),
      cmocka_unit_test(replay_rebuilds_graphs),
      cmocka_unit_test(reset_ends_graphs),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
