/*
 * The session's end of the channel to ferry-server's parent
 * (broker_client.c): the executor's ferry_ipc_broker (CUDA IPC's broker)
 * and FERRY_STREAMS' data connections, which the parent hands over, over
 * the socket it made for this session at its fork.
 */
#ifndef FERRY_SERVER_BROKER_CLIENT_H
#define FERRY_SERVER_BROKER_CLIENT_H

#include "executor/exec.h"
#include "server/broker.h"

struct server_broker {
  struct ferry_ipc_broker ops; /* what the executor is given */
  int fd;
  /* data connections that came while the session waited for a reply,
     kept until server_broker_stripe_take or _end */
  struct {
    int fd;
    uint32_t lane;
  } held[FERRY_STRIPE_MAX];
  unsigned nheld;
  uint8_t stripe_key[FERRY_STRIPE_KEY_LEN]; /* the key the session waits with */
  int stripe_live;
};

void server_broker_init(struct server_broker *b, int fd, uint64_t instance);

/* FERRY_STREAMS: the parent is to hand this session the connections that
   present key, lanes of them at most; 0 once it keeps the key, or -1 (logged) */
int server_broker_stripe_key(struct server_broker *b, const uint8_t *key, unsigned lanes);
/* the socket of the next data connection that presented key (its lane in
   *lane), waiting at most ms; -1 when none came */
int server_broker_stripe_take(struct server_broker *b, const uint8_t *key, int ms,
                              uint32_t *lane);
/* the key is done: the parent refuses any more connections with it, and
   those already handed over and not taken are closed */
void server_broker_stripe_end(struct server_broker *b, const uint8_t *key);

#endif
