/*
 * A buffered reader over any transport connection. A small reply (header,
 * body, a few bulk bytes, trailer) then costs one receive call instead of
 * four; large payloads still go straight into the caller's buffer.
 */
#ifndef FERRY_READER_H
#define FERRY_READER_H

#include <stddef.h>

#include "transport.h"

#define FERRY_READER_SIZE (64u * 1024u)
/* a refill asks for at most this much beyond what is needed: enough for a
   whole small frame, while the bulk of a medium copy stays in the socket
   for the caller to receive straight into its own buffer */
#define FERRY_READER_FILL (8u * 1024u)

struct ferry_reader {
  struct ferry_conn *conn;
  size_t pos, len;
  char buf[FERRY_READER_SIZE];
};

static inline void ferry_reader_init(struct ferry_reader *r, struct ferry_conn *c) {
  r->conn = c;
  r->pos = r->len = 0;
}
/* exactly n bytes into dst; 0, or -1 with errno set */
int ferry_read(struct ferry_reader *r, void *dst, size_t n);
/* bytes already buffered (a caller may wait for more only if this is 0) */
static inline size_t ferry_reader_buffered(const struct ferry_reader *r) { return r->len - r->pos; }

#endif
