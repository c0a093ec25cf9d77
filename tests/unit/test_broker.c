/*
 * The broker in ferry-server's parent (server/broker.c): CUDA IPC's table
 * (bounds, owners, a session's end), FERRY_STREAMS' keys (lanes, deadlines,
 * owners, strangers), the checks of every message, and requests served
 * over a real SOCK_SEQPACKET pair with descriptors passed and refused; the
 * session's end (server/broker_client.c) taking the data connections the
 * parent hands over, also while it waits for a reply, and closing late ones.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/broker.h"
#include "server/broker_client.h"

static int open_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 1024; fd++) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

static int a_pipe_end(void) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  close(p[1]);
  return p[0];
}

static void key_of(uint8_t *key, int v) {
  memset(key, 0, FERRY_IPC_KEY_LEN);
  key[0] = (uint8_t)v;
}

static void test_table_rules(void **state) {
  (void)state;
  int before = open_fds();
  struct broker_table t = {.max_entries = 2, .max_fds = 3};
  uint8_t k1[16], k2[16], k3[16];
  key_of(k1, 1), key_of(k2, 2), key_of(k3, 3);
  int f[3] = {a_pipe_end(), a_pipe_end(), a_pipe_end()};
  assert_int_equal(broker_table_put(&t, 100, k1, "m", 1, f, 2), 0);
  /* the same key twice, or more descriptors than the bound: refused, closed */
  int g = a_pipe_end();
  assert_int_equal(broker_table_put(&t, 100, k1, "m", 1, &g, 1), FERRY_IPC_TOO_MANY);
  int h[2] = {a_pipe_end(), a_pipe_end()};
  assert_int_equal(broker_table_put(&t, 101, k2, "m", 1, h, 2), FERRY_IPC_TOO_MANY);
  assert_int_equal(broker_table_put(&t, 101, k2, "mm", 2, &f[2], 1), 0);
  /* entries are bounded too */
  assert_int_equal(broker_table_put(&t, 101, k3, "m", 1, NULL, 0), FERRY_IPC_TOO_MANY);
  const struct broker_entry *e = broker_table_find(&t, k2);
  assert_non_null(e);
  assert_int_equal(e->owner, 101);
  assert_int_equal(e->meta_len, 2);
  /* only the owner drops an export */
  assert_int_equal(broker_table_drop(&t, 100, k2), -1);
  assert_non_null(broker_table_find(&t, k2));
  assert_int_equal(broker_table_drop(&t, 101, k2), 0);
  assert_null(broker_table_find(&t, k2));
  assert_int_equal(broker_table_drop(&t, 101, k2), -1);
  /* a session's end drops all it exported, closing the descriptors */
  assert_int_equal(broker_table_put(&t, 100, k3, "m", 1, NULL, 0), 0);
  assert_int_equal(broker_table_drop_owner(&t, 100), 2);
  assert_int_equal(t.n, 0);
  assert_int_equal(t.fds, 0);
  broker_table_free(&t);
  assert_int_equal(open_fds(), before);
}

static size_t msg(void *buf, uint32_t magic, uint16_t op, uint16_t nfds, uint32_t status,
                  uint32_t meta_len, size_t extra) {
  struct broker_hdr h = {.magic = magic, .op = op, .nfds = nfds, .status = status,
                         .meta_len = meta_len};
  memcpy(buf, &h, sizeof h);
  memset((char *)buf + sizeof h, 'x', meta_len + extra);
  return sizeof h + meta_len + extra;
}

