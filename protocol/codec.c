/*
 * The generated msgpack codec. Each F(type, field) of calls.def becomes one
 * pack and one checked unpack step; strings travel with their NUL so that a
 * decoded ferry_str can point into the frame without a copy.
 */
#include "codec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct ferry_call_info ferry_calls[FERRY_CALL_LIMIT] = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = {#name, (flags)},
#include "calls.def"
#undef FERRY_CALL
};

int ferry_buf_reserve(struct ferry_buf *b, size_t extra) {
  if (b->len + extra <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra) cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p) return -1;
  b->data = p;
  b->cap = cap;
  return 0;
}

int ferry_buf_append(struct ferry_buf *b, const void *p, size_t n) {
  if (ferry_buf_reserve(b, n)) return -1;
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

void ferry_buf_free(struct ferry_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

static int buf_write(void *data, const char *buf, size_t len) {
  return ferry_buf_append(data, buf, len);
}

/* ---- packing one field ---- */
static int pack_u32(msgpack_packer *pk, ferry_u32 v) { return msgpack_pack_uint32(pk, v); }
static int pack_i32(msgpack_packer *pk, ferry_i32 v) { return msgpack_pack_int32(pk, v); }
static int pack_u64(msgpack_packer *pk, ferry_u64 v) { return msgpack_pack_uint64(pk, v); }
static int pack_f32(msgpack_packer *pk, ferry_f32 v) { return msgpack_pack_float(pk, v); }
static int pack_str(msgpack_packer *pk, ferry_str v) {
  if (!v) return msgpack_pack_nil(pk);
  size_t n = strlen(v) + 1;
  return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, v, n);
}
static int pack_blob(msgpack_packer *pk, ferry_blob v) {
  return msgpack_pack_bin(pk, v.len) || (v.len && msgpack_pack_bin_body(pk, v.ptr, v.len));
}

/* ---- unpacking one field, with type checks ---- */
static int unpack_u32(const msgpack_object *o, ferry_u32 *v) {
  if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > UINT32_MAX) return -1;
  *v = (ferry_u32)o->via.u64;
  return 0;
}
static int unpack_u64(const msgpack_object *o, ferry_u64 *v) {
  if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER) return -1;
  *v = o->via.u64;
  return 0;
}
static int unpack_i32(const msgpack_object *o, ferry_i32 *v) {
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT32_MAX) {
    *v = (ferry_i32)o->via.u64;
    return 0;
  }
  if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 >= INT32_MIN) {
    *v = (ferry_i32)o->via.i64;
    return 0;
  }
  return -1;
}
static int unpack_f32(const msgpack_object *o, ferry_f32 *v) {
  if (o->type != MSGPACK_OBJECT_FLOAT32 && o->type != MSGPACK_OBJECT_FLOAT64) return -1;
  *v = (ferry_f32)o->via.f64;
  return 0;
}
static int unpack_str(const msgpack_object *o, ferry_str *v) {
  if (o->type == MSGPACK_OBJECT_NIL) {
    *v = NULL;
    return 0;
  }
  if (o->type != MSGPACK_OBJECT_STR || o->via.str.size == 0 ||
      o->via.str.ptr[o->via.str.size - 1] != '\0')
    return -1;
  *v = o->via.str.ptr;
  return 0;
}
static int unpack_blob(const msgpack_object *o, ferry_blob *v) {
  if (o->type != MSGPACK_OBJECT_BIN) return -1;
  v->ptr = o->via.bin.ptr;
  v->len = o->via.bin.size;
  return 0;
}

/* ---- a bounded walk of the body before msgpack-c sees it ----
   msgpack_unpack allocates an array's or map's elements from its count
   before reading any of them, so a 6-byte body can ask for gigabytes. The
   walk reads headers only, allocates nothing, and refuses a count the
   bytes left cannot hold: every object still owed takes at least one. */

