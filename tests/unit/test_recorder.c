/*
 * The replay log: keyed records (a destroy cancels its create, a setting
 * replaces the old one, a reset clears all), call order kept through
 * compaction, record copies that own their bytes, and kernels resolved by
 * name (module_function) that live and die with their module.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "recorder/recorder.h"

struct seen {
  unsigned calls[64];
  uint64_t ids[64];
  size_t n;
};

static int collect(void *ctx, const struct ferry_record *rec) {
  struct seen *s = ctx;
  if (s->n == 64) return 1;
  s->calls[s->n] = rec->call;
  uint64_t id = 0;
  switch (rec->call) {
  case FERRY_CALL_mem_map: id = ((const struct ferry_mem_map_args *)(const void *)rec->args)->addr; break;
  case FERRY_CALL_stream_create: id = ((const struct ferry_stream_create_args *)(const void *)rec->args)->stream; break;
  case FERRY_CALL_device_set_limit: id = ((const struct ferry_device_set_limit_args *)(const void *)rec->args)->value; break;
  default: break;
  }
  s->ids[s->n++] = id;
  return 0;
}

static void map(struct ferry_recorder *r, uint64_t addr) {
  struct ferry_mem_map_args a = {addr, 2u << 20};
  assert_int_equal(ferry_record(r, FERRY_CALL_mem_map, &a, NULL, NULL, 0), 0);
}
static void unmap(struct ferry_recorder *r, uint64_t addr) {
  struct ferry_mem_unmap_args a = {addr, 2u << 20};
  assert_int_equal(ferry_record(r, FERRY_CALL_mem_unmap, &a, NULL, NULL, 0), 0);
}

static void destroy_cancels_create(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  map(&r, 0x1000);
  map(&r, 0x2000);
  struct ferry_stream_create_args sc = {7, 0, 0};
  ferry_record(&r, FERRY_CALL_stream_create, &sc, NULL, NULL, 0);
  unmap(&r, 0x1000);
  struct ferry_stream_destroy_args sd = {7};
  ferry_record(&r, FERRY_CALL_stream_destroy, &sd, NULL, NULL, 0);
  assert_int_equal(ferry_recorder_live(&r), 1);
  struct seen s = {0};
  ferry_recorder_foreach(&r, collect, &s);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.calls[0], FERRY_CALL_mem_map);
  assert_int_equal(s.ids[0], 0x2000);
  ferry_recorder_destroy(&r);
}

static void setting_replaces_and_moves_last(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  struct ferry_device_set_limit_args l1 = {2, 100}, l2 = {2, 200}, other = {3, 5};
  ferry_record(&r, FERRY_CALL_device_set_limit, &l1, NULL, NULL, 0);
  ferry_record(&r, FERRY_CALL_device_set_limit, &other, NULL, NULL, 0);
  map(&r, 0x4000);
  ferry_record(&r, FERRY_CALL_device_set_limit, &l2, NULL, NULL, 0);
  struct seen s = {0};
  ferry_recorder_foreach(&r, collect, &s);
  assert_int_equal(s.n, 3);
  assert_int_equal(s.ids[0], 5);      /* limit 3 */
  assert_int_equal(s.ids[1], 0x4000); /* the mapping */
  assert_int_equal(s.ids[2], 200);    /* limit 2, latest value, in its new place */
  ferry_recorder_destroy(&r);
}

static void reset_clears_everything(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  map(&r, 0x1000);
  struct ferry_device_reset_args reset = {0};
  ferry_record(&r, FERRY_CALL_device_reset, &reset, NULL, NULL, 0);
  assert_int_equal(ferry_recorder_live(&r), 0);
  map(&r, 0x3000);
  unmap(&r, 0x1000); /* from before the reset: nothing to cancel */
  assert_int_equal(ferry_recorder_live(&r), 1);
  ferry_recorder_destroy(&r);
}

