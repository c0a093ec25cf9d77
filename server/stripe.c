/*
 * FERRY_STREAMS on the server: a session's data connections. They come to
 * the server's own port, the one the control connection reached, so that a
 * firewall that lets the client in lets them in too: the session makes a
 * random key, gives it to ferry-server's parent (broker.h) and hands the
 * client the port and the key; the parent reads each new connection's
 * hello, and one that presents the key is passed to this session over its
 * channel (anything else is refused there). The session goes on with its
 * one connection if the data connections do not all come. The pieces
 * themselves move through protocol/stripe.c; session.c says which copies go
 * that way.
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
#include "server/broker_client.h"
#include "transport/backends.h" /* ferry_tcp_adopt: a socket the parent accepted */

_Static_assert(sizeof ((struct server_stripe *)0)->key == FERRY_STRIPE_KEY_LEN, "key length");

/* the client connects before it sends stripe_attach, so the connections
   are on their way or with the parent already: this only bounds a slow
   network or a parent that lost them */
#define ATTACH_MS 3000

static long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* tests: FERRY_FAULT=stripe_port names a port nobody listens on (what a
   NAT that maps the server's port elsewhere, or an older server's
   firewalled data port, gives the client). (stripe_handoff, the parent
   refusing them all, is main.c's.) */
static int fault(const char *point) {
  const char *f = getenv("FERRY_FAULT");
  return f && !strcmp(f, point);
}

int server_stripe_open(struct server_stripe *st, struct ferry_conn *control,
                       struct server_broker *parent, uint32_t streams, uint32_t *port,
                       const char **why) {
  char host[256];
  int p = -1;
  if (st->set || st->parent) {
    *why = "data connections are open already";
    return cudaErrorInvalidValue;
  }
  if (streams < 1 || streams > FERRY_STRIPE_MAX) {
    *why = "data connections: 1 to 16";
    return cudaErrorInvalidValue;
  }
  /* only a connection with an IP address of its own (tcp) has any beside it */
  if (!control->ops->addr || control->ops->addr(control, 1, host, sizeof host, &p) || p <= 0) {
    *why = "this connection cannot have data connections";
    return cudaErrorNotSupported;
  }
  if (!parent) { /* a session on its own (ferry-mhelper): nobody reads their hellos */
    *why = "no server process hands data connections over";
    return cudaErrorNotSupported;
  }
  if (getrandom(st->key, sizeof st->key, 0) != (ssize_t)sizeof st->key) {
    *why = "no random key";
    return cudaErrorNotSupported;
  }
  if (server_broker_stripe_key(parent, st->key, streams)) {
    *why = "the server's parent keeps no key";
    return cudaErrorNotSupported;
  }
  st->parent = parent;
  *port = fault("stripe_port") ? 1 : (uint32_t)p;
  st->want = streams;
  return cudaSuccess;
}

unsigned server_stripe_attach(struct server_stripe *st, uint32_t streams, int timeout_ms,
                              const char *peer, int quiet) {
  if (!st->parent) return 0;
  struct ferry_conn *got[FERRY_STRIPE_MAX] = {0};
  unsigned have = 0;
  long deadline = now_ms() + ATTACH_MS;
  char why[160] = "";
  if (streams != st->want)
    snprintf(why, sizeof why, "the client opened %u of %u", streams, st->want);
  while (!why[0] && have < st->want) {
    long left = deadline - now_ms();
    uint32_t lane = 0;
    int fd = left > 0 ? server_broker_stripe_take(st->parent, st->key, (int)left, &lane) : -1;
    if (fd < 0) {
      snprintf(why, sizeof why, "%u of %u came within %d ms", have, st->want, ATTACH_MS);
      break;
    }
    struct ferry_conn *c = ferry_tcp_adopt(fd);
    if (!c) {
      snprintf(why, sizeof why, "out of memory");
      break;
    }
    if (lane >= st->want || got[lane]) {
      snprintf(why, sizeof why, "a data connection named lane %u twice or out of range", lane);
      c->ops->close(c);
      break;
    }
    got[lane] = c;
    have++;
  }
  /* the key dies here: the parent refuses any later connection with it */
  server_broker_stripe_end(st->parent, st->key);
  st->parent = NULL;
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
  if (st->parent) server_broker_stripe_end(st->parent, st->key);
  st->parent = NULL;
  ferry_stripes_close(st->set);
  st->set = NULL;
}