static void test_parse(void **state) {
  (void)state;
  char buf[4096], why[200];
  struct broker_hdr h;
  const void *meta;
  size_t n = msg(buf, BROKER_MAGIC, BROKER_PUT, 2, 0, 10, 0);
  assert_int_equal(broker_parse(buf, n, 2, 0, 0, &h, &meta, why, sizeof why), 0);
  assert_int_equal(h.meta_len, 10);
  assert_ptr_equal(meta, buf + sizeof h);
  n = msg(buf, BROKER_MAGIC, BROKER_GET, 0, 0, 0, 0);
  assert_int_equal(broker_parse(buf, n, 0, 0, 0, &h, &meta, why, sizeof why), 0);
  n = msg(buf, BROKER_MAGIC, BROKER_REPLY, 1, FERRY_IPC_OWN, 4, 0);
  assert_int_equal(broker_parse(buf, n, 1, 0, 1, &h, &meta, why, sizeof why), 0);

  /* every malformed kind is refused with a reason */
  struct {
    uint32_t magic;
    uint16_t op, nfds;
    uint32_t status, meta_len;
    size_t extra, len_cut;
    unsigned got_fds;
    int ctrunc, want_reply;
    const char *why;
  } bad[] = {
      {0x12345678, BROKER_GET, 0, 0, 0, 0, 0, 0, 0, 0, "magic"},
      {BROKER_MAGIC, 9, 0, 0, 0, 0, 0, 0, 0, 0, "not a request"},
      {BROKER_MAGIC, BROKER_REPLY, 0, 0, 0, 0, 0, 0, 0, 0, "not a request"},
      {BROKER_MAGIC, BROKER_GET, 0, 0, 0, 0, 0, 0, 0, 1, "not a reply"},
      {BROKER_MAGIC, BROKER_PUT, 0, 0, 8, 1, 0, 0, 0, 0, "do not hold"},
      {BROKER_MAGIC, BROKER_PUT, 0, 0, 8, 0, 3, 0, 0, 0, "do not hold"},
      {BROKER_MAGIC, BROKER_PUT, 0, 0, BROKER_META_MAX + 1, 0, 0, 0, 0, 0, "do not hold"},
      {BROKER_MAGIC, BROKER_PUT, 2, 0, 8, 0, 0, 1, 0, 0, "announced"},
      {BROKER_MAGIC, BROKER_PUT, 1, 0, 8, 0, 0, 1, 1, 0, "dropped in transit"},
      {BROKER_MAGIC, BROKER_PUT, BROKER_MAX_FDS + 1, 0, 8, 0, 0, BROKER_MAX_FDS + 1, 0, 0, "at most"},
      {BROKER_MAGIC, BROKER_GET, 1, 0, 0, 0, 0, 1, 0, 0, "carries"},
      {BROKER_MAGIC, BROKER_DROP, 0, 0, 4, 0, 0, 0, 0, 0, "carries"},
      {BROKER_MAGIC, BROKER_PUT, 0, 0, 0, 0, 0, 0, 0, 0, "without a description"},
      {BROKER_MAGIC, BROKER_GET, 0, 7, 0, 0, 0, 0, 0, 0, "with a status"},
      /* FERRY_STREAMS' messages: their description is one struct, a key
         comes alone, a connection with its one descriptor, to the session */
      {BROKER_MAGIC, BROKER_STRIPE_KEY, 0, 0, 8, 0, 0, 0, 0, 0, "description"},
      {BROKER_MAGIC, BROKER_STRIPE_END, 1, 0, 36, 0, 0, 1, 0, 0, "descriptors"},
      {BROKER_MAGIC, BROKER_STRIPE_CONN, 0, 0, 36, 0, 0, 0, 0, 1, "descriptors"},
      {BROKER_MAGIC, BROKER_STRIPE_CONN, 2, 0, 36, 0, 0, 2, 0, 1, "descriptors"},
      {BROKER_MAGIC, BROKER_STRIPE_CONN, 1, 0, 36, 0, 0, 1, 0, 0, "not a request"},
      {BROKER_MAGIC, BROKER_STRIPE_KEY, 0, 0, 36, 0, 0, 0, 0, 1, "not a reply"},
      {BROKER_MAGIC, BROKER_STRIPE_CONN, 1, 3, 36, 0, 0, 1, 0, 1, "status"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    n = msg(buf, bad[i].magic, bad[i].op, bad[i].nfds, bad[i].status,
            bad[i].meta_len > BROKER_META_MAX ? 0 : bad[i].meta_len, bad[i].extra);
    if (bad[i].meta_len > BROKER_META_MAX) {
      struct broker_hdr *p = (struct broker_hdr *)buf;
      p->meta_len = bad[i].meta_len;
    }
    why[0] = '\0';
    assert_int_equal(broker_parse(buf, n - bad[i].len_cut, bad[i].got_fds, bad[i].ctrunc,
                                  bad[i].want_reply, &h, &meta, why, sizeof why), -1);
    if (!strstr(why, bad[i].why)) fail_msg("case %zu: '%s' lacks '%s'", i, why, bad[i].why);
  }
  /* shorter than a header */
  assert_int_equal(broker_parse(buf, 3, 0, 0, 0, &h, &meta, why, sizeof why), -1);
  assert_non_null(strstr(why, "shorter"));

  /* a key for 1 to 16 data connections, no more, no fewer */
  struct broker_stripe d = {.lane = 4};
  n = msg(buf, BROKER_MAGIC, BROKER_STRIPE_KEY, 0, 0, sizeof d, 0);
  memcpy(buf + sizeof h, &d, sizeof d);
  assert_int_equal(broker_parse(buf, n, 0, 0, 0, &h, &meta, why, sizeof why), 0);
  assert_int_equal(sizeof d, 36);
  for (unsigned lanes = 0; lanes <= FERRY_STRIPE_MAX + 1; lanes += FERRY_STRIPE_MAX + 1) {
    d.lane = lanes;
    memcpy(buf + sizeof h, &d, sizeof d);
    assert_int_equal(broker_parse(buf, n, 0, 0, 0, &h, &meta, why, sizeof why), -1);
    assert_non_null(strstr(why, "data connections (1 to 16)"));
  }
  n = msg(buf, BROKER_MAGIC, BROKER_STRIPE_CONN, 1, 0, sizeof d, 0);
  assert_int_equal(broker_parse(buf, n, 1, 0, 1, &h, &meta, why, sizeof why), 0);
  n = msg(buf, BROKER_MAGIC, BROKER_STRIPE_END, 0, 0, sizeof d, 0);
  assert_int_equal(broker_parse(buf, n, 0, 0, 0, &h, &meta, why, sizeof why), 0);
}

static void stripe_key_of(uint8_t *key, int v) {
  memset(key, 0x33, FERRY_STRIPE_KEY_LEN);
  key[FERRY_STRIPE_KEY_LEN - 1] = (uint8_t)v;
}

/* FERRY_STREAMS' keys: a key lets in as many connections as it has lanes,
   until its deadline; strangers, ended keys and keys of sessions that
   ended let in nothing */
static void test_stripe_keys(void **state) {
  (void)state;
  struct broker_table t = {0};
  uint8_t k1[FERRY_STRIPE_KEY_LEN], k2[FERRY_STRIPE_KEY_LEN], k3[FERRY_STRIPE_KEY_LEN];
  stripe_key_of(k1, 1), stripe_key_of(k2, 2), stripe_key_of(k3, 3);
  assert_int_equal(broker_stripe_put(&t, 10, k1, 2, 1000), 0);
  assert_int_equal(broker_stripe_put(&t, 20, k2, 4, 1000), 0);
  /* a stranger: one byte off */
  assert_int_equal(broker_stripe_claim(&t, k3, 0), 0);
  /* two lanes, then the key is spent */
  assert_int_equal(broker_stripe_claim(&t, k1, 0), 10);
  assert_int_equal(broker_stripe_claim(&t, k1, 999), 10);
  assert_int_equal(broker_stripe_claim(&t, k1, 0), 0);
  assert_int_equal(t.nsk, 1);
  /* only its owner ends a key */
  broker_stripe_end(&t, 10, k2);
  assert_int_equal(broker_stripe_claim(&t, k2, 0), 20);
  broker_stripe_end(&t, 20, k2);
  assert_int_equal(broker_stripe_claim(&t, k2, 0), 0);
  assert_int_equal(t.nsk, 0);
  /* past its deadline a key lets in nothing, and expiry removes it */
  assert_int_equal(broker_stripe_put(&t, 10, k1, 2, 1000), 0);
  assert_int_equal(broker_stripe_claim(&t, k1, 1000), 0);
  assert_int_equal(broker_stripe_expire(&t, 999), 1);
  assert_int_equal(broker_stripe_expire(&t, 1000), 0);
  /* a session's new key replaces its old one */
  assert_int_equal(broker_stripe_put(&t, 10, k1, 2, 1000), 0);
  assert_int_equal(broker_stripe_put(&t, 10, k3, 2, 1000), 0);
  assert_int_equal(t.nsk, 1);
  assert_int_equal(broker_stripe_claim(&t, k1, 0), 0);
  /* a session that ended takes its key with it */
  assert_int_equal(broker_stripe_put(&t, 20, k2, 2, 1000), 0);
  assert_int_equal(broker_table_drop_owner(&t, 10), 0);
  assert_int_equal(broker_stripe_claim(&t, k3, 0), 0);
  assert_int_equal(broker_stripe_claim(&t, k2, 0), 20);
  broker_table_free(&t);
  assert_int_equal(t.nsk, 0);
}

/* sends a request with fds over s */
static void send_req(int s, uint16_t op, const uint8_t *key, const char *meta, const int *fds,
                     unsigned nfds) {
  size_t ml = meta ? strlen(meta) : 0;
  struct broker_hdr h = {.magic = BROKER_MAGIC, .op = op, .nfds = (uint16_t)nfds,
                         .meta_len = (uint32_t)ml};
  if (key) memcpy(h.key, key, FERRY_IPC_KEY_LEN);
  assert_true(broker_send(s, &h, meta, fds, 0) > 0);
}

/* the reply: its header, with received fds in fds */
static struct broker_hdr recv_reply(int s, char *meta, int *fds, unsigned *nfds) {
  char buf[4096];
  union {
    char b[CMSG_SPACE(BROKER_MAX_FDS * sizeof(int))];
    struct cmsghdr a;
  } c;
  struct iovec iov = {buf, sizeof buf};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b,
                     .msg_controllen = sizeof c.b};
  ssize_t r = recvmsg(s, &m, MSG_DONTWAIT);
  assert_true(r >= (ssize_t)sizeof(struct broker_hdr));
  *nfds = 0;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
    unsigned k = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    memcpy(fds + *nfds, CMSG_DATA(cm), k * sizeof(int));
    *nfds += k;
  }
  struct broker_hdr h;
  const void *body;
  char why[200];
  assert_int_equal(broker_parse(buf, (size_t)r, *nfds, 0, 1, &h, &body, why, sizeof why), 0);
  memcpy(meta, body, h.meta_len);
  meta[h.meta_len] = '\0';
  return h;
}

