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

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocol/codec.h"
#include "protocol/stripe.h"
#include "server/server.h"
#include "transport/reader.h"
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
  unsigned bad = 0; /* an id below FERRY_CALL_LIMIT that no call has */
  while (ferry_call_valid(bad)) bad++;
  assert_true(bad < FERRY_CALL_LIMIT);
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

/* issue 11, a hostile probe's frames, byte for byte: a hello with an empty
   body (a zero-length read into no buffer yet), and after a good hello a
   mem_map whose 6-byte body asks for an array of 537940569 elements (the
   issue calls the frame 37 bytes; its hex is 38). Each ends its session
   with a GOODBYE naming the reason. */
static void test_probe_frames(void **state) {
  (void)state;
  size_t mark = log_mark();
  struct ferry_conn *c = dial();
  unsigned char empty_hello[32] = {0x46, 0x52, 0x59, 0x31};
  send_raw(c, empty_hello, sizeof empty_hello);
  expect_goodbye(c, "arguments of hello: malformed msgpack body: empty body");
  c->ops->close(c);
  assert_true(log_has("ended: malformed frame: arguments of hello", mark));
  assert_healthy();

  mark = log_mark();
  static const unsigned char huge_count[38] = {
      0x46, 0x52, 0x59, 0x31, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x92, 0xdd, 0x20, 0x10, 0x52, 0x59};
  c = hello();
  send_raw(c, huge_count, sizeof huge_count);
  expect_goodbye(c, "an array of 537940569 elements at byte 1 cannot fit in the 0 bytes left");
  c->ops->close(c);
  assert_true(log_has("ended: malformed frame: arguments of mem_map", mark));
  assert_healthy();
}

/* a connection whose recv_some breaks its contract: 1 byte, whatever the minimum */
static long short_recv_some(struct ferry_conn *c, void *buf, size_t min, size_t cap) {
  (void)c, (void)min, (void)cap;
  memset(buf, 'x', 1);
  return 1;
}

/* issue 11: the session reads an empty body into a buffer it has not
   allocated yet, so the reader must take (NULL, 0) without touching
   either (memcpy(NULL, .., 0) is undefined: the ASan/UBSan build aborted
   the session). ferry-server's parent now reads hellos itself, so this
   pins the reader directly. Also: a transport that returns less than it
   was asked for is an error, not a reader that counts bytes it lacks. */
static void test_reader_edge_cases(void **state) {
  (void)state;
  static const struct ferry_conn_ops ops = {.recv_some = short_recv_some};
  struct ferry_conn c = {.ops = &ops};
  struct ferry_reader *rd = malloc(sizeof *rd);
  assert_non_null(rd);
  ferry_reader_init(rd, &c);
  assert_int_equal(ferry_read(rd, NULL, 0), 0);
  char buf[10];
  errno = 0;
  assert_int_equal(ferry_read(rd, buf, sizeof buf), -1);
  assert_int_equal(errno, EIO);
  assert_int_equal(ferry_reader_buffered(rd), 0);
  free(rd);
}

/* ---- issue 11: what a connection may cost before and after the fork ----
   These start their own servers with the limits under test and speak to
   them over plain sockets, so that a test can send a byte at a time, bind
   another loopback address, or stay silent. */

/* live (not yet exited) children of ppid, from /proc/N/stat; the first in *first */
static int children_of(pid_t ppid, pid_t *first) {
  DIR *d = opendir("/proc");
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) continue;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0) continue;
    buf[r] = '\0';
    char *rp = strrchr(buf, ')'), state;
    int parent;
    if (!rp || sscanf(rp + 1, " %c %d", &state, &parent) != 2) continue;
    if (parent != ppid || state == 'Z') continue;
    if (first && !n) *first = (pid_t)atoi(e->d_name);
    n++;
  }
  closedir(d);
  return n;
}

/* waits up to ms for ppid to have `want` live children; returns the count */
static int wait_children(pid_t ppid, int want, int ms) {
  int n = children_of(ppid, NULL);
  for (int t = 0; n != want && t < ms; t += 10) {
    usleep(10000);
    n = children_of(ppid, NULL);
  }
  return n;
}

/* a server of its own, its stderr collected as it is needed */
struct srv {
  pid_t pid;
  int fd;
  struct ferry_url url;
  char log[1 << 16];
  size_t len;
};