static uint64_t be(const unsigned char *p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

int ferry_msgpack_check(const void *body, size_t len, unsigned max_depth, char *err,
                        size_t errlen) {
  const unsigned char *p = body;
  size_t off = 0;
  /* owed[d]: objects still to read in the container open at depth d */
  uint64_t owed[FERRY_MSGPACK_MAX_DEPTH + 1] = {1};
  uint64_t need = 1; /* the sum of owed[] */
  unsigned depth = 0;
  if (max_depth > FERRY_MSGPACK_MAX_DEPTH) max_depth = FERRY_MSGPACK_MAX_DEPTH;
  if (len == 0) {
    snprintf(err, errlen, "empty body");
    return -1;
  }
  while (need) {
    while (owed[depth] == 0) depth--;
    if (off >= len) {
      snprintf(err, errlen, "truncated: %" PRIu64 " more object%s due at byte %zu", need,
               need == 1 ? "" : "s", off);
      return -1;
    }
    size_t at = off;
    unsigned b = p[off++];
    owed[depth]--;
    need--;
    /* kind: a container, a length-prefixed byte run (str, bin, ext) or
       NULL for a value of fixed size */
    const char *kind = NULL;
    int container = 0;
    unsigned lenbytes = 0; /* size of the count or length after b */
    uint64_t count = 0;    /* elements, pairs, or bytes */
    uint64_t fixed = 0;    /* payload bytes besides a length's */
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
      /* fixint, nil, bool: the byte is the whole object */
    } else if (b <= 0x8f) {
      kind = "map", container = 1, count = b & 0x0f;
    } else if (b <= 0x9f) {
      kind = "array", container = 1, count = b & 0x0f;
    } else if (b <= 0xbf) {
      kind = "str", count = b & 0x1f;
    } else {
      switch (b) {
      case 0xc4: case 0xc5: case 0xc6: kind = "bin", lenbytes = 1u << (b - 0xc4); break;
      case 0xc7: case 0xc8: case 0xc9: kind = "ext", lenbytes = 1u << (b - 0xc7), fixed = 1; break;
      case 0xca: fixed = 4; break;
      case 0xcb: fixed = 8; break;
      case 0xcc: case 0xcd: case 0xce: case 0xcf: fixed = 1u << (b - 0xcc); break;
      case 0xd0: case 0xd1: case 0xd2: case 0xd3: fixed = 1u << (b - 0xd0); break;
      case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: fixed = 1 + (1u << (b - 0xd4)); break;
      case 0xd9: case 0xda: case 0xdb: kind = "str", lenbytes = 1u << (b - 0xd9); break;
      case 0xdc: case 0xdd: kind = "array", container = 1, lenbytes = 2u << (b - 0xdc); break;
      case 0xde: case 0xdf: kind = "map", container = 1, lenbytes = 2u << (b - 0xde); break;
      default:
        snprintf(err, errlen, "invalid byte 0x%02x at byte %zu", b, at);
        return -1;
      }
    }
    if (lenbytes) {
      if (len - off < lenbytes) {
        snprintf(err, errlen, "truncated: the %s header at byte %zu", kind, at);
        return -1;
      }
      count = be(p + off, lenbytes);
      off += lenbytes;
    }
    uint64_t left = len - off;
    if (container) {
      int map = kind[0] == 'm';
      uint64_t objects = map ? 2 * count : count;
      /* the objects already owed take their bytes first */
      uint64_t room = left < need ? 0 : left - need;
      if (objects > room) {
        snprintf(err, errlen, "%s of %" PRIu64 " %s at byte %zu cannot fit in the %" PRIu64
                 " bytes left for it", map ? "a map" : "an array", count,
                 map ? "pairs" : "elements", at, room);
        return -1;
      }
      if (depth + 1 > max_depth) {
        snprintf(err, errlen, "a nested %s at byte %zu (no field holds one)", kind, at);
        return -1;
      }
      if (objects) {
        owed[++depth] = objects;
        need += objects;
      }
    } else {
      uint64_t size = fixed + count;
      if (size > left) {
        if (kind)
          snprintf(err, errlen, "%s %s of %" PRIu64 " bytes at byte %zu runs past the %" PRIu64
                   " bytes left", kind[0] == 'e' ? "an" : "a", kind, count, at, left);
        else
          snprintf(err, errlen, "truncated: the value at byte %zu", at);
        return -1;
      }
      off += size;
    }
  }
  if (off != len) {
    snprintf(err, errlen, "%zu trailing bytes after the object", len - off);
    return -1;
  }
  return 0;
}