static void test_serve(void **state) {
  (void)state;
  int before = open_fds();
  int a[2], b[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, a), 0); /* session 10 */
  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, b), 0); /* session 20 */
  struct broker_table t = {0};
  char why[200], meta[4096];
  int fds[BROKER_MAX_FDS];
  unsigned n;

  /* 10 exports a file; the broker keeps a copy of its descriptor */
  char path[] = "/tmp/ferry-broker-XXXXXX";
  int f = mkstemp(path);
  assert_true(f >= 0);
  unlink(path);
  assert_int_equal(write(f, "shared", 6), 6);
  send_req(a[1], BROKER_PUT, NULL, "pieces", &f, 1);
  close(f);
  assert_int_equal(broker_serve(&t, a[0], 10, why, sizeof why), 0);
  struct broker_hdr h = recv_reply(a[1], meta, fds, &n);
  assert_int_equal(h.status, 0);
  assert_int_equal(n, 0);
  uint8_t key[16];
  memcpy(key, h.key, sizeof key);

  /* 20 gets it: the description and a working descriptor */
  send_req(b[1], BROKER_GET, key, NULL, NULL, 0);
  assert_int_equal(broker_serve(&t, b[0], 20, why, sizeof why), 0);
  h = recv_reply(b[1], meta, fds, &n);
  assert_int_equal(h.status, 0);
  assert_string_equal(meta, "pieces");
  assert_int_equal(n, 1);
  char got[8] = "";
  assert_int_equal(pread(fds[0], got, 6, 0), 6);
  assert_memory_equal(got, "shared", 6);
  close(fds[0]);

  /* 10 asking for its own: FERRY_IPC_OWN; a key nobody made: NO_EXPORT */
  send_req(a[1], BROKER_GET, key, NULL, NULL, 0);
  assert_int_equal(broker_serve(&t, a[0], 10, why, sizeof why), 0);
  assert_int_equal(recv_reply(a[1], meta, fds, &n).status, FERRY_IPC_OWN);
  uint8_t other[16];
  key_of(other, 9);
  send_req(b[1], BROKER_GET, other, NULL, NULL, 0);
  assert_int_equal(broker_serve(&t, b[0], 20, why, sizeof why), 0);
  assert_int_equal(recv_reply(b[1], meta, fds, &n).status, FERRY_IPC_NO_EXPORT);

  /* 20 cannot drop 10's export; 10 can */
  send_req(b[1], BROKER_DROP, key, NULL, NULL, 0);
  assert_int_equal(broker_serve(&t, b[0], 20, why, sizeof why), 0);
  assert_non_null(broker_table_find(&t, key));
  send_req(a[1], BROKER_DROP, key, NULL, NULL, 0);
  assert_int_equal(broker_serve(&t, a[0], 10, why, sizeof why), 0);
  assert_null(broker_table_find(&t, key));

  /* a malformed message: refused with a reason, its descriptors closed */
  int p = a_pipe_end();
  send_req(a[1], BROKER_GET, key, NULL, &p, 1);
  close(p);
  assert_int_equal(broker_serve(&t, a[0], 10, why, sizeof why), -1);
  assert_non_null(strstr(why, "carries"));
  /* nothing to read: nothing done; the session hung up: 1 */
  assert_int_equal(broker_serve(&t, a[0], 10, why, sizeof why), 0);
  close(a[1]);
  assert_int_equal(broker_serve(&t, a[0], 10, why, sizeof why), 1);
  close(a[0]);
  close(b[0]);
  close(b[1]);
  broker_table_free(&t);
  assert_int_equal(open_fds(), before);
}

