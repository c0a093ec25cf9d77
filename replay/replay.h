/*
 * Replay: the recorder's log run on a migration's target (replay/target.h:
 * an executor in the program, a ferry-mhelper, or another ferry-server's
 * session), in call order, so that the vGPU's modules, allocations (at the
 * same addresses), streams, events, arrays and settings exist there before
 * its memory is copied.
 */
#ifndef FERRY_REPLAY_H
#define FERRY_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "recorder/recorder.h"
#include "replay/target.h"

struct ferry_replay_stats {
  uint64_t records, modules;
  double module_ms; /* module loads (the driver's JIT/load work) */
  double other_ms;  /* everything else */
};

struct ferry_replay_hooks {
  /* a module was loaded again: its variables' addresses on the source and
     on the target GPU ({addr, size} pairs, one per variable, 0 = absent) */
  int (*module_loaded)(void *ctx, uint32_t module, ferry_blob source_vars, ferry_blob local_vars);
  const char *(*error_name)(int cuda_error); /* for messages; may be NULL */
  void *ctx;
};

/* 0, or a cudaError_t with a reason in err; the target is then left as it
   is (the caller closes it) */
int ferry_replay(struct ferry_recorder *log, const struct ferry_target *t,
                 const struct ferry_replay_hooks *hooks, struct ferry_replay_stats *stats,
                 char *err, size_t errlen);

/* the same, ahead of a migration's pause: the log as it is now, and the
   recorder's journal starts (ferry_recorder_mark) */
int ferry_replay_ahead(struct ferry_recorder *log, const struct ferry_target *t,
                       const struct ferry_replay_hooks *hooks, struct ferry_replay_stats *stats,
                       char *err, size_t errlen);
/* at the pause: only the changes since ferry_replay_ahead (stats add up);
   -1 when the journal is broken (the target must be replayed afresh) */
int ferry_replay_journal(struct ferry_recorder *log, const struct ferry_target *t,
                         const struct ferry_replay_hooks *hooks, struct ferry_replay_stats *stats,
                         char *err, size_t errlen);

#endif
