/* The ib:// backend. With an RDMA device (RXE_ADDR set, as in the
   soft-RoCE VM of tests/ib/, or a real adapter): small and large streams
   both ways, uneven iovecs, interleaved sizes, recv_some bounds, a closed
   peer read as ECONNRESET, the server's fork-after-accept, and the bounded
   spin of a waiting thread (it lets a sender in, and an idle wait sleeps).
   Without one:
   those are skipped, and ib:// must fail at once, naming the missing device
   and pointing at tcp://. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/ib_api.h"
#include "transport/ib_conn.h" /* one white-box test breaks an rkey */
#include "transport/transport.h"

/* an RDMA device is there (the VM exports RXE_ADDR; the backend's own check otherwise) */
static int have_device(void) {
  char err[256];
  if (getenv("RXE_ADDR") && *getenv("RXE_ADDR")) return 1;
  return ferry_ib_have_device(err, sizeof err) == 0;
}

static const char *addr(void) {
  const char *a = getenv("RXE_ADDR");
  return a && *a ? a : "127.0.0.1";
}

static void need_device(void) {
  if (!have_device()) {
    printf("[ SKIPPED  ] no RDMA device here (no /sys/class/infiniband entry, RXE_ADDR unset); "
           "tests/ib runs this test inside a soft-RoCE VM\n");
    skip();
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- a connected pair in one process: the client connects in a thread,
   because its connect waits for the server side's first use ---- */

struct pair {
  const char *scheme;
  struct ferry_listener *l;
  struct ferry_conn *client, *server;
  struct ferry_url url;
  char err[320];
};

static void *connect_thread(void *arg) {
  struct pair *p = arg;
  p->client = ferry_transport_find(p->scheme, p->err, sizeof p->err)
                  ->connect(&p->url, 20000, p->err, sizeof p->err);
  if (p->client) {
    uint32_t hi = 0x6869;
    struct iovec iov = {&hi, sizeof hi};
    if (ferry_sendv(p->client, &iov, 1)) {
      p->client->ops->close(p->client);
      p->client = NULL;
    }
  }
  return NULL;
}

static struct ferry_listener *listen_any(const char *scheme, char *err, size_t errlen) {
  char text[300];
  snprintf(text, sizeof text, "%s://%s:0", scheme, addr());
  struct ferry_url u;
  assert_int_equal(ferry_url_parse(text, &u, err, errlen), 0);
  const struct ferry_transport *t = ferry_transport_find(scheme, err, errlen);
  if (!t) fail_msg("%s", err);
  struct ferry_listener *l = t->listen(&u, err, errlen);
  if (!l) fail_msg("listen: %s", err);
  return l;
}

static void open_pair_on(struct pair *p, const char *scheme) {
  memset(p, 0, sizeof *p);
  p->scheme = scheme;
  p->l = listen_any(scheme, p->err, sizeof p->err);
  assert_int_equal(ferry_url_parse(p->l->name, &p->url, p->err, sizeof p->err), 0);
  assert_string_equal(p->url.scheme, scheme);
  assert_true(p->url.port > 0); /* the name reports the port picked */
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, connect_thread, p), 0);
  p->server = p->l->ops->accept(p->l);
  assert_non_null(p->server);
  uint32_t hi = 0;
  int rc = ferry_recv_all(p->server, &hi, sizeof hi); /* sets RDMA up, here */
  pthread_join(th, NULL);
  if (!p->client) fail_msg("connect: %s", p->err);
  assert_int_equal(rc, 0);
  assert_int_equal(hi, 0x6869);
}

static void open_pair(struct pair *p) { open_pair_on(p, "ib"); }

static void close_pair(struct pair *p) {
  if (p->client) p->client->ops->close(p->client);
  if (p->server) p->server->ops->close(p->server);
  p->l->ops->close(p->l);
}

static void fill(unsigned char *b, size_t n, unsigned seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    b[i] = (unsigned char)(x >> 16);
  }
}

struct sender {
  struct ferry_conn *c;
  const unsigned char *buf;
  size_t n;
  int rc;
};

