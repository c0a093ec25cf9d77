/* Buffered reads; see reader.h. */
#include "reader.h"

#include <errno.h>
#include <string.h>

int ferry_read(struct ferry_reader *r, void *dst, size_t n) {
  /* an empty body is read into a buffer not yet allocated (dst NULL), and
     memcpy(NULL, .., 0) is undefined */
  if (!n) return 0;
  char *out = dst;
  size_t have = r->len - r->pos;
  size_t take = have < n ? have : n;
  memcpy(out, r->buf + r->pos, take);
  r->pos += take;
  out += take;
  n -= take;
  if (!n) return 0;
  r->pos = r->len = 0;
  /* large remainders bypass the buffer: no extra copy of bulk data */
  if (n >= FERRY_READER_SIZE / 2) return ferry_recv_all(r->conn, out, n);
  size_t cap = n > FERRY_READER_FILL ? n : FERRY_READER_FILL;
  long got = r->conn->ops->recv_some(r->conn, r->buf, n, cap);
  if (got < 0) return -1;
  if ((size_t)got < n || (size_t)got > cap) { /* a transport broke its contract */
    errno = EIO;
    return -1;
  }
  memcpy(out, r->buf, n);
  r->pos = n;
  r->len = (size_t)got;
  return 0;
}
