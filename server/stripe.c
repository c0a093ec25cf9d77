/*
 * FERRY_STREAMS on the server: a session's data connections. The session
 * process (not the parent) listens on an ephemeral port of the address the
 * client reached, hands the client that port and a random key, and takes
 * the connections that present the key; anything else that connects is
 * refused, and the session goes on with its one connection if the data
 * connections do not all come. The pieces themselves move through
 * protocol/stripe.c; session.c says which copies go that way.
 */
#include "server.h"

#include <driver_types.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/log.h"
#include "protocol/stripe.h"

/* the client connects before it sends stripe_attach, so the connections
   wait in the backlog: this only bounds strangers and a slow network */
#define ATTACH_MS 3000
/* how long one accepted connection may take to send its hello */
#define HELLO_MS 1000

static long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* tests (FERRY_FAULT=stripe_port): the port is closed before the client
   comes, as a firewall would keep it */
static int fault(const char *point) {
  const char *f = getenv("FERRY_FAULT");
  return f && !strcmp(f, point);
}

int server_stripe_open(struct server_stripe *st, struct ferry_conn *control, uint32_t streams,
                       uint32_t *port, const char **why) {
  char host[256], err[300];
  if (st->set || st->l) {
    *why = "data connections are open already";
    return cudaErrorInvalidValue;
  }
  if (streams < 1 || streams > FERRY_STRIPE_MAX) {
    *why = "data connections: 1 to 16";
    return cudaErrorInvalidValue;
  }
  /* only a connection with an IP address of its own (tcp) has any beside it */
  if (!control->ops->addr || control->ops->addr(control, 1, host, sizeof host, NULL)) {
    *why = "this connection cannot have data connections";
    return cudaErrorNotSupported;
  }
  const struct ferry_transport *t = ferry_transport_find("tcp", err, sizeof err);
  struct ferry_url u = {.port = 0, .gpu = -1};
  snprintf(u.scheme, sizeof u.scheme, "tcp");
  snprintf(u.host, sizeof u.host, "%s", host);
  if (!t || !(st->l = t->listen(&u, err, sizeof err)) || !st->l->ops->accept_within) {
    ferry_log("cannot open data connections: %s", err);
    if (st->l) st->l->ops->close(st->l);
    st->l = NULL;
    *why = "cannot listen";
    return cudaErrorNotSupported;
  }
  if (getrandom(st->key, sizeof st->key, 0) != (ssize_t)sizeof st->key) {
    st->l->ops->close(st->l);
    st->l = NULL;
    *why = "no random key";
    return cudaErrorNotSupported;
  }
  int p = ferry_listener_port(st->l);
  *port = p < 0 ? 0 : (uint32_t)p;
  if (fault("stripe_port")) *port = 1; /* nobody listens there */
  st->want = streams;
  return cudaSuccess;
}

/* the same in time wherever the keys differ */
static int key_matches(const uint8_t *a, const uint8_t *b) {
  unsigned diff = 0;
  for (size_t i = 0; i < FERRY_STRIPE_KEY_LEN; i++) diff |= (unsigned)(a[i] ^ b[i]);
  return diff == 0;
}

unsigned server_stripe_attach(struct server_stripe *st, uint32_t streams, int timeout_ms,
                              const char *peer, int quiet) {
  if (!st->l) return 0;
  struct ferry_conn *got[FERRY_STRIPE_MAX] = {0};
  unsigned have = 0;
  long deadline = now_ms() + ATTACH_MS;
  char why[160] = "";
  if (streams != st->want)
    snprintf(why, sizeof why, "the client opened %u of %u", streams, st->want);
  while (!why[0] && have < st->want) {
    long left = deadline - now_ms();
    struct ferry_conn *c = left > 0 ? st->l->ops->accept_within(st->l, (int)left) : NULL;
    if (!c) {
      snprintf(why, sizeof why, "%u of %u came within %d ms", have, st->want, ATTACH_MS);
      break;
    }
    struct ferry_stripe_hello h;
    left = deadline - now_ms();
    int ms = left < HELLO_MS ? (left > 0 ? (int)left : 1) : HELLO_MS;
    if (c->ops->set_timeout) c->ops->set_timeout(c, ms);
    int ok = ferry_recv_all(c, &h, sizeof h) == 0 && h.magic == FERRY_STRIPE_MAGIC &&
             key_matches(h.key, st->key);
    if (!ok) { /* a stranger, or a client of another session: never attached */
      ferry_log("session from %s: refused a data connection from %s: no valid key", peer, c->peer);
      c->ops->close(c);
      continue;
    }
    if (h.lane >= st->want || got[h.lane]) {
      snprintf(why, sizeof why, "a data connection named lane %u twice or out of range", h.lane);
      c->ops->close(c);
      break;
    }
    if (c->ops->set_timeout) c->ops->set_timeout(c, 0);
    got[h.lane] = c;
    have++;
  }
  st->l->ops->close(st->l);
  st->l = NULL;
  if (have == st->want && !why[0]) st->set = ferry_stripes_start(got, have, timeout_ms);
  else
    for (unsigned i = 0; i < st->want; i++)
      if (got[i]) got[i]->ops->close(got[i]);
  if (!st->set) {
    ferry_log("session from %s: no data connections (%s); large copies use the one connection",
              peer, why[0] ? why : "cannot start their threads");
    return 0;
  }
  if (!quiet) ferry_log("session from %s: large copies striped over %u data connections", peer, have);
  return have;
}

void server_stripe_close(struct server_stripe *st) {
  if (st->l) st->l->ops->close(st->l);
  st->l = NULL;
  ferry_stripes_close(st->set);
  st->set = NULL;
}
