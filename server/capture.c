/*
 * Device printf output is written by the driver to the process's stdout at
 * synchronisation points. A session child turns its fd 1 into a pipe so that
 * this output can travel back to the client's terminal in OUTPUT frames. A
 * thread drains the pipe continuously: if nobody read it, a kernel printing
 * more than a pipe's worth would block the driver, and with it the session.
 * Looking into the pipe on every reply costs a system call, so the session
 * only does that when device code ran since the device was last synchronised
 * (see capture_take); output the thread already holds is seen through a
 * counter, with no call at all.
 */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

/* output beyond this between two replies is dropped (with one log line) */
#define CAPTURE_LIMIT (64u << 20)

static int pipe_rd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *cap_buf;
static size_t cap_len, cap_cap;
static int dropped_logged;
/* cap_len as last published under the lock, readable without it */
static atomic_size_t cap_seen;

/* reads whatever the pipe holds right now; call with the lock held. Both the
   thread and capture_take read only under the lock, so bytes keep their order. */
static int drain_locked(void) {
  char tmp[65536];
  for (;;) {
    ssize_t r = read(pipe_rd, tmp, sizeof tmp);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno == EAGAIN ? 0 : -1;
    if (r == 0) return -1; /* every writer is gone */
    size_t n = (size_t)r;
    if (cap_len + n > CAPTURE_LIMIT) {
      if (!dropped_logged) ferry_log("device output beyond %u MiB between two calls dropped",
                                     CAPTURE_LIMIT >> 20);
      dropped_logged = 1;
      continue;
    }
    if (cap_len + n > cap_cap) {
      size_t c = cap_cap ? cap_cap : 4096;
      while (c < cap_len + n) c *= 2;
      char *p = realloc(cap_buf, c);
      if (!p) continue; /* lose the output rather than the session */
      cap_buf = p;
      cap_cap = c;
    }
    memcpy(cap_buf + cap_len, tmp, n);
    cap_len += n;
    atomic_store_explicit(&cap_seen, cap_len, memory_order_release);
  }
}

static void *drain_thread(void *arg) {
  (void)arg;
  for (;;) {
    struct pollfd pfd = {.fd = pipe_rd, .events = POLLIN};
    if (poll(&pfd, 1, -1) < 0) {
      if (errno == EINTR) continue;
      return NULL;
    }
    pthread_mutex_lock(&lock);
    int r = drain_locked();
    pthread_mutex_unlock(&lock);
    if (r) return NULL;
  }
}

int capture_start(void) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC)) return -1;
  fflush(stdout);
  if (dup2(fds[1], 1) < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  close(fds[1]);
  pipe_rd = fds[0];
  fcntl(pipe_rd, F_SETFL, fcntl(pipe_rd, F_GETFL) | O_NONBLOCK);
  pthread_t th;
  if (pthread_create(&th, NULL, drain_thread, NULL)) return -1;
  pthread_detach(th);
  return 0;
}

void capture_take(char **buf, size_t *len, int look) {
  *buf = NULL;
  *len = 0;
  if (pipe_rd < 0) return;
  /* a stdout buffer with nothing in it flushes without a system call; bytes
     it does hold go into the pipe now, so the pipe must be read */
  if (__fpending(stdout)) look = 1;
  fflush(stdout);
  if (!look && !atomic_load_explicit(&cap_seen, memory_order_acquire)) return;
  pthread_mutex_lock(&lock);
  if (look) drain_locked();
  if (cap_len) {
    *buf = cap_buf;
    *len = cap_len;
    cap_buf = NULL;
    cap_len = cap_cap = 0;
    atomic_store_explicit(&cap_seen, 0, memory_order_release);
  }
  dropped_logged = 0;
  pthread_mutex_unlock(&lock);
}