/* header + unevenly split pieces, as the shim sends a frame with bulk */
static void *send_thread(void *arg) {
  struct sender *s = arg;
  uint32_t hdr = (uint32_t)s->n;
  struct iovec iov[6] = {
      {&hdr, sizeof hdr},
      {(void *)s->buf, 1},
      {(void *)(s->buf + 1), 0},
      {(void *)(s->buf + 1), s->n / 3},
      {(void *)(s->buf + 1 + s->n / 3), 4095},
      {(void *)(s->buf + 1 + s->n / 3 + 4095), s->n - 1 - s->n / 3 - 4095},
  };
  s->rc = ferry_sendv(s->c, iov, 6);
  return NULL;
}

static size_t big_size(void) {
  const char *mb = getenv("FERRY_IB_TEST_MB");
  size_t m = mb && atoi(mb) > 0 ? (size_t)atoi(mb) : 64;
  return m << 20;
}

/* n bytes from `from` to `to`, sent by a thread while this one receives */
static void transfer(struct ferry_conn *from, struct ferry_conn *to, size_t n, unsigned seed,
                     const char *what) {
  unsigned char *out = malloc(n), *in = malloc(n);
  assert_non_null(out);
  assert_non_null(in);
  fill(out, n, seed);
  memset(in, 0, n);
  struct sender s = {from, out, n, -1};
  pthread_t th;
  double t0 = now_s();
  assert_int_equal(pthread_create(&th, NULL, send_thread, &s), 0);
  uint32_t hdr = 0;
  assert_int_equal(ferry_recv_all(to, &hdr, sizeof hdr), 0);
  assert_int_equal(hdr, (uint32_t)n);
  assert_int_equal(ferry_recv_all(to, in, n), 0);
  pthread_join(th, NULL);
  double dt = now_s() - t0;
  assert_int_equal(s.rc, 0);
  assert_memory_equal(in, out, n);
  if (n >= (1u << 20))
    printf("[ INFO     ] %s: %zu MiB in %.3f s = %.1f MiB/s\n", what, n >> 20, dt,
           (double)(n >> 20) / dt);
  free(out);
  free(in);
}

static void round_trips(struct pair *p);

static void test_small_both_ways(void **state) {
  (void)state;
  need_device();
  struct pair p;
  open_pair(&p);
  for (unsigned k = 0; k < 200; k++) {
    unsigned char a[100], b[100];
    fill(a, sizeof a, k);
    struct iovec iov[3] = {{a, 32}, {a + 32, 0}, {a + 32, 68}};
    struct ferry_conn *from = k & 1 ? p.server : p.client, *to = k & 1 ? p.client : p.server;
    assert_int_equal(ferry_sendv(from, iov, 3), 0);
    assert_int_equal(ferry_recv_all(to, b, sizeof b), 0);
    assert_memory_equal(a, b, sizeof a);
  }
  round_trips(&p);
  close_pair(&p);
}

/* the latency a remote CUDA call pays */
static void round_trips(struct pair *p) {
  double t0 = now_s();
  for (int k = 0; k < 1000; k++) {
    char q[64] = {0}, r[64];
    struct iovec iov = {q, sizeof q};
    assert_int_equal(ferry_sendv(p->client, &iov, 1), 0);
    assert_int_equal(ferry_recv_all(p->server, r, sizeof r), 0);
    iov.iov_base = r;
    assert_int_equal(ferry_sendv(p->server, &iov, 1), 0);
    assert_int_equal(ferry_recv_all(p->client, q, sizeof q), 0);
  }
  printf("[ INFO     ] %s: 64-byte round trip: %.1f us\n", p->scheme, (now_s() - t0) / 1000 * 1e6);
}

/* the same measurements over tcp to the same address, for comparison */
static void test_tcp_reference(void **state) {
  (void)state;
  need_device();
  struct pair p;
  open_pair_on(&p, "tcp");
  round_trips(&p);
  transfer(p.client, p.server, big_size() + 12345, 3, "tcp client -> server");
  close_pair(&p);
}

