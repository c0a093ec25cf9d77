/*
 * ferry-server must outlive any client: garbage, truncated frames, unknown
 * calls and malformed bodies end only the offending session, with a logged
 * reason, and the next client is served normally. Runs the real server
 * binary with the sim backend on a kernel-chosen loopback port.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocol/codec.h"
#include "transport/transport.h"

#define ARENA_BASE 0x200000000000ull
#define ARENA_SIZE 0x40000000000ull

/* ---- the server process and its log ---- */

static pid_t server_pid;
static struct ferry_url server_url;
static int log_fd = -1;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char server_log[1 << 20];
static size_t log_len;

static void *log_reader(void *arg) {
  (void)arg;
  char buf[4096];
  ssize_t r;
  while ((r = read(log_fd, buf, sizeof buf)) > 0) {
    pthread_mutex_lock(&log_lock);
    size_t n = (size_t)r;
    if (n > sizeof server_log - 1 - log_len) n = sizeof server_log - 1 - log_len;
    memcpy(server_log + log_len, buf, n);
    log_len += n;
    server_log[log_len] = '\0';
    pthread_mutex_unlock(&log_lock);
    if (getenv("FERRY_TEST_VERBOSE")) fwrite(buf, 1, (size_t)r, stderr);
  }
  return NULL;
}

/* waits up to 5 s for `needle` to show up in the server's log after offset `from` */
static int log_has(const char *needle, size_t from) {
  for (int i = 0; i < 500; i++) {
    pthread_mutex_lock(&log_lock);
    int found = from <= log_len && strstr(server_log + from, needle) != NULL;
    pthread_mutex_unlock(&log_lock);
    if (found) return 1;
    usleep(10000);
  }
  fprintf(stderr, "server log lacks '%s'; log:\n%s\n", needle, server_log + from);
  return 0;
}

static size_t log_mark(void) {
  pthread_mutex_lock(&log_lock);
  size_t n = log_len;
  pthread_mutex_unlock(&log_lock);
  return n;
}

static pid_t start_server(const char *extra, int *errfd) {
  int fds[2];
  if (pipe(fds)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    if (extra)
      execl(FERRY_SERVER_BIN, FERRY_SERVER_BIN, "--backend", "sim", "--listen", "tcp://127.0.0.1:0",
            extra, (char *)NULL);
    else
      execl(FERRY_SERVER_BIN, FERRY_SERVER_BIN, "--backend", "sim", "--listen", "tcp://127.0.0.1:0",
            (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  *errfd = fds[0];
  return pid;
}

/* reads the server's stderr up to its "listening on" line and parses the URL */
static int read_listen_line(int fd, struct ferry_url *url, char *seen, size_t seen_cap) {
  size_t len = 0;
  while (len < seen_cap - 1) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 10000) <= 0) break;
    ssize_t r = read(fd, seen + len, 1);
    if (r <= 0) break;
    len++;
    seen[len] = '\0';
    if (seen[len - 1] != '\n') continue;
    char *at = strstr(seen, "listening on ");
    if (!at) continue;
    char u[200];
    if (sscanf(at, "listening on %199s", u) != 1) return -1;
    char err[256];
    return ferry_url_parse(u, url, err, sizeof err);
  }
  return -1;
}

static int group_setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  server_pid = start_server(NULL, &log_fd);
  if (server_pid < 0) return -1;
  char seen[4096] = "";
  if (read_listen_line(log_fd, &server_url, seen, sizeof seen)) {
    fprintf(stderr, "ferry-server did not start: %s\n", seen);
    return -1;
  }
  pthread_t th;
  pthread_create(&th, NULL, log_reader, NULL);
  pthread_detach(th);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  kill(server_pid, SIGTERM);
  int st = 0;
  waitpid(server_pid, &st, 0);
  /* SIGTERM is a clean stop */
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "ferry-server ended with status 0x%x after SIGTERM\n", st);
    return -1;
  }
  return 0;
}

