/* The generated msgpack codec: round trips, and rejection of bad bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/codec.h"

static void launch_round_trip(void **state) {
  (void)state;
  unsigned char params[40];
  for (int i = 0; i < 40; i++) params[i] = (unsigned char)(i * 3);
  struct ferry_launch_args in = {.func = 0x10002, .gx = 7, .gy = 1, .gz = 3, .bx = 256, .by = 2,
                                 .bz = 1, .shmem = 4096, .stream = 17, .params = {params, 40}};
  struct ferry_buf b = {0};
  assert_int_equal(ferry_encode_args(FERRY_CALL_launch, &in, &b), 0);
  struct ferry_decoder d;
  ferry_decoder_init(&d);
  struct ferry_launch_args out;
  memset(&out, 0, sizeof out);
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_launch, b.data, b.len, &out), 0);
  assert_int_equal(out.func, 0x10002);
  assert_int_equal(out.gx, 7);
  assert_int_equal(out.gz, 3);
  assert_int_equal(out.bx, 256);
  assert_int_equal(out.by, 2);
  assert_int_equal(out.shmem, 4096);
  assert_int_equal(out.stream, 17);
  assert_int_equal(out.params.len, 40);
  assert_memory_equal(out.params.ptr, params, 40);
  ferry_decoder_destroy(&d);
  ferry_buf_free(&b);
}

static void rets_with_strings_and_floats(void **state) {
  (void)state;
  int32_t attrs[4] = {1, -2, 3, 1 << 30};
  unsigned char uuid[16] = {9};
  struct ferry_hello_rets in = {.name = "NVIDIA H100", .total_mem = 80ull << 30,
                                .granularity = 2 << 20, .driver_version = 13000,
                                .uuid = {uuid, 16}, .attrs = {attrs, sizeof attrs}};
  struct ferry_buf b = {0};
  assert_int_equal(ferry_encode_rets(FERRY_CALL_hello, &in, &b), 0);
  struct ferry_decoder d;
  ferry_decoder_init(&d);
  struct ferry_hello_rets out;
  assert_int_equal(ferry_decode_rets(&d, FERRY_CALL_hello, b.data, b.len, &out), 0);
  assert_string_equal(out.name, "NVIDIA H100");
  assert_true(out.total_mem == 80ull << 30);
  assert_int_equal(out.driver_version, 13000);
  assert_memory_equal(out.attrs.ptr, attrs, sizeof attrs);
  ferry_buf_free(&b);

  struct ferry_event_elapsed_rets e = {.ms = 1.5f}, e2;
  assert_int_equal(ferry_encode_rets(FERRY_CALL_event_elapsed, &e, &b), 0);
  assert_int_equal(ferry_decode_rets(&d, FERRY_CALL_event_elapsed, b.data, b.len, &e2), 0);
  assert_true(e2.ms == 1.5f);
  struct ferry_stream_priority_range_rets pr = {.least = 0, .greatest = -5}, pr2;
  ferry_buf_free(&b);
  assert_int_equal(ferry_encode_rets(FERRY_CALL_stream_priority_range, &pr, &b), 0);
  assert_int_equal(ferry_decode_rets(&d, FERRY_CALL_stream_priority_range, b.data, b.len, &pr2), 0);
  assert_int_equal(pr2.greatest, -5);
  ferry_decoder_destroy(&d);
  ferry_buf_free(&b);
}

static void rejects_bad_bodies(void **state) {
  (void)state;
  struct ferry_decoder d;
  ferry_decoder_init(&d);
  struct ferry_mem_map_args a = {.addr = 0x200000000000ull, .size = 2 << 20}, out;
  struct ferry_buf b = {0};
  assert_int_equal(ferry_encode_args(FERRY_CALL_mem_map, &a, &b), 0);
  /* truncated */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_mem_map, b.data, b.len - 1, &out), -1);
  assert_non_null(strstr(d.error, "mem_map"));
  /* trailing garbage */
  char longer[64];
  memcpy(longer, b.data, b.len);
  longer[b.len] = 0x01;
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_mem_map, longer, b.len + 1, &out), -1);
  /* the body of another call: wrong field count */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_launch, b.data, b.len, &out), -1);
  assert_non_null(strstr(d.error, "fields"));
  /* a wrong field type: a string where a u64 belongs */
  struct ferry_buf s = {0};
  ferry_buf_append(&s, "\x92\xa2hi\x01", 5); /* [ "hi", 1 ] */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_mem_map, s.data, s.len, &out), -1);
  assert_non_null(strstr(d.error, "addr"));
  /* an unknown call id */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_LIMIT + 5, b.data, b.len, &out), -1);
  assert_non_null(strstr(d.error, "unknown call"));
  /* garbage bytes */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_mem_map, "\xc1\xc1\xc1", 3, &out), -1);
  /* a string without its NUL is refused (decoded strings must be C strings) */
  ferry_buf_free(&s);
  ferry_buf_append(&s, "\x96\xa2hi\x00\x00\x00\xc4\x00\xc4\x00", 11);
  struct ferry_hello_rets hr;
  assert_int_equal(ferry_decode_rets(&d, FERRY_CALL_hello, s.data, s.len, &hr), -1);
  ferry_buf_free(&s);
  ferry_buf_free(&b);
  ferry_decoder_destroy(&d);
}