static void test_large_both_ways(void **state) {
  (void)state;
  need_device();
  struct pair p;
  open_pair(&p);
  size_t n = big_size() + 12345; /* not a multiple of anything */
  transfer(p.client, p.server, n, 1, "ib client -> server");
  transfer(p.server, p.client, n, 2, "ib server -> client");
  close_pair(&p);
}

struct receiver {
  struct ferry_conn *c;
  unsigned char *buf;
  size_t n;
  int rc;
};

static void *recv_thread(void *arg) {
  struct receiver *r = arg;
  uint32_t hdr = 0;
  r->rc = ferry_recv_all(r->c, &hdr, sizeof hdr);
  if (!r->rc && hdr != (uint32_t)r->n) r->rc = -2;
  if (!r->rc) r->rc = ferry_recv_all(r->c, r->buf, r->n);
  return NULL;
}

/* both directions at once, each connection sending in one thread while
   another thread receives on it (the shim's flusher does that) */
static void test_full_duplex(void **state) {
  (void)state;
  need_device();
  struct pair p;
  open_pair(&p);
  size_t n = (big_size() / 4) + 777;
  unsigned char *a = malloc(n), *b = malloc(n), *ina = calloc(1, n), *inb = calloc(1, n);
  assert_true(a && b && ina && inb);
  fill(a, n, 11);
  fill(b, n, 12);
  struct sender sa = {p.client, a, n, -1}, sb = {p.server, b, n, -1};
  struct receiver ra = {p.server, ina, n, -1}, rb = {p.client, inb, n, -1};
  pthread_t t[4];
  assert_int_equal(pthread_create(&t[0], NULL, send_thread, &sa), 0);
  assert_int_equal(pthread_create(&t[1], NULL, send_thread, &sb), 0);
  assert_int_equal(pthread_create(&t[2], NULL, recv_thread, &ra), 0);
  assert_int_equal(pthread_create(&t[3], NULL, recv_thread, &rb), 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  assert_int_equal(sa.rc, 0);
  assert_int_equal(sb.rc, 0);
  assert_int_equal(ra.rc, 0);
  assert_int_equal(rb.rc, 0);
  assert_memory_equal(ina, a, n);
  assert_memory_equal(inb, b, n);
  free(a);
  free(b);
  free(ina);
  free(inb);
  close_pair(&p);
}

struct mixed {
  struct ferry_conn *c;
  int rc;
};

static size_t mixed_len(unsigned k) {
  static const size_t sizes[] = {1, 31, 4000, 4080, 4081, 65536, 300001, 3u << 20, 7, 9u << 20};
  return sizes[k % (sizeof sizes / sizeof sizes[0])];
}

/* length-prefixed messages of every size class, back to back */
static void *mixed_thread(void *arg) {
  struct mixed *m = arg;
  unsigned char *buf = malloc(9u << 20);
  m->rc = buf ? 0 : -1;
  for (unsigned k = 0; k < 40 && !m->rc; k++) {
    uint32_t len = (uint32_t)mixed_len(k);
    fill(buf, len, k + 100);
    struct iovec iov[2] = {{&len, sizeof len}, {buf, len}};
    m->rc = ferry_sendv(m->c, iov, 2);
  }
  free(buf);
  return NULL;
}

static void test_interleaved(void **state) {
  (void)state;
  need_device();
  struct pair p;
  open_pair(&p);
  struct mixed m = {p.client, -1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, mixed_thread, &m), 0);
  unsigned char *in = malloc(9u << 20), *want = malloc(9u << 20);
  assert_non_null(in);
  assert_non_null(want);
  for (unsigned k = 0; k < 40; k++) {
    uint32_t len = 0;
    assert_int_equal(ferry_recv_all(p.server, &len, sizeof len), 0);
    assert_int_equal(len, mixed_len(k));
    assert_int_equal(ferry_recv_all(p.server, in, len), 0);
    fill(want, len, k + 100);
    assert_memory_equal(in, want, len);
    /* the server answers now and then while the client keeps sending */
    if (k % 5 == 0) {
      struct iovec iov = {&k, sizeof k};
      assert_int_equal(ferry_sendv(p.server, &iov, 1), 0);
    }
  }
  pthread_join(th, NULL);
  assert_int_equal(m.rc, 0);
  for (unsigned k = 0; k < 40; k += 5) {
    unsigned got;
    assert_int_equal(ferry_recv_all(p.client, &got, sizeof got), 0);
    assert_int_equal(got, k);
  }
  free(in);
  free(want);
  close_pair(&p);
}

