/*
 * The executor's CUDA IPC (executor/exec_ipc.c) on the CPU simulation,
 * with a broker in memory: an export of a range over two mappings, the
 * same key again, an import elsewhere in the arena that sees and changes
 * the same bytes, and what is refused: another server's handle, a key of
 * the wrong length, a size that is not the export's, a range over a live
 * mapping, a description the broker altered, a second close; unmapping
 * ends the export; an event opened in its own process is refused as CUDA does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "executor/exec.h"
#include "protocol/ipc.h"

#define MiB (1ull << 20)
#define ARENA 0x200000000000ull
#define ARENA_SIZE (1ull << 40)

static const struct ferry_driver *drv;
static struct ferry_exec *ex;

/* ---- a broker in memory ---- */
static struct {
  uint8_t key[16];
  unsigned char meta[4096];
  size_t meta_len;
  int fds[32];
  unsigned nfds;
  int used;
} store[8];
static int puts_made, drops_made, corrupt;

static int fake_put(void *ctx, const void *meta, size_t meta_len, const int *fds, unsigned nfds,
                    uint8_t *key) {
  (void)ctx;
  for (int i = 0; i < 8; i++) {
    if (store[i].used) continue;
    store[i].used = 1;
    memset(store[i].key, 0, 16);
    store[i].key[0] = (uint8_t)(i + 1);
    memcpy(store[i].meta, meta, meta_len);
    store[i].meta_len = meta_len;
    for (unsigned k = 0; k < nfds; k++) store[i].fds[k] = dup(fds[k]);
    store[i].nfds = nfds;
    memcpy(key, store[i].key, 16);
    puts_made++;
    return 0;
  }
  return FERRY_IPC_TOO_MANY;
}
static int fake_get(void *ctx, const uint8_t *key, void *meta, size_t *meta_len, int *fds,
                    unsigned *nfds) {
  (void)ctx;
  for (int i = 0; i < 8; i++) {
    if (!store[i].used || memcmp(store[i].key, key, 16)) continue;
    memcpy(meta, store[i].meta, store[i].meta_len);
    if (corrupt) ((uint64_t *)meta)[1] += 2 * MiB; /* the range it describes */
    *meta_len = store[i].meta_len;
    for (unsigned k = 0; k < store[i].nfds; k++) fds[k] = dup(store[i].fds[k]);
    *nfds = store[i].nfds;
    return 0;
  }
  return FERRY_IPC_NO_EXPORT;
}
static void fake_drop(void *ctx, const uint8_t *key) {
  (void)ctx;
  for (int i = 0; i < 8; i++)
    if (store[i].used && !memcmp(store[i].key, key, 16)) {
      for (unsigned k = 0; k < store[i].nfds; k++) close(store[i].fds[k]);
      store[i].used = 0;
      drops_made++;
    }
}
static const struct ferry_ipc_broker broker = {0x1234, fake_put, fake_get, fake_drop, NULL};

static int setup(void **state) {
  (void)state;
  char err[256];
  drv = ferry_driver_sim(NULL, err, sizeof err);
  assert_non_null(drv);
  ex = ferry_exec_open(drv, 0, ARENA, ARENA_SIZE, err, sizeof err);
  assert_non_null(ex);
  ferry_exec_set_broker(ex, &broker);
  return 0;
}
static int teardown(void **state) {
  (void)state;
  ferry_exec_close(ex);
  return 0;
}

static int call(unsigned c, const void *a, void *r) { return ferry_exec_call_mem(ex, c, a, r, NULL); }

static void put_bytes(uint64_t dst, const void *p, size_t n) {
  struct ferry_bulk b = {.in = p, .in_len = n};
  struct ferry_memcpy_htod_args a = {dst, 0};
  assert_int_equal(ferry_exec_call_mem(ex, FERRY_CALL_memcpy_htod, &a, NULL, &b), 0);
}
static void get_bytes(uint64_t src, void *p, size_t n) {
  struct ferry_bulk b = {.out = p, .out_len = n};
  struct ferry_memcpy_dtoh_args a = {src, n, 0};
  assert_int_equal(ferry_exec_call_mem(ex, FERRY_CALL_memcpy_dtoh, &a, NULL, &b), 0);
}

