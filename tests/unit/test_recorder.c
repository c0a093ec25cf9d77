/*
 * The replay log: keyed records (a destroy cancels its create, a setting
 * replaces the old one, a reset clears all), call order kept through
 * compaction, record copies that own their bytes, kernels resolved by
 * name (module_function) that live and die with their module, and every
 * RECORD call keyed by its FERRY_RECORD line as recorder.c's switch keyed
 * it before.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "protocol/codec.h"
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

/* a function's cache setting dies with its module, and only with it */
static void cache_config_dies_with_its_module(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  for (uint32_t m = 0; m < 2; m++) {
    struct ferry_module_load_args a = {m, {NULL, 0}, {NULL, 0}};
    struct ferry_module_load_rets rt = {{NULL, 0}, {NULL, 0}};
    assert_int_equal(ferry_record(&r, FERRY_CALL_module_load, &a, &rt, NULL, 0), 0);
    struct ferry_func_set_cache_config_args c = {m << 16 | 1, 2};
    assert_int_equal(ferry_record(&r, FERRY_CALL_func_set_cache_config, &c, NULL, NULL, 0), 0);
  }
  struct ferry_func_set_cache_config_args again = {1u << 16 | 1, 3}; /* replaces module 1's */
  assert_int_equal(ferry_record(&r, FERRY_CALL_func_set_cache_config, &again, NULL, NULL, 0), 0);
  assert_int_equal(ferry_recorder_live(&r), 4);
  struct ferry_module_unload_args u = {0};
  ferry_record(&r, FERRY_CALL_module_unload, &u, NULL, NULL, 0);
  assert_int_equal(ferry_recorder_live(&r), 2); /* module 1 and its setting */
  assert_int_equal(nth_live(&r, 1)->call, FERRY_CALL_func_set_cache_config);
  const void *args = nth_live(&r, 1)->args;
  assert_int_equal(((const struct ferry_func_set_cache_config_args *)args)->config, 3);
  u.module = 1;
  ferry_record(&r, FERRY_CALL_module_unload, &u, NULL, NULL, 0);
  assert_int_equal(ferry_recorder_live(&r), 0);
  ferry_recorder_destroy(&r);
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

/* ---- every RECORD call keyed as before its keys moved into calls.def ---- */

/* recorder.c's switch as it was, a regression guard: the key and object
   each call's record had, and what it did to the log (NEW: a call the
   switch did not know, added since). Kinds as recorder.c numbers them. */
enum { K_MAP = 1, K_MODULE, K_STREAM, K_EVENT, K_ARRAY, K_TEX, K_SURF, K_FLAGS, K_LIMIT,
       K_CACHE, K_FUNC_ATTR, K_FUNC_CACHE, K_EVENT_RECORD, K_MODULE_FUNC, K_CTX_OBJECT,
       K_GRAPH_EXEC };
enum old_act { O_PLAIN, O_CREATE, O_DESTROY, O_SET, O_RESET, O_ONCE, O_SKIP, O_NEW };
struct old_key {
  enum old_act act;
  uint64_t hi, lo, object;
};
#define KEY(kind, id) ((uint64_t)(kind) << 56 | (uint64_t)(id))
#define A(name) ((const struct ferry_##name##_args *)a)
#define R(name) ((const struct ferry_##name##_rets *)r)
static struct old_key old_classify(unsigned call, const void *a, const void *r) {
  switch (call) {
#define ID(kind, field, act) (struct old_key){act, KEY(kind, 0), (field), 0}
  case FERRY_CALL_mem_map: return ID(K_MAP, A(mem_map)->addr, O_CREATE);
  case FERRY_CALL_mem_unmap: return ID(K_MAP, A(mem_unmap)->addr, O_DESTROY);
  case FERRY_CALL_module_load: return ID(K_MODULE, A(module_load)->module, O_CREATE);
  case FERRY_CALL_module_unload: return ID(K_MODULE, A(module_unload)->module, O_DESTROY);
  case FERRY_CALL_stream_create: return ID(K_STREAM, A(stream_create)->stream, O_CREATE);
  case FERRY_CALL_stream_destroy: return ID(K_STREAM, A(stream_destroy)->stream, O_DESTROY);
  case FERRY_CALL_event_create: return ID(K_EVENT, A(event_create)->event, O_CREATE);
  case FERRY_CALL_event_destroy: return ID(K_EVENT, A(event_destroy)->event, O_DESTROY);
  case FERRY_CALL_event_record: return ID(K_EVENT_RECORD, A(event_record)->event, O_SET);
  case FERRY_CALL_array_create: return ID(K_ARRAY, A(array_create)->array, O_CREATE);
  case FERRY_CALL_array_destroy: return ID(K_ARRAY, A(array_destroy)->array, O_DESTROY);
  case FERRY_CALL_tex_create:
    return (struct old_key){O_CREATE, KEY(K_TEX, 0), R(tex_create)->object, R(tex_create)->object};
  case FERRY_CALL_tex_destroy: return ID(K_TEX, A(tex_destroy)->object, O_DESTROY);
  case FERRY_CALL_surf_create:
    return (struct old_key){O_CREATE, KEY(K_SURF, 0), R(surf_create)->object, R(surf_create)->object};
  case FERRY_CALL_surf_destroy: return ID(K_SURF, A(surf_destroy)->object, O_DESTROY);
  case FERRY_CALL_set_device_flags: return ID(K_FLAGS, 0, O_SET);
  case FERRY_CALL_device_set_limit: return ID(K_LIMIT, A(device_set_limit)->limit, O_SET);
  case FERRY_CALL_device_set_cache_config: return ID(K_CACHE, 0, O_SET);
  case FERRY_CALL_func_set_attribute:
    return (struct old_key){O_SET, KEY(K_FUNC_ATTR, A(func_set_attribute)->func),
                            A(func_set_attribute)->attr, 0};
  /* keyed by its function, so that it dies with the function's module (the
     old switch keyed it by nothing: an unload left it, module 0's took all) */
  case FERRY_CALL_func_set_cache_config:
    return (struct old_key){O_SET, KEY(K_FUNC_CACHE, A(func_set_cache_config)->func), 0, 0};
  case FERRY_CALL_module_function:
    return (struct old_key){O_ONCE,
                            KEY(K_MODULE_FUNC, (uint64_t)A(module_function)->module << 16 |
                                                   R(module_function)->index),
                            0, R(module_function)->index};
  case FERRY_CALL_ctx_object_create:
    if (R(ctx_object_create)->same_as) return (struct old_key){O_SKIP, 0, 0, 0};
    return (struct old_key){O_CREATE, KEY(K_CTX_OBJECT, A(ctx_object_create)->stream),
                            A(ctx_object_create)->object, 0};
  case FERRY_CALL_device_reset: return (struct old_key){O_RESET, 0, 0, 0};
  /* added since (issue 21): by the client's exec id */
  case FERRY_CALL_graph_instantiate: return ID(K_GRAPH_EXEC, A(graph_instantiate)->exec, O_CREATE);
  case FERRY_CALL_graph_exec_destroy: return ID(K_GRAPH_EXEC, A(graph_exec_destroy)->exec, O_DESTROY);
#undef ID
  default: return (struct old_key){O_NEW, 0, 0, 0};
  }
}

/* every field holds a value of its name, so that a create and its destroy
   (mem_map's and mem_unmap's addr, tex_create's object and tex_destroy's)
   name the same thing */
static uint64_t of_name(const char *field) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = field; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return (h & 0xffffff) | 1;
}
#define FILL_u32(f) s->f = (ferry_u32)of_name(#f);
#define FILL_i32(f) s->f = (ferry_i32)of_name(#f);
#define FILL_u64(f) s->f = of_name(#f);
#define FILL_f32(f) s->f = 1.5f;
#define FILL_str(f) s->f = #f;
#define FILL_blob(f) s->f = (ferry_blob){#f, sizeof #f};
#define ARGS(...) __VA_ARGS__
#define RETS(...) __VA_ARGS__
#define F(type, field) FILL_##type(field)
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  static void fill_##name##_args(void *p) {                                                    \
    struct ferry_##name##_args *s = p;                                                         \
    (void)s;                                                                                   \
    args                                                                                       \
  }                                                                                            \
  static void fill_##name##_rets(void *p) {                                                    \
    struct ferry_##name##_rets *s = p;                                                         \
    (void)s;                                                                                   \
    rets                                                                                       \
  }
