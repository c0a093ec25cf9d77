/* The shm backend: two rings in a memfd between threads and between
   processes. Data arrives whole and in order through wrap-around and
   messages larger than the ring, in both directions at once; a closed peer
   hands over its last bytes and then reads as ECONNRESET; a killed peer is
   noticed within about the futex timeout, never a hang; a fork() child's
   detach leaves the parent's channel alone; a memfd that is not a channel
   is refused with a reason. ctest runs the whole suite twice: as is, and
   with FERRY_SHM_SPIN_US=0 so that every wait sleeps on the futex. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/shm.h"

#define SMALL_RING (64u << 10)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int send1(struct ferry_conn *c, const void *p, size_t n) {
  struct iovec iov = {(void *)p, n};
  return ferry_sendv(c, &iov, 1);
}

static struct ferry_conn *create(size_t ring, struct ferry_shm_peer *peer) {
  char err[256] = "";
  struct ferry_conn *c = ferry_shm_create(ring, peer, err, sizeof err);
  if (!c) fail_msg("create: %s", err);
  return c;
}

static struct ferry_conn *attach(struct ferry_shm_peer *peer) {
  char err[256] = "";
  struct ferry_conn *c = ferry_shm_attach(peer->mem_fd, peer->sock_fd, err, sizeof err);
  if (!c) fail_msg("attach: %s", err);
  peer->mem_fd = peer->sock_fd = -1; /* attach owns them now */
  return c;
}

/* ---- ping-pong between two threads ---- */

/* echoes each message (a length byte, then that many bytes) with every byte + 1 */
static void *echo_plus_one(void *arg) {
  struct ferry_conn *c = arg;
  unsigned char len, buf[256];
  for (;;) {
    if (ferry_recv_all(c, &len, 1)) return NULL;
    if (len == 0) return c; /* the end */
    if (ferry_recv_all(c, buf, len)) return NULL;
    for (unsigned i = 0; i < len; i++) buf[i]++;
    struct iovec iov[2] = {{&len, 1}, {buf, len}};
    if (ferry_sendv(c, iov, 2)) return NULL;
  }
}

static void ping_pong(struct ferry_conn *c, int rounds) {
  unsigned char out[256], in[256];
  for (int r = 0; r < rounds; r++) {
    unsigned char len = (unsigned char)(1 + r % 255);
    for (unsigned i = 0; i < len; i++) out[i] = (unsigned char)(r * 7 + i);
    struct iovec iov[2] = {{&len, 1}, {out, len}};
    assert_int_equal(ferry_sendv(c, iov, 2), 0);
    unsigned char got;
    assert_int_equal(ferry_recv_all(c, &got, 1), 0);
    assert_int_equal(got, len);
    assert_int_equal(ferry_recv_all(c, in, len), 0);
    for (unsigned i = 0; i < len; i++) assert_int_equal(in[i], (unsigned char)(out[i] + 1));
  }
}

static void test_ping_pong_threads(void **state) {
  (void)state;
  struct ferry_shm_peer peer;
  struct ferry_conn *a = create(SMALL_RING, &peer);
  assert_int_equal(ferry_shm_peer_pid(a), 0); /* nobody attached yet */
  assert_string_equal(a->peer, "shm");
  struct ferry_conn *b = attach(&peer);
  assert_int_equal(ferry_shm_peer_pid(a), getpid());
  assert_int_equal(ferry_shm_peer_pid(b), getpid());
  char want[64];
  snprintf(want, sizeof want, "shm (pid %d)", (int)getpid());
  assert_string_equal(b->peer, want);
  pthread_t th;
  /* a echoes to b's pings, then b echoes to a's */
  assert_int_equal(pthread_create(&th, NULL, echo_plus_one, a), 0);
  ping_pong(b, 3000);
  unsigned char end = 0;
  assert_int_equal(send1(b, &end, 1), 0);
  void *ret;
  pthread_join(th, &ret);
  assert_ptr_equal(ret, a);
  assert_int_equal(pthread_create(&th, NULL, echo_plus_one, b), 0);
  ping_pong(a, 3000);
  assert_int_equal(send1(a, &end, 1), 0);
  pthread_join(th, &ret);
  assert_ptr_equal(ret, b);
  a->ops->close(a);
  b->ops->close(b);
}

/* ---- across fork() ---- */

