/*
 * Moving a vGPU while the program runs: from its server onto a GPU of this
 * machine (in this process or a ferry-mhelper), to another server, and back.
 * The control socket (control.c), FERRY_MIGRATE_AT and the tests all go
 * through ferry_migrate_to and ferry_prepare.
 */
#ifndef FERRY_MIGRATE_H
#define FERRY_MIGRATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

#include "shim/core/vgpu.h"

extern const char *const ferry_phase_names[FERRY_PHASE_COUNT];

/* Moves vGPU `vgpu` onto local GPU `local_gpu`, in this process or in a
   ferry-mhelper (FERRY_MHELPER=auto|always|never). Blocks until done. 0,
   or -1 with a one-line reason in err (the program then goes on remotely,
   nothing lost). Safe to call from any thread that is not inside a CUDA
   call of this program. */
int ferry_migrate(int vgpu, int local_gpu, char *err, size_t errlen);
/* target: a local GPU's index, or a server URL (tcp://host:port/gpu): the
   vGPU moves to another server session, still remote (its log goes on) */
int ferry_migrate_to(int vgpu, const char *target, char *err, size_t errlen);
/* what ferry_migrate and ferry_migrate_to return for a move that waits:
   the vGPU shares memory through CUDA IPC, and moves once that closes (err
   says so) */
#define FERRY_MIGRATE_WAITS 1
/* a CUDA IPC export or import of v closed (all: every one of them, at a
   reset): when none is left, a move that waited for it runs at v's next
   launch (front ends call it in place of decrementing v->ipc_open) */
void ferry_ipc_release(struct ferry_vgpu *v, int all);
/* on each launch of vgpu (cheap when no move is ready): a move that
   waited for CUDA IPC and may now run, runs here */
void ferry_migrate_waited_at_launch(int vgpu);
/* opens the target of a later migration now (context and arena, a helper,
   or a server session), while the program runs: the migration to it then
   starts at the hold. cancel closes it; a migration elsewhere drops it */
int ferry_prepare(int vgpu, const char *target, char *err, size_t errlen);
/* closes the prepared target (0), or stops a prepare still opening one: it
   fails ("cancelled"), its target closed, before this returns 1; drops a
   move that waits for CUDA IPC (2); -1 with the reason in err when there
   is none of these */
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

/* a status's where as messages quote it: a server URL cut as
   ferry_echo_url cuts it, a local GPU whole */
static inline const char *ferry_echo_where(const char *where, char *out, size_t n) {
  if (!strstr(where, "://")) return where;
  char url[320];
  snprintf(url, sizeof url, "%.*s", (int)strcspn(where, " "), where); /* without " (connection lost)" */
  return ferry_echo_url(url, out, n);
}

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

/* ---- event times across a migration (pre_events.c) ---- */
/* cudaEventElapsedTime across a migration: 1 and *ms when a or b was last
   recorded before it, else 0 */
int ferry_pre_elapsed(struct ferry_vgpu *v, uint32_t a, uint32_t b, float *ms, int *rc);
/* an event recorded again (or destroyed) after the migration */
void ferry_pre_forget(struct ferry_vgpu *v, uint32_t id);
/* during a migration's drain: the remote times of events recorded so far */
int ferry_pre_capture(struct ferry_vgpu *v);

/* set once the program took a module variable's address (the runtime front
   end's cudaGetSymbolAddress): a migration then moves the variables */
extern int ferry_symbol_address_taken;

#endif