/* ---- generated per-call functions ---- */
#define ARGS(...) __VA_ARGS__
#define RETS(...) __VA_ARGS__
#define COUNT_FIELD(type, field) +1
#define PACK_FIELD(type, field) if (pack_##type(pk, s->field)) return -1;
#define UNPACK_FIELD(type, field)                                             \
  if (unpack_##type(it, &s->field)) {                                         \
    snprintf(err, errlen, "field '%s' is not a valid %s", #field, #type);     \
    return -1;                                                                \
  }                                                                           \
  it++;


#define F COUNT_FIELD
enum {
#define FERRY_CALL(id, name, flags, args, rets) name##_args_count = 0 args, name##_rets_count = 0 rets,
#include "calls.def"
#undef FERRY_CALL
};
#undef F

#define F PACK_FIELD
#define FERRY_CALL(id, name, flags, args, rets)                               \
  static int pack_##name##_args(msgpack_packer *pk, const void *p) {          \
    const struct ferry_##name##_args *s = p;                                  \
    (void)s;                                                                  \
    if (msgpack_pack_array(pk, name##_args_count)) return -1;                 \
    args return 0;                                                            \
  }                                                                           \
  static int pack_##name##_rets(msgpack_packer *pk, const void *p) {          \
    const struct ferry_##name##_rets *s = p;                                  \
    (void)s;                                                                  \
    if (msgpack_pack_array(pk, name##_rets_count)) return -1;                 \
    rets return 0;                                                            \
  }
#include "calls.def"
#undef FERRY_CALL
#undef F

#define F UNPACK_FIELD
#define FERRY_CALL(id, name, flags, args, rets)                                      \
  static int unpack_##name##_args(const msgpack_object *o, void *p, char *err,       \
                                  size_t errlen) {                                   \
    struct ferry_##name##_args *s = p;                                               \
    const msgpack_object *it = o->via.array.ptr;                                     \
    (void)s; (void)it; (void)err; (void)errlen;                                      \
    if (o->via.array.size != name##_args_count) return -2;                           \
    args return 0;                                                                   \
  }                                                                                  \
  static int unpack_##name##_rets(const msgpack_object *o, void *p, char *err,       \
                                  size_t errlen) {                                   \
    struct ferry_##name##_rets *s = p;                                               \
    const msgpack_object *it = o->via.array.ptr;                                     \
    (void)s; (void)it; (void)err; (void)errlen;                                      \
    if (o->via.array.size != name##_rets_count) return -2;                           \
    rets return 0;                                                                   \
  }
#include "calls.def"
#undef FERRY_CALL
#undef F
#undef ARGS
#undef RETS

typedef int (*pack_fn)(msgpack_packer *, const void *);
typedef int (*unpack_fn)(const msgpack_object *, void *, char *, size_t);

/* tables by id; a hole's entries stay NULL (ferry_call_valid refuses it) */
static const pack_fn pack_args[FERRY_CALL_LIMIT] = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = pack_##name##_args,
#include "calls.def"
#undef FERRY_CALL
};
static const pack_fn pack_rets[FERRY_CALL_LIMIT] = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = pack_##name##_rets,
#include "calls.def"
#undef FERRY_CALL
};
static const unpack_fn unpack_args[FERRY_CALL_LIMIT] = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = unpack_##name##_args,
#include "calls.def"
#undef FERRY_CALL
};
static const unpack_fn unpack_rets[FERRY_CALL_LIMIT] = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = unpack_##name##_rets,
#include "calls.def"
#undef FERRY_CALL
};
static const unsigned field_count[FERRY_CALL_LIMIT][2] = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = {name##_args_count, name##_rets_count},
#include "calls.def"
#undef FERRY_CALL
};
const size_t ferry_args_size[FERRY_CALL_LIMIT] = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = sizeof(struct ferry_##name##_args),
#include "calls.def"
#undef FERRY_CALL
};
const size_t ferry_rets_size[FERRY_CALL_LIMIT] = {
#define FERRY_CALL(id, name, flags, args, rets) [id] = sizeof(struct ferry_##name##_rets),
#include "calls.def"
#undef FERRY_CALL
};

static int encode(const pack_fn *table, unsigned call, const void *s, struct ferry_buf *out) {
  if (!ferry_call_valid(call)) return -1;
  msgpack_packer pk;
  msgpack_packer_init(&pk, out, buf_write);
  return table[call](&pk, s) ? -1 : 0;
}

int ferry_encode_args(unsigned call, const void *args, struct ferry_buf *out) {
  return encode(pack_args, call, args, out);
}
int ferry_encode_rets(unsigned call, const void *rets, struct ferry_buf *out) {
  return encode(pack_rets, call, rets, out);
}

void ferry_decoder_init(struct ferry_decoder *d) {
  msgpack_zone_init(&d->zone, 2048);
  d->error[0] = '\0';
}
void ferry_decoder_destroy(struct ferry_decoder *d) { msgpack_zone_destroy(&d->zone); }

static int decode(struct ferry_decoder *d, const unpack_fn *table, int which, unsigned call,
                  const void *body, size_t len, void *s) {
  if (!ferry_call_valid(call)) {
    snprintf(d->error, sizeof d->error, "unknown call id %u", call);
    return -1;
  }
  const char *what = which ? "results" : "arguments";
  char why[112];
  /* bodies are one flat array: no container below it */
  if (ferry_msgpack_check(body, len, 1, why, sizeof why)) {
    snprintf(d->error, sizeof d->error, "%s of %s: malformed msgpack body: %s", what,
             ferry_calls[call].name, why);
    return -1;
  }
  msgpack_zone_clear(&d->zone);
  size_t off = 0;
  msgpack_object obj;
  msgpack_unpack_return r = msgpack_unpack(body, len, &off, &d->zone, &obj);
  if (r != MSGPACK_UNPACK_SUCCESS || off != len) {
    snprintf(d->error, sizeof d->error, "%s of %s: malformed msgpack body", what,
             ferry_calls[call].name);
    return -1;
  }
  if (obj.type != MSGPACK_OBJECT_ARRAY || obj.via.array.size != field_count[call][which]) {
    snprintf(d->error, sizeof d->error, "%s of %s: expected an array of %u fields", what,
             ferry_calls[call].name, field_count[call][which]);
    return -1;
  }
  char field_err[96] = "";
  if (table[call](&obj, s, field_err, sizeof field_err)) {
    snprintf(d->error, sizeof d->error, "%s of %s: %s", what, ferry_calls[call].name, field_err);
    return -1;
  }
  return 0;
}

int ferry_decode_args(struct ferry_decoder *d, unsigned call, const void *body, size_t len,
                      void *args) {
  return decode(d, unpack_args, 0, call, body, len, args);
}
int ferry_decode_rets(struct ferry_decoder *d, unsigned call, const void *body, size_t len,
                      void *rets) {
  return decode(d, unpack_rets, 1, call, body, len, rets);
}