static void test_fork_echo(void **state) {
  (void)state;
  struct ferry_shm_peer peer;
  struct ferry_conn *a = create(SMALL_RING, &peer);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* the creator's side is the parent's: a copy of its socket end kept
       here would hide the parent's death from this child */
    a->ops->detach(a);
    char err[256];
    struct ferry_conn *b = ferry_shm_attach(peer.mem_fd, peer.sock_fd, err, sizeof err);
    if (!b) _exit(2);
    if (!echo_plus_one(b)) _exit(3);
    b->ops->close(b);
    _exit(0);
  }
  ferry_shm_peer_close(&peer); /* as a spawner does: the child's copies are the ones */
  assert_int_equal(peer.mem_fd, -1);
  ping_pong(a, 2000);
  assert_int_equal(ferry_shm_peer_pid(a), pid);
  unsigned char end = 0;
  assert_int_equal(send1(a, &end, 1), 0);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  a->ops->close(a);
}

/* ---- large transfers, both directions at once ---- */

/* byte k of direction d's stream: a run of it cannot pass for another offset */
static unsigned char pattern(int d, uint64_t k) {
  uint64_t x = (k + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)d * 0x632be59bd9b4e019ull;
  return (unsigned char)(x >> 56);
}

static uint32_t rnd(uint32_t *s) { /* xorshift: both ends replay the same sizes */
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

#define DUPLEX_MESSAGES 120

struct duplex {
  struct ferry_conn *c;
  int dir;     /* which stream this thread sends or receives */
  long errors; /* bytes that differ, or -1 on a failed call */
};

static void *duplex_sender(void *arg) {
  struct duplex *d = arg;
  uint32_t seed = 0x1234567u + (uint32_t)d->dir;
  size_t max = 3 * SMALL_RING;
  unsigned char *buf = malloc(max);
  uint64_t pos = 0;
  for (int m = 0; m < DUPLEX_MESSAGES; m++) {
    uint32_t len = 1 + rnd(&seed) % (uint32_t)max;
    for (uint32_t i = 0; i < len; i++) buf[i] = pattern(d->dir, pos + i);
    pos += len;
    /* a length word, then the payload cut at random points, with empty pieces */
    struct iovec iov[8];
    int n = 0;
    iov[n++] = (struct iovec){&len, sizeof len};
    iov[n++] = (struct iovec){buf, 0};
    uint32_t at = 0;
    while (n < 7) {
      uint32_t k = at < len ? rnd(&seed) % (len - at + 1) : 0;
      iov[n++] = (struct iovec){buf + at, k};
      at += k;
    }
    iov[n++] = (struct iovec){buf + at, len - at};
    if (ferry_sendv(d->c, iov, n)) {
      d->errors = -1;
      break;
    }
  }
  free(buf);
  return NULL;
}

static void *duplex_receiver(void *arg) {
  struct duplex *d = arg;
  uint32_t seed = 0x1234567u + (uint32_t)d->dir, pieces = 99u + (uint32_t)d->dir;
  size_t max = 3 * SMALL_RING;
  unsigned char *buf = malloc(max);
  uint64_t pos = 0;
  for (int m = 0; m < DUPLEX_MESSAGES && d->errors >= 0; m++) {
    uint32_t want = 1 + rnd(&seed) % (uint32_t)max, len = 0;
    /* the sender's cut points come from the same seed: replay them */
    uint32_t at = 0;
    for (int i = 0; i < 5; i++) at += at < want ? rnd(&seed) % (want - at + 1) : 0;
    if (ferry_recv_all(d->c, &len, sizeof len) || len != want) {
      d->errors = -1;
      break;
    }
    /* read it in random pieces, half with recv_all and half with recv_some */
    uint32_t got = 0;
    while (got < len) {
      uint32_t k = 1 + rnd(&pieces) % (len - got);
      if (rnd(&pieces) & 1) {
        if (ferry_recv_all(d->c, buf + got, k)) d->errors = -1;
      } else {
        long r = d->c->ops->recv_some(d->c, buf + got, 1, k);
        if (r < 1 || r > (long)k) d->errors = -1;
        k = r > 0 ? (uint32_t)r : 0;
      }
      if (d->errors < 0) break;
      got += k;
    }
    if (d->errors < 0) break;
    for (uint32_t i = 0; i < got; i++) d->errors += buf[i] != pattern(d->dir, pos + i);
    pos += len;
  }
  free(buf);
  return NULL;
}

static void test_full_duplex_wrap(void **state) {
  (void)state;
  struct ferry_shm_peer peer;
  struct ferry_conn *a = create(SMALL_RING, &peer), *b = attach(&peer);
  struct duplex w[4] = {{a, 0, 0}, {b, 0, 0}, {b, 1, 0}, {a, 1, 0}};
  pthread_t th[4];
  assert_int_equal(pthread_create(&th[0], NULL, duplex_sender, &w[0]), 0);
  assert_int_equal(pthread_create(&th[1], NULL, duplex_receiver, &w[1]), 0);
  assert_int_equal(pthread_create(&th[2], NULL, duplex_sender, &w[2]), 0);
  assert_int_equal(pthread_create(&th[3], NULL, duplex_receiver, &w[3]), 0);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) assert_int_equal(w[i].errors, 0);
  a->ops->close(a);
  b->ops->close(b);
}