static void assert_server_alive(void) {
  int st;
  assert_int_equal(waitpid(server_pid, &st, WNOHANG), 0);
}

/* ---- a tiny client ---- */

static struct ferry_conn *dial(void) {
  char err[256];
  const struct ferry_transport *t = ferry_transport_find("tcp", err, sizeof err);
  struct ferry_conn *c = t->connect(&server_url, 5000, err, sizeof err);
  if (!c) fail_msg("%s", err);
  return c;
}

static void send_raw(struct ferry_conn *c, const void *p, size_t n) {
  struct iovec iov = {(void *)p, n};
  assert_int_equal(ferry_sendv(c, &iov, 1), 0);
}

static void send_frame(struct ferry_conn *c, unsigned kind, const void *body, size_t body_len,
                       const void *bulk, uint64_t bulk_len) {
  struct ferry_frame h = {.magic = FERRY_MAGIC, .kind = (uint16_t)kind,
                          .body_len = (uint32_t)body_len, .bulk_len = bulk_len};
  struct iovec iov[3] = {{&h, sizeof h}, {(void *)body, body_len}, {(void *)bulk, bulk_len}};
  assert_int_equal(ferry_sendv(c, iov, 3), 0);
}

static void send_call(struct ferry_conn *c, unsigned call, const void *args, const void *bulk,
                      uint64_t bulk_len) {
  struct ferry_buf b = {0};
  assert_int_equal(ferry_encode_args(call, args, &b), 0);
  send_frame(c, call, b.data, b.len, bulk, bulk_len);
  ferry_buf_free(&b);
}

struct reply {
  struct ferry_frame h;
  char *body;
  char *bulk;
  int32_t final_status; /* trailer of a bulk reply */
};

/* reads frames up to the next REPLY or GOODBYE; -1 when the server closed */
static int read_reply(struct ferry_conn *c, struct reply *r, int bulk_reply) {
  for (;;) {
    memset(r, 0, sizeof *r);
    if (ferry_recv_all(c, &r->h, sizeof r->h)) return -1;
    assert_int_equal(r->h.magic, FERRY_MAGIC);
    assert_true(r->h.body_len <= FERRY_MAX_BODY);
    r->body = malloc(r->h.body_len + 1);
    r->bulk = malloc(r->h.bulk_len + 1);
    assert_int_equal(ferry_recv_all(c, r->body, r->h.body_len), 0);
    r->body[r->h.body_len] = '\0';
    assert_int_equal(ferry_recv_all(c, r->bulk, r->h.bulk_len), 0);
    if (r->h.kind == FERRY_KIND_REPLY && bulk_reply && r->h.bulk_len)
      assert_int_equal(ferry_recv_all(c, &r->final_status, 4), 0);
    if (r->h.kind == FERRY_KIND_REPLY || r->h.kind == FERRY_KIND_GOODBYE) return 0;
    free(r->body);
    free(r->bulk);
  }
}

static void free_reply(struct reply *r) {
  free(r->body);
  free(r->bulk);
}

/* the GOODBYE reason: msgpack [str] */
static void expect_goodbye(struct ferry_conn *c, const char *needle) {
  struct reply r;
  assert_int_equal(read_reply(c, &r, 0), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_GOODBYE);
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  msgpack_object o;
  size_t off = 0;
  assert_int_equal(msgpack_unpack(r.body, r.h.body_len, &off, &z, &o), MSGPACK_UNPACK_SUCCESS);
  assert_int_equal(o.type, MSGPACK_OBJECT_ARRAY);
  assert_int_equal(o.via.array.size, 1);
  assert_int_equal(o.via.array.ptr[0].type, MSGPACK_OBJECT_STR);
  const char *s = o.via.array.ptr[0].via.str.ptr;
  if (!memmem(s, o.via.array.ptr[0].via.str.size, needle, strlen(needle)))
    fail_msg("goodbye reason '%.*s' lacks '%s'", (int)o.via.array.ptr[0].via.str.size, s, needle);
  msgpack_zone_destroy(&z);
  free_reply(&r);
  /* and then the server closes */
  char b;
  assert_int_equal(ferry_recv_all(c, &b, 1), -1);
}