static void test_memory(void **state) {
  (void)state;
  struct ferry_mem_map_args m1 = {ARENA + 2 * MiB, 2 * MiB}, m2 = {ARENA + 4 * MiB, 2 * MiB};
  assert_int_equal(call(FERRY_CALL_mem_map, &m1, NULL), 0);
  assert_int_equal(call(FERRY_CALL_mem_map, &m2, NULL), 0);
  static unsigned char pat[2 * MiB], got[2 * MiB];
  for (size_t i = 0; i < sizeof pat; i++) pat[i] = (unsigned char)(i * 7 + 3);
  put_bytes(ARENA + 3 * MiB, pat, sizeof pat); /* across both mappings */

  struct ferry_ipc_mem_export_args ea = {ARENA + 2 * MiB, 4 * MiB};
  struct ferry_ipc_mem_export_rets er;
  memset(&er, 0, sizeof er);
  assert_int_equal(call(FERRY_CALL_ipc_mem_export, &ea, &er), 0);
  assert_int_equal(er.refusal, 0);
  assert_int_equal(er.instance, 0x1234);
  assert_int_equal(er.key.len, 16);
  uint8_t key[16];
  memcpy(key, er.key.ptr, 16);
  assert_int_equal(store[0].nfds, 2); /* one piece per mapping */
  memset(&er, 0, sizeof er);
  assert_int_equal(call(FERRY_CALL_ipc_mem_export, &ea, &er), 0); /* again: the same key */
  assert_memory_equal(er.key.ptr, key, 16);
  assert_int_equal(puts_made, 1);
  struct ferry_ipc_mem_export_args unmapped = {ARENA + 64 * MiB, 2 * MiB};
  assert_int_equal(call(FERRY_CALL_ipc_mem_export, &unmapped, &er), 1);

  uint64_t at = ARENA + 64 * MiB;
  struct ferry_ipc_mem_import_args ia = {0x1234, {key, 16}, at, 4 * MiB};
  struct ferry_ipc_mem_import_rets ir;
  /* refusals and malformed requests */
  struct ferry_ipc_mem_import_args bad = ia;
  bad.instance = 99;
  memset(&ir, 0, sizeof ir);
  assert_int_equal(call(FERRY_CALL_ipc_mem_import, &bad, &ir), 0);
  assert_int_equal(ir.refusal, FERRY_IPC_OTHER_SERVER);
  bad = ia;
  bad.key.len = 15;
  assert_int_equal(call(FERRY_CALL_ipc_mem_import, &bad, &ir), 1);
  bad = ia;
  bad.size = 2 * MiB; /* not the export's size */
  assert_int_equal(call(FERRY_CALL_ipc_mem_import, &bad, &ir), 1);
  bad = ia;
  bad.addr = ARENA + 4 * MiB; /* over a live mapping */
  assert_int_equal(call(FERRY_CALL_ipc_mem_import, &bad, &ir), 1);
  corrupt = 1;
  assert_int_equal(call(FERRY_CALL_ipc_mem_import, &ia, &ir), 1);
  corrupt = 0;
  uint8_t none[16] = {0x77};
  bad = ia;
  bad.key.ptr = none;
  memset(&ir, 0, sizeof ir);
  assert_int_equal(call(FERRY_CALL_ipc_mem_import, &bad, &ir), 0);
  assert_int_equal(ir.refusal, FERRY_IPC_NO_EXPORT);

  /* the import sees the bytes, and its writes are the exporter's */
  memset(&ir, 0, sizeof ir);
  assert_int_equal(call(FERRY_CALL_ipc_mem_import, &ia, &ir), 0);
  assert_int_equal(ir.refusal, 0);
  get_bytes(at + 1 * MiB, got, sizeof got);
  assert_memory_equal(got, pat, sizeof pat);
  memset(pat, 0x5a, 4096);
  put_bytes(at + 2 * MiB - 2048, pat, 4096);
  get_bytes(ARENA + 4 * MiB - 2048, got, 4096);
  assert_memory_equal(got, pat, 4096);

  /* unmapping a piece ends the export; the import keeps its memory */
  struct ferry_mem_unmap_args u = {ARENA + 4 * MiB, 2 * MiB};
  assert_int_equal(call(FERRY_CALL_mem_unmap, &u, NULL), 0);
  assert_int_equal(drops_made, 1);
  get_bytes(at + 2 * MiB - 2048, got, 4096);
  assert_memory_equal(got, pat, 4096);
  struct ferry_ipc_mem_close_args c = {at};
  assert_int_equal(call(FERRY_CALL_ipc_mem_close, &c, NULL), 0);
  assert_int_equal(call(FERRY_CALL_ipc_mem_close, &c, NULL), 1);
}

