/*
 * CUDA graphs through ferry-server (issue 21): the real binary on the sim
 * backend with the unit twins, spoken to by a tiny client. A graph
 * instantiated once and launched 100 times (one pipelined call each) gives
 * the results of 100 runs; re-sent with new parameters it runs those; a
 * malformed blob or an exec id never instantiated ends only that session,
 * with a reason naming the call, and the server serves the next client.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protocol/codec.h"
#include "protocol/graph.h"
#include "transport/transport.h"

#define ARENA_BASE 0x200000000000ull
#define ARENA_SIZE 0x40000000000ull
#define MiB (1ull << 20)
#define A ARENA_BASE         /* int[1000], incremented by the graph */
#define B (ARENA_BASE + MiB) /* A copied here by the graph */

static pid_t server_pid;
static int log_fd = -1;
static struct ferry_url url;
static char server_log[1 << 16];
static size_t log_len;

/* the server's stderr, read up to its "listening on" line, or more */
static void read_log(int ms) {
  struct pollfd p = {.fd = log_fd, .events = POLLIN};
  while (log_len < sizeof server_log - 1 && poll(&p, 1, ms) > 0) {
    ssize_t r = read(log_fd, server_log + log_len, sizeof server_log - 1 - log_len);
    if (r <= 0) break;
    log_len += (size_t)r;
    server_log[log_len] = '\0';
    ms = 0;
  }
}

static int log_has(const char *needle, int ms) {
  for (int t = 0; t <= ms; t += 10) {
    read_log(10);
    if (strstr(server_log, needle)) return 1;
  }
  fprintf(stderr, "server log lacks '%s'; log:\n%s\n", needle, server_log);
  return 0;
}

