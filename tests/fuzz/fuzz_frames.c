/*
 * Fuzz harness: the frame reader. The input is a client's byte stream; it
 * is read the way a session reads it (32-byte header, body into a buffer
 * that grows only when it must, so an empty first body goes into NULL,
 * then the bulk bytes in pieces small and large) through the buffered
 * reader over a connection that delivers arbitrary chunks. Every read must
 * hand back exactly the next bytes of the stream and fail only when the
 * stream has run out; every body goes through the decoder of its call.
 * The checks on a header are only those the harness needs to stay in step
 * (the session's own live in server/session.c, fuzzed by fuzz_session).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memconn.h"
#include "protocol/codec.h"
#include "transport/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ferry_reader rd; /* 64 KiB: not on the stack */
static uint8_t sink[1u << 17];

static void fail(const char *what, size_t at) {
  fprintf(stderr, "fuzz_frames: %s at stream offset %zu\n", what, at);
  abort();
}

/* ferry_read, checked against the stream itself */
static int read_checked(struct memconn *m, void *dst, size_t n, size_t *pos) {
  if (ferry_read(&rd, dst, n)) {
    if (m->in_len - *pos >= n) fail("a read failed although the bytes were there", *pos);
    return -1;
  }
  if (m->in_len - *pos < n) fail("a read succeeded past the end of the stream", *pos);
  if (n && memcmp(dst, m->in + *pos, n)) fail("a read returned the wrong bytes", *pos);
  *pos += n;
  if (*pos + ferry_reader_buffered(&rd) != m->in_pos)
    fail("the reader lost count of its buffered bytes", *pos);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct memconn m;
  memconn_init(&m, data, size, NULL);
  ferry_reader_init(&rd, &m.c);
  static struct ferry_decoder dec;
  static void *args; /* big enough for any call's arguments */
  if (!args) {
    size_t most = 0;
    for (unsigned i = 0; i < FERRY_CALL_LIMIT; i++)
      if (ferry_args_size[i] > most) most = ferry_args_size[i];
    ferry_decoder_init(&dec);
    args = malloc(most);
  }
  char *body = NULL;
  size_t cap = 0, pos = 0;
  for (;;) {
    struct ferry_frame h;
    if (read_checked(&m, &h, sizeof h, &pos)) break;
    if (h.magic != FERRY_MAGIC || h.body_len > FERRY_MAX_BODY) break;
    if (h.body_len > cap) {
      char *p = realloc(body, h.body_len);
      if (!p) break;
      body = p;
      cap = h.body_len;
    }
    if (read_checked(&m, body, h.body_len, &pos)) break;
    /* any kind: the decoder must refuse the ones it does not know */
    if (ferry_decode_args(&dec, h.kind, body, h.body_len, args) == 0 &&
        !ferry_call_valid(h.kind))
      fail("an unknown call decoded", pos);
    uint64_t bulk = h.bulk_len;
    while (bulk) {
      /* pieces on both sides of the reader's bypass threshold */
      size_t k = (size_t)(memconn_next(&m) % sizeof sink) + 1;
      if (k > bulk) k = (size_t)bulk;
      if (read_checked(&m, sink, k, &pos)) break;
      bulk -= k;
    }
    if (bulk) break;
  }
  free(body);
  return 0;
}
