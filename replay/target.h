/*
 * Where a migration rebuilds a vGPU: an executor inside the program, or a
 * link to a process that runs one (a ferry-mhelper on a local GPU, or a
 * session of another ferry-server). Replay and mem-sync speak calls.def
 * calls to a target and never ask which it is, so every direction of a move
 * is the same code.
 */
#ifndef FERRY_TARGET_H
#define FERRY_TARGET_H

#include "executor/exec.h"
#include "protocol/codec.h"

struct ferry_target {
  /* one call; blobs in rets stay valid until the next call. An ASYNC
     call's error may come back from the next SYNC call instead. */
  int (*call)(void *ctx, unsigned call, const void *args, void *rets,
              const struct ferry_bulk *bulk);
  void *ctx;
};

/* a target that runs calls on ex in this thread (its context made current
   on each call); the caller keeps other threads away from ex */
struct ferry_target ferry_exec_target(struct ferry_exec *ex);

#endif
