/*
 * CUDA IPC's broker in ferry-server's parent (broker.h): the table of
 * exports, the checks of every message, and the serving of one request.
 * A session is ours, but it runs the client's calls, so nothing it sends
 * is trusted: lengths, operations and descriptor counts are checked, and
 * an entry is handed out or dropped only as its rules say.
 */
#include "server/broker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

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
  int reply = h->op == BROKER_REPLY;
  int request = h->op == BROKER_PUT || h->op == BROKER_GET || h->op == BROKER_DROP;
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
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    struct broker_entry *p = realloc(t->e, cap * sizeof *p);
    if (!p) {
      close_all(fds, nfds);
      return -1;
    }
    t->e = p;
    t->cap = cap;
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

size_t broker_table_drop_owner(struct broker_table *t, pid_t owner) {
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
  union {
    char buf[CMSG_SPACE(BROKER_MAX_FDS * sizeof(int))];
    struct cmsghdr align;
  } c;
  struct iovec iov = {buf, sizeof buf};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
                     .msg_controllen = sizeof c.buf};
  ssize_t r;
  do
    r = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  while (r < 0 && errno == EINTR);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return 0;
  if (r <= 0)
    return 1;
  int fds[BROKER_MAX_FDS];
  unsigned nfds = 0;
  int extra = 0; /* descriptors beyond what one message may carry */
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
      continue;
    size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
      if (nfds < BROKER_MAX_FDS)
        fds[nfds++] = fd;
      else {
        close(fd);
        extra = 1;
      }
    }
  }
  struct broker_hdr h;
  const void *meta;
  int trunc = (m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0 || extra;
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
  } else {
    broker_table_drop(t, owner, h.key); /* no reply: nothing waits for one */
  }
  return 0;
}