/* bytes the allocator holds in mmapped blocks: where a huge request lands */
static size_t mapped_bytes(void) { return mallinfo2().hblkhd; }

/* issue 11: msgpack counts size msgpack-c's allocations before any element
   is read, so a count the body cannot hold must be refused first */
static void refuses_counts_the_body_cannot_hold(void **state) {
  (void)state;
  struct ferry_decoder d;
  ferry_decoder_init(&d);
  struct ferry_mem_map_args mm;
  size_t before = mapped_bytes();
  /* the probe's body: mem_map [array32 of 0x20105259 elements] */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_mem_map, "\x92\xdd\x20\x10\x52\x59", 6, &mm), -1);
  /* a glibc build would hold gigabytes here if the count had been obeyed */
  assert_true(mapped_bytes() < before + (64u << 20));
  assert_non_null(strstr(d.error, "arguments of mem_map"));
  assert_non_null(strstr(d.error, "array of 537940569 elements"));
  assert_non_null(strstr(d.error, "0 bytes left"));
  static const struct {
    const char *body;
    size_t len;
    const char *why;
  } bad[] = {
      {"\xdd\xff\xff\xff\xff", 5, "array of 4294967295 elements"},
      {"\xdf\xff\xff\xff\xff", 5, "map of 4294967295 pairs"},
      {"\xde\x00\x03\x01\x01\x01\x01\x01", 8, "map of 3 pairs"}, /* 6 objects in 5 bytes */
      {"\xdc\x00\x05\x01\x01\x01\x01", 7, "array of 5 elements"},
      {"\x92\xdb\xff\xff\xff\xff", 6, "str of 4294967295 bytes"},
      {"\x92\xc6\x7f\xff\xff\xff", 6, "bin of 2147483647 bytes"},
      {"\x92\xc9\x00\x01\x00\x00\x07", 7, "ext of 65536 bytes"},
      {"\x92\xc4\x02\x01", 4, "bin of 2 bytes"},
      {"\x92\xd8\x01\x02", 4, "truncated"},   /* fixext16 cut short */
      {"\x92\xcf\x01\x02", 4, "truncated"},   /* uint64 cut short */
      {"\x92\x01", 2, "array of 2 elements"}, /* one element of two */
      /* objects owed at every depth count: 3 bytes hold the inner 2 and not
         also the outer array's 2 still due */
      {"\x93\x92\x01\x01\x01", 5, "array of 2 elements at byte 1"},
      {"\x92\x01\x01\x01", 4, "trailing"},
      {"", 0, "empty body"},
      {"\xc1", 1, "0xc1"},
      {"\x92\x91\x01\x01", 4, "nested"}, /* no field is a container */
      {"\x92\x80\x01", 3, "nested"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    before = mapped_bytes();
    if (ferry_decode_args(&d, FERRY_CALL_mem_map, bad[i].body, bad[i].len, &mm) != -1)
      fail_msg("body %zu decoded", i);
    assert_true(mapped_bytes() < before + (64u << 20));
    if (!strstr(d.error, bad[i].why)) fail_msg("body %zu: '%s' lacks '%s'", i, d.error, bad[i].why);
  }
  /* an empty body may come as a NULL pointer (a zero-length read into no buffer) */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_hello, NULL, 0, &mm), -1);
  assert_non_null(strstr(d.error, "empty body"));
  /* counts that exactly fit are fine: 4 one-byte elements in 4 bytes */
  struct ferry_memcpy_dtod_args dd;
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_memcpy_dtod, "\xdc\x00\x04\x01\x02\x03\x04", 7, &dd), 0);
  assert_true(dd.dst == 1 && dd.src == 2 && dd.size == 3 && dd.stream == 4);
  ferry_decoder_destroy(&d);

  /* the walk itself, on nested bodies (the codec's are flat) */
  char why[128];
  assert_int_equal(ferry_msgpack_check("\x92\x91\x01\x81\x01\x02", 6, 2, why, sizeof why), 0);
  assert_int_equal(ferry_msgpack_check("\x92\x91\x01\x81\x01\x02", 6, 1, why, sizeof why), -1);
  assert_non_null(strstr(why, "nested array at byte 1"));
  assert_int_equal(ferry_msgpack_check("\x92\x91\x01\x81\x01", 5, 2, why, sizeof why), -1);
  assert_non_null(strstr(why, "map of 1 pairs at byte 3"));
  unsigned char deep[40];
  memset(deep, 0x91, sizeof deep);
  deep[sizeof deep - 1] = 0x01; /* 39 arrays deep */
  assert_int_equal(ferry_msgpack_check(deep, sizeof deep, 64, why, sizeof why), -1);
  assert_non_null(strstr(why, "nested array at byte 32"));
  assert_int_equal(ferry_msgpack_check(deep + 8, sizeof deep - 8, 64, why, sizeof why), 0);
}