static void unrecorded_calls_are_ignored(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  struct ferry_launch_args l = {0};
  assert_int_equal(ferry_record(&r, FERRY_CALL_launch, &l, NULL, NULL, 0), 0);
  assert_int_equal(ferry_record(&r, 100000, &l, NULL, NULL, 0), 0);
  assert_int_equal(ferry_recorder_live(&r), 0);
  ferry_recorder_destroy(&r);
}

static void module_copies_own_their_bytes(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  char fnames[] = "kern_a\0kern_b";
  char vnames[] = "var_x";
  unsigned char vars[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  static const char image[] = "fatbin bytes";
  struct ferry_module_load_args a = {3, {fnames, sizeof fnames}, {vnames, sizeof vnames}};
  struct ferry_module_load_rets rt = {{NULL, 0}, {vars, sizeof vars}};
  assert_int_equal(ferry_record(&r, FERRY_CALL_module_load, &a, &rt, image, sizeof image), 0);
  struct ferry_func_set_attribute_args fa = {3u << 16 | 1, 8, 1024};
  ferry_record(&r, FERRY_CALL_func_set_attribute, &fa, NULL, NULL, 0);
  memset(fnames, 'X', sizeof fnames); /* the caller's buffers die after the call */
  memset(vars, 0, sizeof vars);
  const struct ferry_record *rec = &r.recs[0];
  const struct ferry_module_load_args *copy = (const void *)rec->args;
  assert_int_equal(copy->func_names.len, sizeof fnames);
  assert_memory_equal(copy->func_names.ptr, "kern_a\0kern_b", sizeof fnames);
  assert_int_equal(rec->var_info_len, 16);
  assert_int_equal(((const unsigned char *)rec->var_info)[15], 16);
  assert_ptr_equal(rec->bulk, image); /* the image lives with the program: not copied */
  struct ferry_module_unload_args u = {3};
  ferry_record(&r, FERRY_CALL_module_unload, &u, NULL, NULL, 0);
  assert_int_equal(ferry_recorder_live(&r), 0); /* the kernel's attribute went with it */
  ferry_recorder_destroy(&r);
}

static void function(struct ferry_recorder *r, uint32_t module, const char *name, uint32_t index) {
  struct ferry_module_function_args a = {module, name};
  struct ferry_module_function_rets rt = {index, {NULL, 0}};
  assert_int_equal(ferry_record(r, FERRY_CALL_module_function, &a, &rt, NULL, 0), 0);
}

static const struct ferry_record *nth_live(struct ferry_recorder *r, size_t n) {
  for (size_t i = 0; i < r->n; i++)
    if (r->recs[i].live && n-- == 0) return &r->recs[i];
  return NULL;
}

/* kernels resolved by name belong to their module, keep the order of
   first resolution (replay must give the same indexes) and own their names */
static void module_functions_go_with_their_module(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  struct ferry_module_load_args a = {3, {NULL, 0}, {NULL, 0}};
  struct ferry_module_load_rets rt = {{NULL, 0}, {NULL, 0}};
  assert_int_equal(ferry_record(&r, FERRY_CALL_module_load, &a, &rt, "img", 4), 0);
  a.module = 4;
  assert_int_equal(ferry_record(&r, FERRY_CALL_module_load, &a, &rt, "img", 4), 0);
  char name[] = "kern_a";
  function(&r, 3, name, 0);
  function(&r, 3, "kern_b", 1);
  function(&r, 4, "kern_a", 0);
  function(&r, 3, "kern_a", 0); /* asked again: stays first, not moved last */
  struct ferry_func_set_attribute_args fa = {3u << 16 | 1, 8, 1024};
  ferry_record(&r, FERRY_CALL_func_set_attribute, &fa, NULL, NULL, 0);
  memset(name, 'X', sizeof name - 1);
  assert_int_equal(ferry_recorder_live(&r), 6);
  const struct ferry_record *first = nth_live(&r, 2);
  assert_int_equal(first->call, FERRY_CALL_module_function);
  assert_string_equal(((const struct ferry_module_function_args *)(const void *)first->args)->name,
                      "kern_a");
  assert_int_equal(first->object, 0);
  assert_int_equal(nth_live(&r, 3)->object, 1);
  assert_int_equal(nth_live(&r, 5)->call, FERRY_CALL_func_set_attribute);
  struct ferry_module_unload_args u = {3};
  ferry_record(&r, FERRY_CALL_module_unload, &u, NULL, NULL, 0);
  /* module 4 and its function are left */
  assert_int_equal(ferry_recorder_live(&r), 2);
  assert_int_equal(nth_live(&r, 1)->call, FERRY_CALL_module_function);
  assert_int_equal(((const struct ferry_module_function_args *)(const void *)nth_live(&r, 1)->args)->module, 4);
  /* a module loaded again under the id starts a fresh list */
  a.module = 3;
  assert_int_equal(ferry_record(&r, FERRY_CALL_module_load, &a, &rt, "img", 4), 0);
  function(&r, 3, "kern_b", 0);
  assert_int_equal(ferry_recorder_live(&r), 4);
  assert_int_equal(nth_live(&r, 3)->object, 0);
  ferry_recorder_destroy(&r);
}

static void texture_keyed_by_returned_object(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  struct ferry_tex_create_args t = {0};
  struct ferry_tex_create_rets o1 = {11}, o2 = {12};
  ferry_record(&r, FERRY_CALL_tex_create, &t, &o1, NULL, 0);
  ferry_record(&r, FERRY_CALL_tex_create, &t, &o2, NULL, 0);
  struct ferry_tex_destroy_args d = {11};
  ferry_record(&r, FERRY_CALL_tex_destroy, &d, NULL, NULL, 0);
  assert_int_equal(ferry_recorder_live(&r), 1);
  assert_int_equal(r.recs[r.n - 1].object, 12);
  ferry_recorder_destroy(&r);
}

/* a program allocating and freeing in a loop: the log stays small and the
   survivors keep their order */
static void churn_compacts_in_order(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  for (uint64_t i = 0; i < 20000; i++) {
    map(&r, 0x100000 + i * 0x1000);
    if (i % 100) unmap(&r, 0x100000 + i * 0x1000);
  }
  assert_int_equal(ferry_recorder_live(&r), 200);
  assert_true(r.n < 1000); /* dead records were dropped */
  struct seen s = {0};
  ferry_recorder_foreach(&r, collect, &s);
  for (size_t i = 0; i < s.n; i++) assert_int_equal(s.ids[i], 0x100000 + i * 100 * 0x1000);
  for (uint64_t i = 0; i < 20000; i += 100) unmap(&r, 0x100000 + i * 0x1000);
  assert_int_equal(ferry_recorder_live(&r), 0);
  ferry_recorder_destroy(&r);
}

/* after a mark, every change is journalled in call order: creates,
   destroys of records made before the mark, settings; the log itself goes
   on as before */
static void journal_keeps_changes_after_mark(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  map(&r, 0x1000);
  struct ferry_stream_create_args sc = {7, 0, 0};
  ferry_record(&r, FERRY_CALL_stream_create, &sc, NULL, NULL, 0);
  struct seen before = {0};
  assert_int_equal(ferry_recorder_mark(&r, collect, &before), 0);
  assert_int_equal(before.n, 2);
  assert_int_equal(ferry_recorder_journal_broken(&r), 0);
  struct seen j = {0};
  assert_int_equal(ferry_recorder_journal_foreach(&r, collect, &j), 0);
  assert_int_equal(j.n, 0);

  unmap(&r, 0x1000); /* made before the mark: its destroy must travel */
  map(&r, 0x3000);
  struct ferry_stream_destroy_args sd = {7};
  ferry_record(&r, FERRY_CALL_stream_destroy, &sd, NULL, NULL, 0);
  struct ferry_device_set_limit_args lim = {1, 4096};
  ferry_record(&r, FERRY_CALL_device_set_limit, &lim, NULL, NULL, 0);
  struct ferry_device_synchronize_args sync = {0};
  ferry_record(&r, FERRY_CALL_device_synchronize, &sync, NULL, NULL, 0); /* not recorded */

  memset(&j, 0, sizeof j);
  assert_int_equal(ferry_recorder_journal_foreach(&r, collect, &j), 0);
  assert_int_equal(j.n, 4);
  assert_int_equal(j.calls[0], FERRY_CALL_mem_unmap);
  assert_int_equal(j.calls[1], FERRY_CALL_mem_map);
  assert_int_equal(j.ids[1], 0x3000);
  assert_int_equal(j.calls[2], FERRY_CALL_stream_destroy);
  assert_int_equal(j.calls[3], FERRY_CALL_device_set_limit);
  assert_int_equal(j.ids[3], 4096);
  /* the log is what is live, as without a journal */
  assert_int_equal(ferry_recorder_live(&r), 2);

  ferry_recorder_journal_stop(&r);
  assert_int_equal(ferry_recorder_journal_broken(&r), 1); /* none running */
  map(&r, 0x5000);
  assert_int_equal(ferry_recorder_journal_foreach(&r, collect, &j), -1);
  ferry_recorder_destroy(&r);
}

/* a reset, or more changes than the journal keeps, break it: the caller
   then replays everything on a fresh target */
static void journal_breaks_on_reset_and_overflow(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  struct seen s = {0};
  assert_int_equal(ferry_recorder_mark(&r, collect, &s), 0);
  struct ferry_device_reset_args reset = {0};
  ferry_record(&r, FERRY_CALL_device_reset, &reset, NULL, NULL, 0);
  assert_int_equal(ferry_recorder_journal_broken(&r), 1);
  assert_int_equal(ferry_recorder_journal_foreach(&r, collect, &s), -1);

  assert_int_equal(ferry_recorder_mark(&r, collect, &s), 0); /* a new mark starts clean */
  assert_int_equal(ferry_recorder_journal_broken(&r), 0);
  for (unsigned i = 0; i < FERRY_JOURNAL_MAX; i++) {
    struct ferry_device_set_limit_args lim = {2, i};
    ferry_record(&r, FERRY_CALL_device_set_limit, &lim, NULL, NULL, 0);
  }
  assert_int_equal(ferry_recorder_journal_broken(&r), 0);
  struct ferry_device_set_limit_args lim = {2, 1};
  ferry_record(&r, FERRY_CALL_device_set_limit, &lim, NULL, NULL, 0);
  assert_int_equal(ferry_recorder_journal_broken(&r), 1);
  assert_int_equal(ferry_recorder_live(&r), 1); /* the log itself lost nothing */
  ferry_recorder_destroy(&r);
}

/* a mark whose walk fails starts no journal */
static int stop_at_first(void *ctx, const struct ferry_record *rec) {
  (void)ctx, (void)rec;
  return 5;
}
static void failed_mark_starts_no_journal(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  map(&r, 0x1000);
  assert_int_equal(ferry_recorder_mark(&r, stop_at_first, NULL), 5);
  assert_int_equal(ferry_recorder_journal_broken(&r), 1);
  ferry_recorder_destroy(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(destroy_cancels_create),
      cmocka_unit_test(setting_replaces_and_moves_last),
      cmocka_unit_test(reset_clears_everything),
      cmocka_unit_test(unrecorded_calls_are_ignored),
      cmocka_unit_test(module_copies_own_their_bytes),
      cmocka_unit_test(module_functions_go_with_their_module),
      cmocka_unit_test(texture_keyed_by_returned_object),
      cmocka_unit_test(churn_compacts_in_order),
      cmocka_unit_test(journal_keeps_changes_after_mark),
      cmocka_unit_test(journal_breaks_on_reset_and_overflow),
      cmocka_unit_test(failed_mark_starts_no_journal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