static void test_recv_some(void **state) {
  (void)state;
  need_device();
  struct pair p;
  open_pair(&p);
  char msg[10] = "0123456789", got[100];
  struct iovec iov = {msg, sizeof msg};
  assert_int_equal(ferry_sendv(p.client, &iov, 1), 0);
  /* exactly min when cap == min, the rest stays */
  assert_int_equal(p.server->ops->recv_some(p.server, got, 4, 4), 4);
  assert_memory_equal(got, "0123", 4);
  /* whatever arrived, never more than cap */
  long n = p.server->ops->recv_some(p.server, got, 1, 100);
  assert_true(n >= 1 && n <= 6);
  long total = n;
  while (total < 6) {
    n = p.server->ops->recv_some(p.server, got + total, 1, 100);
    assert_true(n >= 1);
    total += n;
  }
  assert_int_equal(total, 6);
  assert_memory_equal(got, "456789", 6);
  /* min may be larger than what one message carried: it waits for more */
  assert_int_equal(ferry_sendv(p.client, &iov, 1), 0);
  assert_int_equal(ferry_sendv(p.client, &iov, 1), 0);
  assert_int_equal(p.server->ops->recv_some(p.server, got, 15, 100) >= 15, 1);
  close_pair(&p);
}

static void test_peer_close(void **state) {
  (void)state;
  need_device();
  struct pair p;
  open_pair(&p);
  char msg[5] = "bye!", got[5];
  struct iovec iov = {msg, sizeof msg};
  assert_int_equal(ferry_sendv(p.client, &iov, 1), 0);
  p.client->ops->close(p.client);
  p.client = NULL;
  /* what was sent before the close still arrives; then the end is an error */
  assert_int_equal(ferry_recv_all(p.server, got, sizeof got), 0);
  assert_string_equal(got, "bye!");
  double t0 = now_s();
  errno = 0;
  assert_int_equal(ferry_recv_all(p.server, got, 1), -1);
  assert_int_equal(errno, ECONNRESET);
  /* sending to the vanished peer fails too (without SIGPIPE or a hang) */
  size_t n = 32u << 20;
  char *big = calloc(1, n);
  assert_non_null(big);
  struct iovec b = {big, n};
  errno = 0;
  assert_int_equal(ferry_sendv(p.server, &b, 1), -1);
  assert_int_equal(errno, ECONNRESET);
  assert_true(now_s() - t0 < 10);
  free(big);
  close_pair(&p);
}

/* an RDMA WRITE with a wrong rkey completes with an error: the sender's
   next call fails with ECONNRESET (and a logged reason), not a hang or a crash,
   and the other side ends too */
static void test_error_completion(void **state) {
  (void)state;
  need_device();
  struct pair p;
  open_pair(&p);
  ((struct ib_conn *)p.client)->peer_rkey ^= 0x5a5a00;
  size_t n = 1u << 20;
  char *big = calloc(1, n);
  assert_non_null(big);
  struct iovec b = {big, n};
  double t0 = now_s();
  int rc = ferry_sendv(p.client, &b, 1); /* may return before the completion */
  assert_true(rc == 0 || (rc == -1 && errno == ECONNRESET));
  char x;
  errno = 0;
  assert_int_equal(ferry_recv_all(p.client, &x, 1), -1);
  assert_int_equal(errno, ECONNRESET);
  errno = 0;
  assert_int_equal(ferry_sendv(p.client, &b, 1), -1);
  assert_int_equal(errno, ECONNRESET);
  p.client->ops->close(p.client);
  p.client = NULL;
  errno = 0;
  assert_int_equal(ferry_recv_all(p.server, &x, 1), -1);
  assert_int_equal(errno, ECONNRESET);
  assert_true(now_s() - t0 < 10);
  free(big);
  close_pair(&p);
}

