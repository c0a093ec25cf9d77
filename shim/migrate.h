/*
 * Moving a vGPU from its remote server onto a GPU of this machine, while the
 * program runs. The control socket (control.c), FERRY_MIGRATE_AT and the
 * tests all go through these two entry points.
 */
#ifndef FERRY_MIGRATE_H
#define FERRY_MIGRATE_H

#include <stddef.h>
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
extern const char *const ferry_phase_names[FERRY_PHASE_COUNT];

enum ferry_migration_state { FERRY_MIG_NONE, FERRY_MIG_RUNNING, FERRY_MIG_DONE, FERRY_MIG_FAILED };

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

/* Moves vGPU `vgpu` onto local GPU `local_gpu`, in this process or in a
   ferry-mhelper (FERRY_MHELPER=auto|always|never). Blocks until done. 0,
   or -1 with a one-line reason in err (the program then goes on remotely,
   nothing lost). Safe to call from any thread that is not inside a CUDA
   call of this program. */
int ferry_migrate(int vgpu, int local_gpu, char *err, size_t errlen);
/* target: a local GPU's index, or a server URL (tcp://host:port/gpu): the
   vGPU moves to another server session, still remote (its log goes on) */
int ferry_migrate_to(int vgpu, const char *target, char *err, size_t errlen);
/* opens the target of a later migration now (context and arena, a helper,
   or a server session), while the program runs: the migration to it then
   starts at the hold. cancel closes it; a migration elsewhere drops it */
int ferry_prepare(int vgpu, const char *target, char *err, size_t errlen);
int ferry_prepare_cancel(int vgpu, char *err, size_t errlen);
/* how long the prepared target took to open; -1 when there is none */
double ferry_prepared_ms(int vgpu);
/* internal (migrate_at.c): a migration to a local GPU (url NULL) or a
   server; *started is 0 when it was refused before anything began */
struct ferry_url;
int ferry_migrate_run(int vgpu, int gpu, const struct ferry_url *url, char *err, size_t errlen,
                      int *started);
/* text to a target: a local GPU (*remote 0) or a server URL; -1 with why */
int ferry_migrate_parse_target(const char *text, size_t len, int *gpu, struct ferry_url *url,
                               int *remote, char *why, size_t n);

/* number of vGPUs, and one's snapshot; -1 when index is out of range */
int ferry_vgpu_count(void);
int ferry_vgpu_status(int index, struct ferry_vgpu_status *out);

/* FERRY_MIGRATE_AT=<vgpu>:<local>:launch=<N>[,...]: called on each launch
   of vgpu (cheap when unset) */
void ferry_migrate_at_launch(int vgpu);
/* reads FERRY_MIGRATE_AT once the vGPUs are known, saying what is wrong in it */
void ferry_migrate_at_check(void);

/* the control socket: started at init unless FERRY_CONTROL=off (control.c) */
void ferry_control_start(void);
/* handles one request line (without its newline); writes one reply line
   (without newline) beginning "ok" or "error " */
void ferry_control_handle(const char *line, char *reply, size_t len);

#endif
