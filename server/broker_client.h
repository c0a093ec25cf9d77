/*
 * The session's end of CUDA IPC's broker (broker_client.c): the
 * executor's ferry_ipc_broker over the socket ferry-server's parent made
 * for this session at its fork.
 */
#ifndef FERRY_SERVER_BROKER_CLIENT_H
#define FERRY_SERVER_BROKER_CLIENT_H

#include "executor/exec.h"
#include "server/broker.h"

struct server_broker {
  struct ferry_ipc_broker ops; /* what the executor is given */
  int fd;
};

void server_broker_init(struct server_broker *b, int fd, uint64_t instance);

#endif
