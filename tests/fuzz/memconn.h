/*
 * A ferry_conn over two memory buffers, for the fuzz harnesses: receives
 * come from the fuzzer's bytes, sends land in a buffer (the first
 * MEMCONN_KEEP bytes kept, the rest only counted). recv_some hands back
 * anything from its minimum to its cap, chosen by a generator seeded from
 * the input, so the buffered reader meets frames split at every point.
 * Plain C11: builds with gcc too, no clang-only headers.
 */
#ifndef FERRY_FUZZ_MEMCONN_H
#define FERRY_FUZZ_MEMCONN_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "transport/transport.h"

#define MEMCONN_KEEP (1u << 20)

struct memconn {
  struct ferry_conn c;
  const uint8_t *in;
  size_t in_len, in_pos;
  uint64_t rng;
  uint8_t *out; /* MEMCONN_KEEP bytes, owned by the caller */
  size_t out_len;   /* bytes kept */
  uint64_t out_all; /* bytes sent */
  int closed;
};

static inline uint64_t memconn_next(struct memconn *m) { /* splitmix64 */
  uint64_t z = (m->rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* the peer is gone once its bytes run out */
static inline int memconn_take(struct memconn *m, void *buf, size_t n) {
  if (m->in_len - m->in_pos < n) {
    m->in_pos = m->in_len;
    errno = ECONNRESET;
    return -1;
  }
  if (n) memcpy(buf, m->in + m->in_pos, n);
  m->in_pos += n;
  return 0;
}

static inline int memconn_recv_all(struct ferry_conn *c, void *buf, size_t n) {
  return memconn_take((struct memconn *)c, buf, n);
}

static inline long memconn_recv_some(struct ferry_conn *c, void *buf, size_t min, size_t cap) {
  struct memconn *m = (struct memconn *)c;
  size_t left = m->in_len - m->in_pos;
  if (left < min) return memconn_take(m, buf, min);
  size_t most = cap < left ? cap : left;
  size_t n = min + (size_t)(memconn_next(m) % (most - min + 1));
  return memconn_take(m, buf, n) ? -1 : (long)n;
}

static inline int memconn_sendv(struct ferry_conn *c, const struct iovec *iov, int iovcnt) {
  struct memconn *m = (struct memconn *)c;
  if (m->closed) {
    errno = EPIPE;
    return -1;
  }
  for (int i = 0; i < iovcnt; i++) {
    size_t n = iov[i].iov_len, room = MEMCONN_KEEP - m->out_len;
    size_t k = n < room ? n : room;
    if (k) memcpy(m->out + m->out_len, iov[i].iov_base, k);
    m->out_len += k;
    m->out_all += n;
  }
  return 0;
}

static inline void memconn_close(struct ferry_conn *c) { ((struct memconn *)c)->closed = 1; }

static const struct ferry_conn_ops memconn_ops = {
    .sendv = memconn_sendv,
    .recv_all = memconn_recv_all,
    .recv_some = memconn_recv_some,
    .detach = memconn_close,
    .close = memconn_close,
};

static inline uint64_t memconn_hash(const uint8_t *p, size_t n) { /* FNV-1a */
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static inline void memconn_init(struct memconn *m, const uint8_t *in, size_t len, uint8_t *out) {
  memset(m, 0, sizeof *m);
  m->c.ops = &memconn_ops;
  strcpy(m->c.peer, "fuzz");
  m->in = in;
  m->in_len = len;
  m->rng = memconn_hash(in, len);
  m->out = out;
}

#endif