static int32_t hello_status(struct ferry_conn *c, uint32_t version, uint32_t gpu) {
  struct ferry_hello_args a = {.version = version, .gpu = gpu, .arena_base = ARENA_BASE,
                               .arena_size = ARENA_SIZE, .client_pid = (uint32_t)getpid()};
  send_call(c, FERRY_CALL_hello, &a, NULL, 0);
  struct reply r;
  assert_int_equal(read_reply(c, &r, 0), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  struct ferry_decoder d;
  ferry_decoder_init(&d);
  struct ferry_hello_rets rets;
  if (ferry_decode_rets(&d, FERRY_CALL_hello, r.body, r.h.body_len, &rets))
    fail_msg("hello reply: %s", d.error);
  if (r.h.status == 0) {
    assert_non_null(rets.name);
    assert_true(rets.granularity > 0);
    assert_int_equal(rets.uuid.len, 16);
  }
  ferry_decoder_destroy(&d);
  free_reply(&r);
  return r.h.status;
}

static struct ferry_conn *hello(void) {
  struct ferry_conn *c = dial();
  assert_int_equal(hello_status(c, FERRY_PROTOCOL_VERSION, 0), 0);
  return c;
}

static int32_t sync_call(struct ferry_conn *c, unsigned call, const void *args, int32_t *async_st) {
  send_call(c, call, args, NULL, 0);
  struct reply r;
  assert_int_equal(read_reply(c, &r, 0), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  if (async_st) *async_st = r.h.async_status;
  free_reply(&r);
  return r.h.status;
}

/* the check after every abuse: a fresh client is served normally */
static void assert_healthy(void) {
  assert_server_alive();
  struct ferry_conn *c = hello();
  struct ferry_device_synchronize_args a = {0};
  int32_t async_st = -1;
  assert_int_equal(sync_call(c, FERRY_CALL_device_synchronize, &a, &async_st), 0);
  assert_int_equal(async_st, 0);
  c->ops->close(c);
  assert_server_alive();
}

/* ---- the cases ---- */

static void test_healthy_session(void **state) {
  (void)state;
  size_t mark = log_mark();
  assert_healthy();
  assert_true(log_has("ended: client disconnected", mark));
}

static void test_garbage_bytes(void **state) {
  (void)state;
  size_t mark = log_mark();
  struct ferry_conn *c = dial();
  char junk[200];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 37 + 11);
  send_raw(c, junk, sizeof junk);
  expect_goodbye(c, "bad magic");
  c->ops->close(c);
  assert_true(log_has("malformed frame: bad magic", mark));
  assert_healthy();
}

static void test_truncated_frames(void **state) {
  (void)state;
  size_t mark = log_mark();
  /* half a header, then gone */
  struct ferry_conn *c = dial();
  struct ferry_frame h = {.magic = FERRY_MAGIC, .kind = FERRY_CALL_hello, .body_len = 40};
  send_raw(c, &h, 10);
  c->ops->close(c);
  assert_true(log_has("client disconnected", mark));
  assert_healthy();

  /* a hello, then a header whose body never comes */
  mark = log_mark();
  c = hello();
  h = (struct ferry_frame){.magic = FERRY_MAGIC, .kind = FERRY_CALL_mem_map, .body_len = 30};
  send_raw(c, &h, sizeof h);
  send_raw(c, "\x92\xcf", 2);
  c->ops->close(c);
  assert_true(log_has("client disconnected", mark));
  assert_healthy();

  /* a BULK_IN call whose bulk bytes stop short */
  mark = log_mark();
  c = hello();
  struct ferry_memcpy_htod_args a = {.dst = ARENA_BASE, .stream = 0};
  struct ferry_buf b = {0};
  assert_int_equal(ferry_encode_args(FERRY_CALL_memcpy_htod, &a, &b), 0);
  h = (struct ferry_frame){.magic = FERRY_MAGIC, .kind = FERRY_CALL_memcpy_htod,
                           .body_len = (uint32_t)b.len, .bulk_len = 1 << 20};
  send_raw(c, &h, sizeof h);
  send_raw(c, b.data, b.len);
  send_raw(c, "abc", 3);
  ferry_buf_free(&b);
  c->ops->close(c);
  assert_true(log_has("client disconnected", mark));
  assert_healthy();
}

static void test_unknown_call(void **state) {
  (void)state;
  size_t mark = log_mark();
  struct ferry_conn *c = hello();
  unsigned bad = FERRY_CALL_COUNT + 7;
  send_frame(c, bad, "\x90", 1, NULL, 0);
  char want[64];
  snprintf(want, sizeof want, "unknown call id %u", bad);
  expect_goodbye(c, want);
  c->ops->close(c);
  assert_true(log_has(want, mark));
  assert_healthy();

  /* a server-only frame kind from a client is a violation too */
  mark = log_mark();
  c = hello();
  send_frame(c, FERRY_KIND_REPLY, "\x90", 1, NULL, 0);
  expect_goodbye(c, "server frame");
  c->ops->close(c);
  assert_healthy();
}

static void test_malformed_body(void **state) {
  (void)state;
  size_t mark = log_mark();
  struct ferry_conn *c = hello();
  /* 0xc1 is never valid msgpack */
  send_frame(c, FERRY_CALL_device_synchronize, "\xc1\xc1\xc1", 3, NULL, 0);
  expect_goodbye(c, "malformed frame");
  c->ops->close(c);
  assert_true(log_has("malformed frame: arguments of device_synchronize", mark));
  assert_healthy();

  /* well-formed msgpack of the wrong shape: a string where mem_map wants u64s */
  mark = log_mark();
  c = hello();
  send_frame(c, FERRY_CALL_mem_map, "\x92\xa1x\x01", 4, NULL, 0);
  expect_goodbye(c, "malformed frame");
  c->ops->close(c);
  assert_true(log_has("malformed frame: arguments of mem_map", mark));
  assert_healthy();
}

static void test_header_violations(void **state) {
  (void)state;
  /* bulk bytes on a call that takes none */
  struct ferry_conn *c = hello();
  struct ferry_device_synchronize_args a = {0};
  struct ferry_buf b = {0};
  assert_int_equal(ferry_encode_args(FERRY_CALL_device_synchronize, &a, &b), 0);
  send_frame(c, FERRY_CALL_device_synchronize, b.data, b.len, "xyzw", 4);
  ferry_buf_free(&b);
  expect_goodbye(c, "bulk");
  c->ops->close(c);
  assert_healthy();

  /* a body over the limit, reserved flags, a second hello */
  c = hello();
  struct ferry_frame h = {.magic = FERRY_MAGIC, .kind = FERRY_CALL_mem_map,
                          .body_len = FERRY_MAX_BODY + 1};
  send_raw(c, &h, sizeof h);
  expect_goodbye(c, "exceeds");
  c->ops->close(c);
  c = hello();
  h = (struct ferry_frame){.magic = FERRY_MAGIC, .kind = FERRY_CALL_mem_map, .flags = 4};
  send_raw(c, &h, sizeof h);
  expect_goodbye(c, "flags");
  c->ops->close(c);
  c = hello();
  struct ferry_hello_args ha = {.version = FERRY_PROTOCOL_VERSION};
  send_call(c, FERRY_CALL_hello, &ha, NULL, 0);
  expect_goodbye(c, "second hello");
  c->ops->close(c);
  assert_healthy();

  /* the first frame must be hello */
  c = dial();
  send_call(c, FERRY_CALL_device_synchronize, &a, NULL, 0);
  expect_goodbye(c, "not hello");
  c->ops->close(c);
  assert_healthy();
}

static void test_hello_refusals(void **state) {
  (void)state;
  struct ferry_conn *c = dial();
  assert_int_equal(hello_status(c, FERRY_PROTOCOL_VERSION + 1, 0), 35 /* cudaErrorInsufficientDriver */);
  expect_goodbye(c, "protocol version mismatch");
  c->ops->close(c);
  c = dial();
  assert_int_equal(hello_status(c, FERRY_PROTOCOL_VERSION, 4000), 101 /* cudaErrorInvalidDevice */);
  expect_goodbye(c, "out of range");
  c->ops->close(c);
  assert_healthy();
}

/* bulk in both directions, through the executor and the simulated device */
static void test_copy_roundtrip(void **state) {
  (void)state;
  struct ferry_conn *c = hello();
  size_t n = (5u << 20) + 123;
  struct ferry_mem_map_args m = {.addr = ARENA_BASE, .size = 8u << 20};
  assert_int_equal(sync_call(c, FERRY_CALL_mem_map, &m, NULL), 0);
  unsigned char *src = malloc(n);
  for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(i * 7 + (i >> 12));
  struct ferry_memcpy_htod_args h = {.dst = ARENA_BASE + 99, .stream = 0};
  send_call(c, FERRY_CALL_memcpy_htod, &h, src, n);
  struct reply r;
  assert_int_equal(read_reply(c, &r, 0), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  assert_int_equal(r.h.status, 0);
  free_reply(&r);
  struct ferry_memcpy_dtoh_args d = {.src = ARENA_BASE + 99, .size = n, .stream = 0};
  send_call(c, FERRY_CALL_memcpy_dtoh, &d, NULL, 0);
  assert_int_equal(read_reply(c, &r, 1), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  assert_int_equal(r.h.bulk_len, n);
  assert_int_equal(r.final_status, 0);
  assert_memory_equal(r.bulk, src, n);
  free_reply(&r);
  /* a copy from unmapped memory is a CUDA error, not the end of the session */
  struct ferry_memcpy_dtoh_args bad = {.src = ARENA_BASE + (1ull << 36), .size = 4096};
  send_call(c, FERRY_CALL_memcpy_dtoh, &bad, NULL, 0);
  assert_int_equal(read_reply(c, &r, 1), 0);
  assert_true(r.h.status != 0 || r.final_status != 0);
  free_reply(&r);
  int32_t async_st = -1;
  struct ferry_device_synchronize_args s = {0};
  assert_int_equal(sync_call(c, FERRY_CALL_device_synchronize, &s, &async_st), 0);
  free(src);
  c->ops->close(c);
  assert_healthy();
}

/* Many frames in one send, so the server's reader holds several at once;
   copy sizes on both sides of the small-reply and chunking thresholds. */
static void test_pipelined_copies(void **state) {
  (void)state;
  struct ferry_conn *c = hello();
  struct ferry_mem_map_args m = {.addr = ARENA_BASE, .size = 8u << 20};
  assert_int_equal(sync_call(c, FERRY_CALL_mem_map, &m, NULL), 0);
  static const size_t sizes[] = {1, 4, 4093, 32768, 32769, 65543, 300001, (1u << 20) + 5};
  enum { N = sizeof sizes / sizeof sizes[0] };
  size_t total = 0;
  for (int i = 0; i < N; i++) total += sizes[i];
  unsigned char *src = malloc(total);
  for (size_t i = 0; i < total; i++) src[i] = (unsigned char)(i * 13 + (i >> 9));
  /* every htod, then every dtoh, encoded into one buffer sent at once */
  struct ferry_buf all = {0};
  uint64_t at = ARENA_BASE + 17;
  size_t off = 0;
  for (int pass = 0; pass < 2; pass++, at = ARENA_BASE + 17, off = 0) {
    for (int i = 0; i < N; i++) {
      struct ferry_buf b = {0};
      struct ferry_memcpy_htod_async_args h = {.dst = at, .stream = 0};
      struct ferry_memcpy_dtoh_args d = {.src = at, .size = sizes[i], .stream = 0};
      unsigned call = pass ? FERRY_CALL_memcpy_dtoh : FERRY_CALL_memcpy_htod_async;
      assert_int_equal(ferry_encode_args(call, pass ? (void *)&d : (void *)&h, &b), 0);
      struct ferry_frame f = {.magic = FERRY_MAGIC, .kind = (uint16_t)call,
                              .body_len = (uint32_t)b.len, .bulk_len = pass ? 0 : sizes[i]};
      assert_int_equal(ferry_buf_append(&all, (const char *)&f, sizeof f), 0);
      assert_int_equal(ferry_buf_append(&all, b.data, b.len), 0);
      if (!pass) assert_int_equal(ferry_buf_append(&all, (const char *)src + off, sizes[i]), 0);
      ferry_buf_free(&b);
      at += sizes[i] + 3;
      off += sizes[i];
    }
  }
  send_raw(c, all.data, all.len);
  ferry_buf_free(&all);
  off = 0;
  for (int i = 0; i < N; i++) {
    struct reply r;
    assert_int_equal(read_reply(c, &r, 1), 0);
    assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
    assert_int_equal(r.h.status, 0);
    assert_int_equal(r.h.async_status, 0);
    assert_int_equal(r.h.bulk_len, sizes[i]);
    assert_int_equal(r.final_status, 0);
    assert_memory_equal(r.bulk, src + off, sizes[i]);
    free_reply(&r);
    off += sizes[i];
  }
  /* a copy that runs off the end of the mapping after its first chunk (a
     300000-byte copy moves in 128 KiB chunks): every announced byte still
     comes, and the trailer carries the error */
  struct ferry_memcpy_dtoh_args d = {.src = ARENA_BASE + (8u << 20) - 200000, .size = 300000};
  send_call(c, FERRY_CALL_memcpy_dtoh, &d, NULL, 0);
  struct reply r;
  assert_int_equal(read_reply(c, &r, 1), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  assert_int_equal(r.h.status, 0);
  assert_int_equal(r.h.bulk_len, 300000);
  assert_true(r.final_status != 0);
  free_reply(&r);
  struct ferry_device_synchronize_args s = {0};
  assert_int_equal(sync_call(c, FERRY_CALL_device_synchronize, &s, NULL), 0);
  free(src);
  c->ops->close(c);
  assert_healthy();
}

/* a handle the client never created ends the session (ferry's shim checks
   handles itself, so only a broken client sends one); the server survives */
static void test_bad_handle_ends_session(void **state) {
  (void)state;
  size_t mark = log_mark();
  struct ferry_conn *c = hello();
  struct ferry_stream_synchronize_args ss = {.stream = 9999};
  struct ferry_buf b = {0};
  assert_int_equal(ferry_encode_args(FERRY_CALL_stream_synchronize, &ss, &b), 0);
  send_frame(c, FERRY_CALL_stream_synchronize, b.data, b.len, NULL, 0);
  ferry_buf_free(&b);
  expect_goodbye(c, "stream id 9999 was never created");
  c->ops->close(c);
  assert_true(log_has("stream id 9999 was never created", mark));
  assert_healthy();
}

/* a server shares no host memory with its clients: a copy that names a
   host address (the calls only ferry-mhelper takes) ends the session, the
   address is never followed, and the server survives */
static void test_host_addresses_are_violations(void **state) {
  (void)state;
  static char secret[64] = "server memory a client must never read";
  unsigned calls[] = {FERRY_CALL_memcpy_dtoh_host, FERRY_CALL_memcpy_htod_host,
                      FERRY_CALL_host_register};
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    size_t mark = log_mark();
    struct ferry_conn *c = hello();
    struct ferry_mem_map_args m = {ARENA_BASE, 2u << 20};
    assert_int_equal(sync_call(c, FERRY_CALL_mem_map, &m, NULL), 0);
    union {
      struct ferry_memcpy_dtoh_host_args d;
      struct ferry_memcpy_htod_host_args h;
      struct ferry_host_register_args r;
    } a;
    if (calls[i] == FERRY_CALL_host_register)
      a.r = (struct ferry_host_register_args){(uint64_t)(uintptr_t)secret, sizeof secret};
    else if (calls[i] == FERRY_CALL_memcpy_dtoh_host)
      a.d = (struct ferry_memcpy_dtoh_host_args){ARENA_BASE, (uint64_t)(uintptr_t)secret,
                                                 sizeof secret, 0};
    else
      a.h = (struct ferry_memcpy_htod_host_args){ARENA_BASE, (uint64_t)(uintptr_t)secret,
                                                 sizeof secret, 0};
    struct ferry_buf b = {0};
    assert_int_equal(ferry_encode_args(calls[i], &a, &b), 0);
    send_frame(c, calls[i], b.data, b.len, NULL, 0);
    ferry_buf_free(&b);
    expect_goodbye(c, "does not share");
    c->ops->close(c);
    assert_true(log_has("does not share", mark));
    assert_healthy();
  }
}

/* CUDA errors are answers; ASYNC errors surface in the next reply */
static void test_cuda_errors_are_not_fatal(void **state) {
  (void)state;
  struct ferry_conn *c = hello();
  struct ferry_memset_args ms = {.dst = ARENA_BASE + (1ull << 37), .value = 1, .size = 64};
  send_call(c, FERRY_CALL_memset, &ms, NULL, 0);
  struct ferry_device_synchronize_args s = {0};
  int32_t async_st = 0;
  sync_call(c, FERRY_CALL_device_synchronize, &s, &async_st);
  assert_true(async_st != 0);
  /* taken once: the next reply is clean again */
  assert_int_equal(sync_call(c, FERRY_CALL_device_synchronize, &s, &async_st), 0);
  assert_int_equal(async_st, 0);
  c->ops->close(c);
  assert_healthy();
}

/* --once serves one session and exits with the session's status */
static void test_once(void **state) {
  (void)state;
  int fd;
  pid_t pid = start_server("--once", &fd);
  assert_true(pid > 0);
  char seen[4096] = "";
  struct ferry_url saved = server_url;
  assert_int_equal(read_listen_line(fd, &server_url, seen, sizeof seen), 0);
  struct ferry_conn *c = hello();
  c->ops->close(c);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  close(fd);
  /* a protocol violation gives a non-zero status */
  pid = start_server("--once", &fd);
  assert_int_equal(read_listen_line(fd, &server_url, seen, sizeof seen), 0);
  c = dial();
  send_raw(c, "garbage garbage garbage garbage!", 32);
  c->ops->close(c);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 2);
  close(fd);
  server_url = saved;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_healthy_session),
      cmocka_unit_test(test_bad_handle_ends_session),
      cmocka_unit_test(test_host_addresses_are_violations),
      cmocka_unit_test(test_garbage_bytes),
      cmocka_unit_test(test_truncated_frames),
      cmocka_unit_test(test_unknown_call),
      cmocka_unit_test(test_malformed_body),
      cmocka_unit_test(test_header_violations),
      cmocka_unit_test(test_hello_refusals),
      cmocka_unit_test(test_copy_roundtrip),
      cmocka_unit_test(test_pipelined_copies),
      cmocka_unit_test(test_cuda_errors_are_not_fatal),
      cmocka_unit_test(test_once),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