/* every call's args and rets, filled field by field, survive a round trip;
   large str and blob fields take the 16- and 32-bit length forms */
static unsigned char big_blob[70000];
static char big_str[300];

#define ARGS(...) __VA_ARGS__
#define RETS(...) __VA_ARGS__
static void fill_u32(ferry_u32 *v, int big) { *v = big ? UINT32_MAX : 7; }
static void fill_i32(ferry_i32 *v, int big) { *v = big ? INT32_MIN : -3; }
static void fill_u64(ferry_u64 *v, int big) { *v = big ? UINT64_MAX : 0x123456789ull; }
static void fill_f32(ferry_f32 *v, int big) { *v = big ? 3.0e38f : -0.25f; }
static void fill_str(ferry_str *v, int big) { *v = big ? big_str : "x"; }
static void fill_blob(ferry_blob *v, int big) {
  *v = (ferry_blob){big_blob, big ? (uint32_t)sizeof big_blob : 3u};
}
static int same_u32(ferry_u32 a, ferry_u32 b) { return a == b; }
static int same_i32(ferry_i32 a, ferry_i32 b) { return a == b; }
static int same_u64(ferry_u64 a, ferry_u64 b) { return a == b; }
static int same_f32(ferry_f32 a, ferry_f32 b) { return a == b; }
static int same_str(ferry_str a, ferry_str b) { return strcmp(a, b) == 0; }
static int same_blob(ferry_blob a, ferry_blob b) {
  return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}
/* decoded str and blob fields point into the body: zero copy */
static int inside_str(ferry_str v, const char *body, size_t len) {
  return v >= body && v < body + len;
}
static int inside_blob(ferry_blob v, const char *body, size_t len) {
  return (const char *)v.ptr >= body && (const char *)v.ptr + v.len <= body + len;
}
static int inside_u32(ferry_u32 v, const char *b, size_t n) { (void)v; (void)b; (void)n; return 1; }
static int inside_i32(ferry_i32 v, const char *b, size_t n) { (void)v; (void)b; (void)n; return 1; }
static int inside_u64(ferry_u64 v, const char *b, size_t n) { (void)v; (void)b; (void)n; return 1; }
static int inside_f32(ferry_f32 v, const char *b, size_t n) { (void)v; (void)b; (void)n; return 1; }

/* per-call fill and compare functions, generated from calls.def as the codec is */
#define F(type, field) fill_##type(&s->field, big);
#define FERRY_CALL(id, name, flags, args, rets)                                           \
  static void fill_##name##_args(void *p, int big) {                                      \
    struct ferry_##name##_args *s = p;                                                    \
    (void)s; (void)big;                                                                   \
    args                                                                                  \
  }                                                                                       \
  static void fill_##name##_rets(void *p, int big) {                                      \
    struct ferry_##name##_rets *s = p;                                                    \
    (void)s; (void)big;                                                                   \
    rets                                                                                  \
  }