#include "protocol/calls.def"
#undef FERRY_CALL
#undef F
#undef ARGS
#undef RETS
static void (*const fill_fns[FERRY_CALL_LIMIT][2])(void *) = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = {fill_##name##_args, fill_##name##_rets},
#include "protocol/calls.def"
#undef FERRY_CALL
};

struct filled {
  _Alignas(8) unsigned char args[FERRY_RECORD_ARGS_BYTES];
  _Alignas(8) unsigned char rets[256];
};
static void fill_call(unsigned call, struct filled *f) {
  memset(f, 0, sizeof *f);
  assert_true(ferry_rets_size[call] <= sizeof f->rets);
  fill_fns[call][0](f->args);
  fill_fns[call][1](f->rets);
}

static const struct ferry_record *only_live(struct ferry_recorder *r) {
  assert_int_equal(ferry_recorder_live(r), 1);
  return nth_live(r, 0);
}

/* a destroy's old key is some create's: recording that create, then the
   destroy, leaves nothing */
static void check_destroy(unsigned destroy, const struct filled *d, const struct old_key *k) {
  int partners = 0;
  for (unsigned c = 0; c < FERRY_CALL_LIMIT; c++) {
    if (!ferry_call_valid(c) || !(ferry_calls[c].flags & RECORD)) continue;
    struct filled f;
    fill_call(c, &f);
    struct old_key ck = old_classify(c, f.args, f.rets);
    if (ck.act != O_CREATE || ck.hi != k->hi || ck.lo != k->lo) continue;
    struct ferry_recorder r;
    ferry_recorder_init(&r);
    assert_int_equal(ferry_record(&r, c, f.args, f.rets, NULL, 0), 0);
    assert_int_equal(ferry_record(&r, destroy, d->args, NULL, NULL, 0), 0);
    if (ferry_recorder_live(&r))
      fail_msg("%s no longer cancels %s", ferry_calls[destroy].name, ferry_calls[c].name);
    ferry_recorder_destroy(&r);
    partners++;
  }
  if (!partners) fail_msg("%s cancels no create", ferry_calls[destroy].name);
}

