/*
 * A session's side of CUDA IPC's broker (broker.h): the executor's
 * ferry_ipc_broker ops over the socket the parent made at the fork. One
 * request at a time (the session serves one call at a time); a parent that
 * does not answer within BROKER_WAIT_MS fails the call rather than hang it.
 */
#include "server/broker_client.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"

#define BROKER_WAIT_MS 10000

static int send_req(int sock, uint16_t op, const uint8_t *key, const void *meta, uint32_t meta_len,
                    const int *fds, unsigned nfds) {
  struct broker_hdr h = {.magic = BROKER_MAGIC, .op = op, .nfds = (uint16_t)nfds,
                         .meta_len = meta_len};
  if (key)
    memcpy(h.key, key, FERRY_IPC_KEY_LEN);
  ssize_t w = broker_send(sock, &h, meta, fds, 0);
  if (w < 0)
    ferry_log("CUDA IPC: the server's broker cannot be reached: %s", strerror(errno));
  return w < 0 ? -1 : 0;
}

/* the reply: its status (0 or a refusal), or -1; fds received go to fds
   (*nfds: room in, count out), the description to meta (*meta_len likewise) */
static int read_reply(int sock, uint8_t *key, void *meta, size_t *meta_len, int *fds,
                      unsigned *nfds) {
  char buf[sizeof(struct broker_hdr) + BROKER_META_MAX + 1];
  union {
    char buf[CMSG_SPACE(BROKER_MAX_FDS * sizeof(int))];
    struct cmsghdr align;
  } c;
  struct pollfd p = {.fd = sock, .events = POLLIN};
  int pr;
  do
    pr = poll(&p, 1, BROKER_WAIT_MS);
  while (pr < 0 && errno == EINTR);
  if (pr <= 0) {
    ferry_log("CUDA IPC: the server's broker did not answer within %d ms", BROKER_WAIT_MS);
    return -1;
  }
  struct iovec iov = {buf, sizeof buf};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
                     .msg_controllen = sizeof c.buf};
  ssize_t r;
  do
    r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  while (r < 0 && errno == EINTR);
  if (r <= 0) {
    ferry_log("CUDA IPC: the server's broker is gone");
    return -1;
  }
  int got[BROKER_MAX_FDS];
  unsigned n = 0;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
      continue;
    size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
      if (n < BROKER_MAX_FDS)
        got[n++] = fd;
      else
        close(fd);
    }
  }
  struct broker_hdr h;
  const void *body;
  char why[160];
  unsigned room = nfds ? *nfds : 0;
  size_t mroom = meta_len ? *meta_len : 0;
  int bad = broker_parse(buf, (size_t)r, n, (m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0, 1, &h,
                         &body, why, sizeof why);
  if (!bad && (n > room || h.meta_len > mroom)) {
    bad = 1;
    snprintf(why, sizeof why, "more than was asked for");
  }
  if (bad) {
    for (unsigned i = 0; i < n; i++)
      close(got[i]);
    ferry_log("CUDA IPC: a malformed answer from the server's broker: %s", why);
    return -1;
  }
  if (key)
    memcpy(key, h.key, FERRY_IPC_KEY_LEN);
  if (meta_len) {
    memcpy(meta, body, h.meta_len);
    *meta_len = h.meta_len;
  }
  if (nfds) {
    memcpy(fds, got, n * sizeof *got);
    *nfds = n;
  }
  return (int)h.status;
}

static int put(void *ctx, const void *meta, size_t meta_len, const int *fds, unsigned nfds,
               uint8_t *key) {
  struct server_broker *b = ctx;
  if (meta_len > BROKER_META_MAX || nfds > BROKER_MAX_FDS)
    return FERRY_IPC_TOO_MANY;
  if (send_req(b->fd, BROKER_PUT, NULL, meta, (uint32_t)meta_len, fds, nfds))
    return -1;
  return read_reply(b->fd, key, NULL, NULL, NULL, NULL);
}

static int get(void *ctx, const uint8_t *key, void *meta, size_t *meta_len, int *fds,
               unsigned *nfds) {
  struct server_broker *b = ctx;
  if (send_req(b->fd, BROKER_GET, key, NULL, 0, NULL, 0))
    return -1;
  int rc = read_reply(b->fd, NULL, meta, meta_len, fds, nfds);
  if (rc > 0) { /* a refusal carries nothing */
    for (unsigned i = 0; i < *nfds; i++)
      close(fds[i]);
    *nfds = 0;
  }
  return rc;
}

static void drop(void *ctx, const uint8_t *key) {
  struct server_broker *b = ctx;
  send_req(b->fd, BROKER_DROP, key, NULL, 0, NULL, 0);
}

void server_broker_init(struct server_broker *b, int fd, uint64_t instance) {
  b->fd = fd;
  b->ops = (struct ferry_ipc_broker){.instance = instance, .put = put, .get = get, .drop = drop,
                                     .ctx = b};
}