/* ---- FERRY_STREAMS' hand-over: the parent here, a session in a thread ---- */

struct session_side {
  struct server_broker b;
  uint8_t key[FERRY_STRIPE_KEY_LEN];
  int keyed;       /* server_broker_stripe_key's answer */
  int ipc;         /* a CUDA IPC get's answer, asked while connections come */
  int fds[3];      /* what take gave, in order (-1: none came) */
  uint32_t lanes[3];
};

static void *session_main(void *arg) {
  struct session_side *s = arg;
  s->keyed = server_broker_stripe_key(&s->b, s->key, 2);
  if (s->keyed) return NULL;
  /* a CUDA IPC request: a data connection comes before its reply */
  uint8_t k[FERRY_IPC_KEY_LEN] = {9};
  unsigned nfds = 0;
  size_t ml = 0;
  int fds[1];
  s->ipc = s->b.ops.get(s->b.ops.ctx, k, NULL, &ml, fds, &nfds);
  for (int i = 0; i < 3; i++)
    s->fds[i] = server_broker_stripe_take(&s->b, s->key, i < 2 ? 5000 : 50, &s->lanes[i]);
  server_broker_stripe_end(&s->b, s->key);
  return NULL;
}

/* one request from the session, served */
static void serve_one(struct broker_table *t, int sock, pid_t owner) {
  struct pollfd p = {.fd = sock, .events = POLLIN};
  assert_int_equal(poll(&p, 1, 5000), 1);
  char why[200];
  assert_int_equal(broker_serve(t, sock, owner, why, sizeof why), 0);
}