#include "protocol/calls.def"
#undef FERRY_CALL
#undef F
/* the name of the first field that differs or was copied out of the body, or NULL */
#define F(type, field)                                                                    \
  if (!same_##type(a->field, b->field) || !inside_##type(b->field, body, len)) return #field;
#define FERRY_CALL(id, name, flags, args, rets)                                           \
  static const char *same_##name##_args(const void *p, const void *q, const char *body,   \
                                        size_t len) {                                     \
    const struct ferry_##name##_args *a = p, *b = q;                                      \
    (void)a; (void)b; (void)body; (void)len;                                              \
    args return NULL;                                                                     \
  }                                                                                       \
  static const char *same_##name##_rets(const void *p, const void *q, const char *body,   \
                                        size_t len) {                                     \
    const struct ferry_##name##_rets *a = p, *b = q;                                      \
    (void)a; (void)b; (void)body; (void)len;                                              \
    rets return NULL;                                                                     \
  }
#include "protocol/calls.def"
#undef FERRY_CALL
#undef F
#undef ARGS
#undef RETS

typedef void (*fill_fn)(void *, int);
typedef const char *(*same_fn)(const void *, const void *, const char *, size_t);
static const fill_fn fill_fns[FERRY_CALL_LIMIT][2] = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = {fill_##name##_args, fill_##name##_rets},
#include "protocol/calls.def"
#undef FERRY_CALL
};
static const same_fn same_fns[FERRY_CALL_LIMIT][2] = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = {same_##name##_args, same_##name##_rets},
#include "protocol/calls.def"
#undef FERRY_CALL
};

static void every_call_round_trips(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof big_blob; i++) big_blob[i] = (unsigned char)(i * 31 + (i >> 8));
  memset(big_str, 'g', sizeof big_str - 1);
  struct ferry_decoder d;
  ferry_decoder_init(&d);
  for (unsigned call = 0; call < FERRY_CALL_LIMIT; call++) {
    if (!ferry_call_valid(call)) continue;
    for (int side = 0; side < 2; side++) {
      size_t size = side ? ferry_rets_size[call] : ferry_args_size[call];
      for (int big = 0; big < 2; big++) {
        void *in = calloc(1, size), *out = calloc(1, size);
        fill_fns[call][side](in, big);
        struct ferry_buf b = {0};
        assert_int_equal((side ? ferry_encode_rets : ferry_encode_args)(call, in, &b), 0);
        if ((side ? ferry_decode_rets : ferry_decode_args)(&d, call, b.data, b.len, out))
          fail_msg("%s %s: %s", ferry_calls[call].name, side ? "rets" : "args", d.error);
        const char *bad = same_fns[call][side](in, out, b.data, b.len);
        if (bad) fail_msg("%s: field %s differs or was copied", ferry_calls[call].name, bad);
        ferry_buf_free(&b);
        free(in);
        free(out);
      }
    }
  }
  ferry_decoder_destroy(&d);
}

static void every_call_has_a_name_and_one_mode(void **state) {
  (void)state;
  for (unsigned i = 0; i < FERRY_CALL_LIMIT; i++) {
    if (!ferry_call_valid(i)) continue;
    assert_non_null(ferry_calls[i].name);
    unsigned mode = ferry_calls[i].flags & (SYNC | ASYNC);
    assert_true(mode == SYNC || mode == ASYNC);
    /* a reply can carry bulk data only if the caller waits for it */
    if (ferry_calls[i].flags & BULK_OUT) assert_true(ferry_calls[i].flags & SYNC);
  }
}

/* wire ids are calls.def's first column, not places in it: these are the
   ids of protocol versions 4 and 5, and a call added or removed elsewhere
   in the table must not move them */
static void ids_are_explicit_and_stable(void **state) {
  (void)state;
  static const struct { unsigned id; const char *name; } known[] = {
      {0, "hello"},   {1, "device_synchronize"}, {10, "mem_map"},  {12, "memcpy_htod"},
      {24, "module_load"}, {29, "launch"},       {45, "event_record"}, {58, "memcpy_dtoh_gather"},
      {59, "mem_hash"}, {63, "memcpy_dtoh_host"},
  };
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    assert_true(ferry_call_valid(known[i].id));
    assert_string_equal(ferry_calls[known[i].id].name, known[i].name);
  }
  assert_int_equal(FERRY_CALL_hello, 0);
  assert_int_equal(FERRY_CALL_launch, 29);
  assert_int_equal(FERRY_CALL_memcpy_dtoh_host, 63);
}

/* every line of calls.def has an id of its own; any other id below the
   limit is a hole, which nothing accepts */
