/*
 * A session's end of the channel to ferry-server's parent (broker.h): the
 * executor's ferry_ipc_broker ops (CUDA IPC's broker), and the data
 * connections of FERRY_STREAMS, which the parent hands over whenever they
 * come. One request at a time (the session serves one call at a time); a
 * parent that does not answer within BROKER_WAIT_MS fails the call rather
 * than hang it. A data connection that comes while a reply is awaited is
 * kept for the stripe code; one of a key that is done is closed.
 */
#include "server/broker_client.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define BROKER_WAIT_MS 10000

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void close_all(const int *fds, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    close(fds[i]);
}

static int send_req(int sock, uint16_t op, const uint8_t *key, const void *meta, uint32_t meta_len,
                    const int *fds, unsigned nfds, const char *what) {
  struct broker_hdr h = {.magic = BROKER_MAGIC, .op = op, .nfds = (uint16_t)nfds,
                         .meta_len = meta_len};
  if (key)
    memcpy(h.key, key, FERRY_IPC_KEY_LEN);
  ssize_t w = broker_send(sock, &h, meta, fds, 0);
  if (w < 0)
    ferry_log("%s: the server's broker cannot be reached: %s", what, strerror(errno));
  return w < 0 ? -1 : 0;
}

/* a message from the parent: its header, its description (into the
   caller's buffer) and its descriptors */
struct msg {
  struct broker_hdr h;
  const void *body;
  int fds[BROKER_MAX_FDS];
  unsigned nfds;
};
#define MSG_BUF (sizeof(struct broker_hdr) + BROKER_META_MAX + 1)

/* the next message within ms: 1; 0 none came; -1 the parent is gone;
   -2 a malformed one (logged, its descriptors closed) */
static int next_msg(int sock, int ms, char *buf, struct msg *m, const char *what) {
  struct pollfd p = {.fd = sock, .events = POLLIN};
  int pr;
  do
    pr = poll(&p, 1, ms);
  while (pr < 0 && errno == EINTR);
  if (pr == 0)
    return 0;
  int trunc;
  ssize_t r = pr < 0 ? -1 : broker_recv(sock, buf, MSG_BUF, MSG_DONTWAIT, m->fds, &m->nfds, &trunc);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return 0;
  if (r <= 0) {
    ferry_log("%s: the server's broker is gone", what);
    return -1;
  }
  char why[160];
  if (broker_parse(buf, (size_t)r, m->nfds, trunc, 1, &m->h, &m->body, why, sizeof why)) {
    close_all(m->fds, m->nfds);
    ferry_log("%s: a malformed answer from the server's broker: %s", what, why);
    return -2;
  }
  return 1;
}

/* a data connection the parent handed over: kept when it is of the key
   the session waits with, else closed (it came too late) */
static void hold(struct server_broker *b, const struct msg *m) {
  struct broker_stripe d;
  memcpy(&d, m->body, sizeof d);
  if (!b->stripe_live || memcmp(d.key, b->stripe_key, sizeof d.key) ||
      b->nheld == FERRY_STRIPE_MAX) {
    close(m->fds[0]);
    return;
  }
  b->held[b->nheld].fd = m->fds[0];
  b->held[b->nheld].lane = d.lane;
  b->nheld++;
}

/* the reply: its status (0 or a refusal), or -1; fds received go to fds
   (*nfds: room in, count out), the description to meta (*meta_len likewise) */
static int read_reply(struct server_broker *b, uint8_t *key, void *meta, size_t *meta_len,
                      int *fds, unsigned *nfds, const char *what) {
  char buf[MSG_BUF];
  struct msg m;
  long deadline = now_ms() + BROKER_WAIT_MS;
  for (;;) {
    long left = deadline - now_ms();
    int r = left > 0 ? next_msg(b->fd, (int)left, buf, &m, what) : 0;
    if (r == 0)
      ferry_log("%s: the server's broker did not answer within %d ms", what, BROKER_WAIT_MS);
    if (r <= 0)
      return -1;
    if (m.h.op == BROKER_STRIPE_CONN) { /* not the answer: the stripe code's */
      hold(b, &m);
      continue;
    }
    break;
  }
  unsigned room = nfds ? *nfds : 0;
  size_t mroom = meta_len ? *meta_len : 0;
  if (m.nfds > room || m.h.meta_len > mroom) {
    close_all(m.fds, m.nfds);
    ferry_log("%s: a malformed answer from the server's broker: more than was asked for", what);
    return -1;
  }
  if (key)
    memcpy(key, m.h.key, FERRY_IPC_KEY_LEN);
  if (meta_len) { /* no memcpy of nothing: meta may be NULL then */
    if (m.h.meta_len) memcpy(meta, m.body, m.h.meta_len);
    *meta_len = m.h.meta_len;
  }
  if (nfds) {
    if (m.nfds) memcpy(fds, m.fds, m.nfds * sizeof *fds);
    *nfds = m.nfds;
  }
  return (int)m.h.status;
}

