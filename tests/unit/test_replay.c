/*
 * Replay of kernels resolved one at a time (module_function): on the
 * target GPU each must get the index the program holds, or the replay
 * fails and says which module and function. Runs on the CPU simulation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "recorder/recorder.h"
#include "replay/replay.h"

#define ARENA 0x200000000000ull
#define ARENA_SIZE (1ull << 40)

static const struct ferry_driver *drv;
static struct ferry_exec *ex;

/* declares inc and copy_var (twins in tests/twins/unit_twins.c) */
static const char ptx[] = ".version 8.8\n.target sm_90\n"
                          ".visible .entry _Z3incPii(.param .u64 a, .param .u32 b) { ret; }\n"
                          ".visible .entry _Z8copy_varPiPKi(.param .u64 a, .param .u64 b) { ret; }\n";

static int setup(void **state) {
  (void)state;
  char err[256];
  drv = ferry_driver_sim(UNIT_TWINS, err, sizeof err);
  return drv ? 0 : -1;
}

/* a fresh session per test: the replay rebuilds into an empty GPU */
static int open_exec(void **state) {
  (void)state;
  char err[256];
  ex = ferry_exec_open(drv, 0, ARENA, ARENA_SIZE, err, sizeof err);
  return ex ? 0 : -1;
}
static int close_exec(void **state) {
  (void)state;
  ferry_exec_close(ex);
  ex = NULL;
  return 0;
}

static void record_load(struct ferry_recorder *r, uint32_t module) {
  struct ferry_module_load_args a = {.module = module};
  struct ferry_module_load_rets rt = {{NULL, 0}, {NULL, 0}};
  assert_int_equal(ferry_record(r, FERRY_CALL_module_load, &a, &rt, ptx, sizeof ptx), 0);
}

/* what the program was told: index for name */
static void record_function(struct ferry_recorder *r, uint32_t module, const char *name,
                            uint32_t index) {
  struct ferry_module_function_args a = {.module = module, .name = name};
  struct ferry_module_function_rets rt = {.index = index};
  assert_int_equal(ferry_record(r, FERRY_CALL_module_function, &a, &rt, NULL, 0), 0);
}

static int replay(struct ferry_recorder *r, char *err, size_t errlen) {
  struct ferry_target t = ferry_exec_target(ex);
  struct ferry_replay_stats st;
  err[0] = '\0';
  return ferry_replay(r, &t, NULL, &st, err, errlen);
}

static uint32_t index_on_target(uint32_t module, const char *name) {
  struct ferry_module_function_args a = {.module = module, .name = name};
  struct ferry_module_function_rets rt;
  assert_int_equal(ferry_exec_call(ex, FERRY_CALL_module_function, &a, &rt, NULL), 0);
  return rt.index;
}

static void indexes_come_out_the_same(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  record_load(&r, 4);
  record_function(&r, 4, "_Z8copy_varPiPKi", 0);
  record_function(&r, 4, "_Z3incPii", 1);
  record_function(&r, 4, "_Z8copy_varPiPKi", 0); /* asked again: the first record stands */
  char err[256];
  assert_int_equal(replay(&r, err, sizeof err), 0);
  assert_string_equal(err, "");
  assert_int_equal(index_on_target(4, "_Z3incPii"), 1);
  assert_int_equal(index_on_target(4, "_Z8copy_varPiPKi"), 0);
  ferry_recorder_destroy(&r);
}

static void another_index_fails_the_replay(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  record_load(&r, 5);
  /* the program holds index 1, but nothing before it resolves index 0 */
  record_function(&r, 5, "_Z3incPii", 1);
  char err[256];
  assert_int_not_equal(replay(&r, err, sizeof err), 0);
  assert_non_null(strstr(err, "module 5"));
  assert_non_null(strstr(err, "_Z3incPii"));
  assert_non_null(strstr(err, "index 0"));
  ferry_recorder_destroy(&r);
}

static void unloaded_module_replays_nothing(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  record_load(&r, 6);
  record_function(&r, 6, "_Z3incPii", 0);
  struct ferry_module_unload_args u = {6};
  assert_int_equal(ferry_record(&r, FERRY_CALL_module_unload, &u, NULL, NULL, 0), 0);
  assert_int_equal(ferry_recorder_live(&r), 0);
  char err[256];
  assert_int_equal(replay(&r, err, sizeof err), 0);
  struct ferry_module_function_args a = {.module = 6, .name = "_Z3incPii"};
  struct ferry_module_function_rets rt;
  assert_int_equal(ferry_exec_call(ex, FERRY_CALL_module_function, &a, &rt, NULL),
                   400 /* cudaErrorInvalidResourceHandle: not loaded */);
  ferry_recorder_destroy(&r);
}

