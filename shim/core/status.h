/*
 * What `ferry status` shows of one vGPU. The core keeps a record per vGPU
 * (where it runs, its log); migration fills in the phases of the last move.
 */
#ifndef FERRY_CORE_STATUS_H
#define FERRY_CORE_STATUS_H

#include <stdint.h>

/* phases, in order; status reports the one running and each one's time */
enum ferry_phase {
  FERRY_PHASE_HOLD,    /* new calls wait; calls in flight finish */
  FERRY_PHASE_DRAIN,   /* the remote GPU finishes queued work and deferred copies */
  FERRY_PHASE_SETUP,   /* local context, arena reservation at the same address (a helper's
                          happens before the hold, while the program runs) */
  FERRY_PHASE_REPLAY,  /* the recorded calls, on the local GPU */
  FERRY_PHASE_MEMSYNC, /* every live region, remote -> local */
  FERRY_PHASE_VARS,    /* __device__/__constant__ variables and CUDA arrays by content */
  FERRY_PHASE_SWITCH,  /* the vGPU runs locally; the remote session is closed */
  FERRY_PHASE_COUNT
};

/* WAITING: a move was asked while the vGPU shares memory through CUDA IPC;
   it starts when the last export or import closes (error says why) */
enum ferry_migration_state {
  FERRY_MIG_NONE, FERRY_MIG_RUNNING, FERRY_MIG_DONE, FERRY_MIG_FAILED, FERRY_MIG_WAITING
};

/* a snapshot of one vGPU, for `status` */
struct ferry_vgpu_status {
  int index;
  int local;            /* 0: remote, 1: runs on a local GPU (in-process or a helper) */
  int helper_pid;       /* the ferry-mhelper serving it, 0 for none */
  int local_gpu;        /* the local GPU, -1 while remote */
  char where[320];      /* the server URL, or "local GPU 1 (NVIDIA H100 80GB HBM3)" */
  uint64_t records;     /* live records in the replay log */
  uint64_t regions;     /* live allocations */
  uint64_t live_bytes;  /* bytes in them */
  /* the last (or current) migration */
  enum ferry_migration_state state;
  int phase;            /* enum ferry_phase while running */
  uint64_t bytes_done, bytes_total; /* mem-sync progress */
  double phase_ms[FERRY_PHASE_COUNT];
  double total_ms;
  double pause_ms;      /* the program held: from the hold to the switch */
  /* what the last successful migration did */
  uint64_t records_replayed, modules_replayed;
  double replay_module_ms, replay_other_ms; /* replay split: module loads / the rest */
  uint64_t bytes_copied, ranges_copied, requests; /* mem-sync */
  /* done before the hold: records replayed, bytes copied and the time it
     took; of those bytes, the ones whose hashes matched at the pause (not
     copied again) and the time hashing took in the pause */
  uint64_t records_ahead, bytes_precopied, bytes_unchanged;
  double ahead_ms, hash_ms;
  uint64_t launches;        /* kernel launches so far */
  uint64_t launch_at_start; /* launches before the last migration began */
  char error[256];      /* why the last migration failed */
  char prepared[320];   /* the target prepared for the next migration, "" for none */
};

#endif