/* ---- recv_some ---- */

struct late_send {
  struct ferry_conn *c;
  const char *text;
  int delay_ms;
};

static void *send_late(void *arg) {
  struct late_send *l = arg;
  usleep((useconds_t)l->delay_ms * 1000);
  send1(l->c, l->text, strlen(l->text));
  return NULL;
}

struct big_send {
  struct ferry_conn *c;
  const char *buf;
  size_t n;
  int rc;
};

static void *send_big(void *arg) {
  struct big_send *b = arg;
  b->rc = send1(b->c, b->buf, b->n);
  return NULL;
}

static void test_recv_some_bounds(void **state) {
  (void)state;
  struct ferry_shm_peer peer;
  struct ferry_conn *a = create(4096, &peer), *b = attach(&peer);
  char buf[4096 + 64];
  /* push the ring's position near its end, so the reads below wrap */
  static char fill[4090];
  assert_int_equal(send1(a, fill, sizeof fill), 0);
  assert_int_equal(ferry_recv_all(b, buf, sizeof fill), 0);

  assert_int_equal(send1(a, "0123456789", 10), 0);
  assert_int_equal(b->ops->recv_some(b, buf, 4, 6), 6); /* capped, though 10 are there */
  assert_memory_equal(buf, "012345", 6);
  assert_int_equal(b->ops->recv_some(b, buf, 1, 100), 4); /* what is there, no more */
  assert_memory_equal(buf, "6789", 4);
  assert_int_equal(b->ops->recv_some(b, buf, 0, 0), 0);

  /* min 5 with 3 there: waits for the rest, then takes all of it */
  assert_int_equal(send1(a, "abc", 3), 0);
  struct late_send l = {a, "defg", 50};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, send_late, &l), 0);
  assert_int_equal(b->ops->recv_some(b, buf, 5, 100), 7);
  pthread_join(th, NULL);
  assert_memory_equal(buf, "abcdefg", 7);
  /* min 0 still waits for one byte, as tcp's does */
  l.text = "z";
  assert_int_equal(pthread_create(&th, NULL, send_late, &l), 0);
  assert_int_equal(b->ops->recv_some(b, buf, 0, 100), 1);
  pthread_join(th, NULL);
  assert_int_equal(buf[0], 'z');
  /* three rings' worth through recv_some with a large cap: never more than the ring holds */
  static char big[3 * 4096 + 5];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (char)(i * 31 + 7);
  char *in = malloc(sizeof big);
  struct big_send bs = {a, big, sizeof big, -1};
  assert_int_equal(pthread_create(&th, NULL, send_big, &bs), 0);
  size_t got = 0;
  while (got < sizeof big) {
    long r = b->ops->recv_some(b, in + got, 1, sizeof big - got);
    assert_true(r >= 1 && r <= 4096);
    got += (size_t)r;
  }
  pthread_join(th, NULL);
  assert_int_equal(bs.rc, 0);
  assert_memory_equal(in, big, sizeof big);
  free(in);
  a->ops->close(a);
  b->ops->close(b);
}

/* ---- the peer goes away ---- */

static void *recv_expect_reset(void *arg) {
  struct ferry_conn *c = arg;
  char buf[8];
  errno = 0;
  long r = ferry_recv_all(c, buf, sizeof buf);
  return (void *)(intptr_t)(r == -1 && errno == ECONNRESET);
}

