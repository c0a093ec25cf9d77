/*
 * What the two files of a migration share: migrate.c runs the steps,
 * migrate_target.c opens and closes what a migration moves to (the GPU in
 * this process, a ferry-mhelper, another server's session) and mem-sync's
 * buffers there.
 */
#ifndef FERRY_MIGRATE_INT_H
#define FERRY_MIGRATE_INT_H

#include <stdint.h>
#include <time.h>

#include "replay/memsync.h"
#include "replay/replay.h"
#include "replay/target.h"
#include "shim/core/host.h"
#include "shim/core/link.h"
#include "shim/core/local.h"

#define MEMSYNC_BUFFERS 2
/* 4 MiB: a request's bytes still in the CPU's caches when they are sent and
   received measured 4.3-5.1 GB/s over loopback on an H200 node, 16 MiB
   3.6-4.0 GB/s (bench/results/2026-11-27-h200-local-to-remote.md) */
#define MEMSYNC_MAX_BUFFER (4u << 20)

struct var_copy {
  uint64_t src, dst, size;
};

struct mig {
  struct ferry_vgpu *v;
  int gpu;
  int helper;               /* onto a ferry-mhelper, else in this process */
  int preparing;            /* a prepare, which cancel may stop (mig_cuttable) */
  const struct ferry_url *url; /* onto another server session instead (remote to remote) */
  struct ferry_local *L;    /* in this process */
  struct ferry_local *left; /* the one the vGPU left, closed after the hold */
  struct ferry_link *tl;    /* the helper's (or new server's) link until the switch */
  struct ferry_target t;
  double t_phase, t_hold;
  /* module variables: where they were and where they are now */
  struct var_copy *vars;
  size_t nvars, cvars;
  struct rebind {
    uint32_t module;
    char *info;
    uint32_t len;
  } *rebinds;
  size_t nrebinds;
  char *err;
  size_t errlen;
  /* mem-sync's buffers, page-locked on the target before the hold */
  void *bufs[2];
  int registered[2];
  uint64_t buf_bytes;
  /* done before the hold (precopy.c): the log replayed (the journal has
     what came since) and the live regions copied */
  int ahead;
  struct ferry_replay_stats ahead_stats;
  double ahead_replay_ms, precopy_ms, hash_ms;
  double warm_ms; /* the hashing kernel's first load on both GPUs */
  uint64_t precopied, unchanged;
};


static inline double mig_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* the first reason wins; always -1 */
__attribute__((format(printf, 2, 3))) int mig_fail(struct mig *m, const char *fmt, ...);
/* FERRY_FAULT=<point>[@N]: a test makes one step fail, once per process
   (at the N-th time a migration reaches it) */
int mig_fault(const char *point);
const char *mig_error_name(int e);
static inline int mig_tcall(struct mig *m, unsigned call, const void *args,
                            const struct ferry_bulk *bulk) {
  return m->t.call(m->t.ctx, call, args, NULL, bulk);
}

/* replay's hook: a module's variables on both GPUs (migrate.c) */
int mig_module_loaded(void *ctx, uint32_t module, ferry_blob source, ferry_blob local);

/* precopy.c: before the hold, the log replayed and the live regions
   copied (0, or -1 with m->err when the replay failed; a copy that stops
   only leaves more for the pause) */
int mig_precopy_enabled(void);
/* mem-sync's source that answers each request with one ferry_source_call
   (for a vGPU in this process, and for copying ahead); live: the program
   runs meanwhile. 0, or -1 when out of memory; freed by mig_queued_free */
int mig_queued_source(struct ferry_vgpu *v, int live, struct ferry_memsync_source *out);
void mig_queued_free(struct ferry_memsync_source *src);
uint64_t mig_hash_chunk(void);
int mig_ahead(struct mig *m);
/* at the pause: the parts of pairs whose pieces hash differently on the
   two GPUs, merged, into *out (malloc'ed); their count, or -1 when out of
   memory; *unchanged: the bytes found equal */
long mig_changed(struct mig *m, const uint64_t *pairs, size_t n, uint64_t **out,
                 uint64_t *unchanged);

/* a prepare's target connection c (NULL: none any more) is where cancel
   cuts it; 0, or -1 (m->err set) when the prepare was cancelled already.
   Does nothing for a migration. (migrate.c) */
int mig_cuttable(struct mig *m, struct ferry_conn *c);

/* the target for messages: "local GPU 1", "local GPU 1 (ferry-mhelper)",
   or its URL as replies quote it (ferry_echo_url) */
void mig_target_name(const struct mig *m, char *out, size_t n);
/* a failure that came from the target's connection going away (a server
   killed, a helper gone) is said of the target: m->err becomes "<target>:
   <what happened to it> (<the step that failed>)". The vGPU's own link is
   not involved, so nothing may blame it. Before mig_close_opened. */
void mig_blame_target(struct mig *m);
/* migrate_target.c: each open is done before the hold (0, or -1 with
   m->err); close_opened undoes whichever was opened */
int mig_open_local(struct mig *m);
int mig_open_helper(struct mig *m);
int mig_open_remote(struct mig *m);
void mig_close_link(struct mig *m);
/* all that is done before the hold: the target opened (as m->url and
   m->helper say), mem-sync's buffers, and unless FERRY_PRECOPY=0 the log
   replayed and the live regions copied there */
int mig_open_ahead(struct mig *m);
void mig_close_opened(struct mig *m);
/* mem-sync's two buffers on the target: sized for total bytes, at most
   mig_buffer_max() each (FERRY_MEMSYNC_BUFFER, 4 MiB by default) */
uint64_t mig_buffer_max(void);
uint64_t mig_buffer_size(uint64_t total);
int mig_buffers_open(struct mig *m, uint64_t bytes);
int mig_buffers_ahead(struct mig *m);
void mig_buffers_close(struct mig *m);

#endif