static pid_t srv_spawn(const char *const *extra, int *errfd) {
  const char *argv[32] = {FERRY_SERVER_BIN, "--backend", "sim", "--listen", "tcp://127.0.0.1:0"};
  int n = 5;
  for (; extra && *extra && n < 31; extra++) argv[n++] = *extra;
  argv[n] = NULL;
  int fds[2];
  if (pipe(fds)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    /* a test that fails midway leaves no server behind holding ctest's pipe */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  close(fds[1]);
  *errfd = fds[0];
  return pid;
}

static void srv_start(struct srv *s, const char *const *extra) {
  memset(s, 0, sizeof *s);
  s->pid = srv_spawn(extra, &s->fd);
  assert_true(s->pid > 0);
  if (read_listen_line(s->fd, &s->url, s->log, sizeof s->log))
    fail_msg("ferry-server did not start: %s", s->log);
  s->len = strlen(s->log);
}

/* reads what the server logged within ms (0: only what is there) */
static void srv_read_log(struct srv *s, int ms) {
  struct pollfd p = {.fd = s->fd, .events = POLLIN};
  while (s->len < sizeof s->log - 1 && poll(&p, 1, ms) > 0) {
    ssize_t r = read(s->fd, s->log + s->len, sizeof s->log - 1 - s->len);
    if (r <= 0) break;
    s->len += (size_t)r;
    s->log[s->len] = '\0';
    if (getenv("FERRY_TEST_VERBOSE")) fwrite(s->log + s->len - r, 1, (size_t)r, stderr);
    ms = 0;
  }
}

static int srv_log_has(struct srv *s, const char *needle, int ms) {
  for (int t = 0; t <= ms; t += 10) {
    srv_read_log(s, 10);
    if (strstr(s->log, needle)) return 1;
  }
  fprintf(stderr, "server log lacks '%s'; log:\n%s\n", needle, s->log);
  return 0;
}

static int srv_log_count(struct srv *s, const char *needle) {
  srv_read_log(s, 0);
  int n = 0;
  for (const char *p = s->log; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static void srv_stop(struct srv *s) {
  kill(s->pid, SIGTERM);
  int st = 0;
  assert_int_equal(waitpid(s->pid, &st, 0), s->pid);
  close(s->fd);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* the exit status of a server that must refuse its command line, and its log */
static int srv_refuses(const char *const *extra, char *log, size_t cap) {
  int fd;
  pid_t pid = srv_spawn(extra, &fd);
  size_t len = 0;
  ssize_t r;
  while (len < cap - 1 && (r = read(fd, log + len, cap - 1 - len)) > 0) len += (size_t)r;
  log[len] = '\0';
  close(fd);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* a tcp connection to the server, from source address src (NULL: any) */
static int raw_dial(const struct ferry_url *u, const char *src) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  if (src) {
    struct sockaddr_in a = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, src, &a.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  }
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)u->port)};
  assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &to.sin_addr), 1);
  assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof to), 0);
  return fd;
}

static void raw_send(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    assert_true(w > 0);
    c += w;
    n -= (size_t)w;
  }
}