static void test_peer_close(void **state) {
  (void)state;
  struct ferry_shm_peer peer;
  struct ferry_conn *a = create(SMALL_RING, &peer), *b = attach(&peer);
  /* the last words before a close are delivered, then ECONNRESET */
  assert_int_equal(send1(b, "GOODBYE", 7), 0);
  b->ops->close(b);
  char buf[16];
  assert_int_equal(ferry_recv_all(a, buf, 3), 0);
  assert_memory_equal(buf, "GOO", 3);
  errno = 0;
  assert_int_equal(ferry_recv_all(a, buf, 8), -1); /* 4 are left, 8 wanted */
  assert_int_equal(errno, ECONNRESET);
  errno = 0;
  assert_int_equal(a->ops->recv_some(a, buf, 1, 16), -1);
  assert_int_equal(errno, ECONNRESET);
  errno = 0;
  assert_int_equal(send1(a, "x", 1), -1);
  assert_int_equal(errno, ECONNRESET);
  a->ops->close(a);

  /* a reader already asleep is woken by the close; a copy of b's socket
     end stays open (as in a fork() child), so only the close flag tells */
  a = create(SMALL_RING, &peer);
  int keep = dup(peer.sock_fd);
  b = attach(&peer);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, recv_expect_reset, a), 0);
  usleep(200 * 1000);
  double t0 = now_s();
  b->ops->close(b);
  void *ok;
  pthread_join(th, &ok);
  assert_true(ok);
  assert_true(now_s() - t0 < 3.0);
  close(keep);
  a->ops->close(a);
}

/* a forked child attaches, writes `hello`, and SIGKILLs itself after 200 ms */
static pid_t doomed_child(struct ferry_conn *a, struct ferry_shm_peer *peer, const char *hello) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    a->ops->detach(a);
    char err[256];
    struct ferry_conn *b = ferry_shm_attach(peer->mem_fd, peer->sock_fd, err, sizeof err);
    if (!b) _exit(2);
    send1(b, hello, strlen(hello));
    usleep(200 * 1000);
    raise(SIGKILL);
  }
  ferry_shm_peer_close(peer);
  return pid;
}

static void reap_killed(pid_t pid) {
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGKILL);
}

static void test_killed_peer_recv(void **state) {
  (void)state;
  struct ferry_shm_peer peer;
  struct ferry_conn *a = create(SMALL_RING, &peer);
  pid_t pid = doomed_child(a, &peer, "last");
  char buf[16];
  double t0 = now_s();
  errno = 0;
  /* its 4 bytes arrive, the other 4 never will */
  assert_int_equal(ferry_recv_all(a, buf, 8), -1);
  assert_int_equal(errno, ECONNRESET);
  assert_true(now_s() - t0 < 3.0);
  reap_killed(pid);
  /* the death is remembered: no more waiting */
  t0 = now_s();
  errno = 0;
  assert_int_equal(ferry_recv_all(a, buf, 1), -1);
  assert_int_equal(errno, ECONNRESET);
  assert_int_equal(send1(a, "x", 1), -1);
  assert_int_equal(errno, ECONNRESET);
  assert_true(now_s() - t0 < 0.5);
  a->ops->close(a);
}

static void test_killed_peer_send(void **state) {
  (void)state;
  struct ferry_shm_peer peer;
  struct ferry_conn *a = create(SMALL_RING, &peer);
  pid_t pid = doomed_child(a, &peer, "r");
  char r;
  assert_int_equal(ferry_recv_all(a, &r, 1), 0); /* it is attached */
  size_t n = 3 * SMALL_RING; /* the child never reads: the ring fills */
  char *big = calloc(1, n);
  double t0 = now_s();
  errno = 0;
  assert_int_equal(send1(a, big, n), -1);
  assert_int_equal(errno, ECONNRESET);
  assert_true(now_s() - t0 < 3.0);
  reap_killed(pid);
  free(big);
  a->ops->close(a);
}

/* ---- attach refuses what is not a channel ---- */

static int fd_is_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

static void expect_refused(int mem_fd, const char *words) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  char err[256] = "";
  assert_null(ferry_shm_attach(mem_fd, sv[0], err, sizeof err));
  if (!strstr(err, words)) fail_msg("wanted '%s' in: %s", words, err);
  assert_false(fd_is_open(mem_fd)); /* attach owns its fds, even when it refuses */
  assert_false(fd_is_open(sv[0]));
  close(sv[1]);
}