static void test_event(void **state) {
  (void)state;
  struct ferry_event_create_args ca = {5, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING};
  assert_int_equal(call(FERRY_CALL_event_create, &ca, NULL), 0);
  struct ferry_ipc_event_export_args ea = {5};
  struct ferry_ipc_event_export_rets er;
  memset(&er, 0, sizeof er);
  assert_int_equal(call(FERRY_CALL_ipc_event_export, &ea, &er), 0);
  assert_int_equal(er.key.len, 16);
  uint8_t key[16];
  memcpy(key, er.key.ptr, 16);
  /* opened in the process that made it: CUDA_ERROR_INVALID_CONTEXT (201) */
  struct ferry_ipc_event_import_args ia = {6, 0x1234, {key, 16}};
  struct ferry_ipc_event_import_rets ir;
  memset(&ir, 0, sizeof ir);
  assert_int_equal(call(FERRY_CALL_ipc_event_import, &ia, &ir), 201);
  int drops = drops_made;
  struct ferry_event_destroy_args da = {5};
  assert_int_equal(call(FERRY_CALL_event_destroy, &da, NULL), 0);
  assert_int_equal(drops_made, drops + 1); /* its export ends with it */
}

/* a range inside one server mapping shares the whole mapping (a driver
   maps an imported handle only from its start), and reads the same bytes */
static void test_whole_mapping(void **state) {
  (void)state;
  struct ferry_mem_map_args m = {ARENA + 96 * MiB, 6 * MiB};
  assert_int_equal(call(FERRY_CALL_mem_map, &m, NULL), 0);
  static unsigned char pat[2 * MiB], got[2 * MiB];
  for (size_t i = 0; i < sizeof pat; i++) pat[i] = (unsigned char)(i * 13 + 1);
  put_bytes(ARENA + 98 * MiB, pat, sizeof pat);
  struct ferry_ipc_mem_export_args ea = {ARENA + 98 * MiB, 2 * MiB};
  struct ferry_ipc_mem_export_rets er;
  memset(&er, 0, sizeof er);
  assert_int_equal(call(FERRY_CALL_ipc_mem_export, &ea, &er), 0);
  assert_int_equal(er.refusal, 0);
  assert_true(er.at == ARENA + 96 * MiB);
  assert_true(er.span == 6 * MiB);
  uint8_t key[16];
  memcpy(key, er.key.ptr, 16);
  struct ferry_ipc_mem_import_args ia = {0x1234, {key, 16}, ARENA + 112 * MiB, 6 * MiB};
  struct ferry_ipc_mem_import_rets ir;
  memset(&ir, 0, sizeof ir);
  assert_int_equal(call(FERRY_CALL_ipc_mem_import, &ia, &ir), 0);
  assert_int_equal(ir.refusal, 0);
  get_bytes(ARENA + 114 * MiB, got, sizeof got);
  assert_memory_equal(got, pat, sizeof pat);
  struct ferry_ipc_mem_close_args ca = {ARENA + 112 * MiB};
  assert_int_equal(call(FERRY_CALL_ipc_mem_close, &ca, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_memory),
      cmocka_unit_test(test_event),
      cmocka_unit_test(test_whole_mapping),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