/* one RECORD call, with its results or with none, against the old key */
static void check_keyed(unsigned call, const struct filled *f, int with_rets) {
  static const _Alignas(8) unsigned char none[256];
  struct old_key k = old_classify(call, f->args, with_rets ? f->rets : none);
  if (k.act == O_NEW) return;
  const char *name = ferry_calls[call].name;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  map(&r, 0x7000); /* a record for a reset to clear */
  size_t before = ferry_recorder_live(&r);
  assert_int_equal(ferry_record(&r, call, f->args, with_rets ? f->rets : NULL, NULL, 0), 0);
  switch (k.act) {
  case O_RESET: assert_int_equal(ferry_recorder_live(&r), 0); break;
  case O_SKIP: assert_int_equal(ferry_recorder_live(&r), before); break;
  case O_DESTROY:
    assert_int_equal(ferry_recorder_live(&r), before);
    if (with_rets) check_destroy(call, f, &k);
    break;
  default: {
    unmap(&r, 0x7000);
    const struct ferry_record *rec = only_live(&r);
    if (rec->key_hi != k.hi || rec->key_lo != k.lo || rec->object != k.object)
      fail_msg("%s%s: key %#" PRIx64 ":%#" PRIx64 " object %#" PRIx64 ", was %#" PRIx64
               ":%#" PRIx64 " object %#" PRIx64, name, with_rets ? "" : " (no results)",
               rec->key_hi, rec->key_lo, rec->object, k.hi, k.lo, k.object);
    /* a second record of the key: SET and CREATE replace, ONCE keeps the first */
    assert_int_equal(ferry_record(&r, call, f->args, with_rets ? f->rets : NULL, NULL, 0), 0);
    assert_int_equal(ferry_recorder_live(&r), k.act == O_PLAIN ? 2 : 1);
    break;
  }
  }
  ferry_recorder_destroy(&r);
}

