/* The tcp backend over loopback: large transfers survive partial writes,
   a closed peer reads as ECONNRESET (never SIGPIPE), and an unreachable
   server fails fast with a message that names it. */
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

#include "transport/transport.h"

struct pair {
  struct ferry_listener *l;
  struct ferry_conn *client, *server;
};

static void open_pair(struct pair *p) {
  char err[256] = "";
  struct ferry_url u;
  assert_int_equal(ferry_url_parse("tcp://127.0.0.1:0", &u, err, sizeof err), 0);
  const struct ferry_transport *t = ferry_transport_find("tcp", err, sizeof err);
  assert_non_null(t);
  p->l = t->listen(&u, err, sizeof err);
  if (!p->l) fail_msg("listen: %s", err);
  /* the listener names the port the kernel picked */
  struct ferry_url bound;
  assert_int_equal(ferry_url_parse(p->l->name, &bound, err, sizeof err), 0);
  assert_true(bound.port > 0);
  p->client = t->connect(&bound, 2000, err, sizeof err);
  if (!p->client) fail_msg("connect: %s", err);
  p->server = p->l->ops->accept(p->l);
  assert_non_null(p->server);
  assert_non_null(strstr(p->server->peer, "127.0.0.1:"));
}

static void close_pair(struct pair *p) {
  if (p->client) p->client->ops->close(p->client);
  if (p->server) p->server->ops->close(p->server);
  p->l->ops->close(p->l);
}

struct sender {
  struct ferry_conn *c;
  const unsigned char *buf;
  size_t n;
  int rc;
};

/* sends the buffer as header + unevenly split pieces, as the shim does */
static void *send_thread(void *arg) {
  struct sender *s = arg;
  uint32_t hdr = (uint32_t)s->n;
  struct iovec iov[5] = {
      {&hdr, sizeof hdr},
      {(void *)s->buf, 1},
      {(void *)(s->buf + 1), 0},
      {(void *)(s->buf + 1), s->n / 3},
      {(void *)(s->buf + 1 + s->n / 3), s->n - 1 - s->n / 3},
  };
  s->rc = ferry_sendv(s->c, iov, 5);
  return NULL;
}

static void test_large_transfer(void **state) {
  (void)state;
  struct pair p;
  open_pair(&p);
  size_t n = 24u << 20; /* well beyond any socket buffer */
  unsigned char *out = malloc(n), *in = malloc(n);
  assert_non_null(out);
  assert_non_null(in);
  for (size_t i = 0; i < n; i++) out[i] = (unsigned char)(i * 2654435761u >> 13);
  struct sender s = {p.client, out, n, -1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, send_thread, &s), 0);
  uint32_t hdr = 0;
  assert_int_equal(ferry_recv_all(p.server, &hdr, sizeof hdr), 0);
  assert_int_equal(hdr, n);
  /* read in odd-sized pieces so that recv_all has to loop */
  size_t got = 0;
  while (got < n) {
    size_t k = n - got < 3000017 ? n - got : 3000017;
    assert_int_equal(ferry_recv_all(p.server, in + got, k), 0);
    got += k;
  }
  pthread_join(th, NULL);
  assert_int_equal(s.rc, 0);
  assert_memory_equal(in, out, n);
  /* and back the other way, in one call */
  s = (struct sender){p.server, out, n, -1};
  assert_int_equal(pthread_create(&th, NULL, send_thread, &s), 0);
  assert_int_equal(ferry_recv_all(p.client, &hdr, sizeof hdr), 0);
  memset(in, 0, n);
  assert_int_equal(ferry_recv_all(p.client, in, n), 0);
  pthread_join(th, NULL);
  assert_int_equal(s.rc, 0);
  assert_memory_equal(in, out, n);
  free(out);
  free(in);
  close_pair(&p);
}

