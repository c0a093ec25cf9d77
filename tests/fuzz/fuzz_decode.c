/*
 * Fuzz harness: every call's decoder. The first input byte picks the call
 * (byte >> 1, modulo FERRY_CALL_LIMIT: an id no call has must be refused)
 * and the side (bit 0: arguments or results); the rest is the msgpack
 * body. Checks besides the sanitizers':
 *  - a body that decodes re-encodes to one that decodes to the same
 *    fields, and its str and blob fields point into the body (zero copy);
 *  - the bounded walk and msgpack-c agree: a body the walk passes (any
 *    depth msgpack-c takes) unpacks in full, with allocations bounded by
 *    the body's size (libFuzzer's -malloc_limit_mb catches the rest);
 *  - whatever the decoder accepts, the walk passes as flat.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, unsigned call, int side) {
  const char *name = ferry_calls[call].name;
  fprintf(stderr, "fuzz_decode: %s %s: %s\n", name ? name : "(no call)",
          side ? "results" : "arguments", what);
  abort();
}

/* field by field comparison and zero-copy check, generated from calls.def */
static int same_u32(ferry_u32 a, ferry_u32 b) { return a == b; }
static int same_i32(ferry_i32 a, ferry_i32 b) { return a == b; }
static int same_u64(ferry_u64 a, ferry_u64 b) { return a == b; }
/* NaN != NaN: compare bits */
static int same_f32(ferry_f32 a, ferry_f32 b) { return memcmp(&a, &b, sizeof a) == 0; }
static int same_str(ferry_str a, ferry_str b) { return (!a && !b) || (a && b && !strcmp(a, b)); }
static int same_blob(ferry_blob a, ferry_blob b) {
  return a.len == b.len && (!a.len || !memcmp(a.ptr, b.ptr, a.len));
}
static int inside(const void *p, size_t n, const char *body, size_t len) {
  return (const char *)p >= body && n <= len && (const char *)p - body <= (ptrdiff_t)(len - n);
}
static int inside_str(ferry_str v, const char *b, size_t n) { return !v || inside(v, strlen(v) + 1, b, n); }
static int inside_blob(ferry_blob v, const char *b, size_t n) { return !v.len || inside(v.ptr, v.len, b, n); }
static int inside_u32(ferry_u32 v, const char *b, size_t n) { (void)v; (void)b; (void)n; return 1; }
static int inside_i32(ferry_i32 v, const char *b, size_t n) { (void)v; (void)b; (void)n; return 1; }
static int inside_u64(ferry_u64 v, const char *b, size_t n) { (void)v; (void)b; (void)n; return 1; }
static int inside_f32(ferry_f32 v, const char *b, size_t n) { (void)v; (void)b; (void)n; return 1; }

#define ARGS(...) __VA_ARGS__
#define RETS(...) __VA_ARGS__
#define F(type, field) if (!same_##type(a->field, b->field)) return #field;
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  static const char *same_##name##_args(const void *p, const void *q) {                        \
    const struct ferry_##name##_args *a = p, *b = q;                                           \
    (void)a; (void)b;                                                                          \
    args return NULL;                                                                          \
  }                                                                                            \
  static const char *same_##name##_rets(const void *p, const void *q) {                        \
    const struct ferry_##name##_rets *a = p, *b = q;                                           \
    (void)a; (void)b;                                                                          \
    rets return NULL;                                                                          \
  }
#include "protocol/calls.def"
#undef FERRY_CALL
#undef F
#define F(type, field) if (!inside_##type(a->field, body, len)) return #field;
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  static const char *inside_##name##_args(const void *p, const char *body, size_t len) {       \
    const struct ferry_##name##_args *a = p;                                                   \
    (void)a; (void)body; (void)len;                                                            \
    args return NULL;                                                                          \
  }                                                                                            \
  static const char *inside_##name##_rets(const void *p, const char *body, size_t len) {       \
    const struct ferry_##name##_rets *a = p;                                                   \
    (void)a; (void)body; (void)len;                                                            \
    rets return NULL;                                                                          \
  }
#include "protocol/calls.def"
#undef FERRY_CALL
#undef F
#undef ARGS
#undef RETS

static const char *(*const same_fns[FERRY_CALL_LIMIT][2])(const void *, const void *) = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = {same_##name##_args, same_##name##_rets},
#include "protocol/calls.def"
#undef FERRY_CALL
};
static const char *(*const inside_fns[FERRY_CALL_LIMIT][2])(const void *, const char *, size_t) = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = {inside_##name##_args, inside_##name##_rets},
#include "protocol/calls.def"
#undef FERRY_CALL
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct ferry_decoder dec, dec2;
  static void *first, *second;
  static msgpack_zone zone;
  if (!first) {
    size_t most = 0;
    for (unsigned i = 0; i < FERRY_CALL_LIMIT; i++) {
      if (ferry_args_size[i] > most) most = ferry_args_size[i];
      if (ferry_rets_size[i] > most) most = ferry_rets_size[i];
    }
    first = malloc(most);
    second = malloc(most);
    ferry_decoder_init(&dec);
    ferry_decoder_init(&dec2);
    msgpack_zone_init(&zone, 2048);
  }
  if (size < 1) return 0;
  unsigned call = (data[0] >> 1) % FERRY_CALL_LIMIT;
  int side = data[0] & 1;
  /* a copy of exactly the body's size, so ASan sees any read past it */
  size_t len = size - 1;
  char *body = malloc(len ? len : 1);
  if (len) memcpy(body, data + 1, len);

  char why[128];
  if (ferry_msgpack_check(body, len, FERRY_MSGPACK_MAX_DEPTH, why, sizeof why) == 0) {
    msgpack_zone_clear(&zone);
    msgpack_object o;
    size_t off = 0;
    if (msgpack_unpack(body, len, &off, &zone, &o) != MSGPACK_UNPACK_SUCCESS || off != len)
      fail("msgpack-c refused a body the bounded walk passed", call, side);
  }
  int flat = ferry_msgpack_check(body, len, 1, why, sizeof why) == 0;

  int (*decode)(struct ferry_decoder *, unsigned, const void *, size_t, void *) =
      side ? ferry_decode_rets : ferry_decode_args;
  int (*encode)(unsigned, const void *, struct ferry_buf *) =
      side ? ferry_encode_rets : ferry_encode_args;
  dec.error[0] = '\0';
  if (decode(&dec, call, body, len, first)) {
    if (!dec.error[0]) fail("refused without a reason", call, side);
  } else {
    if (!ferry_call_valid(call)) fail("an unknown call decoded", call, side);
    if (!flat) fail("decoded a body the walk refuses", call, side);
    const char *bad = inside_fns[call][side](first, body, len);
    if (bad) fail("a str or blob field points outside the body", call, side);
    struct ferry_buf b = {0};
    if (encode(call, first, &b)) fail("cannot encode what it decoded", call, side);
    if (decode(&dec2, call, b.data, b.len, second)) fail(dec2.error, call, side);
    if ((bad = same_fns[call][side](first, second))) fail(bad, call, side);
    ferry_buf_free(&b);
  }
  free(body);
  return 0;
}