static void holes_are_invalid(void **state) {
  (void)state;
  enum {
    lines = 0
#define FERRY_CALL(id, name, flags, args, rets) + 1
#include "protocol/calls.def"
#undef FERRY_CALL
  };
  unsigned valid = 0;
  struct ferry_decoder d;
  ferry_decoder_init(&d);
  struct ferry_buf b = {0};
  assert_int_equal(ferry_buf_append(&b, "\x90", 1), 0); /* an empty body */
  char out[64];
  for (unsigned id = 0; id < FERRY_CALL_LIMIT; id++) {
    if (ferry_call_valid(id)) {
      assert_non_null(ferry_calls[id].name);
      for (unsigned j = 0; j < id; j++)
        if (ferry_calls[j].name) assert_string_not_equal(ferry_calls[j].name, ferry_calls[id].name);
      valid++;
      continue;
    }
    assert_null(ferry_calls[id].name);
    assert_int_equal(ferry_args_size[id], 0);
    assert_int_equal(ferry_decode_args(&d, id, b.data, b.len, out), -1);
    assert_non_null(strstr(d.error, "unknown call"));
    struct ferry_buf e = {0};
    assert_int_equal(ferry_encode_rets(id, out, &e), -1);
  }
  assert_int_equal(valid, lines);
  assert_false(ferry_call_valid(FERRY_CALL_LIMIT));
  assert_false(ferry_call_valid(FERRY_KIND_REPLY));
  ferry_buf_free(&b);
  ferry_decoder_destroy(&d);
}

/* the flags that replaced per-call switches (query_cache.c, session.c,
   local.c) name the calls those switches named, among the calls they knew
   (ids 0 to 63) */
static void check_flag(unsigned flag, const char *what, const unsigned *calls, size_t n) {
  for (unsigned id = 0; id <= FERRY_CALL_memcpy_dtoh_host; id++) {
    if (!ferry_call_valid(id)) continue;
    int listed = 0;
    for (size_t i = 0; i < n; i++) listed |= calls[i] == id;
    if (listed != !!(ferry_calls[id].flags & flag))
      fail_msg("%s: %s %s", what, ferry_calls[id].name, listed ? "lacks the flag" : "has the flag");
  }
}
#define CHECK_FLAG(flag, ...)                                                                 \
  do {                                                                                        \
    static const unsigned calls[] = {__VA_ARGS__};                                            \
    check_flag(flag, #flag, calls, sizeof calls / sizeof calls[0]);                           \
  } while (0)

static void flags_name_the_calls_the_switches_named(void **state) {
  (void)state;
  CHECK_FLAG(CACHED, FERRY_CALL_func_get_attributes, FERRY_CALL_occupancy,
             FERRY_CALL_occupancy_smem, FERRY_CALL_occupancy_clusters,
             FERRY_CALL_stream_priority_range, FERRY_CALL_device_get_limit);
  CHECK_FLAG(INVALIDATES, FERRY_CALL_func_set_attribute, FERRY_CALL_func_set_cache_config,
             FERRY_CALL_device_set_cache_config, FERRY_CALL_device_set_limit,
             FERRY_CALL_set_device_flags, FERRY_CALL_device_reset);
  CHECK_FLAG(FLUSHES_OUTPUT, FERRY_CALL_device_synchronize, FERRY_CALL_device_reset,
             FERRY_CALL_stream_synchronize, FERRY_CALL_event_synchronize, FERRY_CALL_memcpy_htod,
             FERRY_CALL_memcpy_dtoh, FERRY_CALL_memcpy_dtod, FERRY_CALL_memcpy2d_htod,
             FERRY_CALL_memcpy2d_dtoh, FERRY_CALL_memcpy3d_dtoh, FERRY_CALL_memcpy_dtoh_gather,
             FERRY_CALL_module_load, FERRY_CALL_module_unload);
  CHECK_FLAG(WAITS, FERRY_CALL_device_synchronize, FERRY_CALL_stream_synchronize,
             FERRY_CALL_stream_query, FERRY_CALL_event_synchronize, FERRY_CALL_event_query);
  CHECK_FLAG(LAUNCHES, FERRY_CALL_launch);
  CHECK_FLAG(DRAINS, FERRY_CALL_device_synchronize, FERRY_CALL_device_reset);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(launch_round_trip),
      cmocka_unit_test(rets_with_strings_and_floats),
      cmocka_unit_test(rejects_bad_bodies),
      cmocka_unit_test(every_call_has_a_name_and_one_mode),
      cmocka_unit_test(ids_are_explicit_and_stable),
      cmocka_unit_test(holes_are_invalid),
      cmocka_unit_test(flags_name_the_calls_the_switches_named),
      cmocka_unit_test(refuses_counts_the_body_cannot_hold),
      cmocka_unit_test(every_call_round_trips),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