/* the server's pattern: the parent accepts and forks, the child serves
   (RDMA is set up there), the parent forgets the connection */
static void test_fork_after_accept(void **state) {
  (void)state;
  need_device();
  char err[320];
  struct ferry_listener *l = listen_any("ib", err, sizeof err);
  struct ferry_url u;
  assert_int_equal(ferry_url_parse(l->name, &u, err, sizeof err), 0);
  size_t n = 4u << 20;
  fflush(NULL);
  pid_t client = fork();
  assert_true(client >= 0);
  if (client == 0) {
    struct ferry_conn *c = ferry_transport_find("ib", err, sizeof err)->connect(&u, 20000, err,
                                                                                sizeof err);
    if (!c) {
      fprintf(stderr, "client connect: %s\n", err);
      _exit(2);
    }
    unsigned char *out = malloc(n), *in = malloc(n);
    fill(out, n, 7);
    struct iovec iov = {out, n};
    int ok = out && in && ferry_sendv(c, &iov, 1) == 0 && ferry_recv_all(c, in, n) == 0 &&
             memcmp(in, out, n) == 0;
    c->ops->close(c);
    _exit(ok ? 0 : 3);
  }
  struct ferry_conn *s = l->ops->accept(l);
  assert_non_null(s);
  fflush(NULL);
  pid_t server = fork();
  assert_true(server >= 0);
  if (server == 0) {
    l->ops->close(l);
    unsigned char *buf = malloc(n);
    struct iovec iov = {buf, n};
    int ok = buf && ferry_recv_all(s, buf, n) == 0 && ferry_sendv(s, &iov, 1) == 0;
    /* the client closes first; reading on must then report the end */
    char x;
    ok = ok && ferry_recv_all(s, &x, 1) == -1 && errno == ECONNRESET;
    s->ops->close(s);
    _exit(ok ? 0 : 4);
  }
  s->ops->detach(s);
  int st;
  assert_int_equal(waitpid(client, &st, 0), client);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_int_equal(waitpid(server, &st, 0), server);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  l->ops->close(l);
}

/* FERRY_IB_SPIN_US: microseconds, 0 for none, garbage gives the default */
static void test_spin_setting(void **state) {
  (void)state;
  assert_int_equal(ib_spin_ns(NULL), IB_SPIN_US_DEFAULT * 1000ull);
  assert_int_equal(ib_spin_ns(""), IB_SPIN_US_DEFAULT * 1000ull);
  assert_int_equal(ib_spin_ns("0"), 0);
  assert_int_equal(ib_spin_ns("50"), 50000);
  assert_int_equal(ib_spin_ns("abc"), IB_SPIN_US_DEFAULT * 1000ull);
  assert_int_equal(ib_spin_ns("12us"), IB_SPIN_US_DEFAULT * 1000ull);
  assert_int_equal(ib_spin_ns("-5"), IB_SPIN_US_DEFAULT * 1000ull);
  assert_int_equal(ib_spin_ns(" 5"), IB_SPIN_US_DEFAULT * 1000ull); /* all of it a number */
  assert_int_equal(ib_spin_ns("+5"), IB_SPIN_US_DEFAULT * 1000ull);
  assert_int_equal(ib_spin_ns(" -5"), IB_SPIN_US_DEFAULT * 1000ull);
  assert_int_equal(ib_spin_ns("99999999999999"), IB_SPIN_US_MAX * 1000ull);
}

struct waiter {
  struct ferry_conn *c;
  int rounds, rc;
};

/* receives `rounds` 64-byte messages */
static void *wait_thread(void *arg) {
  struct waiter *w = arg;
  char b[64];
  w->rc = 0;
  for (int k = 0; k < w->rounds && !w->rc; k++) w->rc = ferry_recv_all(w->c, b, sizeof b);
  return NULL;
}

/* a thread spinning for a reply lets another thread's send through at once
   (the shim's flusher sends while a caller waits), instead of holding the
   connection for its whole spin */