static int group_setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  int fds[2];
  if (pipe(fds)) return -1;
  server_pid = fork();
  if (server_pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execl(FERRY_SERVER_BIN, FERRY_SERVER_BIN, "--backend", "sim", "--sim-kernels", UNIT_TWINS,
          "--listen", "tcp://127.0.0.1:0", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  log_fd = fds[0];
  for (int t = 0; t < 1000 && !strstr(server_log, "listening on "); t++) read_log(10);
  const char *at = strstr(server_log, "listening on ");
  char u[200], err[256];
  if (!at || sscanf(at, "listening on %199s", u) != 1 || ferry_url_parse(u, &url, err, sizeof err)) {
    fprintf(stderr, "ferry-server did not start: %s\n", server_log);
    return -1;
  }
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  kill(server_pid, SIGTERM);
  int st = 0;
  waitpid(server_pid, &st, 0);
  close(log_fd);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* ---- a tiny client ---- */

static void send_call(struct ferry_conn *c, unsigned call, const void *args, const void *bulk,
                      uint64_t bulk_len) {
  struct ferry_buf b = {0};
  assert_int_equal(ferry_encode_args(call, args, &b), 0);
  struct ferry_frame h = {.magic = FERRY_MAGIC, .kind = (uint16_t)call,
                          .body_len = (uint32_t)b.len, .bulk_len = bulk_len};
  struct iovec iov[3] = {{&h, sizeof h}, {b.data, b.len}, {(void *)bulk, bulk_len}};
  assert_int_equal(ferry_sendv(c, iov, 3), 0);
  ferry_buf_free(&b);
}

struct reply {
  struct ferry_frame h;
  char *body, *bulk;
};

/* the next REPLY or GOODBYE (other frames skipped); -1 when closed */
static int read_reply(struct ferry_conn *c, struct reply *r) {
  for (;;) {
    memset(r, 0, sizeof *r);
    if (ferry_recv_all(c, &r->h, sizeof r->h)) return -1;
    assert_int_equal(r->h.magic, FERRY_MAGIC);
    assert_true(r->h.body_len <= FERRY_MAX_BODY && r->h.bulk_len <= 64 * MiB);
    r->body = malloc(r->h.body_len + 1);
    r->bulk = malloc(r->h.bulk_len + 4);
    assert_int_equal(ferry_recv_all(c, r->body, r->h.body_len), 0);
    assert_int_equal(ferry_recv_all(c, r->bulk, r->h.bulk_len), 0);
    if (r->h.kind == FERRY_KIND_REPLY && r->h.bulk_len) { /* a bulk reply's status trailer */
      int32_t trailer;
      assert_int_equal(ferry_recv_all(c, &trailer, 4), 0);
    }
    if (r->h.kind == FERRY_KIND_REPLY || r->h.kind == FERRY_KIND_GOODBYE) return 0;
    free(r->body);
    free(r->bulk);
  }
}

/* a SYNC call's status, and the latched ASYNC one */
static int32_t sync_call(struct ferry_conn *c, unsigned call, const void *args, const void *bulk,
                         uint64_t bulk_len, int32_t *async_st) {
  send_call(c, call, args, bulk, bulk_len);
  struct reply r;
  assert_int_equal(read_reply(c, &r), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  if (async_st) *async_st = r.h.async_status;
  free(r.body);
  free(r.bulk);
  return r.h.status;
}

static struct ferry_conn *hello(void) {
  char err[256];
  const struct ferry_transport *t = ferry_transport_find("tcp", err, sizeof err);
  assert_non_null(t);
  struct ferry_conn *c = t->connect(&url, 5000, err, sizeof err);
  if (!c) fail_msg("%s", err);
  struct ferry_hello_args a = {.version = FERRY_PROTOCOL_VERSION, .arena_base = ARENA_BASE,
                               .arena_size = ARENA_SIZE, .client_pid = (uint32_t)getpid()};
  assert_int_equal(sync_call(c, FERRY_CALL_hello, &a, NULL, 0, NULL), 0);
  return c;
}

/* the GOODBYE that ends a session, its reason holding needle; then EOF */
static void expect_goodbye(struct ferry_conn *c, const char *needle) {
  struct reply r;
  assert_int_equal(read_reply(c, &r), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_GOODBYE);
  if (!memmem(r.body, r.h.body_len, needle, strlen(needle)))
    fail_msg("goodbye '%.*s' lacks '%s'", (int)r.h.body_len, r.body, needle);
  free(r.body);
  free(r.bulk);
  char b;
  assert_int_equal(ferry_recv_all(c, &b, 1), -1);
  c->ops->close(c);
}

/* memory, module 1 (inc, as in the unit twins), event 2, stream 16 */
static void session_state(struct ferry_conn *c) {
  struct ferry_mem_map_args m = {ARENA_BASE, 2 * MiB};
  assert_int_equal(sync_call(c, FERRY_CALL_mem_map, &m, NULL, 0, NULL), 0);
  static const unsigned char fatbin[32] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 16};
  static const char funcs[] = "_Z3incPii";
  struct ferry_module_load_args l = {.module = 1, .func_names = {funcs, sizeof funcs}};
  assert_int_equal(sync_call(c, FERRY_CALL_module_load, &l, fatbin, sizeof fatbin, NULL), 0);
  struct ferry_event_create_args e = {2, 0};
  assert_int_equal(sync_call(c, FERRY_CALL_event_create, &e, NULL, 0, NULL), 0);
  struct ferry_stream_create_args s = {16, 0, 0};
  assert_int_equal(sync_call(c, FERRY_CALL_stream_create, &s, NULL, 0, NULL), 0);
}

/* inc(A, n) over 1000 threads, then A copied to B, then event 2 recorded */
static void graph_blob(struct ferry_gbuf *b, int32_t n) {
  static const uint32_t d0[] = {0}, d1[] = {1};
  unsigned char params[12];
  uint64_t p = A;
  memcpy(params, &p, 8);
  memcpy(params + 8, &n, 4);
  struct ferry_gnode k = {.type = FERRY_GNODE_KERNEL};
  k.u.kernel.func = 1u << 16;
  k.u.kernel.gx = 4, k.u.kernel.gy = 1, k.u.kernel.gz = 1;
  k.u.kernel.bx = 256, k.u.kernel.by = 1, k.u.kernel.bz = 1;
  k.u.kernel.params = params;
  k.u.kernel.params_len = sizeof params;
  struct ferry_gnode cp = {.type = FERRY_GNODE_MEMCPY, .ndeps = 1, .deps = d0};
  cp.u.memcpy.dst = B, cp.u.memcpy.dpitch = 4000, cp.u.memcpy.src = A, cp.u.memcpy.spitch = 4000;
  cp.u.memcpy.width = 4000, cp.u.memcpy.height = 1;
  struct ferry_gnode ev = {.type = FERRY_GNODE_EVENT_RECORD, .ndeps = 1, .deps = d1};
  ev.u.event.event = 2;
  memset(b, 0, sizeof *b);
  assert_int_equal(ferry_graph_put(b, &k), 0);
  assert_int_equal(ferry_graph_put(b, &cp), 0);
  assert_int_equal(ferry_graph_put(b, &ev), 0);
}

static int32_t instantiate(struct ferry_conn *c, uint32_t exec, const void *blob, size_t len) {
  struct ferry_graph_instantiate_args a = {.exec = exec, .nodes = {blob, (uint32_t)len}};
  return sync_call(c, FERRY_CALL_graph_instantiate, &a, NULL, 0, NULL);
}

/* B's first 1000 ints, read back */
static void read_b(struct ferry_conn *c, int32_t out[1000]) {
  struct ferry_memcpy_dtoh_args a = {.src = B, .size = 4000, .stream = 0};
  send_call(c, FERRY_CALL_memcpy_dtoh, &a, NULL, 0);
  struct reply r;
  assert_int_equal(read_reply(c, &r), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  assert_int_equal(r.h.status, 0);
  assert_int_equal(r.h.bulk_len, 4000);
  memcpy(out, r.bulk, 4000);
  free(r.body);
  free(r.bulk);
}

static void launch_a_hundred_times(void **state) {
  (void)state;
  struct ferry_conn *c = hello();
  session_state(c);
  struct ferry_gbuf b;
  graph_blob(&b, 1000);
  assert_int_equal(instantiate(c, 7, b.data, b.len), 0);
  ferry_gbuf_free(&b);
  struct ferry_graph_launch_args l = {.exec = 7, .stream = 16};
  for (int i = 0; i < 100; i++) send_call(c, FERRY_CALL_graph_launch, &l, NULL, 0);
  struct ferry_event_synchronize_args es = {2};
  int32_t async_st = -1;
  assert_int_equal(sync_call(c, FERRY_CALL_event_synchronize, &es, NULL, 0, &async_st), 0);
  assert_int_equal(async_st, 0);
  int32_t got[1000];
  read_b(c, got);
  for (int i = 0; i < 1000; i++) assert_int_equal(got[i], 100);
  /* the same exec id with new parameters (cudaGraphExecUpdate): 500 threads */
  graph_blob(&b, 500);
  assert_int_equal(instantiate(c, 7, b.data, b.len), 0);
  ferry_gbuf_free(&b);
  send_call(c, FERRY_CALL_graph_launch, &l, NULL, 0);
  struct ferry_stream_synchronize_args ss = {16};
  assert_int_equal(sync_call(c, FERRY_CALL_stream_synchronize, &ss, NULL, 0, &async_st), 0);
  assert_int_equal(async_st, 0);
  read_b(c, got);
  assert_int_equal(got[499], 101);
  assert_int_equal(got[500], 100);
  struct ferry_graph_exec_destroy_args d = {7};
  assert_int_equal(sync_call(c, FERRY_CALL_graph_exec_destroy, &d, NULL, 0, NULL), 0);
  /* gone: launching it now is a client that lost track, and ends the session */
  send_call(c, FERRY_CALL_graph_launch, &l, NULL, 0);
  expect_goodbye(c, "graph_launch: graph exec id 7 was never created");
}

static void malformed_blob_ends_only_its_session(void **state) {
  (void)state;
  struct ferry_conn *c = hello();
  session_state(c);
  struct ferry_gbuf b;
  graph_blob(&b, 10);
  b.data[0] ^= 0xff; /* the magic */
  send_call(c, FERRY_CALL_graph_instantiate,
            &(struct ferry_graph_instantiate_args){.exec = 1, .nodes = {b.data, (uint32_t)b.len}},
            NULL, 0);
  expect_goodbye(c, "graph_instantiate: its node blob is malformed");
  assert_true(log_has("graph_instantiate: its node blob is malformed", 5000));
  /* a truncated one, in a new session; then a healthy session */
  b.data[0] ^= 0xff;
  c = hello();
  session_state(c);
  send_call(c, FERRY_CALL_graph_instantiate,
            &(struct ferry_graph_instantiate_args){.exec = 1, .nodes = {b.data, (uint32_t)b.len - 2}},
            NULL, 0);
  expect_goodbye(c, "its node blob is malformed");
  c = hello();
  session_state(c);
  assert_int_equal(instantiate(c, 1, b.data, b.len), 0);
  struct ferry_graph_launch_args l = {.exec = 1, .stream = 0};
  send_call(c, FERRY_CALL_graph_launch, &l, NULL, 0);
  struct ferry_device_synchronize_args ds = {0};
  int32_t async_st = -1;
  assert_int_equal(sync_call(c, FERRY_CALL_device_synchronize, &ds, NULL, 0, &async_st), 0);
  assert_int_equal(async_st, 0);
  c->ops->close(c);
  ferry_gbuf_free(&b);
  int st;
  assert_int_equal(waitpid(server_pid, &st, WNOHANG), 0); /* the server lives on */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(launch_a_hundred_times),
      cmocka_unit_test(malformed_blob_ends_only_its_session),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
