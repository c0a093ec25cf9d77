/*
 * The broker in ferry-server's parent (broker.h): the table of CUDA IPC's
 * exports and of FERRY_STREAMS' keys, the checks of every message, the
 * serving of one request and the hand-over of a data connection. A session
 * is ours, but it runs the client's calls, so nothing it sends is trusted:
 * lengths, operations and descriptor counts are checked, and an entry is
 * handed out or dropped only as its rules say.
 */
#include "server/broker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"

#define DEFAULT_MAX_ENTRIES 4096
#define DEFAULT_MAX_FDS 1024

int broker_random(void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom((char *)buf + got, n - got, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    got += (size_t)r;
  }
  return 0;
}

int broker_parse(const void *buf, size_t len, unsigned nfds, int ctrunc, int want_reply,
                 struct broker_hdr *h, const void **meta, char *why, size_t n) {
  if (len < sizeof *h) {
    snprintf(why, n, "a %zu-byte message is shorter than its header", len);
    return -1;
  }
  memcpy(h, buf, sizeof *h);
  int reply = h->op == BROKER_REPLY || h->op == BROKER_STRIPE_CONN;
  int request = h->op == BROKER_PUT || h->op == BROKER_GET || h->op == BROKER_DROP ||
                h->op == BROKER_STRIPE_KEY || h->op == BROKER_STRIPE_END;
  int stripe = h->op == BROKER_STRIPE_KEY || h->op == BROKER_STRIPE_END ||
               h->op == BROKER_STRIPE_CONN;
  struct broker_stripe sd = {0};
  if (stripe && len == sizeof *h + sizeof sd)
    memcpy(&sd, (const char *)buf + sizeof *h, sizeof sd);
  if (h->magic != BROKER_MAGIC)
    snprintf(why, n, "bad magic 0x%08x", (unsigned)h->magic);
  else if (want_reply ? !reply : !request)
    snprintf(why, n, "operation %u is not a %s", (unsigned)h->op, want_reply ? "reply" : "request");
  else if (h->meta_len > BROKER_META_MAX || sizeof *h + h->meta_len != len)
    snprintf(why, n, "%zu bytes do not hold a header and %u bytes of description", len,
             (unsigned)h->meta_len);
  else if (ctrunc)
    snprintf(why, n, "descriptors were dropped in transit");
  else if (h->nfds != nfds || nfds > BROKER_MAX_FDS)
    snprintf(why, n, "%u descriptors came, %u announced (at most %d)", nfds, (unsigned)h->nfds,
             BROKER_MAX_FDS);
  else if ((h->op == BROKER_GET || h->op == BROKER_DROP) && (nfds || h->meta_len))
    snprintf(why, n, "a %s carries a description or descriptors",
             h->op == BROKER_GET ? "get" : "drop");
  else if (h->op == BROKER_PUT && !h->meta_len)
    snprintf(why, n, "a put without a description");
  else if (stripe && h->meta_len != sizeof sd)
    snprintf(why, n, "a data connection's message of %u bytes of description, not %zu",
             (unsigned)h->meta_len, sizeof sd);
  else if (stripe && nfds != (h->op == BROKER_STRIPE_CONN))
    snprintf(why, n, "a data connection's message carries %u descriptors", nfds);
  else if (h->op == BROKER_STRIPE_KEY && (sd.lane < 1 || sd.lane > FERRY_STRIPE_MAX))
    snprintf(why, n, "a key for %u data connections (1 to %d)", (unsigned)sd.lane,
             FERRY_STRIPE_MAX);
  else if (h->op == BROKER_STRIPE_CONN && h->status)
    snprintf(why, n, "a data connection with a status");
  else if (!reply && h->status)
    snprintf(why, n, "a request with a status");
  else {
    *meta = (const char *)buf + sizeof *h;
    return 0;
  }
  return -1;
}

static void close_all(const int *fds, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    close(fds[i]);
}

int broker_table_put(struct broker_table *t, pid_t owner, const uint8_t *key, const void *meta,
                     uint32_t meta_len, const int *fds, unsigned nfds) {
  size_t max_e = t->max_entries ? t->max_entries : DEFAULT_MAX_ENTRIES;
  unsigned max_f = t->max_fds ? t->max_fds : DEFAULT_MAX_FDS;
  if (t->n >= max_e || nfds > BROKER_MAX_FDS || nfds > max_f - (t->fds < max_f ? t->fds : max_f) ||
      meta_len > BROKER_META_MAX || broker_table_find(t, key)) {
    close_all(fds, nfds);
    return FERRY_IPC_TOO_MANY;
  }
  if (ferry_grow((void **)&t->e, &t->cap, t->n + 1, sizeof *t->e)) {
    close_all(fds, nfds);
    return -1;
  }
  struct broker_entry *e = &t->e[t->n];
  memset(e, 0, sizeof *e);
  if (meta_len && !(e->meta = malloc(meta_len))) {
    close_all(fds, nfds);
    return -1;
  }
  memcpy(e->key, key, FERRY_IPC_KEY_LEN);
  e->owner = owner;
  e->meta_len = meta_len;
  if (meta_len)
    memcpy(e->meta, meta, meta_len);
  e->nfds = nfds;
  if (nfds)
    memcpy(e->fds, fds, nfds * sizeof *fds);
  t->fds += nfds;
  t->n++;
  return 0;
}

