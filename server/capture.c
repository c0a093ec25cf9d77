/*
 * Device output is written by the driver at synchronisation points: printf
 * to the process's stdout, a failed device assert's message to its stderr.
 * A session child turns its fd 1 and fd 2 into pipes so that this output
 * can travel back to the client's terminal in OUTPUT frames, each to the
 * stream it was written to; ferry's own log lines keep the session's
 * original stderr (ferry_log_set_fd). A thread drains the pipes
 * continuously: if nobody read them, a kernel printing more than a pipe's
 * worth would block the driver, and with it the session. Looking into the
 * pipes on every reply costs system calls, so the session only does that
 * when device code ran since the device was last synchronised (see
 * capture_take); output the thread already holds is seen through a
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

struct stream {
  int fd;      /* what it captures: 1 or 2 */
  int pipe_rd; /* -1 until started */
  char *buf;
  size_t len, cap;
  int dropped_logged;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct stream streams[CAPTURE_STREAMS] = {{.fd = 1, .pipe_rd = -1},
                                                 {.fd = 2, .pipe_rd = -1}};
/* bytes held in all streams as last published under the lock, readable without it */
static atomic_size_t held;

static size_t held_locked(void) {
  size_t n = 0;
  for (int i = 0; i < CAPTURE_STREAMS; i++) n += streams[i].len;
  return n;
}

/* reads whatever st's pipe holds right now; call with the lock held. Both
   the thread and capture_take read only under the lock, so bytes keep their
   order. 0, or -1 when every writer is gone. */
static int drain_locked(struct stream *st) {
  char tmp[65536];
  for (;;) {
    ssize_t r = read(st->pipe_rd, tmp, sizeof tmp);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno == EAGAIN ? 0 : -1;
    if (r == 0) return -1;
    size_t n = (size_t)r;
    if (st->len + n > CAPTURE_LIMIT) {
      if (!st->dropped_logged) ferry_log("device output beyond %u MiB between two calls dropped",
                                         CAPTURE_LIMIT >> 20);
      st->dropped_logged = 1;
      continue;
    }
    if (st->len + n > st->cap) {
      size_t c = st->cap ? st->cap : 4096;
      while (c < st->len + n) c *= 2;
      char *p = realloc(st->buf, c);
      if (!p) continue; /* lose the output rather than the session */
      st->buf = p;
      st->cap = c;
    }
    memcpy(st->buf + st->len, tmp, n);
    st->len += n;
    atomic_store_explicit(&held, held_locked(), memory_order_release);
  }
}

static void *drain_thread(void *arg) {
  (void)arg;
  struct pollfd pfd[CAPTURE_STREAMS];
  for (int i = 0; i < CAPTURE_STREAMS; i++) pfd[i] = (struct pollfd){.fd = streams[i].pipe_rd, .events = POLLIN};
  for (;;) {
    if (poll(pfd, CAPTURE_STREAMS, -1) < 0) {
      if (errno == EINTR) continue;
      return NULL;
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < CAPTURE_STREAMS; i++) {
      if (!pfd[i].revents) continue;
      if (drain_locked(&streams[i])) pfd[i].fd = -1; /* closed: poll ignores it from now on */
    }
    pthread_mutex_unlock(&lock);
    if (pfd[0].fd < 0 && pfd[1].fd < 0) return NULL;
  }
}

/* fd becomes the write end of a new pipe, whose read end st keeps */
static int redirect(struct stream *st) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC)) return -1;
  if (dup2(fds[1], st->fd) < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  close(fds[1]);
  st->pipe_rd = fds[0];
  return fcntl(st->pipe_rd, F_SETFL, fcntl(st->pipe_rd, F_GETFL) | O_NONBLOCK);
}

int capture_start(void) {
  /* ferry's own lines stay in the server's log */
  int log_fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (log_fd < 0) return -1;
  ferry_log_set_fd(log_fd);
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < CAPTURE_STREAMS; i++)
    if (redirect(&streams[i])) return -1;
  pthread_t th;
  if (pthread_create(&th, NULL, drain_thread, NULL)) return -1;
  pthread_detach(th);
  return 0;
}

void capture_take(struct capture_out out[CAPTURE_STREAMS], int look) {
  for (int i = 0; i < CAPTURE_STREAMS; i++) out[i] = (struct capture_out){NULL, 0, streams[i].fd};
  if (streams[0].pipe_rd < 0) return;
  /* a stdout buffer with nothing in it flushes without a system call; bytes
     it does hold go into the pipe now, so the pipe must be read */
  if (__fpending(stdout) || __fpending(stderr)) look = 1;
  fflush(stdout);
  fflush(stderr);
  if (!look && !atomic_load_explicit(&held, memory_order_acquire)) return;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < CAPTURE_STREAMS; i++) {
    struct stream *st = &streams[i];
    if (look) drain_locked(st);
    if (st->len) {
      out[i].buf = st->buf;
      out[i].len = st->len;
      st->buf = NULL;
      st->len = st->cap = 0;
    }
    st->dropped_logged = 0;
  }
  atomic_store_explicit(&held, 0, memory_order_release);
  pthread_mutex_unlock(&lock);
}
