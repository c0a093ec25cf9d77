/*
 * Migration of a vGPU while the program runs, from where it runs now (a
 * server, a ferry-mhelper, or the GPU in this process) to a GPU of this
 * machine (in this process or in a helper, FERRY_MHELPER) or to a server
 * session. The phases, in order: the target opened, the log replayed and
 * the live regions copied there while the program runs (precopy.c); hold
 * new calls (the gate), drain the source GPU, replay what came since,
 * copy what changed, then variables and CUDA arrays, and switch. Every
 * target takes the same calls (replay/target.h), so one path moves to any.
 * Nothing on the source changes until the switch, so any failure before it
 * only has to undo the target: the program goes on where it was.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "replay/memsync.h"
#include "replay/replay.h"
#include "shim/core/shadow.h"
#include "shim/core/hooks.h"
#include "shim/migrate/migrate.h"
#include "shim/migrate/migrate_int.h"

const char *const ferry_phase_names[FERRY_PHASE_COUNT] = {"hold", "drain", "setup", "replay",
                                                           "memsync", "vars", "switch"};
int ferry_symbol_address_taken; /* a migration cannot keep these (issue 3) */

/* the core connected every vGPU: FERRY_MIGRATE_AT is read and the control
   socket opens */
static void migration_started(void) {
  ferry_migrate_at_check();
  ferry_control_start();
}
__attribute__((constructor)) static void migration_hooks(void) {
  ferry_hooks.started = migration_started;
}

static pthread_mutex_t mig_lock = PTHREAD_MUTEX_INITIALIZER;

/* the prepared target of vGPU index as text, "" for none (mig_lock held) */
static void prepared_text(int index, char *out, size_t n);

/* FERRY_FAULT=<point>[@N]: a test makes one step fail, once per process,
   the first (or N-th) time a migration reaches it */
int mig_fault(const char *point) {
  static int fired, reached;
  const char *f = getenv("FERRY_FAULT");
  size_t n = f ? strcspn(f, "@") : 0;
  if (!f || n != strlen(point) || strncmp(f, point, n)) return 0;
  int nth = f[n] == '@' ? atoi(f + n + 1) : 1;
  if (__atomic_add_fetch(&reached, 1, __ATOMIC_RELAXED) < nth) return 0;
  return !__atomic_exchange_n(&fired, 1, __ATOMIC_RELAXED);
}

int ferry_vgpu_count(void) { return ferry_ensure_init() ? 0 : ferry.count; }

int ferry_vgpu_status(int index, struct ferry_vgpu_status *out) {
  if (ferry_ensure_init() || index < 0 || index >= ferry.count) return -1;
  struct ferry_vgpu *v = &ferry.vgpus[index];
  pthread_mutex_lock(&mig_lock);
  *out = v->mig;
  int running = v->mig.state == FERRY_MIG_RUNNING;
  out->index = index;
  out->local = __atomic_load_n(&v->moved, __ATOMIC_ACQUIRE);
  out->local_gpu = -1;
  if (ferry_is_local(v)) {
    out->local_gpu = ferry_local_gpu(v->lx);
    snprintf(out->where, sizeof out->where, "local GPU %d (%s)", out->local_gpu,
             ferry_local_name(v->lx));
  } else if (out->local) {
    out->helper_pid = v->link.helper_pid;
    out->local_gpu = v->link.helper_gpu;
    snprintf(out->where, sizeof out->where, "%s%s", v->link.name,
             ferry_dead(v) ? " (connection lost)" : "");
  } else {
    snprintf(out->where, sizeof out->where, "%s%s", v->url_text,
             ferry_dead(v) ? " (connection lost)" : "");
  }
  prepared_text(index, out->prepared, sizeof out->prepared);
  pthread_mutex_unlock(&mig_lock);
  out->launches = __atomic_load_n(&v->launches, __ATOMIC_RELAXED);
  /* a migration holds the arena and the log for most of its length: status
     answers with what they held when it began, and never waits for it */
  if (!running) {
    out->records = ferry_recorder_live(&v->log);
    pthread_mutex_lock(&v->arena_lock);
    out->regions = v->arena.nregions;
    out->live_bytes = v->arena.live_bytes;
    pthread_mutex_unlock(&v->arena_lock);
  }
  return 0;
}

/* ---- one migration ---- */

/* closes the running phase's clock; phase < 0 keeps the last one shown
   (a failed migration then says where it stopped) */
static void enter_phase(struct mig *m, int phase) {
  double t = mig_now_ms();
  pthread_mutex_lock(&mig_lock);
  m->v->mig.phase_ms[m->v->mig.phase] += t - m->t_phase;
  if (phase >= 0) m->v->mig.phase = phase;
  pthread_mutex_unlock(&mig_lock);
  m->t_phase = t;
}

