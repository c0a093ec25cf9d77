/*
 * FERRY_STREAMS on the client: after a tcp link's hello, N data
 * connections to its session (stripe_open gives the port, the server's
 * own, and the key each presents; stripe_attach confirms them), and the
 * striped copies over them
 * (remote.c decides which; protocol/stripe.c moves the pieces). When the
 * data connections cannot be opened the link says so in one line and keeps
 * its one connection: nothing fails for it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/setting.h"
#include "protocol/stripe.h"
#include "shim/core/link.h"

/* a data port that does not answer at once is kept shut by a firewall
   (an older server's, which listened on a port of its own for them): the
   control connection to the same host just worked */
#define STRIPE_CONNECT_MS 3000

/* 4 by default: they come to the server's own port, so they need no
   firewall rule beyond its own, and only copies of FERRY_STRIPE_MIN and
   more use them (an H200's loopback: 8-13 GB/s against one stream's 3-5,
   from 4 MiB to 1 GiB) */
#define STREAMS_DEFAULT 4
static unsigned streams = STREAMS_DEFAULT;
static pthread_once_t streams_once = PTHREAD_ONCE_INIT;
static void read_streams(void) {
  uint64_t n;
  if (ferry_env_uint("FERRY_STREAMS", 1, FERRY_STRIPE_MAX, &n, "a count from 1 to 16", "4"))
    streams = (unsigned)n;
}

/* FERRY_FAULT=<point>[@N] for tests, as migration's faults: stripe_kill
   (the last data connection dies half-way through the N-th striped copy),
   stripe_stranger (a connection with a wrong key comes first) */
static int fault(const char *point, unsigned *nth) {
  const char *f = getenv("FERRY_FAULT");
  size_t n = f ? strcspn(f, "@") : 0;
  if (!f || n != strlen(point) || strncmp(f, point, n)) return 0;
  if (nth) *nth = f[n] == '@' ? (unsigned)atoi(f + n + 1) : 1;
  return 1;
}

static struct ferry_conn *open_lane(const struct ferry_url *u, unsigned lane, const uint8_t *key,
                                    char *err, size_t errlen) {
  const struct ferry_transport *t = ferry_transport_find("tcp", err, errlen);
  int ms = ferry_connect_timeout_ms();
  struct ferry_conn *c = t ? t->connect(u, ms && ms < STRIPE_CONNECT_MS ? ms : STRIPE_CONNECT_MS,
                                        err, errlen) : NULL;
  if (!c) return NULL;
  struct ferry_stripe_hello h = {.magic = FERRY_STRIPE_MAGIC, .lane = lane};
  memcpy(h.key, key, sizeof h.key);
  struct iovec iov = {&h, sizeof h};
  if (ferry_sendv(c, &iov, 1)) {
    snprintf(err, errlen, "%s", strerror(errno));
    c->ops->close(c);
    return NULL;
  }
  return c;
}

void ferry_link_stripes_open(struct ferry_link *l) {
  pthread_once(&streams_once, read_streams);
  unsigned n = l->streams > 0 ? (unsigned)l->streams : streams;
  char host[256], why[300] = "";
  if (n < 2 || !l->conn || !l->conn->ops->addr) return; /* tcp:// only */
  if (l->conn->ops->addr(l->conn, 0, host, sizeof host, NULL)) return;
  struct ferry_stripe_open_args oa = {n};
  struct ferry_stripe_open_rets or_;
  int rc = ferry_link_call(l, FERRY_CALL_stripe_open, &oa, &or_, NULL);
  if (rc || or_.key.len != FERRY_STRIPE_KEY_LEN || !or_.port || or_.port > 65535) {
    if (!l->dead)
      ferry_log("device %d: %u streams: %s offers no data connections (%s); large copies "
                "use the one connection", l->vgpu, n, l->name,
                rc ? cudaGetErrorString((cudaError_t)rc) : "a malformed answer");
    return;
  }
  uint8_t key[FERRY_STRIPE_KEY_LEN];
  memcpy(key, or_.key.ptr, sizeof key);
  struct ferry_url u = {.port = (int)or_.port, .gpu = -1};
  snprintf(u.scheme, sizeof u.scheme, "tcp");
  snprintf(u.host, sizeof u.host, "%s", host);

  struct ferry_conn *stranger = NULL, *conns[FERRY_STRIPE_MAX];
  unsigned have = 0;
  if (fault("stripe_stranger", NULL)) {
    uint8_t wrong[FERRY_STRIPE_KEY_LEN];
    for (size_t i = 0; i < sizeof wrong; i++) wrong[i] = (uint8_t)(key[i] ^ 0x5a);
    stranger = open_lane(&u, 0, wrong, why, sizeof why);
  }
  for (; have < n; have++)
    if (!(conns[have] = open_lane(&u, have, key, why, sizeof why))) break;
  struct ferry_stripe_attach_args aa = {have == n ? n : 0};
  struct ferry_stripe_attach_rets ar = {0};
  rc = ferry_link_call(l, FERRY_CALL_stripe_attach, &aa, &ar, NULL);
  if (stranger) stranger->ops->close(stranger);
  if (!rc && have == n && ar.streams == n) {
    l->stripes = ferry_stripes_start(conns, n, ferry_call_timeout_ms());
    if (!l->stripes) snprintf(why, sizeof why, "cannot start their threads");
  } else {
    for (unsigned i = 0; i < have; i++) conns[i]->ops->close(conns[i]);
    if (!why[0]) snprintf(why, sizeof why, "the server took %u of %u", ar.streams, n);
  }
  if (l->dead) return;
  if (!l->stripes) {
    ferry_log("device %d: %u streams: cannot open data connections to %s port %u (%s); "
              "large copies use the one connection", l->vgpu, n, host, or_.port, why);
    return;
  }
  unsigned nth;
  if (fault("stripe_kill", &nth)) {
    l->stripes->fault_lane = (int)n - 1;
    l->stripes->fault_at = nth;
  }
  ferry_debug("device %d: copies of %llu KiB and more striped over %u data connections", l->vgpu,
              (unsigned long long)(ferry_stripe_min() >> 10), n);
}

int ferry_link_striped(const struct ferry_link *l, uint64_t n) {
  return l->stripes && n >= ferry_stripe_min();
}

/* dst NULL: the bytes are read and dropped (a copy nobody waits for) */
int ferry_link_stripe_move(struct ferry_link *l, int send, void *buf, uint64_t n) {
  struct ferry_stripes *s = l->stripes;
  uint64_t seq = ferry_stripes_begin(s, send);
  if (buf) {
    if (ferry_stripes_move(s, send, seq, n, 0, buf, n)) return -1;
  } else {
    size_t part = 4u << 20;
    char *scratch = malloc(part);
    if (!scratch) return -1;
    int rc = 0;
    for (uint64_t at = 0; at < n && !rc; at += part)
      rc = ferry_stripes_move(s, 0, seq, n, at, scratch, n - at < part ? n - at : part);
    free(scratch);
    if (rc) return -1;
  }
  __atomic_fetch_add(&l->striped[!send], n, __ATOMIC_RELAXED);
  return 0;
}