static void test_spin_lets_sender_in(void **state) {
  (void)state;
  need_device();
  struct pair p;
  open_pair(&p);
  ((struct ib_conn *)p.client)->spin_ns = 400000000ull; /* 0.4 s: far beyond any wait here */
  struct waiter w = {p.client, 5, -1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
  double worst = 0;
  for (int k = 0; k < 5; k++) {
    usleep(20000); /* the waiter is spinning now */
    char q[64] = {(char)k}, r[64];
    struct iovec iov = {q, sizeof q};
    double t0 = now_s();
    assert_int_equal(ferry_sendv(p.client, &iov, 1), 0);
    double dt = now_s() - t0;
    if (dt > worst) worst = dt;
    assert_int_equal(ferry_recv_all(p.server, r, sizeof r), 0);
    assert_int_equal(r[0], (char)k);
    iov.iov_base = r;
    assert_int_equal(ferry_sendv(p.server, &iov, 1), 0); /* ends one wait */
  }
  pthread_join(th, NULL);
  assert_int_equal(w.rc, 0);
  printf("[ INFO     ] slowest send beside a spinning receiver: %.1f us\n", worst * 1e6);
  assert_true(worst < 0.1);
  close_pair(&p);
}

/* spinning is bounded: a receiver waiting on an idle connection sleeps */
static void test_idle_wait_sleeps(void **state) {
  (void)state;
  need_device();
  struct pair p;
  open_pair(&p);
  ((struct ib_conn *)p.client)->spin_ns = 20000000ull; /* 20 ms per wait */
  struct waiter w = {p.client, 1, -1};
  struct timespec c0, c1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  double t0 = now_s();
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
  usleep(1500000);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  double cpu = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) / 1e9;
  double wall = now_s() - t0;
  char q[64] = {0};
  struct iovec iov = {q, sizeof q};
  assert_int_equal(ferry_sendv(p.server, &iov, 1), 0);
  pthread_join(th, NULL);
  assert_int_equal(w.rc, 0);
  printf("[ INFO     ] an idle wait of %.2f s used %.3f s of CPU\n", wall, cpu);
  assert_true(cpu < 0.5 * wall);
  close_pair(&p);
}

/* no device: ib:// fails at once, says why and what to use instead */
static void test_no_device(void **state) {
  (void)state;
  if (have_device()) {
    printf("[ SKIPPED  ] this host has an RDMA device; the no-device message is not testable\n");
    skip();
  }
  char err[320] = "";
  struct ferry_url u;
  assert_int_equal(ferry_url_parse("ib://127.0.0.1:1/0", &u, err, sizeof err), 0);
  const struct ferry_transport *t = ferry_transport_find("ib", err, sizeof err);
  if (!t) fail_msg("ib:// is not built in: %s", err);
  double t0 = now_s();
  errno = 0;
  assert_null(t->connect(&u, 5000, err, sizeof err));
  assert_true(now_s() - t0 < 0.5);
  assert_int_equal(errno, ENODEV);
  printf("[ INFO     ] %s\n", err);
  assert_non_null(strstr(err, "ib://127.0.0.1:1"));
  assert_non_null(strstr(err, "no RDMA device"));
  assert_non_null(strstr(err, "use tcp://"));
  /* the server side says the same when asked to listen */
  assert_null(t->listen(&u, err, sizeof err));
  assert_non_null(strstr(err, "no RDMA device"));
  assert_non_null(strstr(err, "use tcp://"));
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_device),
      cmocka_unit_test(test_spin_setting),
      /* first: librdmacm keeps device contexts open for the life of a process,
         and a child forked after that cannot use them (the kernel refuses);
         ferry-server's parent never touches verbs, and this test's parent
         must not have either */
      cmocka_unit_test(test_fork_after_accept),
      cmocka_unit_test(test_small_both_ways),
      cmocka_unit_test(test_recv_some),
      cmocka_unit_test(test_large_both_ways),
      cmocka_unit_test(test_interleaved),
      cmocka_unit_test(test_full_duplex),
      cmocka_unit_test(test_spin_lets_sender_in),
      cmocka_unit_test(test_idle_wait_sleeps),
      cmocka_unit_test(test_peer_close),
      cmocka_unit_test(test_error_completion),
      cmocka_unit_test(test_tcp_reference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