/* a connected pair standing in for a data connection: the session gets
   one end, the test keeps the other to see it is open or closed */
static void a_conn(int *mine, int *theirs) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  *mine = sv[0];
  *theirs = sv[1];
}

static int closed_far(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  char c;
  return poll(&p, 1, 5000) == 1 && read(fd, &c, 1) == 0;
}

static void test_stripe_handover(void **state) {
  (void)state;
  int before = open_fds();
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  struct broker_table t = {0};
  struct session_side s;
  server_broker_init(&s.b, sv[1], 1);
  stripe_key_of(s.key, 7);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, session_main, &s), 0);

  /* the key is registered (and answered) before the client may know it */
  serve_one(&t, sv[0], 10);
  assert_int_equal(t.nsk, 1);
  /* a late connection of an older key is closed by the session, unseen */
  uint8_t old[FERRY_STRIPE_KEY_LEN];
  stripe_key_of(old, 6);
  int late, late_far;
  a_conn(&late, &late_far);
  assert_int_equal(broker_hand_conn(sv[0], old, 0, late), 0);
  close(late);
  /* lane 1 comes while the session waits for an IPC reply: it is kept */
  int c1, c1_far, c0, c0_far;
  a_conn(&c1, &c1_far);
  assert_int_equal(broker_stripe_claim(&t, s.key, 0), 10);
  assert_int_equal(broker_hand_conn(sv[0], s.key, 1, c1), 0);
  close(c1);
  serve_one(&t, sv[0], 10); /* the get: no such export */
  a_conn(&c0, &c0_far);
  assert_int_equal(broker_stripe_claim(&t, s.key, 0), 10);
  assert_int_equal(broker_hand_conn(sv[0], s.key, 0, c0), 0);
  close(c0);
  /* both lanes came: the key is spent, a third presenting it is a stranger */
  assert_int_equal(broker_stripe_claim(&t, s.key, 0), 0);
  serve_one(&t, sv[0], 10); /* the end */
  pthread_join(th, NULL);

  assert_int_equal(s.keyed, 0);
  assert_int_equal(s.ipc, FERRY_IPC_NO_EXPORT);
  assert_true(closed_far(late_far));
  assert_true(s.fds[0] >= 0 && s.fds[1] >= 0);
  assert_int_equal(s.fds[2], -1);
  assert_int_equal(s.lanes[0], 1);
  assert_int_equal(s.lanes[1], 0);
  /* they are the very connections: bytes go through */
  assert_int_equal(write(s.fds[0], "1", 1), 1);
  assert_int_equal(write(s.fds[1], "0", 1), 1);
  char got = 0;
  assert_int_equal(read(c1_far, &got, 1), 1);
  assert_int_equal(got, '1');
  assert_int_equal(read(c0_far, &got, 1), 1);
  assert_int_equal(got, '0');
  close(s.fds[0]);
  close(s.fds[1]);
  close(c0_far);
  close(c1_far);
  close(late_far);

  /* a connection handed over after the end is taken by nobody, and
     closed when the session next reads its channel */
  a_conn(&late, &late_far);
  assert_int_equal(broker_hand_conn(sv[0], s.key, 0, late), 0);
  close(late);
  uint32_t lane;
  assert_int_equal(server_broker_stripe_take(&s.b, s.key, 10, &lane), -1);
  server_broker_stripe_end(&s.b, s.key);
  assert_true(closed_far(late_far));
  close(late_far);
  serve_one(&t, sv[0], 10); /* that end */
  close(sv[0]);
  close(sv[1]);
  broker_table_free(&t);
  assert_int_equal(open_fds(), before);
}

