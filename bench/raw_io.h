/* What the raw transport benchmarks (tcp_raw.c, tcp_streams.c) share: a
   clock, whole-buffer socket I/O and ferry's socket options. */
#ifndef FERRY_BENCH_RAW_IO_H
#define FERRY_BENCH_RAW_IO_H

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

static inline double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* all n bytes, sent (writing) or received; 0, or -1 */
static inline int io_all(int fd, void *buf, size_t n, int writing) {
  char *p = buf;
  while (n) {
    ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* ferry's socket option (transport/tcp.c) */
static inline void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

#endif