static int memfd_with(const void *bytes, size_t n, size_t size) {
  int fd = memfd_create("test", MFD_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)size), 0);
  if (n) assert_int_equal(pwrite(fd, bytes, n, 0), (ssize_t)n);
  return fd;
}

static void test_attach_not_a_channel(void **state) {
  (void)state;
  expect_refused(memfd_with(NULL, 0, 1u << 20), "is not a ferry shm channel (no ferry header)");
  expect_refused(memfd_with(NULL, 0, 0), "is not a ferry shm channel (0 bytes");
  /* a real header in a memfd of the wrong size */
  struct ferry_shm_peer peer;
  struct ferry_conn *a = create(SMALL_RING, &peer);
  static char hdr[4096];
  assert_int_equal(pread(peer.mem_fd, hdr, sizeof hdr, 0), (ssize_t)sizeof hdr);
  expect_refused(memfd_with(hdr, sizeof hdr, 4096 + SMALL_RING), "is damaged");
  /* another version (the 32-bit word after the 8-byte magic) */
  char other[4096];
  memcpy(other, hdr, sizeof other);
  other[8] ^= 0x40;
  expect_refused(memfd_with(other, sizeof other, 4096 + 2 * SMALL_RING), "different ferry builds");
  /* the real channel attaches once, not twice */
  int mem2 = dup(peer.mem_fd);
  struct ferry_conn *b = attach(&peer);
  char want[64];
  snprintf(want, sizeof want, "already attached by pid %d", (int)getpid());
  expect_refused(mem2, want);
  a->ops->close(a);
  b->ops->close(b);
}

/* ---- detach in a fork() child ---- */

static void test_detach_in_child(void **state) {
  (void)state;
  struct ferry_shm_peer peer;
  struct ferry_conn *a = create(SMALL_RING, &peer), *b = attach(&peer);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, echo_plus_one, b), 0);
  ping_pong(a, 10);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* the child must not disturb the parent's channel: a close here would */
    a->ops->detach(a);
    b->ops->detach(b);
    _exit(0);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* long enough for b's reader to time out of its futex and look at the
     socket: a shutdown() in the child would show here as a hang-up */
  usleep(300 * 1000);
  ping_pong(a, 500);
  unsigned char end = 0;
  assert_int_equal(send1(a, &end, 1), 0);
  void *ret;
  pthread_join(th, &ret);
  assert_ptr_equal(ret, b);
  a->ops->close(a);
  b->ops->close(b);
}

/* ---- odds and ends ---- */

static void test_spin_setting(void **state) {
  (void)state;
  const char *e = getenv("FERRY_SHM_SPIN_US");
  unsigned want = e ? (unsigned)strtoul(e, NULL, 10) : 50;
  assert_int_equal(ferry_shm_spin_us(), want);
}

static void test_no_shm_url(void **state) {
  (void)state;
  char err[256] = "";
  assert_null(ferry_transport_find("shm", err, sizeof err));
  assert_string_equal(err, "shm:// channels are made by ferry itself for ferry-mhelper; they "
                           "cannot be named in a URL");
}

static void test_ring_too_large(void **state) {
  (void)state;
  struct ferry_shm_peer peer;
  char err[256] = "";
  assert_null(ferry_shm_create((size_t)1 << 31, &peer, err, sizeof err));
  assert_non_null(strstr(err, "cannot create a shm channel"));
  assert_int_equal(peer.mem_fd, -1);
  assert_int_equal(peer.sock_fd, -1);
}

/* a test that hangs dies by SIGALRM instead of waiting for ctest's timeout */
static int watchdog_on(void **state) {
  (void)state;
  alarm(30);
  return 0;
}
static int watchdog_off(void **state) {
  (void)state;
  alarm(0);
  return 0;
}
#define T(f) cmocka_unit_test_setup_teardown(f, watchdog_on, watchdog_off)

int main(void) {
  /* make an accidental SIGPIPE fatal and visible rather than ignored */
  signal(SIGPIPE, SIG_DFL);
  const struct CMUnitTest tests[] = {
      T(test_spin_setting),
      T(test_ping_pong_threads),
      T(test_fork_echo),
      T(test_full_duplex_wrap),
      T(test_recv_some_bounds),
      T(test_peer_close),
      T(test_killed_peer_recv),
      T(test_killed_peer_send),
      T(test_attach_not_a_channel),
      T(test_detach_in_child),
      T(test_no_shm_url),
      T(test_ring_too_large),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