/* broker_take_fds: every descriptor of every SCM_RIGHTS header, closing
   those beyond the room */
static void test_take_fds(void **state) {
  (void)state;
  int before = open_fds();
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  int p[3] = {a_pipe_end(), a_pipe_end(), a_pipe_end()};
  struct broker_hdr h = {.magic = BROKER_MAGIC, .op = BROKER_GET, .nfds = 3};
  assert_true(broker_send(sv[0], &h, NULL, p, 0) > 0);
  for (int i = 0; i < 3; i++) close(p[i]);
  union {
    char b[CMSG_SPACE(8 * sizeof(int))];
    struct cmsghdr a;
  } c;
  char buf[256];
  struct iovec iov = {buf, sizeof buf};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b,
                     .msg_controllen = sizeof c.b};
  assert_true(recvmsg(sv[1], &m, 0) > 0);
  int fds[2], extra = 0;
  assert_int_equal(broker_take_fds(&m, fds, 2, &extra), 2);
  assert_int_equal(extra, 1);
  close(fds[0]);
  close(fds[1]);
  close(sv[0]);
  close(sv[1]);
  assert_int_equal(open_fds(), before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_rules),
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_serve),
      cmocka_unit_test(test_stripe_keys),
      cmocka_unit_test(test_stripe_handover),
      cmocka_unit_test(test_take_fds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