static int stream_exists(uint32_t stream) {
  struct ferry_stream_query_args q = {stream};
  return ferry_exec_call(ex, FERRY_CALL_stream_query, &q, NULL, NULL) == 0;
}

static int writable(uint64_t addr) {
  char byte = 1;
  struct ferry_memcpy_htod_args w = {addr, 0};
  struct ferry_bulk in = {.in = &byte, .in_len = 1};
  return ferry_exec_call_mem(ex, FERRY_CALL_memcpy_htod, &w, NULL, &in) == 0;
}

/* replayed ahead, then only the journal at the pause: the target ends as
   a whole replay would leave it, with creates and destroys from both
   sides of the mark */
static void journal_completes_replay_ahead(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  const uint64_t a = ARENA, b = ARENA + (2u << 20), c = ARENA + (4u << 20);
  struct ferry_mem_map_args ma = {a, 2u << 20}, mb = {b, 2u << 20}, mc = {c, 2u << 20};
  assert_int_equal(ferry_record(&r, FERRY_CALL_mem_map, &ma, NULL, NULL, 0), 0);
  assert_int_equal(ferry_record(&r, FERRY_CALL_mem_map, &mb, NULL, NULL, 0), 0);
  struct ferry_stream_create_args s7 = {7, 1, 0}, s8 = {8, 1, 0};
  assert_int_equal(ferry_record(&r, FERRY_CALL_stream_create, &s7, NULL, NULL, 0), 0);
  record_load(&r, 4);
  record_function(&r, 4, "_Z3incPii", 0);

  struct ferry_target t = ferry_exec_target(ex);
  struct ferry_replay_stats st;
  char err[256] = "";
  assert_int_equal(ferry_replay_ahead(&r, &t, NULL, &st, err, sizeof err), 0);
  assert_int_equal(st.records, 5);
  assert_true(writable(a) && writable(b) && !writable(c));
  assert_true(stream_exists(7));

  /* the program goes on: b freed, c mapped, stream 7 gone, stream 8 new,
     a second kernel resolved */
  struct ferry_mem_unmap_args ub = {b, 2u << 20};
  assert_int_equal(ferry_record(&r, FERRY_CALL_mem_unmap, &ub, NULL, NULL, 0), 0);
  assert_int_equal(ferry_record(&r, FERRY_CALL_mem_map, &mc, NULL, NULL, 0), 0);
  struct ferry_stream_destroy_args d7 = {7};
  assert_int_equal(ferry_record(&r, FERRY_CALL_stream_destroy, &d7, NULL, NULL, 0), 0);
  assert_int_equal(ferry_record(&r, FERRY_CALL_stream_create, &s8, NULL, NULL, 0), 0);
  record_function(&r, 4, "_Z8copy_varPiPKi", 1);

  memset(&st, 0, sizeof st);
  assert_int_equal(ferry_replay_journal(&r, &t, NULL, &st, err, sizeof err), 0);
  assert_string_equal(err, "");
  assert_int_equal(st.records, 5);
  assert_true(writable(a) && !writable(b) && writable(c));
  assert_false(stream_exists(7));
  assert_true(stream_exists(8));
  assert_int_equal(index_on_target(4, "_Z8copy_varPiPKi"), 1);

  /* with the journal stopped the replay cannot be finished */
  ferry_recorder_journal_stop(&r);
  assert_int_equal(ferry_replay_journal(&r, &t, NULL, &st, err, sizeof err), -1);
  assert_non_null(strstr(err, "changed too much"));
  ferry_recorder_destroy(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(indexes_come_out_the_same, open_exec, close_exec),
      cmocka_unit_test_setup_teardown(another_index_fails_the_replay, open_exec, close_exec),
      cmocka_unit_test_setup_teardown(unloaded_module_replays_nothing, open_exec, close_exec),
      cmocka_unit_test_setup_teardown(journal_completes_replay_ahead, open_exec, close_exec),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