static void test_peer_close(void **state) {
  (void)state;
  struct pair p;
  open_pair(&p);
  char msg[3] = "hi";
  struct iovec iov = {msg, 2};
  assert_int_equal(ferry_sendv(p.client, &iov, 1), 0);
  p.client->ops->close(p.client);
  p.client = NULL;
  char buf[8];
  /* the bytes that arrived are still readable, then a short read is ECONNRESET */
  assert_int_equal(ferry_recv_all(p.server, buf, 2), 0);
  assert_memory_equal(buf, "hi", 2);
  errno = 0;
  assert_int_equal(ferry_recv_all(p.server, buf, 4), -1);
  assert_int_equal(errno, ECONNRESET);
  /* sending into a closed connection fails instead of killing us with SIGPIPE */
  static char big[1 << 20];
  struct iovec biov = {big, sizeof big};
  int rc = 0;
  for (int i = 0; i < 64 && rc == 0; i++) rc = ferry_sendv(p.server, &biov, 1);
  assert_int_equal(rc, -1);
  assert_true(errno == EPIPE || errno == ECONNRESET);
  close_pair(&p);
}

static void test_detach_after_fork(void **state) {
  (void)state;
  struct pair p;
  open_pair(&p);
  /* the server's parent detaches its copy after fork; the child's copy must
     keep working (a shutdown() here would cut it) */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char b;
    int ok = ferry_recv_all(p.server, &b, 1) == 0 && b == 'q';
    struct iovec iov = {"a", 1};
    ok = ok && ferry_sendv(p.server, &iov, 1) == 0;
    _exit(ok ? 0 : 1);
  }
  p.server->ops->detach(p.server);
  p.server = NULL;
  struct iovec iov = {"q", 1};
  assert_int_equal(ferry_sendv(p.client, &iov, 1), 0);
  char buf[1];
  assert_int_equal(ferry_recv_all(p.client, buf, 1), 0);
  assert_int_equal(buf[0], 'a');
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* with the child gone no fd is left: the client now sees the close */
  errno = 0;
  assert_int_equal(ferry_recv_all(p.client, buf, 1), -1);
  assert_int_equal(errno, ECONNRESET);
  close_pair(&p);
}

static void test_connect_refused(void **state) {
  (void)state;
  char err[256] = "";
  struct ferry_url u;
  /* grab a free port, then close it so nobody listens there */
  assert_int_equal(ferry_url_parse("tcp://127.0.0.1:0", &u, err, sizeof err), 0);
  const struct ferry_transport *t = ferry_transport_find("tcp", err, sizeof err);
  struct ferry_listener *l = t->listen(&u, err, sizeof err);
  assert_non_null(l);
  struct ferry_url bound;
  assert_int_equal(ferry_url_parse(l->name, &bound, err, sizeof err), 0);
  l->ops->close(l);

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  struct ferry_conn *c = t->connect(&bound, 5000, err, sizeof err);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  assert_null(c);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  assert_true(secs < 1.0);
  char want[128];
  snprintf(want, sizeof want, "cannot reach tcp://127.0.0.1:%d: Connection refused", bound.port);
  assert_string_equal(err, want);
}

static void test_connect_unresolvable(void **state) {
  (void)state;
  char err[256] = "";
  struct ferry_url u;
  assert_int_equal(ferry_url_parse("tcp://no-such-host.invalid:7420", &u, err, sizeof err), 0);
  const struct ferry_transport *t = ferry_transport_find("tcp", err, sizeof err);
  assert_null(t->connect(&u, 2000, err, sizeof err));
  assert_non_null(strstr(err, "cannot reach tcp://no-such-host.invalid:7420"));
  assert_non_null(strstr(err, "resolve"));
}

static void test_listen_in_use(void **state) {
  (void)state;
  char err[256] = "";
  struct ferry_url u;
  assert_int_equal(ferry_url_parse("tcp://127.0.0.1:0", &u, err, sizeof err), 0);
  const struct ferry_transport *t = ferry_transport_find("tcp", err, sizeof err);
  struct ferry_listener *l = t->listen(&u, err, sizeof err);
  assert_non_null(l);
  struct ferry_url bound;
  assert_int_equal(ferry_url_parse(l->name, &bound, err, sizeof err), 0);
  assert_null(t->listen(&bound, err, sizeof err));
  assert_non_null(strstr(err, "Address already in use"));
  l->ops->close(l);
}

int main(void) {
  /* make an accidental SIGPIPE fatal and visible rather than ignored */
  signal(SIGPIPE, SIG_DFL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_large_transfer),
      cmocka_unit_test(test_peer_close),
      cmocka_unit_test(test_detach_after_fork),
      cmocka_unit_test(test_connect_refused),
      cmocka_unit_test(test_connect_unresolvable),
      cmocka_unit_test(test_listen_in_use),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
