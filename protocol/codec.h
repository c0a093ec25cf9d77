/*
 * msgpack encoding and decoding of every call's ARGS and RETS, generated
 * from calls.def. Decoding never trusts the peer: a wrong field count or
 * type is an error with a reason, never a crash. Decoded str and blob
 * fields point into the body buffer (zero copy), so the body must outlive
 * the decoded struct.
 */
#ifndef FERRY_CODEC_H
#define FERRY_CODEC_H

#include <msgpack.h>
#include "wire.h"

/* growable byte buffer used for outgoing bodies */
struct ferry_buf {
  char *data;
  size_t len, cap;
};
int ferry_buf_reserve(struct ferry_buf *b, size_t extra);
int ferry_buf_append(struct ferry_buf *b, const void *p, size_t n);
void ferry_buf_free(struct ferry_buf *b);

/* the raw bytes of a call (BULK_IN / BULK_OUT), beside its body */
struct ferry_bulk {
  const void *in;
  uint64_t in_len;
  void *out; /* BULK_OUT: the reply's bytes land here */
  uint64_t out_len;
};

/* append the msgpack encoding; returns 0, or -1 when out of memory */
int ferry_encode_args(unsigned call, const void *args, struct ferry_buf *out);
int ferry_encode_rets(unsigned call, const void *rets, struct ferry_buf *out);

/* a decoder owns a reusable msgpack zone */
struct ferry_decoder {
  msgpack_zone zone;
  char error[160];
};
void ferry_decoder_init(struct ferry_decoder *d);
void ferry_decoder_destroy(struct ferry_decoder *d);
/* returns 0, or -1 with d->error set */
int ferry_decode_args(struct ferry_decoder *d, unsigned call, const void *body, size_t len, void *args);
int ferry_decode_rets(struct ferry_decoder *d, unsigned call, const void *body, size_t len, void *rets);

/* 0 when body[0..len) is exactly one msgpack object, no container in it
   nested more than max_depth deep (the outermost is depth 1), and every
   count and length fits in the bytes left; else -1 with a reason. Reads
   headers only and allocates nothing: run it before msgpack_unpack on
   bytes from a peer, since msgpack-c allocates from counts up front. */
#define FERRY_MSGPACK_MAX_DEPTH 32u
int ferry_msgpack_check(const void *body, size_t len, unsigned max_depth, char *err,
                        size_t errlen);

/* sizes of the generated structs, for callers that allocate them generically
   (0 for an id no call has) */
extern const size_t ferry_args_size[FERRY_CALL_LIMIT];
extern const size_t ferry_rets_size[FERRY_CALL_LIMIT];

#endif