const struct broker_entry *broker_table_find(const struct broker_table *t, const uint8_t *key) {
  for (size_t i = 0; i < t->n; i++)
    if (!memcmp(t->e[i].key, key, FERRY_IPC_KEY_LEN))
      return &t->e[i];
  return NULL;
}

static void remove_at(struct broker_table *t, size_t i) {
  close_all(t->e[i].fds, t->e[i].nfds);
  t->fds -= t->e[i].nfds;
  free(t->e[i].meta);
  t->e[i] = t->e[--t->n];
}

int broker_table_drop(struct broker_table *t, pid_t owner, const uint8_t *key) {
  for (size_t i = 0; i < t->n; i++)
    if (!memcmp(t->e[i].key, key, FERRY_IPC_KEY_LEN)) {
      if (t->e[i].owner != owner)
        return -1; /* only its exporter ends an export */
      remove_at(t, i);
      return 0;
    }
  return -1;
}

static void stripe_drop_owner(struct broker_table *t, pid_t owner);

size_t broker_table_drop_owner(struct broker_table *t, pid_t owner) {
  stripe_drop_owner(t, owner);
  size_t n = 0;
  for (size_t i = 0; i < t->n;)
    if (t->e[i].owner == owner) {
      remove_at(t, i);
      n++;
    } else {
      i++;
    }
  return n;
}

void broker_table_free(struct broker_table *t) {
  while (t->n)
    remove_at(t, t->n - 1);
  free(t->e);
  t->e = NULL;
  t->cap = 0;
  free(t->sk);
  t->sk = NULL;
  t->nsk = t->capsk = 0;
}

/* ---- FERRY_STREAMS' keys ---- */

static long mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* the same in time wherever the keys differ */
static int key_equal(const uint8_t *a, const uint8_t *b) {
  unsigned diff = 0;
  for (size_t i = 0; i < FERRY_STRIPE_KEY_LEN; i++)
    diff |= (unsigned)(a[i] ^ b[i]);
  return diff == 0;
}

static void stripe_remove_at(struct broker_table *t, size_t i) {
  t->sk[i] = t->sk[--t->nsk];
}

static void stripe_drop_owner(struct broker_table *t, pid_t owner) {
  for (size_t i = 0; i < t->nsk;)
    if (t->sk[i].owner == owner)
      stripe_remove_at(t, i);
    else
      i++;
}

int broker_stripe_put(struct broker_table *t, pid_t owner, const uint8_t *key, unsigned lanes,
                      long deadline_ms) {
  stripe_drop_owner(t, owner); /* one key per session: a new one replaces it */
  if (ferry_grow((void **)&t->sk, &t->capsk, t->nsk + 1, sizeof *t->sk))
    return -1;
  struct broker_stripe_key *k = &t->sk[t->nsk++];
  memcpy(k->key, key, sizeof k->key);
  k->owner = owner;
  k->lanes = lanes;
  k->handed = 0;
  k->deadline_ms = deadline_ms;
  return 0;
}

pid_t broker_stripe_claim(struct broker_table *t, const uint8_t *key, long now_ms) {
  size_t found = t->nsk;
  for (size_t i = 0; i < t->nsk; i++) /* every key is looked at, found or not */
    if (key_equal(t->sk[i].key, key) && now_ms < t->sk[i].deadline_ms)
      found = i;
  if (found == t->nsk)
    return 0;
  pid_t owner = t->sk[found].owner;
  if (++t->sk[found].handed >= t->sk[found].lanes)
    stripe_remove_at(t, found); /* all came: nobody else may present it */
  return owner;
}

void broker_stripe_end(struct broker_table *t, pid_t owner, const uint8_t *key) {
  for (size_t i = 0; i < t->nsk; i++)
    if (t->sk[i].owner == owner && key_equal(t->sk[i].key, key)) {
      stripe_remove_at(t, i);
      return;
    }
}

size_t broker_stripe_expire(struct broker_table *t, long now_ms) {
  for (size_t i = 0; i < t->nsk;)
    if (now_ms >= t->sk[i].deadline_ms)
      stripe_remove_at(t, i);
    else
      i++;
  return t->nsk;
}

ssize_t broker_send(int sock, const struct broker_hdr *h, const void *meta, const int *fds,
                    int flags) {
  struct iovec iov[2] = {{(void *)h, sizeof *h}, {(void *)meta, h->meta_len}};
  union {
    char buf[CMSG_SPACE(BROKER_MAX_FDS * sizeof(int))];
    struct cmsghdr align;
  } c;
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = h->meta_len ? 2 : 1};
  if (h->nfds > BROKER_MAX_FDS) {
    errno = EINVAL;
    return -1;
  }
  if (h->nfds) {
    m.msg_control = c.buf;
    m.msg_controllen = CMSG_SPACE(h->nfds * sizeof(int));
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(h->nfds * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, h->nfds * sizeof(int));
  }
  ssize_t w;
  do
    w = sendmsg(sock, &m, flags | MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  return w;
}

