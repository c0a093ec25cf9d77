/*
 * Generated deep copies (see clone.h): one function per call and side, a
 * step per str/blob field, nothing for plain numbers.
 */
#include "clone.h"

#include <string.h>

#define EXTRA_u32(f)
#define EXTRA_i32(f)
#define EXTRA_u64(f)
#define EXTRA_f32(f)
#define EXTRA_str(f) n += s->f ? strlen(s->f) + 1 : 0;
#define EXTRA_blob(f) n += s->f.len;
#define COPY_u32(f)
#define COPY_i32(f)
#define COPY_u64(f)
#define COPY_f32(f)
#define COPY_str(f)                                                                            \
  if (s->f) {                                                                                  \
    size_t l = strlen(s->f) + 1;                                                               \
    memcpy(p, s->f, l);                                                                        \
    d->f = p;                                                                                  \
    p += l;                                                                                    \
  }
#define COPY_blob(f)                                                                           \
  if (s->f.len) {                                                                              \
    memcpy(p, s->f.ptr, s->f.len);                                                             \
    d->f.ptr = p;                                                                              \
    p += s->f.len;                                                                             \
  }

#define ARGS(...) __VA_ARGS__
#define RETS(...)
#define F(type, field) EXTRA_##type(field)
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  static size_t args_extra_##name(const struct ferry_##name##_args *s) {                        \
    size_t n = 0;                                                                              \
    (void)s;                                                                                   \
    args return n;                                                                             \
  }
#include "calls.def"
#undef FERRY_CALL
#undef F
#define F(type, field) COPY_##type(field)
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  static void args_clone_##name(const struct ferry_##name##_args *s,                            \
                                struct ferry_##name##_args *d, char *p) {                       \
    *d = *s;                                                                                   \
    (void)p;                                                                                   \
    args                                                                                       \
  }
#include "calls.def"
#undef FERRY_CALL
#undef F
#undef ARGS
#undef RETS

#define ARGS(...)
#define RETS(...) __VA_ARGS__
#define F(type, field) EXTRA_##type(field)
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  static size_t rets_extra_##name(const struct ferry_##name##_rets *s) {                        \
    size_t n = 0;                                                                              \
    (void)s;                                                                                   \
    rets return n;                                                                             \
  }
#include "calls.def"
#undef FERRY_CALL
#undef F
#define F(type, field) COPY_##type(field)
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  static void rets_clone_##name(const struct ferry_##name##_rets *s,                            \
                                struct ferry_##name##_rets *d, char *p) {                       \
    *d = *s;                                                                                   \
    (void)p;                                                                                   \
    rets                                                                                       \
  }
#include "calls.def"
#undef FERRY_CALL
#undef F
#undef ARGS
#undef RETS

size_t ferry_args_extra(unsigned call, const void *args) {
  switch (call) {
#define FERRY_CALL(id, name, flags, args_, rets_)                                              \
  case FERRY_CALL_##name: return args_extra_##name(args);
#include "calls.def"
#undef FERRY_CALL
  default: return 0;
  }
}

size_t ferry_rets_extra(unsigned call, const void *rets) {
  switch (call) {
#define FERRY_CALL(id, name, flags, args, rets_)                                               \
  case FERRY_CALL_##name: return rets_extra_##name(rets);
#include "calls.def"
#undef FERRY_CALL
  default: return 0;
  }
}

void ferry_args_clone(unsigned call, const void *src, void *dst, void *extra) {
  switch (call) {
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  case FERRY_CALL_##name: args_clone_##name(src, dst, extra); break;
#include "calls.def"
#undef FERRY_CALL
  default: break;
  }
}

void ferry_rets_clone(unsigned call, const void *src, void *dst, void *extra) {
  switch (call) {
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  case FERRY_CALL_##name: rets_clone_##name(src, dst, extra); break;
#include "calls.def"
#undef FERRY_CALL
  default: break;
  }
}