static void every_record_call_keyed_as_before(void **state) {
  (void)state;
  unsigned checked = 0;
  for (unsigned call = 0; call < FERRY_CALL_LIMIT; call++) {
    if (!ferry_call_valid(call) || !(ferry_calls[call].flags & RECORD)) continue;
    struct filled f;
    fill_call(call, &f);
    check_keyed(call, &f, 1);
    check_keyed(call, &f, 0);
    checked++;
  }
  assert_true(checked >= 23); /* the RECORD calls the old switch knew */
}

/* a graph exec's record is its newest blob (the client re-sends the whole
   graph to update it), a copy the log owns, last in the log; its destroy
   drops it */
static void instantiate(struct ferry_recorder *r, uint32_t exec, char *blob, uint32_t len) {
  struct ferry_graph_instantiate_args a = {.exec = exec, .flags = 0, .nodes = {blob, len}};
  assert_int_equal(ferry_record(r, FERRY_CALL_graph_instantiate, &a, NULL, NULL, 0), 0);
}
static const struct ferry_graph_instantiate_args *gi(const struct ferry_record *rec) {
  assert_int_equal(rec->call, FERRY_CALL_graph_instantiate);
  return (const void *)rec->args;
}

static void graph_exec_keeps_newest_blob(void **state) {
  (void)state;
  struct ferry_recorder r;
  ferry_recorder_init(&r);
  char first[] = "first blob", second[] = "the second, longer blob", other[] = "exec 4";
  instantiate(&r, 3, first, sizeof first);
  instantiate(&r, 4, other, sizeof other);
  instantiate(&r, 3, second, sizeof second);
  memset(second, 'x', sizeof second - 1); /* the caller's buffer is gone after the call */
  assert_int_equal(ferry_recorder_live(&r), 2);
  const struct ferry_graph_instantiate_args *a = gi(nth_live(&r, 0));
  assert_int_equal(a->exec, 4);
  a = gi(nth_live(&r, 1));
  assert_int_equal(a->exec, 3);
  assert_int_equal(a->nodes.len, sizeof "the second, longer blob");
  assert_memory_equal(a->nodes.ptr, "the second, longer blob", a->nodes.len);
  struct ferry_graph_exec_destroy_args d = {3};
  assert_int_equal(ferry_record(&r, FERRY_CALL_graph_exec_destroy, &d, NULL, NULL, 0), 0);
  assert_int_equal(gi(only_live(&r))->exec, 4);
  d.exec = 4;
  assert_int_equal(ferry_record(&r, FERRY_CALL_graph_exec_destroy, &d, NULL, NULL, 0), 0);
  assert_int_equal(ferry_recorder_live(&r), 0);
  ferry_recorder_destroy(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(destroy_cancels_create),
      cmocka_unit_test(setting_replaces_and_moves_last),
      cmocka_unit_test(reset_clears_everything),
      cmocka_unit_test(unrecorded_calls_are_ignored),
      cmocka_unit_test(module_copies_own_their_bytes),
      cmocka_unit_test(cache_config_dies_with_its_module),
      cmocka_unit_test(module_functions_go_with_their_module),
      cmocka_unit_test(texture_keyed_by_returned_object),
      cmocka_unit_test(churn_compacts_in_order),
      cmocka_unit_test(journal_keeps_changes_after_mark),
      cmocka_unit_test(journal_breaks_on_reset_and_overflow),
      cmocka_unit_test(failed_mark_starts_no_journal),
      cmocka_unit_test(every_record_call_keyed_as_before),
      cmocka_unit_test(graph_exec_keeps_newest_blob),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