/* the first reason wins; always -1 */
int mig_fail(struct mig *m, const char *fmt, ...) {
  if (!m->err[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, m->errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

int mig_module_loaded(void *ctx, uint32_t module, ferry_blob source, ferry_blob local) {
  struct mig *m = ctx;
  /* tests: a replay that stalls, holding the gate, the arena and the log:
     2 s, or until the file FERRY_FAULT_RELEASE names exists (at most 120 s),
     so that a test on a loaded machine decides when it ends */
  if (mig_fault("stall")) {
    const char *release = getenv("FERRY_FAULT_RELEASE");
    for (int i = 0; release && i < 12000 && access(release, F_OK); i++)
      nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    if (!release) nanosleep(&(struct timespec){2, 0}, NULL);
  }
  if (source.len != local.len) return 1;
  for (uint32_t off = 0; off + 16 <= source.len; off += 16) {
    uint64_t s[2], l[2];
    memcpy(s, (const char *)source.ptr + off, 16);
    memcpy(l, (const char *)local.ptr + off, 16);
    if (!s[0] || !l[0]) continue;
    if (s[1] != l[1]) return 1;
    if (m->nvars == m->cvars) {
      size_t cap = m->cvars ? m->cvars * 2 : 32;
      struct var_copy *p = realloc(m->vars, cap * sizeof *p);
      if (!p) return 1;
      m->vars = p;
      m->cvars = cap;
    }
    m->vars[m->nvars++] = (struct var_copy){s[0], l[0], s[1]};
  }
  struct rebind *r = realloc(m->rebinds, (m->nrebinds + 1) * sizeof *r);
  if (!r) return 1;
  m->rebinds = r;
  char *info = malloc(local.len ? local.len : 1);
  if (!info) return 1;
  if (local.len) memcpy(info, local.ptr, local.len);
  m->rebinds[m->nrebinds++] = (struct rebind){module, info, local.len};
  return 0;
}

const char *mig_error_name(int e) { return cudaGetErrorName((cudaError_t)e); }

/* module globals the driver front end handed out: where the target has them */
static int global_on_target(void *ctx, uint32_t module, const char *name, uint64_t *addr,
                            uint64_t *size) {
  struct mig *m = ctx;
  struct ferry_module_global_args a = {.module = module, .name = name};
  struct ferry_module_global_rets r;
  int rc = m->t.call(m->t.ctx, FERRY_CALL_module_global, &a, &r, NULL);
  if (rc) return mig_fail(m, "module %u: variable %s is not on the local GPU (%s)", module, name, mig_error_name(rc));
  *addr = r.addr;
  *size = r.size;
  return 0;
}

static int add_var_copy(void *ctx, uint64_t src, uint64_t dst, uint64_t size) {
  struct mig *m = ctx;
  if (m->nvars == m->cvars) {
    size_t cap = m->cvars ? m->cvars * 2 : 32;
    struct var_copy *p = realloc(m->vars, cap * sizeof *p);
    if (!p) return mig_fail(m, "out of memory");
    m->vars = p;
    m->cvars = cap;
  }
  m->vars[m->nvars++] = (struct var_copy){src, dst, size};
  return 0;
}


/* mem-sync's source: gather requests to the remote server */
struct remote_src {
  struct ferry_link *l;
  int batches;
};
static int src_request(void *ctx, const uint64_t *pairs, uint32_t n) {
  struct remote_src *s = ctx;
  struct ferry_memcpy_dtoh_gather_args a = {.ranges = {pairs, n * 16}};
  return ferry_link_send(s->l, FERRY_CALL_memcpy_dtoh_gather, &a) ? -1 : 0;
}
static int src_receive(void *ctx, void *dst, uint64_t len) {
  struct remote_src *s = ctx;
  struct ferry_bulk bulk = {.out = dst, .out_len = len};
  int rc = ferry_link_reply(s->l, FERRY_CALL_memcpy_dtoh_gather, NULL, &bulk);
  if (rc) return s->l->dead ? -1 : 1;
  if (s->batches++ == 0 && mig_fault("memsync")) return 1;
  return 0;
}

static void progress(void *ctx, uint64_t done, uint64_t total) {
  struct ferry_vgpu *v = ctx;
  pthread_mutex_lock(&mig_lock);
  v->mig.bytes_done = done;
  v->mig.bytes_total = total;
  pthread_mutex_unlock(&mig_lock);
}

static size_t format_bytes(unsigned f) {
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF:
  case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_UNORM_INT16X2: case CU_AD_FORMAT_UNORM_INT16X4:
  case CU_AD_FORMAT_SNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X2: case CU_AD_FORMAT_SNORM_INT16X4:
    return 2;
  case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT:
    return 4;
  default: return 1;
  }
}

/* a CUDA array's content: read remotely, written on the target */
static int copy_array(void *ctx, const struct ferry_record *rec) {
  struct mig *m = ctx;
  if (rec->call != FERRY_CALL_array_create) return 0;
  const struct ferry_array_create_args *a = (const void *)rec->args;
  uint64_t w = a->width * a->channels * format_bytes(a->format);
  uint64_t h = a->height ? a->height : 1, d = a->depth ? a->depth : 1;
  uint64_t bytes = w * h * d;
  char *buf = malloc(bytes ? bytes : 1);
  if (!buf) return cudaErrorMemoryAllocation;
  struct ferry_memcpy3d_dtoh_args rd = {.src_kind = 1, .src = a->array, .width = w, .height = h,
                                        .depth = d};
  struct ferry_bulk bulk = {.out = buf, .out_len = bytes};
  int rc = ferry_source_call(m->v, FERRY_CALL_memcpy3d_dtoh, &rd, NULL, &bulk);
  if (!rc) {
    struct ferry_memcpy3d_htod_args wr = {.dst_kind = 1, .dst = a->array, .width = w, .height = h,
                                          .depth = d};
    struct ferry_bulk in = {.in = buf, .in_len = bytes};
    rc = mig_tcall(m, FERRY_CALL_memcpy3d_htod, &wr, &in);
  }
  free(buf);
  if (rc) snprintf(m->err, m->errlen, "copying CUDA array %u failed: %s", a->array, mig_error_name(rc));
  return rc;
}

/* __device__ and __constant__ variables, by name: one gather from the
   remote GPU, then each written where the target placed it */
static int copy_vars(struct mig *m) {
  if (!m->nvars) return 0;
  uint64_t total = 0;
  uint64_t *pairs = malloc(m->nvars * 16);
  if (!pairs) return cudaErrorMemoryAllocation;
  for (size_t i = 0; i < m->nvars; i++) {
    pairs[2 * i] = m->vars[i].src;
    pairs[2 * i + 1] = m->vars[i].size;
    total += m->vars[i].size;
  }
  char *buf = malloc(total ? total : 1);
  int rc = buf ? 0 : cudaErrorMemoryAllocation;
  if (!rc) {
    struct ferry_memcpy_dtoh_gather_args a = {.ranges = {pairs, (uint32_t)(m->nvars * 16)}};
    struct ferry_bulk bulk = {.out = buf, .out_len = total};
    rc = ferry_source_call(m->v, FERRY_CALL_memcpy_dtoh_gather, &a, NULL, &bulk);
  }
  const char *p = buf;
  for (size_t i = 0; i < m->nvars && !rc; i++) {
    struct ferry_memcpy_htod_args w = {m->vars[i].dst, 0};
    struct ferry_bulk in = {.in = p, .in_len = m->vars[i].size};
    rc = mig_tcall(m, FERRY_CALL_memcpy_htod, &w, &in);
    p += m->vars[i].size;
  }
  free(pairs);
  free(buf);
  if (rc) snprintf(m->err, m->errlen, "copying module variables failed: %s", mig_error_name(rc));
  return rc;
}

/* device-side malloc/new memory lives in a heap the driver places and owns */
static int uses_device_heap(void *ctx, const struct ferry_record *rec) {
  (void)ctx;
  return rec->call == FERRY_CALL_device_set_limit &&
         ((const struct ferry_device_set_limit_args *)(const void *)rec->args)->limit ==
             cudaLimitMallocHeapSize;
}

/* flush, wait for the GPU the vGPU leaves, refuse what cannot move */
static int drain(struct mig *m) {
  struct ferry_vgpu *v = m->v;
  int here = ferry_is_local(v);
  int rc = here ? 0 : ferry_flush(&v->link);
  struct ferry_device_synchronize_args sync = {0};
  if (!rc) rc = ferry_source_call(v, FERRY_CALL_device_synchronize, &sync, NULL, NULL);
  if (ferry_dead(v)) return mig_fail(m, "the remote GPU is unreachable");
  if (rc) {
    /* a second wait tells a sticky error (the context is lost) from one
       that was only latched; either way the program still gets to see it */
    int again = ferry_source_call(v, FERRY_CALL_device_synchronize, &sync, NULL, NULL);
    __atomic_store_n(&v->carry_error, rc, __ATOMIC_RELEASE);
    if (again) return mig_fail(m, "the device has a sticky error (%s); it stays remote",
                           cudaGetErrorName((cudaError_t)rc));
  }
  if (!here && ferry_deferred_pending(&v->link))
    return mig_fail(m, "asynchronous copies did not complete");
  if ((rc = ferry_shadow_settle(v)))
    return mig_fail(m, "bringing back the pinned host memory its kernels use failed (%s)",
                    cudaGetErrorName((cudaError_t)rc));
  if (ferry_recorder_foreach(&v->log, uses_device_heap, NULL))
    return mig_fail(m, "the program sized the device malloc heap (cudaLimitMallocHeapSize): memory "
                   "allocated by kernels (malloc/new) lives in the driver's heap and cannot be "
                   "moved");
  if (ferry_pre_capture(v)) return mig_fail(m, "out of memory reading event times");
  return 0;
}

/* every live region, through the buffers */
static int memsync(struct mig *m, uint64_t *bytes) {
  struct ferry_vgpu *v = m->v;
  struct ferry_memsync_opts o;
  ferry_memsync_defaults(&o);
  uint64_t *pairs = NULL;
  char why[256] = "";
  int rc = 0;
  long n = ferry_memsync_plan(v->arena.regions, v->arena.nregions, v->arena.maps, v->arena.nmaps,
                              o.merge_gap, &pairs);
  if (n < 0) return mig_fail(m, "out of memory planning mem-sync");
  if (m->precopied) { /* copied ahead: only the pieces whose hashes differ */
    uint64_t *changed;
    long k = mig_changed(m, pairs, (size_t)n, &changed, &m->unchanged);
    free(pairs);
    if (k < 0) return mig_fail(m, "out of memory comparing the copies");
    pairs = changed;
    n = k;
    /* tests: a fault in mem-sync, even when the pause has nothing to copy */
    if (!n && mig_fault("memsync")) {
      free(pairs);
      return mig_fail(m, "mem-sync failed (injected fault)");
    }
  }
  uint64_t total = 0;
  for (long i = 0; i < n; i++) total += pairs[2 * i + 1];
  /* the program allocated more since the buffers were made: larger ones now */
  if (n > 0 && m->buf_bytes < mig_buffer_size(total)) {
    mig_buffers_close(m);
    rc = mig_buffers_open(m, mig_buffer_size(total));
  }
  o.batch_bytes = m->buf_bytes ? m->buf_bytes : mig_buffer_max();
  o.bulk = m->url != NULL;
  /* a server's replies are pipelined; the GPU in this process answers at once */
  struct remote_src src = {&v->link, 0};
  struct ferry_memsync_source source = {src_request, src_receive, &src};
  int queued = !rc && ferry_is_local(v);
  if (queued && mig_queued_source(v, 0, &source)) {
    rc = mig_fail(m, "out of memory");
    queued = 0;
  }
  if (!rc) {
    o.buffers = MEMSYNC_BUFFERS;
    o.bufs = m->bufs;
    o.progress = progress;
    o.progress_ctx = v;
    struct ferry_memsync_stats ms;
    if (ferry_memsync_run(&m->t, pairs, (size_t)n, &source, &o, &ms, why, sizeof why)) {
      rc = mig_fail(m, "%s", why);
    } else {
      *bytes = ms.bytes;
      pthread_mutex_lock(&mig_lock);
      v->mig.bytes_copied = ms.bytes;
      v->mig.ranges_copied = ms.ranges;
      v->mig.requests = ms.requests;
      v->mig.bytes_precopied = m->precopied;
      v->mig.bytes_unchanged = m->unchanged;
      v->mig.hash_ms = m->hash_ms;
      pthread_mutex_unlock(&mig_lock);
    }
  }
  if (queued) mig_queued_free(&source);
  free(pairs);
  mig_buffers_close(m);
  return rc;
}

/* the vGPU leaves the GPU in this process (the gate is held exclusively);
   that context is closed after the hold (close_left): destroying it
   takes 60-85 ms on an H200 */
static void leave_process(struct mig *m) {
  struct ferry_vgpu *v = m->v;
  pthread_mutex_lock(&mig_lock);
  m->left = v->lx;
  __atomic_store_n(&v->local, 0, __ATOMIC_RELEASE);
  v->lx = NULL;
  v->inproc_gpu = -1;
  pthread_mutex_unlock(&mig_lock);
}

/* no call reaches the context the vGPU left: its memory is freed and the
   arena's placeholder is back */
static void close_left(struct mig *m) {
  if (!m->left) return;
  ferry_host_forget_local(m->left);
  ferry_local_close(m->left);
  m->left = NULL;
  if (ferry_placeholder_reserve(m->v))
    ferry_log("device %d: its address range could not be reserved again; a host mapping may "
              "now take it", m->v->index);
}

/* the target takes over: nothing can fail from here on */
static void switch_over(struct mig *m) {
  struct ferry_vgpu *v = m->v;
  for (size_t i = 0; i < m->nrebinds; i++) {
    ferry_blob info = {m->rebinds[i].info, m->rebinds[i].len};
    if (ferry_hooks.module_moved) ferry_hooks.module_moved(v->index, m->rebinds[i].module, info);
    /* the log goes on, with the variables where they are now */
    ferry_recorder_rebind(&v->log, m->rebinds[i].module, info);
  }
  if (ferry_hooks.globals_commit) ferry_hooks.globals_commit(v->index);
  __atomic_add_fetch(&v->generation, 1, __ATOMIC_RELEASE);
  ferry_shadow_switched(v);
  if (m->url) { /* remote again, or still: the log goes on, on the new server */
    int from_process = ferry_is_local(v);
    if (from_process) leave_process(m);
    struct ferry_staging *old_staging = v->link.staging;
    int from_helper = v->link.helper_pid != 0;
    ferry_link_adopt(&v->link, m->tl); /* closes the old session (a helper exits) */
    mig_close_link(m);
    if (old_staging) ferry_staging_free(old_staging);
    if (from_helper || from_process) {
      ferry_host_forget_helper(v->index);
      __atomic_store_n(&v->moved, 0, __ATOMIC_RELEASE);
    }
    v->url = *m->url;
    ferry_url_format(&v->url, v->url_text, sizeof v->url_text);
    return;
  }
  if (m->helper) {
    ferry_link_adopt(&v->link, m->tl); /* closes the remote session */
    mig_close_link(m);
    if (ferry_host_register_helper(v))
      ferry_debug("device %d: pinned memory is not page-locked in its helper; its copies stay "
                  "correct but synchronous", v->index);
  } else {
    pthread_mutex_lock(&mig_lock);
    v->lx = m->L;
    m->L = NULL;
    __atomic_store_n(&v->local, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&mig_lock);
    ferry_link_close(&v->link); /* the server frees everything it held */
    ferry_host_register_local(v->lx);
  }
  __atomic_store_n(&v->moved, 1, __ATOMIC_RELEASE);
}

/* the steps under the gate; -1 with m->err on failure */
static int move(struct mig *m, uint64_t *bytes, uint64_t *records) {
  struct ferry_vgpu *v = m->v;
  char why[256] = "";
  enter_phase(m, FERRY_PHASE_DRAIN);
  /* tests: the program held for a second, e.g. while its target dies */
  if (mig_fault("pause_stall")) nanosleep(&(struct timespec){1, 0}, NULL);
  if (drain(m)) return -1;
  double drained = mig_now_ms();

  enter_phase(m, FERRY_PHASE_REPLAY);
  struct ferry_replay_hooks hooks = {mig_module_loaded, mig_error_name, m};
  struct ferry_replay_stats rs = {0};
  /* replayed ahead: only what the program changed since */
  if (m->ahead ? ferry_replay_journal(&v->log, &m->t, &hooks, &rs, why, sizeof why)
               : ferry_replay(&v->log, &m->t, &hooks, &rs, why, sizeof why))
    return mig_fail(m, "%s", why);
  *records = rs.records;
  pthread_mutex_lock(&v->pre_lock);
  v->bridge_ms = mig_now_ms() - drained;
  pthread_mutex_unlock(&v->pre_lock);
  pthread_mutex_lock(&mig_lock);
  v->mig.records_replayed = rs.records;
  v->mig.records_ahead = m->ahead_stats.records;
  v->mig.ahead_ms = m->ahead_replay_ms + m->precopy_ms + m->warm_ms;
  v->mig.modules_replayed = rs.modules;
  v->mig.replay_module_ms = rs.module_ms;
  v->mig.replay_other_ms = rs.other_ms;
  pthread_mutex_unlock(&mig_lock);
  if (mig_fault("replay")) return mig_fail(m, "replaying the log failed (injected fault)");
  if (ferry_hooks.globals_prepare &&
      ferry_hooks.globals_prepare(v->index, global_on_target, add_var_copy, m))
    return mig_fail(m, "looking up module variables on the target failed");

  enter_phase(m, FERRY_PHASE_MEMSYNC);
  if (memsync(m, bytes)) return -1;

  enter_phase(m, FERRY_PHASE_VARS);
  if (copy_vars(m) || ferry_recorder_foreach(&v->log, copy_array, m))
    return mig_fail(m, "copying variables failed");
  if (mig_fault("vars")) return mig_fail(m, "copying variables failed (injected fault)");

  enter_phase(m, FERRY_PHASE_SWITCH);
  switch_over(m);
  return 0;
}

__attribute__((format(printf, 3, 4))) static int refuse(char *err, size_t errlen,
                                                         const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

/* FERRY_MHELPER: where a migration goes; -1 for a bad value */
enum { POLICY_AUTO, POLICY_ALWAYS, POLICY_NEVER };
static int helper_policy(void) {
  const char *p = getenv("FERRY_MHELPER");
  if (!p || !*p || !strcmp(p, "auto")) return POLICY_AUTO;
  if (!strcmp(p, "always")) return POLICY_ALWAYS;
  if (!strcmp(p, "never")) return POLICY_NEVER;
  return -1;
}

/* decides in-process or helper (mig_lock held); NULL, or a refusal */
static const char *placement(int vi, int gpu, int *helper, char *buf, size_t n) {
  int policy = helper_policy();
  if (policy < 0) {
    snprintf(buf, n, "FERRY_MHELPER='%s': expected auto, always or never", getenv("FERRY_MHELPER"));
    return buf;
  }
  /* vGPUs in this process, or on their way (migrations run at once) */
  int in_process = -1, same_gpu = -1;
  for (int i = 0; i < ferry.count; i++) {
    struct ferry_vgpu *o = &ferry.vgpus[i];
    if (i == vi || o->inproc_gpu < 0) continue;
    in_process = i;
    if (o->inproc_gpu == gpu) same_gpu = i;
  }
  /* auto: the first vGPU to move runs in this process, the others in
     helpers; one that started on a local GPU (FERRY_DEVICES=local:N) stays
     in helpers, so that it can always be evicted again */
  *helper = policy == POLICY_ALWAYS ||
            (policy == POLICY_AUTO && (in_process >= 0 || ferry.vgpus[vi].start_gpu >= 0));
  if (!*helper && same_gpu >= 0) {
    /* two vGPUs in one process on one GPU would share its primary context */
    snprintf(buf, n, "local GPU %d already runs device %d in this process (FERRY_MHELPER=never "
             "allows no helper)", gpu, same_gpu);
    return buf;
  }
  return NULL;
}

/* Targets opened ahead (`prepare`): the next migration of the vGPU to the
   same target takes it, so the migration itself starts at the hold.
   Under mig_lock; busy while a prepare opens one, which `cancel` may stop:
   it sets cancel, cuts conn (the target's connection, once there is one)
   and waits for prepare_done. */
static struct prepared {
  int active, busy, remote, cancel;
  struct ferry_url url;
  struct mig m; /* what it opened, replayed and copied */
  double setup_ms;
  struct ferry_conn *conn;
} prepared[FERRY_MAX_VGPUS];
static pthread_cond_t prepare_done = PTHREAD_COND_INITIALIZER;

int mig_cuttable(struct mig *m, struct ferry_conn *c) {
  if (!m->preparing) return 0;
  pthread_mutex_lock(&mig_lock);
  struct prepared *p = &prepared[m->v->index];
  int cancelled = p->cancel;
  p->conn = cancelled ? NULL : c;
  pthread_mutex_unlock(&mig_lock);
  return cancelled ? mig_fail(m, "cancelled") : 0;
}

static void prepared_text(int index, char *out, size_t n) {
  const struct prepared *p = &prepared[index];
  if (!p->active) snprintf(out, n, "%s", "");
  else if (p->remote) ferry_url_format(&p->url, out, n);
  else snprintf(out, n, "local GPU %d%s", p->m.gpu, p->m.helper ? " (ferry-mhelper)" : "");
}

/* what a prepared target holds, as a migration's */
static void from_prepared(const struct prepared *p, struct mig *m) {
  char *err = m->err;
  size_t errlen = m->errlen;
  double t_phase = m->t_phase; /* the migration's clock, not the prepare's */
  *m = p->m;
  m->url = p->remote ? &p->url : NULL;
  m->err = err, m->errlen = errlen, m->t_phase = t_phase;
}

static void mig_free(struct mig *m) {
  for (size_t i = 0; i < m->nrebinds; i++) free(m->rebinds[i].info);
  free(m->rebinds);
  free(m->vars);
  m->rebinds = NULL, m->vars = NULL, m->nrebinds = m->nvars = m->cvars = 0;
}

static void close_prepared(struct ferry_vgpu *v, const struct prepared *p) {
  char why[256] = "";
  struct mig m = {.err = why, .errlen = sizeof why};
  from_prepared(p, &m);
  if (m.ahead) ferry_recorder_journal_stop(&v->log);
  mig_close_opened(&m);
  mig_free(&m);
}

static int same_target(const struct prepared *p, int gpu, const struct ferry_url *url) {
  if (!url) return !p->remote && p->m.gpu == gpu;
  return p->remote && !strcmp(p->url.scheme, url->scheme) && !strcmp(p->url.host, url->host) &&
         p->url.port == url->port && p->url.gpu == url->gpu;
}


static const char ipc_busy[] =
    "device %d shares memory or events with another program through CUDA IPC "
    "(cudaIpcGetMemHandle, cudaIpcOpenMemHandle, cudaIpcGetEventHandle, "
    "cudaIpcOpenEventHandle), or with another device through peer access "
    "(cudaDeviceEnablePeerAccess), which holds it on its server; free, close, destroy "
    "or disable what it shares first";

/* why vGPU vi cannot move to the target now (mig_lock held), or NULL */
static const char *cannot_move(struct ferry_vgpu *v, const struct ferry_url *url) {
  if (v->mig.state == FERRY_MIG_RUNNING) return "a migration of device %d is already running";
  if (prepared[v->index].busy) return "a prepare of device %d is running (cancel stops it)";
  if (!url && ferry_is_local(v)) return "device %d already runs on a local GPU (in this process)";
  if (!url && v->moved) return "device %d already runs on a local GPU (in a ferry-mhelper)";
  if (ferry_dead(v)) return "device %d lost its server; there is nothing left to migrate";
  if (v->log_broken) return "device %d lost a record (out of memory); it cannot migrate";
  /* another program maps its memory, or it maps another's, through the server */
  if (__atomic_load_n(&v->ipc_open, __ATOMIC_ACQUIRE)) return ipc_busy;
  return NULL;
}

/* ---- a move that waits for CUDA IPC to close ----
   Another program maps this vGPU's memory (NCCL's peer rank maps its
   buffers so), or it maps another's: moving it would leave them reading
   memory it no longer uses. A move asked then waits, shown as "waiting" in
   status; once the last export or import closes (ferry_ipc_release) it
   runs at the vGPU's next launch, in the launching thread, as
   FERRY_MIGRATE_AT's moves do. A program that ends first (PyTorch tears
   NCCL down at exit) never starts it among the libraries' destructors.
   cancel drops it; another move replaces it. */
static struct waiting {
  int active;
  int ready; /* nothing is shared any more: it runs at the next launch */
  int gpu;
  int remote;
  struct ferry_url url;
} waiting[FERRY_MAX_VGPUS];
static int waiting_ready; /* atomic: some waiting[].ready (every launch reads it) */

/* mig_lock held: the move of v to (gpu, url) waits; the reason in err */
static int wait_for_ipc(struct ferry_vgpu *v, int gpu, const struct ferry_url *url,
                        const char *target, char *err, size_t errlen) {
  struct waiting *w = &waiting[v->index];
  *w = (struct waiting){.active = 1, .gpu = gpu, .remote = url != NULL};
  if (url) w->url = *url;
  v->mig = (struct ferry_vgpu_status){.state = FERRY_MIG_WAITING, .phase = -1,
                                      .launch_at_start = v->launches};
  snprintf(v->mig.error, sizeof v->mig.error,
           "waiting to move to %s: device %d shares memory or events with another program "
           "through CUDA IPC, or with another device through peer access; it moves at its "
           "first launch after the last export, import or peer access closes", target, v->index);
  snprintf(err, errlen, "%s", v->mig.error);
  return FERRY_MIGRATE_WAITS;
}

void ferry_ipc_release(struct ferry_vgpu *v, int all) {
  int left = all ? (__atomic_store_n(&v->ipc_open, 0, __ATOMIC_RELEASE), 0)
                 : __atomic_sub_fetch(&v->ipc_open, 1, __ATOMIC_ACQ_REL);
  if (left > 0) return;
  pthread_mutex_lock(&mig_lock);
  if (waiting[v->index].active && !waiting[v->index].ready) {
    waiting[v->index].ready = 1;
    __atomic_store_n(&waiting_ready, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&mig_lock);
}

void ferry_migrate_waited_at_launch(int vi) {
  if (!__atomic_load_n(&waiting_ready, __ATOMIC_ACQUIRE)) return;
  pthread_mutex_lock(&mig_lock);
  struct waiting w = waiting[vi];
  int go = w.active && w.ready;
  if (go) waiting[vi].active = waiting[vi].ready = 0;
  int any = 0;
  for (int i = 0; i < FERRY_MAX_VGPUS; i++) any |= waiting[i].active && waiting[i].ready;
  __atomic_store_n(&waiting_ready, any, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&mig_lock);
  if (!go) return;
  char err[300];
  int started;
  int rc = ferry_migrate_run(vi, w.gpu, w.remote ? &w.url : NULL, err, sizeof err, &started);
  if (rc && rc != FERRY_MIGRATE_WAITS && !started) /* waiting again: said already */
    ferry_log("the waiting migration of device %d did not start: %s", vi, err);
}

/* *started: 0 when refused before anything began (nothing logged) */
int ferry_migrate_run(int vi, int gpu, const struct ferry_url *url, char *err, size_t errlen,
                      int *started) {
  *started = 0;
  if (errlen) err[0] = '\0';
  int rc = ferry_ensure_init();
  if (rc) {
    snprintf(err, errlen, "CUDA is not usable in this program (%s)", cudaGetErrorName((cudaError_t)rc));
    return -1;
  }
  if (vi < 0 || vi >= ferry.count)
    return refuse(err, errlen, "no device %d: this program has %d device(s)", vi, ferry.count);
  if (!url && gpu < 0) return refuse(err, errlen, "bad local GPU %d", gpu);
  struct ferry_vgpu *v = &ferry.vgpus[vi];
  char target[320];
  if (url) {
    char full[320];
    ferry_url_format(url, full, sizeof full);
    ferry_echo_url(full, target, sizeof target);
  } else {
    snprintf(target, sizeof target, "local GPU %d", gpu);
  }
  char why[256];
  int helper = 0;
  pthread_mutex_lock(&mig_lock);
  const char *busy = cannot_move(v, url);
  if (busy == ipc_busy) {
    int rc = wait_for_ipc(v, gpu, url, target, err, errlen);
    pthread_mutex_unlock(&mig_lock);
    ferry_log("%s", err);
    return rc;
  }
  if (!busy && waiting[vi].active) waiting[vi].active = waiting[vi].ready = 0; /* replaced */
  /* a target prepared for this move is taken; one prepared elsewhere is dropped */
  struct prepared pre = {0}, stale = {0};
  if (!busy && prepared[vi].active) {
    if (same_target(&prepared[vi], gpu, url)) pre = prepared[vi];
    else stale = prepared[vi];
    prepared[vi].active = 0;
    if (stale.active && !stale.m.helper && !stale.remote) v->inproc_gpu = -1;
  }
  if (pre.active) helper = pre.m.helper;
  const char *refused = busy || url || pre.active ? NULL : placement(vi, gpu, &helper, why, sizeof why);
  if (busy || refused) {
    pthread_mutex_unlock(&mig_lock);
    if (stale.active) close_prepared(v, &stale);
    if (busy) return refuse(err, errlen, busy, vi);
    return refuse(err, errlen, "%s", refused);
  }
  *started = 1;
  if (!helper && !url) v->inproc_gpu = gpu; /* taken, for migrations that start meanwhile */
  v->mig = (struct ferry_vgpu_status){.state = FERRY_MIG_RUNNING, .phase = FERRY_PHASE_HOLD,
                                      .launch_at_start = v->launches};
  pthread_mutex_lock(&v->arena_lock); /* what status shows while the migration runs */
  v->mig.regions = v->arena.nregions;
  v->mig.live_bytes = v->arena.live_bytes;
  pthread_mutex_unlock(&v->arena_lock);
  v->mig.records = ferry_recorder_live(&v->log);
  pthread_mutex_unlock(&mig_lock);

  if (stale.active) close_prepared(v, &stale);
  struct mig m = {.v = v, .gpu = gpu, .helper = helper, .url = url, .err = err, .errlen = errlen,
                  .t_phase = mig_now_ms()};
  double t0 = m.t_phase;
  int failed = 0;
  /* the program changed too much since prepare replayed the log there */
  if (pre.active && pre.m.ahead && ferry_recorder_journal_broken(&v->log)) {
    ferry_debug("device %d: the prepared target is out of date; opening it afresh", vi);
    close_prepared(v, &pre);
    pre.active = 0;
    if (!helper && !url) v->inproc_gpu = gpu;
  }
  if (pre.active) { /* opened by prepare, while the program ran */
    from_prepared(&pre, &m);
  } else {
    /* the target opens while the program runs: its context, arena or
       helper process are not part of the pause */
    pthread_mutex_lock(&mig_lock);
    v->mig.phase = FERRY_PHASE_SETUP;
    pthread_mutex_unlock(&mig_lock);
    failed = mig_open_ahead(&m);
  }
  enter_phase(&m, FERRY_PHASE_HOLD);
  uint64_t bytes = 0, records = 0;
  if (!failed) {
    /* arena_lock first: a thread in cudaMalloc holds it while its mem_map
       call waits at the gate */
    pthread_mutex_lock(&v->arena_lock);
    pthread_rwlock_wrlock(&v->gate);
    m.t_hold = mig_now_ms();
    failed = move(&m, &bytes, &records);
    enter_phase(&m, -1);
    pthread_mutex_lock(&mig_lock);
    v->mig.pause_ms = mig_now_ms() - m.t_hold;
    pthread_mutex_unlock(&mig_lock);
    pthread_rwlock_unlock(&v->gate);
    pthread_mutex_unlock(&v->arena_lock);
    close_left(&m);
  } else {
    enter_phase(&m, -1);
  }
  if (m.ahead) ferry_recorder_journal_stop(&v->log);
  if (failed) {
    mig_blame_target(&m);
    mig_close_opened(&m);
  }
  mig_free(&m);

  double total = mig_now_ms() - t0;
  /* the replay and copy before the hold, for FERRY_STATS */
  double ahead_module_ms = m.ahead_stats.module_ms, ahead_other_ms = m.ahead_stats.other_ms,
         precopy_ms = m.precopy_ms;
  pthread_mutex_lock(&mig_lock);
  if (failed && !url) v->inproc_gpu = -1;
  v->mig.state = failed ? FERRY_MIG_FAILED : FERRY_MIG_DONE;
  v->mig.total_ms = total;
  if (failed) snprintf(v->mig.error, sizeof v->mig.error, "%s", err);
  pthread_mutex_unlock(&mig_lock);
  if (failed) {
    pthread_mutex_lock(&v->pre_lock);
    v->npre = 0;
    pthread_mutex_unlock(&v->pre_lock);
    ferry_log("migration of device %d to %s failed: %s", vi, target, err);
    return -1;
  }
  struct ferry_vgpu_status st;
  ferry_vgpu_status(vi, &st);
  char where[sizeof st.where];
  ferry_log("device %d now runs on %s: %llu records replayed, %.1f MiB copied, "
            "%.1f ms (paused %.1f ms)", vi, ferry_echo_where(st.where, where, sizeof where),
            (unsigned long long)records, bytes / 1048576.0, total, st.pause_ms);
  if (getenv("FERRY_STATS"))
    ferry_log("migration stats: device=%d helper=%d records=%llu modules=%llu replay_module_ms=%.3f "
              "replay_other_ms=%.3f bytes=%llu ranges=%llu requests=%llu hold_ms=%.3f "
              "drain_ms=%.3f setup_ms=%.3f replay_ms=%.3f memsync_ms=%.3f vars_ms=%.3f "
              "switch_ms=%.3f pause_ms=%.3f total_ms=%.3f records_ahead=%llu ahead_ms=%.3f "
              "bytes_precopied=%llu bytes_unchanged=%llu hash_ms=%.3f ahead_module_ms=%.3f "
              "ahead_other_ms=%.3f precopy_ms=%.3f", vi, st.helper_pid,
              (unsigned long long)st.records_replayed, (unsigned long long)st.modules_replayed,
              st.replay_module_ms, st.replay_other_ms, (unsigned long long)st.bytes_copied,
              (unsigned long long)st.ranges_copied, (unsigned long long)st.requests,
              st.phase_ms[0], st.phase_ms[1], st.phase_ms[2], st.phase_ms[3], st.phase_ms[4],
              st.phase_ms[5], st.phase_ms[6], st.pause_ms, st.total_ms,
              (unsigned long long)st.records_ahead, st.ahead_ms,
              (unsigned long long)st.bytes_precopied, (unsigned long long)st.bytes_unchanged,
              st.hash_ms, ahead_module_ms, ahead_other_ms, precopy_ms);
  if (ferry_symbol_address_taken)
    ferry_log("warning: the program took a __device__ variable's address (cudaGetSymbolAddress) "
              "before the migration; that address is not valid on the local GPU");
  return 0;
}

int ferry_migrate(int vi, int gpu, char *err, size_t errlen) {
  int started;
  return ferry_migrate_run(vi, gpu, NULL, err, errlen, &started);
}

int ferry_migrate_to(int vi, const char *target, char *err, size_t errlen) {
  int gpu, remote, started;
  struct ferry_url url;
  if (ferry_migrate_parse_target(target, strlen(target), &gpu, &url, &remote, err, errlen)) return -1;
  return ferry_migrate_run(vi, gpu, remote ? &url : NULL, err, errlen, &started);
}

int ferry_prepare(int vi, const char *target, char *err, size_t errlen) {
  int gpu, remote, helper = 0;
  struct ferry_url url;
  if (errlen) err[0] = '\0';
  int rc = ferry_ensure_init();
  if (rc) return refuse(err, errlen, "CUDA is not usable in this program (%s)",
                        cudaGetErrorName((cudaError_t)rc));
  if (vi < 0 || vi >= ferry.count)
    return refuse(err, errlen, "no device %d: this program has %d device(s)", vi, ferry.count);
  if (ferry_migrate_parse_target(target, strlen(target), &gpu, &url, &remote, err, errlen)) return -1;
  struct ferry_vgpu *v = &ferry.vgpus[vi];
  char why[256];
  pthread_mutex_lock(&mig_lock);
  const char *busy = cannot_move(v, remote ? &url : NULL);
  if (!busy && prepared[vi].active) busy = "device %d already has a prepared target (cancel it first)";
  const char *refused = busy || remote ? NULL : placement(vi, gpu, &helper, why, sizeof why);
  if (busy || refused) {
    pthread_mutex_unlock(&mig_lock);
    if (busy) return refuse(err, errlen, busy, vi);
    return refuse(err, errlen, "%s", refused);
  }
  prepared[vi].busy = 1;
  if (!helper && !remote) v->inproc_gpu = gpu;
  pthread_mutex_unlock(&mig_lock);
  struct mig m = {.v = v, .gpu = gpu, .helper = helper, .url = remote ? &url : NULL, .err = err,
                  .errlen = errlen, .preparing = 1};
  double t0 = mig_now_ms();
  int failed = mig_open_ahead(&m);
  /* cancel can no longer reach the connection, which may close now */
  pthread_mutex_lock(&mig_lock);
  int cancelled = prepared[vi].cancel;
  prepared[vi].conn = NULL;
  pthread_mutex_unlock(&mig_lock);
  m.preparing = 0;
  if (cancelled) {
    char name[320];
    mig_target_name(&m, name, sizeof name);
    failed = refuse(err, errlen, "the prepare of device %d on %s was cancelled", vi, name);
  } else if (failed) {
    mig_blame_target(&m);
  }
  if (failed) {
    mig_close_opened(&m);
    mig_free(&m);
  }
  pthread_mutex_lock(&mig_lock);
  m.err = NULL, m.errlen = 0;
  prepared[vi] = (struct prepared){.active = !failed, .remote = remote, .url = url, .m = m,
                                   .setup_ms = mig_now_ms() - t0};
  if (failed && !helper && !remote) v->inproc_gpu = -1;
  pthread_cond_broadcast(&prepare_done);
  pthread_mutex_unlock(&mig_lock);
  return failed ? -1 : 0;
}

int ferry_prepare_cancel(int vi, char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  if (vi < 0 || vi >= FERRY_MAX_VGPUS) return refuse(err, errlen, "no device %d", vi);
  pthread_mutex_lock(&mig_lock);
  /* a prepare still opening its target: its connection is cut (a call
     blocked on it fails now) and it closes what it opened */
  int aborted = prepared[vi].busy;
  if (aborted) {
    prepared[vi].cancel = 1;
    struct ferry_conn *c = prepared[vi].conn;
    if (c && c->ops->interrupt) c->ops->interrupt(c);
    while (prepared[vi].busy) pthread_cond_wait(&prepare_done, &mig_lock);
  }
  struct prepared p = prepared[vi];
  prepared[vi].active = 0;
  if (p.active && !p.m.helper && !p.remote) ferry.vgpus[vi].inproc_gpu = -1;
  int was_waiting = waiting[vi].active;
  if (was_waiting) {
    waiting[vi].active = waiting[vi].ready = 0;
    ferry.vgpus[vi].mig.state = FERRY_MIG_NONE;
  }
  pthread_mutex_unlock(&mig_lock);
  if (was_waiting && !p.active && !aborted) return 2;
  if (p.active) close_prepared(&ferry.vgpus[vi], &p); /* one that finished meanwhile */
  if (aborted) return 1;
  if (!p.active) return refuse(err, errlen, "device %d has no prepared target", vi);
  return 0;
}

double ferry_prepared_ms(int vi) {
  pthread_mutex_lock(&mig_lock);
  double ms = vi >= 0 && vi < FERRY_MAX_VGPUS && prepared[vi].active ? prepared[vi].setup_ms : -1;
  pthread_mutex_unlock(&mig_lock);
  return ms;
}