static int put(void *ctx, const void *meta, size_t meta_len, const int *fds, unsigned nfds,
               uint8_t *key) {
  struct server_broker *b = ctx;
  if (meta_len > BROKER_META_MAX || nfds > BROKER_MAX_FDS)
    return FERRY_IPC_TOO_MANY;
  if (send_req(b->fd, BROKER_PUT, NULL, meta, (uint32_t)meta_len, fds, nfds, "CUDA IPC"))
    return -1;
  return read_reply(b, key, NULL, NULL, NULL, NULL, "CUDA IPC");
}

static int get(void *ctx, const uint8_t *key, void *meta, size_t *meta_len, int *fds,
               unsigned *nfds) {
  struct server_broker *b = ctx;
  if (send_req(b->fd, BROKER_GET, key, NULL, 0, NULL, 0, "CUDA IPC"))
    return -1;
  int rc = read_reply(b, NULL, meta, meta_len, fds, nfds, "CUDA IPC");
  if (rc > 0) { /* a refusal carries nothing */
    for (unsigned i = 0; i < *nfds; i++)
      close(fds[i]);
    *nfds = 0;
  }
  return rc;
}

static void drop(void *ctx, const uint8_t *key) {
  struct server_broker *b = ctx;
  send_req(b->fd, BROKER_DROP, key, NULL, 0, NULL, 0, "CUDA IPC");
}

void server_broker_init(struct server_broker *b, int fd, uint64_t instance) {
  memset(b, 0, sizeof *b);
  b->fd = fd;
  b->ops = (struct ferry_ipc_broker){.instance = instance, .put = put, .get = get, .drop = drop,
                                     .ctx = b};
}

/* ---- FERRY_STREAMS' data connections ---- */

#define STRIPE_WHAT "data connections"

static int stripe_msg(struct server_broker *b, uint16_t op, const uint8_t *key, uint32_t lane) {
  struct broker_stripe d = {.lane = lane};
  memcpy(d.key, key, sizeof d.key);
  return send_req(b->fd, op, NULL, &d, sizeof d, NULL, 0, STRIPE_WHAT);
}

static void drop_held(struct server_broker *b) {
  for (unsigned i = 0; i < b->nheld; i++)
    close(b->held[i].fd);
  b->nheld = 0;
}

int server_broker_stripe_key(struct server_broker *b, const uint8_t *key, unsigned lanes) {
  drop_held(b);
  memcpy(b->stripe_key, key, sizeof b->stripe_key);
  b->stripe_live = 1;
  int rc = stripe_msg(b, BROKER_STRIPE_KEY, key, lanes);
  if (!rc)
    rc = read_reply(b, NULL, NULL, NULL, NULL, NULL, STRIPE_WHAT);
  if (rc) {
    b->stripe_live = 0;
    if (rc > 0)
      ferry_log("%s: the server's broker keeps no key for them", STRIPE_WHAT);
    return -1;
  }
  return 0;
}

int server_broker_stripe_take(struct server_broker *b, const uint8_t *key, int ms,
                              uint32_t *lane) {
  if (!b->stripe_live || memcmp(key, b->stripe_key, sizeof b->stripe_key))
    return -1;
  if (b->nheld) { /* oldest first */
    int fd = b->held[0].fd;
    *lane = b->held[0].lane;
    memmove(b->held, b->held + 1, --b->nheld * sizeof b->held[0]);
    return fd;
  }
  char buf[MSG_BUF];
  struct msg m;
  long deadline = now_ms() + ms;
  for (;;) {
    long left = deadline - now_ms();
    int r = left > 0 ? next_msg(b->fd, (int)left, buf, &m, STRIPE_WHAT) : 0;
    if (r == -2)
      continue;
    if (r <= 0)
      return -1;
    if (m.h.op != BROKER_STRIPE_CONN) { /* a reply nothing waits for */
      close_all(m.fds, m.nfds);
      ferry_log("%s: an answer from the server's broker that nothing asked for", STRIPE_WHAT);
      continue;
    }
    hold(b, &m);
    if (b->nheld) {
      int fd = b->held[0].fd;
      *lane = b->held[0].lane;
      b->nheld = 0;
      return fd;
    }
  }
}

void server_broker_stripe_end(struct server_broker *b, const uint8_t *key) {
  stripe_msg(b, BROKER_STRIPE_END, key, 0);
  b->stripe_live = 0;
  drop_held(b);
  /* those the parent handed over before it read the end: closed now (any
     later are closed when next seen) */
  char buf[MSG_BUF];
  struct msg m;
  int r;
  while ((r = next_msg(b->fd, 0, buf, &m, STRIPE_WHAT)) != 0 && r != -1)
    if (r == 1)
      close_all(m.fds, m.nfds);
}