unsigned broker_take_fds(struct msghdr *m, int *fds, unsigned max, int *extra) {
  unsigned n = 0;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
      continue;
    size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
      if (n < max) {
        fds[n++] = fd;
      } else {
        close(fd);
        *extra = 1;
      }
    }
  }
  return n;
}

ssize_t broker_recv(int sock, void *buf, size_t cap, int flags, int *fds, unsigned *nfds,
                    int *trunc) {
  union {
    char buf[CMSG_SPACE(BROKER_MAX_FDS * sizeof(int))];
    struct cmsghdr align;
  } c;
  struct iovec iov = {buf, cap};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
                     .msg_controllen = sizeof c.buf};
  ssize_t r;
  do
    r = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
  while (r < 0 && errno == EINTR);
  *nfds = 0;
  *trunc = 0;
  if (r < 0)
    return r;
  int extra = 0;
  *nfds = broker_take_fds(&m, fds, BROKER_MAX_FDS, &extra);
  *trunc = (m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0 || extra;
  return r;
}

int broker_hand_conn(int sock, const uint8_t *key, uint32_t lane, int fd) {
  struct broker_stripe d = {.lane = lane};
  memcpy(d.key, key, sizeof d.key);
  struct broker_hdr h = {.magic = BROKER_MAGIC, .op = BROKER_STRIPE_CONN, .nfds = 1,
                         .meta_len = sizeof d};
  /* never blocks: a session that does not read its channel loses the connection */
  return broker_send(sock, &h, &d, &fd, MSG_DONTWAIT) < 0 ? -1 : 0;
}

/* a reply, with fds beside it; never blocks (the session waits for it, so
   its socket has room; if not, it does without and times out) */
static void reply(int sock, uint32_t status, const uint8_t *key, const void *meta,
                  uint32_t meta_len, const int *fds, unsigned nfds) {
  struct broker_hdr h = {.magic = BROKER_MAGIC, .op = BROKER_REPLY, .nfds = (uint16_t)nfds,
                         .status = status, .meta_len = meta_len};
  if (key)
    memcpy(h.key, key, FERRY_IPC_KEY_LEN);
  broker_send(sock, &h, meta, fds, MSG_DONTWAIT);
}

int broker_serve(struct broker_table *t, int sock, pid_t owner, char *why, size_t n) {
  static char buf[sizeof(struct broker_hdr) + BROKER_META_MAX + 1];
  int fds[BROKER_MAX_FDS];
  unsigned nfds;
  int trunc;
  ssize_t r = broker_recv(sock, buf, sizeof buf, MSG_DONTWAIT, fds, &nfds, &trunc);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return 0;
  if (r <= 0)
    return 1;
  struct broker_hdr h;
  const void *meta;
  if (broker_parse(buf, (size_t)r, nfds, trunc, 0, &h, &meta, why, n)) {
    close_all(fds, nfds);
    return -1;
  }
  if (h.op == BROKER_PUT) {
    uint8_t key[FERRY_IPC_KEY_LEN];
    do {
      if (broker_random(key, sizeof key)) {
        close_all(fds, nfds);
        snprintf(why, n, "getrandom failed: %s", strerror(errno));
        reply(sock, FERRY_IPC_TOO_MANY, NULL, NULL, 0, NULL, 0);
        return 0;
      }
    } while (broker_table_find(t, key));
    int rc = broker_table_put(t, owner, key, meta, h.meta_len, fds, nfds);
    reply(sock, rc < 0 ? FERRY_IPC_TOO_MANY : (uint32_t)rc, rc ? NULL : key, NULL, 0, NULL, 0);
  } else if (h.op == BROKER_GET) {
    const struct broker_entry *e = broker_table_find(t, h.key);
    if (!e)
      reply(sock, FERRY_IPC_NO_EXPORT, NULL, NULL, 0, NULL, 0);
    else if (e->owner == owner)
      reply(sock, FERRY_IPC_OWN, NULL, NULL, 0, NULL, 0);
    else
      reply(sock, 0, e->key, e->meta, e->meta_len, e->fds, e->nfds);
  } else if (h.op == BROKER_STRIPE_KEY) {
    struct broker_stripe d;
    memcpy(&d, meta, sizeof d);
    int rc = broker_stripe_put(t, owner, d.key, d.lane, mono_ms() + BROKER_STRIPE_MS);
    reply(sock, rc ? FERRY_IPC_TOO_MANY : 0, NULL, NULL, 0, NULL, 0);
  } else if (h.op == BROKER_STRIPE_END) {
    struct broker_stripe d;
    memcpy(&d, meta, sizeof d);
    broker_stripe_end(t, owner, d.key); /* no reply, as for a drop */
  } else {
    broker_table_drop(t, owner, h.key); /* no reply: nothing waits for one */
  }
  return 0;
}