/* n bytes within ms; -1 at EOF or error, -2 out of time */
static int raw_recv(int fd, void *dst, size_t n, int ms) {
  char *p = dst;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (n) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    long left = ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&pf, 1, (int)left) <= 0) return -2;
    ssize_t r = recv(fd, p, n, 0);
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* the next frame (body and bulk; a bulk REPLY's trailer in final_status) */
static int raw_frame(int fd, struct reply *r, int ms) {
  memset(r, 0, sizeof *r);
  int rc = raw_recv(fd, &r->h, sizeof r->h, ms);
  if (rc) return rc;
  assert_int_equal(r->h.magic, FERRY_MAGIC);
  r->body = malloc(r->h.body_len + 1);
  r->bulk = malloc(r->h.bulk_len + 1);
  assert_int_equal(raw_recv(fd, r->body, r->h.body_len, ms), 0);
  r->body[r->h.body_len] = '\0';
  assert_int_equal(raw_recv(fd, r->bulk, r->h.bulk_len, ms), 0);
  if (r->h.kind == FERRY_KIND_REPLY && r->h.bulk_len)
    assert_int_equal(raw_recv(fd, &r->final_status, 4, ms), 0);
  return 0;
}

static void frame_bytes(struct ferry_buf *b, unsigned call, const void *args, uint64_t bulk_len) {
  struct ferry_buf body = {0};
  assert_int_equal(ferry_encode_args(call, args, &body), 0);
  struct ferry_frame h = {.magic = FERRY_MAGIC, .kind = (uint16_t)call,
                          .body_len = (uint32_t)body.len, .bulk_len = bulk_len};
  assert_int_equal(ferry_buf_append(b, &h, sizeof h), 0);
  assert_int_equal(ferry_buf_append(b, body.data, body.len), 0);
  ferry_buf_free(&body);
}

static void hello_frame(struct ferry_buf *b, const char *token) {
  struct ferry_hello_args a = {.version = FERRY_PROTOCOL_VERSION, .arena_base = ARENA_BASE,
                               .arena_size = ARENA_SIZE, .client_pid = (uint32_t)getpid(),
                               .token = token};
  frame_bytes(b, FERRY_CALL_hello, &a, 0);
}

/* reads up to a GOODBYE naming `needle`; then the server closes */
static void raw_goodbye(int fd, const char *needle) {
  struct reply r;
  do {
    assert_int_equal(raw_frame(fd, &r, 3000), 0);
    if (r.h.kind != FERRY_KIND_GOODBYE) free_reply(&r);
  } while (r.h.kind != FERRY_KIND_GOODBYE);
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  msgpack_object o;
  size_t off = 0;
  assert_int_equal(msgpack_unpack(r.body, r.h.body_len, &off, &z, &o), MSGPACK_UNPACK_SUCCESS);
  assert_int_equal(o.type, MSGPACK_OBJECT_ARRAY);
  assert_int_equal(o.via.array.ptr[0].type, MSGPACK_OBJECT_STR);
  const char *s = o.via.array.ptr[0].via.str.ptr;
  if (!memmem(s, o.via.array.ptr[0].via.str.size, needle, strlen(needle)))
    fail_msg("goodbye reason '%.*s' lacks '%s'", (int)o.via.array.ptr[0].via.str.size, s, needle);
  msgpack_zone_destroy(&z);
  free_reply(&r);
  char b;
  assert_int_equal(raw_recv(fd, &b, 1, 3000), -1);
}

/* a served session: the REPLY status of the hello, from src */
static int32_t raw_hello_status(const struct ferry_url *u, const char *src, const char *token,
                                int *fd_out) {
  int fd = raw_dial(u, src);
  struct ferry_buf b = {0};
  hello_frame(&b, token);
  raw_send(fd, b.data, b.len);
  ferry_buf_free(&b);
  struct reply r;
  assert_int_equal(raw_frame(fd, &r, 3000), 0);
  if (r.h.kind == FERRY_KIND_GOODBYE) fail_msg("hello answered by a GOODBYE: %s", r.body + 2);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  int32_t st = r.h.status;
  free_reply(&r);
  *fd_out = fd;
  return st;
}

static int raw_hello(const struct ferry_url *u, const char *src) {
  int fd;
  assert_int_equal(raw_hello_status(u, src, NULL, &fd), 0);
  return fd;
}

/* a SYNC call without bulk; its status, the latched async one in *async_st */
static int32_t raw_sync(int fd, unsigned call, const void *args, int32_t *async_st) {
  struct ferry_buf b = {0};
  frame_bytes(&b, call, args, 0);
  raw_send(fd, b.data, b.len);
  ferry_buf_free(&b);
  struct reply r;
  assert_int_equal(raw_frame(fd, &r, 5000), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  if (async_st) *async_st = r.h.async_status;
  free_reply(&r);
  return r.h.status;
}

/* a connection that never speaks costs no process: the parent holds it
   until its hello is complete */
static void test_silent_connections_fork_nothing(void **state) {
  (void)state;
  assert_int_equal(wait_children(server_pid, 0, 3000), 0); /* earlier tests' sessions */
  int fds[11];
  for (int i = 0; i < 10; i++) fds[i] = raw_dial(&server_url, NULL);
  fds[10] = raw_dial(&server_url, NULL);
  struct ferry_frame h = {.magic = FERRY_MAGIC, .kind = FERRY_CALL_hello, .body_len = 40};
  raw_send(fds[10], &h, 10); /* a third of a header */
  usleep(300000);
  assert_int_equal(children_of(server_pid, NULL), 0);
  for (int i = 0; i < 11; i++) close(fds[i]);
  assert_healthy();
}

/* the whole hello must arrive within the handshake timeout: a client
   sending a byte at a time, or nothing, is dropped with the reason */
static void test_slow_hello_dropped(void **state) {
  (void)state;
  struct srv s;
  static const char *const args[] = {"--handshake-timeout-ms", "400", NULL};
  srv_start(&s, args);
  int silent = raw_dial(&s.url, NULL);
  int slow = raw_dial(&s.url, NULL);
  struct ferry_buf b = {0};
  hello_frame(&b, NULL);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  size_t sent = 0;
  for (;;) {
    struct pollfd p = {.fd = slow, .events = POLLIN};
    if (poll(&p, 1, 50) > 0) break; /* the GOODBYE */
    assert_int_equal(children_of(s.pid, NULL), 0);
    assert_true(sent < b.len); /* dropped before the hello is complete */
    raw_send(slow, b.data + sent++, 1);
  }
  clock_gettime(CLOCK_MONOTONIC, &t);
  long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
  assert_true(ms >= 350 && ms < 2000);
  raw_goodbye(slow, "handshake timeout: no complete hello within 400 ms");
  raw_goodbye(silent, "handshake timeout");
  assert_int_equal(children_of(s.pid, NULL), 0);
  assert_true(srv_log_has(&s, "ended: handshake timeout", 2000));
  close(slow);
  close(silent);
  ferry_buf_free(&b);
  /* a client that says hello at once is served */
  int fd = raw_hello(&s.url, NULL);
  assert_int_equal(wait_children(s.pid, 1, 2000), 1);
  close(fd);
  srv_stop(&s);
}

/* a wrong token is found by the parent: no session process ever exists */
static void test_wrong_token_never_forks(void **state) {
  (void)state;
  char path[] = "/tmp/ferry-robustness-token.XXXXXX";
  int tf = mkstemp(path);
  assert_true(tf >= 0);
  static const char token[] = "robustness-token-0123456789abcdef";
  assert_int_equal(write(tf, token, strlen(token)), (ssize_t)strlen(token));
  assert_int_equal(fchmod(tf, 0600), 0);
  close(tf);
  struct srv s;
  const char *args[] = {"--token-file", path, NULL};
  srv_start(&s, args);
  unlink(path);

  /* the header first: a server that forks at accept has a child by now */
  int fd = raw_dial(&s.url, NULL);
  struct ferry_buf b = {0};
  hello_frame(&b, "robustness-token-WRONG-456789abcdef");
  raw_send(fd, b.data, sizeof(struct ferry_frame));
  usleep(200000);
  assert_int_equal(children_of(s.pid, NULL), 0);
  raw_send(fd, b.data + sizeof(struct ferry_frame), b.len - sizeof(struct ferry_frame));
  ferry_buf_free(&b);
  struct reply r;
  assert_int_equal(raw_frame(fd, &r, 3000), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  assert_int_equal(r.h.status, 800 /* cudaErrorNotPermitted */);
  free_reply(&r);
  raw_goodbye(fd, "authentication failed: wrong token");
  close(fd);
  assert_int_equal(children_of(s.pid, NULL), 0);
  /* no token at all */
  assert_int_equal(raw_hello_status(&s.url, NULL, NULL, &fd), 800);
  raw_goodbye(fd, "authentication failed: no token");
  close(fd);
  assert_int_equal(children_of(s.pid, NULL), 0);
  assert_true(srv_log_has(&s, "hello refused: authentication failed: wrong token", 2000));
  /* the right one is served */
  assert_int_equal(raw_hello_status(&s.url, NULL, token, &fd), 0);
  assert_int_equal(wait_children(s.pid, 1, 2000), 1);
  close(fd);
  srv_stop(&s);
}

/* --max-sessions: one more is told the server is busy, and nothing forks */
static void test_max_sessions(void **state) {
  (void)state;
  struct srv s;
  static const char *const args[] = {"--max-sessions", "2", NULL};
  srv_start(&s, args);
  int a = raw_hello(&s.url, NULL), b = raw_hello(&s.url, NULL);
  assert_int_equal(wait_children(s.pid, 2, 2000), 2);
  int c = raw_dial(&s.url, NULL);
  struct ferry_buf hb = {0};
  hello_frame(&hb, NULL);
  raw_send(c, hb.data, hb.len);
  raw_goodbye(c, "server busy: 2 sessions (--max-sessions)");
  close(c);
  /* one that says nothing is told at once, not after the handshake timeout */
  int quiet = raw_dial(&s.url, NULL);
  raw_goodbye(quiet, "server busy: 2 sessions (--max-sessions)");
  close(quiet);
  assert_int_equal(children_of(s.pid, NULL), 2);
  assert_true(srv_log_has(&s, "server busy: 2 sessions (--max-sessions)", 2000));
  /* a session that ends makes room */
  close(a);
  assert_int_equal(wait_children(s.pid, 1, 3000), 1);
  usleep(100000); /* the server reaps it on SIGCHLD */
  int d = raw_hello(&s.url, NULL);
  close(b);
  close(d);
  ferry_buf_free(&hb);
  srv_stop(&s);
}

/* --max-per-peer counts the sessions and handshakes of one client address */
static void test_max_per_peer(void **state) {
  (void)state;
  struct srv s;
  static const char *const args[] = {"--max-per-peer", "2", NULL};
  srv_start(&s, args);
  int q1 = raw_dial(&s.url, "127.0.0.1"), q2 = raw_dial(&s.url, "127.0.0.1");
  usleep(100000); /* both accepted */
  int c = raw_dial(&s.url, "127.0.0.1");
  raw_goodbye(c, "too many connections from 127.0.0.1: 2 sessions and handshakes (--max-per-peer)");
  close(c);
  /* another address is not held back */
  int other = raw_hello(&s.url, "127.0.0.2");
  assert_int_equal(wait_children(s.pid, 1, 2000), 1);
  assert_true(srv_log_has(&s, "(--max-per-peer)", 2000));
  close(q1);
  close(q2);
  usleep(100000);
  int again = raw_hello(&s.url, "127.0.0.1");
  close(again);
  close(other);
  srv_stop(&s);
}

/* pending handshakes are bounded: the oldest is dropped for a new one */
static void test_pending_bound_drops_oldest(void **state) {
  (void)state;
  struct srv s;
  static const char *const args[] = {"--max-pending", "3", "--max-per-peer", "100",
                                     "--handshake-timeout-ms", "20000", NULL};
  srv_start(&s, args);
  int q[3];
  for (int i = 0; i < 3; i++) {
    q[i] = raw_dial(&s.url, NULL);
    usleep(30000);
  }
  int fd = raw_hello(&s.url, NULL); /* the fourth handshake */
  raw_goodbye(q[0], "server busy: 3 handshakes pending; the oldest was dropped");
  struct pollfd p[2] = {{.fd = q[1], .events = POLLIN}, {.fd = q[2], .events = POLLIN}};
  assert_int_equal(poll(p, 2, 100), 0); /* the others wait on */
  assert_int_equal(wait_children(s.pid, 1, 2000), 1);
  for (int i = 0; i < 3; i++) close(q[i]);
  close(fd);
  srv_stop(&s);
}

/* a flood of refusals does not flood the log */
static void test_refusals_log_rate_limited(void **state) {
  (void)state;
  struct srv s;
  static const char *const args[] = {"--max-sessions", "1", "--max-per-peer", "100", NULL};
  srv_start(&s, args);
  int keep = raw_hello(&s.url, NULL);
  assert_int_equal(wait_children(s.pid, 1, 2000), 1);
  struct ferry_buf hb = {0};
  hello_frame(&hb, NULL);
  for (int i = 0; i < 40; i++) {
    int c = raw_dial(&s.url, NULL);
    raw_send(c, hb.data, hb.len);
    raw_goodbye(c, "server busy: 1 session (--max-sessions)");
    close(c);
  }
  ferry_buf_free(&hb);
  srv_read_log(&s, 100);
  int lines = srv_log_count(&s, "server busy: 1 session (--max-sessions)");
  assert_true(lines >= 1 && lines <= 7);
  /* and then says how many it left out */
  assert_true(srv_log_has(&s, "more refusals (--max-sessions) not logged", 2500));
  close(keep);
  srv_stop(&s);
}

/* --max-session-mem: mem_map beyond the quota is cudaErrorMemoryAllocation,
   logged once; memory given back can be mapped again */
static void test_session_mem_quota(void **state) {
  (void)state;
  struct srv s;
  static const char *const args[] = {"--max-session-mem", "8M", NULL};
  srv_start(&s, args);
  int fd = raw_hello(&s.url, NULL);
  struct ferry_mem_map_args m = {ARENA_BASE, 4u << 20};
  assert_int_equal(raw_sync(fd, FERRY_CALL_mem_map, &m, NULL), 0);
  m.addr += 4u << 20;
  assert_int_equal(raw_sync(fd, FERRY_CALL_mem_map, &m, NULL), 0);
  struct ferry_mem_map_args over = {ARENA_BASE + (8u << 20), 2u << 20};
  assert_int_equal(raw_sync(fd, FERRY_CALL_mem_map, &over, NULL), 2 /* cudaErrorMemoryAllocation */);
  assert_true(srv_log_has(&s, "device memory quota reached: 2 MiB more would exceed 8 MiB "
                              "(--max-session-mem), 8 MiB mapped", 2000));
  assert_int_equal(raw_sync(fd, FERRY_CALL_mem_map, &over, NULL), 2);
  struct ferry_mem_unmap_args u = {ARENA_BASE, 4u << 20};
  assert_int_equal(raw_sync(fd, FERRY_CALL_mem_unmap, &u, NULL), 0);
  assert_int_equal(raw_sync(fd, FERRY_CALL_mem_map, &over, NULL), 0);
  struct ferry_device_synchronize_args sy = {0};
  assert_int_equal(raw_sync(fd, FERRY_CALL_device_synchronize, &sy, NULL), 0);
  assert_int_equal(srv_log_count(&s, "device memory quota reached"), 1);
  close(fd);
  srv_stop(&s);
}

static long vm_field_kib(pid_t pid, const char *field);
static long vm_hwm_kib(pid_t pid) { return vm_field_kib(pid, "VmHWM:"); }

static long vm_field_kib(pid_t pid, const char *field) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  ssize_t r = read(fd, buf, sizeof buf - 1);
  close(fd);
  assert_true(r > 0);
  buf[r] = '\0';
  const char *at = strstr(buf, field);
  assert_non_null(at);
  return atol(at + strlen(field));
}

/* DEFERRED frames up to the REPLY of the synchronize that follows them:
   tokens and sizes in order, data checked against want; *refused counts
   those that came with no data and why ([token, why]) */
static int refused_count;
static int32_t collect_deferred(int fd, uint64_t *tokens, uint64_t *sizes, int *n,
                                const unsigned char *want, int32_t *async_st) {
  *n = 0;
  refused_count = 0;
  for (;;) {
    struct reply r;
    assert_int_equal(raw_frame(fd, &r, 10000), 0);
    if (r.h.kind == FERRY_KIND_REPLY) {
      *async_st = r.h.async_status;
      free_reply(&r);
      return r.h.status;
    }
    assert_int_equal(r.h.kind, FERRY_KIND_DEFERRED);
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    msgpack_object o;
    size_t off = 0;
    assert_int_equal(msgpack_unpack(r.body, r.h.body_len, &off, &z, &o), MSGPACK_UNPACK_SUCCESS);
    tokens[*n] = o.via.array.ptr[0].via.u64;
    sizes[*n] = r.h.bulk_len;
    if (o.via.array.size == 2) { /* refused: the reason names the limit */
      assert_int_equal(o.via.array.ptr[1].type, MSGPACK_OBJECT_STR);
      assert_int_equal(r.h.bulk_len, 0);
      char why[256];
      snprintf(why, sizeof why, "%.*s", (int)o.via.array.ptr[1].via.str.size, o.via.array.ptr[1].via.str.ptr);
      assert_non_null(strstr(why, "at most 8 MiB (--max-deferred)"));
      refused_count++;
    }
    msgpack_zone_destroy(&z);
    if (r.h.bulk_len) assert_memory_equal(r.bulk, want, r.h.bulk_len);
    (*n)++;
    free_reply(&r);
  }
}

/* asynchronous device-to-host copies hold pinned memory until the client
   synchronizes: beyond --max-deferred they fail (cudaErrorMemoryAllocation,
   delivered empty), the session stays small, and the data of the others
   arrives intact; a lone copy larger than the bound still works */
/* found by fuzz_session: a BULK_OUT reply of no bytes carried a trailer
   the client never reads, and module_load allocated the bulk a header
   announced before any of it came */
static void test_empty_bulk_and_announced_module(void **state) {
  (void)state;
  struct srv s;
  srv_start(&s, NULL);
  int fd = raw_hello(&s.url, NULL);
  struct ferry_mem_map_args m = {ARENA_BASE, 2u << 20};
  assert_int_equal(raw_sync(fd, FERRY_CALL_mem_map, &m, NULL), 0);
  struct ferry_buf b = {0};
  struct ferry_memcpy_dtoh_args d = {.src = ARENA_BASE, .size = 0, .stream = 0};
  frame_bytes(&b, FERRY_CALL_memcpy_dtoh, &d, 0);
  raw_send(fd, b.data, b.len);
  b.len = 0;
  struct reply r;
  assert_int_equal(raw_frame(fd, &r, 5000), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  assert_int_equal(r.h.bulk_len, 0);
  free_reply(&r);
  /* in step: the next reply is the next call's */
  struct ferry_device_synchronize_args sy = {0};
  assert_int_equal(raw_sync(fd, FERRY_CALL_device_synchronize, &sy, NULL), 0);

  pid_t child = 0;
  assert_int_equal(children_of(s.pid, &child), 1);
  long before = vm_field_kib(child, "VmSize:");
  static const char names[] = "k\0";
  struct ferry_module_load_args ml = {.module = 1, .func_names = {names, sizeof names},
                                      .var_names = {NULL, 0}};
  frame_bytes(&b, FERRY_CALL_module_load, &ml, 1ull << 30); /* 1 GiB announced */
  assert_int_equal(ferry_buf_append(&b, "0123456789abcdef", 16), 0); /* 16 bytes come */
  raw_send(fd, b.data, b.len);
  usleep(300 * 1000);
  long grew = vm_field_kib(child, "VmSize:") - before;
  if (grew > 256 * 1024) fail_msg("an announced 1 GiB module grew the session by %ld KiB", grew);
  ferry_buf_free(&b);
  close(fd);
  srv_stop(&s);
}

static void test_deferred_copies_bounded(void **state) {
  (void)state;
  struct srv s;
  static const char *const args[] = {"--max-deferred", "8M", NULL};
  srv_start(&s, args);
  int fd = raw_hello(&s.url, NULL);
  const size_t mib4 = 4u << 20, big = 12u << 20;
  struct ferry_mem_map_args m = {ARENA_BASE, 16u << 20};
  assert_int_equal(raw_sync(fd, FERRY_CALL_mem_map, &m, NULL), 0);
  unsigned char *pat = malloc(big);
  for (size_t i = 0; i < big; i++) pat[i] = (unsigned char)(i * 31 + (i >> 13));
  struct ferry_buf b = {0};
  struct ferry_memcpy_htod_args h = {.dst = ARENA_BASE, .stream = 0};
  frame_bytes(&b, FERRY_CALL_memcpy_htod, &h, big);
  assert_int_equal(ferry_buf_append(&b, pat, big), 0);
  raw_send(fd, b.data, b.len);
  b.len = 0;
  struct reply r;
  assert_int_equal(raw_frame(fd, &r, 5000), 0);
  assert_int_equal(r.h.status, 0);
  free_reply(&r);
  pid_t child = 0;
  assert_int_equal(children_of(s.pid, &child), 1);
  long before = vm_hwm_kib(child);

  enum { N = 24 };
  for (int i = 0; i < N; i++) {
    struct ferry_memcpy_dtoh_async_args a = {ARENA_BASE, mib4, 0, (uint64_t)i + 1};
    frame_bytes(&b, FERRY_CALL_memcpy_dtoh_async, &a, 0);
  }
  struct ferry_device_synchronize_args sy = {0};
  frame_bytes(&b, FERRY_CALL_device_synchronize, &sy, 0);
  raw_send(fd, b.data, b.len);
  b.len = 0;
  uint64_t tokens[N + 1], sizes[N + 1];
  int n = 0;
  int32_t async_st = 0;
  assert_int_equal(collect_deferred(fd, tokens, sizes, &n, pat, &async_st), 0);
  assert_int_equal(async_st, 2 /* cudaErrorMemoryAllocation */);
  assert_int_equal(n, N);
  int with_data = 0;
  for (int i = 0; i < N; i++) {
    assert_int_equal(tokens[i], i + 1);
    assert_true(sizes[i] == 0 || sizes[i] == mib4);
    with_data += sizes[i] == mib4;
  }
  assert_int_equal(with_data, 2); /* 8 MiB of 4 MiB copies */
  assert_int_equal(refused_count, N - 2); /* each of the others says why */
  long grew = vm_hwm_kib(child) - before;
  if (grew > 24 * 1024) fail_msg("the session grew by %ld KiB for %d MiB of copies", grew, 4 * N);
  assert_true(srv_log_has(&s, "(--max-deferred)", 2000));

  /* one copy larger than the bound, nothing else waiting: it is data the
     session holds on the device anyway */
  struct ferry_memcpy_dtoh_async_args a = {ARENA_BASE, big, 0, 100};
  frame_bytes(&b, FERRY_CALL_memcpy_dtoh_async, &a, 0);
  frame_bytes(&b, FERRY_CALL_device_synchronize, &sy, 0);
  raw_send(fd, b.data, b.len);
  assert_int_equal(collect_deferred(fd, tokens, sizes, &n, pat, &async_st), 0);
  assert_int_equal(async_st, 0);
  assert_int_equal(n, 1);
  assert_int_equal(tokens[0], 100);
  assert_int_equal(sizes[0], big);
  assert_int_equal(srv_log_count(&s, "(--max-deferred)"), 1);
  ferry_buf_free(&b);
  free(pat);
  close(fd);
  srv_stop(&s);
}

/* limits that make no sense stop the server at start */
static void test_limit_options_checked(void **state) {
  (void)state;
  char log[4096];
  static const char *const zero[] = {"--max-sessions", "0", NULL};
  assert_int_equal(srv_refuses(zero, log, sizeof log), 2);
  assert_non_null(strstr(log, "--max-sessions 0: expected a whole number"));
  static const char *const unit[] = {"--max-session-mem", "12Q", NULL};
  assert_int_equal(srv_refuses(unit, log, sizeof log), 2);
  assert_non_null(strstr(log, "--max-session-mem 12Q: expected a size"));
  static const char *const huge[] = {"--max-deferred", "99999999T", NULL};
  assert_int_equal(srv_refuses(huge, log, sizeof log), 2);
  assert_non_null(strstr(log, "--max-deferred 99999999T: expected a size"));
}

/* A session that reads its own hello (an ib:// one: its hello comes over
   RDMA, which the server's parent cannot set up) ends itself when the
   hello is not complete in time, and serves one that is. Run here on a
   tcp connection, which is what the ib:// bootstrap accepts. */
static void test_session_own_hello_deadline(void **state) {
  (void)state;
  char err[256];
  const struct ferry_transport *t = ferry_transport_find("tcp", err, sizeof err);
  struct ferry_url u, bound;
  assert_int_equal(ferry_url_parse("tcp://127.0.0.1:0", &u, err, sizeof err), 0);
  struct ferry_listener *l = t->listen(&u, err, sizeof err);
  assert_non_null(l);
  assert_int_equal(ferry_url_parse(l->name, &bound, err, sizeof err), 0);
  for (int say_hello = 0; say_hello < 2; say_hello++) {
    int fd = raw_dial(&bound, NULL);
    struct ferry_conn *c = l->ops->accept(l);
    assert_non_null(c);
    int errp[2];
    assert_int_equal(pipe(errp), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(errp[1], 2);
      close(fd); /* the client's end: a copy here would keep the connection open */
      l->ops->close(l);
      struct server_opts o = {.backend = "sim", .quiet = 1, .handshake_ms = 300};
      _exit(session_run(c, &o));
    }
    close(errp[1]);
    c->ops->detach(c);
    if (say_hello) {
      struct ferry_buf b = {0};
      hello_frame(&b, NULL);
      raw_send(fd, b.data, b.len);
      ferry_buf_free(&b);
      struct reply r;
      assert_int_equal(raw_frame(fd, &r, 3000), 0);
      assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
      assert_int_equal(r.h.status, 0);
      free_reply(&r);
      usleep(500000); /* past the deadline: it no longer applies */
      struct ferry_device_synchronize_args sy = {0};
      assert_int_equal(raw_sync(fd, FERRY_CALL_device_synchronize, &sy, NULL), 0);
      close(fd); /* the session ends with its client */
    }
    int st = 0;
    pid_t w = 0;
    for (int i = 0; i < 300 && !(w = waitpid(pid, &st, WNOHANG)); i++) usleep(10000);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!say_hello) close(fd); /* silent, and open, until the session gave up */
    if (w != pid) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      fail_msg("the session still waits for a hello after 3 s");
    }
    char log[2048];
    ssize_t n = read(errp[0], log, sizeof log - 1);
    log[n > 0 ? n : 0] = '\0';
    close(errp[0]);
    assert_true(WIFEXITED(st));
    if (say_hello) {
      assert_int_equal(WEXITSTATUS(st), 0);
      continue;
    }
    assert_int_equal(WEXITSTATUS(st), 2);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    assert_true(ms >= 250 && ms < 3000);
    if (!strstr(log, "ended: handshake timeout: no complete hello within 300 ms"))
      fail_msg("the session's log lacks its timeout: %s", log);
  }
  l->ops->close(l);
}

/* ---- FERRY_STREAMS: data connections through the server's own port ---- */

/* stripe_open on a session: its status; the port and key it named */
static int32_t raw_stripe_open(int fd, uint32_t streams, uint32_t *port, uint8_t *key) {
  struct ferry_stripe_open_args a = {.streams = streams};
  struct ferry_buf b = {0};
  frame_bytes(&b, FERRY_CALL_stripe_open, &a, 0);
  raw_send(fd, b.data, b.len);
  ferry_buf_free(&b);
  struct reply r;
  assert_int_equal(raw_frame(fd, &r, 5000), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  int32_t st = r.h.status;
  if (!st) {
    struct ferry_decoder d;
    ferry_decoder_init(&d);
    struct ferry_stripe_open_rets rets;
    if (ferry_decode_rets(&d, FERRY_CALL_stripe_open, r.body, r.h.body_len, &rets))
      fail_msg("stripe_open reply: %s", d.error);
    assert_int_equal(rets.key.len, FERRY_STRIPE_KEY_LEN);
    memcpy(key, rets.key.ptr, FERRY_STRIPE_KEY_LEN);
    *port = rets.port;
    ferry_decoder_destroy(&d);
  }
  free_reply(&r);
  return st;
}

/* stripe_attach: the count the session took */
static uint32_t raw_stripe_attach(int fd, uint32_t streams) {
  struct ferry_stripe_attach_args a = {.streams = streams};
  struct ferry_buf b = {0};
  frame_bytes(&b, FERRY_CALL_stripe_attach, &a, 0);
  raw_send(fd, b.data, b.len);
  ferry_buf_free(&b);
  struct reply r;
  assert_int_equal(raw_frame(fd, &r, 10000), 0);
  assert_int_equal(r.h.kind, FERRY_KIND_REPLY);
  assert_int_equal(r.h.status, 0);
  struct ferry_decoder d;
  ferry_decoder_init(&d);
  struct ferry_stripe_attach_rets rets;
  if (ferry_decode_rets(&d, FERRY_CALL_stripe_attach, r.body, r.h.body_len, &rets))
    fail_msg("stripe_attach reply: %s", d.error);
  ferry_decoder_destroy(&d);
  free_reply(&r);
  return rets.streams;
}

/* a data connection to port on 127.0.0.1, presenting key as lane */
static int raw_lane(int port, uint32_t lane, const uint8_t *key) {
  struct ferry_url u = {.port = port};
  int fd = raw_dial(&u, NULL);
  struct ferry_stripe_hello h = {.magic = FERRY_STRIPE_MAGIC, .lane = lane};
  memcpy(h.key, key, sizeof h.key);
  raw_send(fd, &h, sizeof h);
  return fd;
}

/* the server closed fd without a word (no GOODBYE: a data connection reads none) */
static void raw_closed(int fd) {
  char b;
  assert_int_equal(raw_recv(fd, &b, 1, 5000), -1);
  close(fd);
}

/* the data connections come to the server's own port, the one the
   session's connection reached; the parent forks nothing for them and
   hands them to the session, whose key they present; a key lets in its
   lanes once, and nobody else */
static void test_stripe_main_port(void **state) {
  (void)state;
  struct srv s;
  srv_start(&s, NULL);
  /* a key nobody gave: closed, counted, logged */
  uint8_t stranger[FERRY_STRIPE_KEY_LEN];
  memset(stranger, 0x5a, sizeof stranger);
  raw_closed(raw_lane(s.url.port, 0, stranger));
  assert_true(srv_log_has(&s, "refused a data connection from 127.0.0.1:", 2000));
  assert_true(srv_log_has(&s, ": no valid key", 2000));
  assert_int_equal(children_of(s.pid, NULL), 0);

  int c = raw_hello(&s.url, NULL);
  assert_int_equal(wait_children(s.pid, 1, 2000), 1);
  uint32_t port = 0;
  uint8_t key[FERRY_STRIPE_KEY_LEN];
  assert_int_equal(raw_stripe_open(c, 2, &port, key), 0);
  assert_int_equal(port, (uint32_t)s.url.port);
  /* before the session's own: a stranger's (the right key but one bit) */
  memcpy(stranger, key, sizeof key);
  stranger[5] ^= 1;
  int st = raw_lane((int)port, 0, stranger);
  int l1 = raw_lane((int)port, 1, key), l0 = raw_lane((int)port, 0, key);
  raw_closed(st);
  assert_int_equal(raw_stripe_attach(c, 2), 2);
  assert_true(srv_log_has(&s, "large copies striped over 2 data connections", 2000));
  assert_int_equal(children_of(s.pid, NULL), 1);
  /* the key is spent: a third connection with it is a stranger */
  raw_closed(raw_lane((int)port, 0, key));
  assert_true(srv_log_count(&s, "refused a data connection") >= 3);
  /* the session holds its data connections: they end with it */
  close(c);
  raw_closed(l0);
  raw_closed(l1);
  srv_stop(&s);
}

/* a session's key dies with it: once it is reaped, its key is a stranger's */
static void test_stripe_key_dies_with_session(void **state) {
  (void)state;
  struct srv s;
  srv_start(&s, NULL);
  int c = raw_hello(&s.url, NULL);
  uint32_t port = 0;
  uint8_t key[FERRY_STRIPE_KEY_LEN];
  assert_int_equal(raw_stripe_open(c, 4, &port, key), 0);
  close(c);
  assert_true(srv_log_has(&s, ") finished: exit status 0", 3000)); /* reaped */
  raw_closed(raw_lane((int)port, 0, key));
  assert_true(srv_log_has(&s, "refused a data connection", 2000));
  assert_int_equal(children_of(s.pid, NULL), 0);
  srv_stop(&s);
}

/* the bounds on sessions hold back sessions, not a session's data
   connections: with --max-sessions and --max-per-peer reached, a waiting
   session still gets them, while another session is refused */
static void test_stripe_within_bounds(void **state) {
  (void)state;
  struct srv s;
  static const char *const args[] = {"--max-sessions", "2", "--max-per-peer", "1", NULL};
  srv_start(&s, args);
  int c = raw_hello(&s.url, NULL);
  uint32_t port = 0;
  uint8_t key[FERRY_STRIPE_KEY_LEN];
  assert_int_equal(raw_stripe_open(c, 3, &port, key), 0);
  /* while the key waits: a second session of this address is still one too many */
  struct ferry_buf hb = {0};
  hello_frame(&hb, NULL);
  int other = raw_dial(&s.url, "127.0.0.1");
  raw_send(other, hb.data, hb.len);
  raw_goodbye(other, "too many connections from 127.0.0.1: 1 sessions and handshakes "
                     "(--max-per-peer)");
  close(other);
  /* one from elsewhere fills --max-sessions */
  int d = raw_hello(&s.url, "127.0.0.2");
  assert_int_equal(wait_children(s.pid, 2, 2000), 2);
  int third = raw_dial(&s.url, "127.0.0.3");
  raw_send(third, hb.data, hb.len);
  raw_goodbye(third, "server busy: 2 sessions (--max-sessions)");
  close(third);
  int l[3];
  for (uint32_t i = 0; i < 3; i++) l[i] = raw_lane((int)port, i, key);
  assert_int_equal(raw_stripe_attach(c, 3), 3);
  /* nothing waits now: a connection is refused at once, as before */
  int quiet = raw_dial(&s.url, NULL);
  raw_goodbye(quiet, "server busy: 2 sessions (--max-sessions)");
  close(quiet);
  ferry_buf_free(&hb);
  close(c);
  close(d);
  for (int i = 0; i < 3; i++) raw_closed(l[i]);
  srv_stop(&s);
}

/* --once keeps its port open for its session's data connections, and
   for nobody else */
static void test_stripe_once(void **state) {
  (void)state;
  struct srv s;
  static const char *const args[] = {"--once", NULL};
  srv_start(&s, args);
  int c = raw_hello(&s.url, NULL);
  uint32_t port = 0;
  uint8_t key[FERRY_STRIPE_KEY_LEN];
  assert_int_equal(raw_stripe_open(c, 2, &port, key), 0);
  struct ferry_buf hb = {0};
  hello_frame(&hb, NULL);
  int other = raw_dial(&s.url, NULL);
  raw_send(other, hb.data, hb.len);
  raw_goodbye(other, "server busy: it serves one session (--once)");
  close(other);
  ferry_buf_free(&hb);
  int l0 = raw_lane((int)port, 0, key), l1 = raw_lane((int)port, 1, key);
  assert_int_equal(raw_stripe_attach(c, 2), 2);
  close(c);
  int st = 0;
  assert_int_equal(waitpid(s.pid, &st, 0), s.pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  raw_closed(l0);
  raw_closed(l1);
  close(s.fd);
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
      cmocka_unit_test(test_probe_frames),
      cmocka_unit_test(test_reader_edge_cases),
      cmocka_unit_test(test_silent_connections_fork_nothing),
      cmocka_unit_test(test_slow_hello_dropped),
      cmocka_unit_test(test_wrong_token_never_forks),
      cmocka_unit_test(test_max_sessions),
      cmocka_unit_test(test_max_per_peer),
      cmocka_unit_test(test_pending_bound_drops_oldest),
      cmocka_unit_test(test_refusals_log_rate_limited),
      cmocka_unit_test(test_session_mem_quota),
      cmocka_unit_test(test_deferred_copies_bounded),
      cmocka_unit_test(test_empty_bulk_and_announced_module),
      cmocka_unit_test(test_limit_options_checked),
      cmocka_unit_test(test_session_own_hello_deadline),
      cmocka_unit_test(test_stripe_main_port),
      cmocka_unit_test(test_stripe_key_dies_with_session),
      cmocka_unit_test(test_stripe_within_bounds),
      cmocka_unit_test(test_stripe_once),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
