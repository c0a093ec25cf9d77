/*
 * Migration of a vGPU from its remote server to a local GPU, while the
 * program runs (issue 3). The phases, in order: hold new calls (the gate),
 * drain the remote GPU, open the local GPU at the arena's address, replay
 * the log, copy every live region, then variables and CUDA arrays, and
 * switch. Nothing on the remote side changes until the switch, so any
 * failure before it only has to undo the local half: the program goes on
 * remotely with nothing lost.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "replay/memsync.h"
#include "replay/replay.h"
#include "shim.h"

const char *const ferry_phase_names[FERRY_PHASE_COUNT] = {"hold", "drain", "setup", "replay",
                                                           "memsync", "vars", "switch"};

static pthread_mutex_t mig_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* FERRY_FAULT=<point>: a test makes one step fail, once per process */
static int fault(const char *point) {
  static int fired;
  const char *f = getenv("FERRY_FAULT");
  if (!f || strcmp(f, point) || __atomic_exchange_n(&fired, 1, __ATOMIC_RELAXED)) return 0;
  return 1;
}

int ferry_vgpu_count(void) { return ferry_ensure_init() ? 0 : ferry.count; }

int ferry_vgpu_status(int index, struct ferry_vgpu_status *out) {
  if (ferry_ensure_init() || index < 0 || index >= ferry.count) return -1;
  struct ferry_vgpu *v = &ferry.vgpus[index];
  pthread_mutex_lock(&mig_lock);
  *out = v->mig;
  pthread_mutex_unlock(&mig_lock);
  out->index = index;
  out->local = ferry_is_local(v);
  if (out->local)
    snprintf(out->where, sizeof out->where, "local GPU %d (%s)", ferry_local_gpu(v->lx),
             ferry_local_name(v->lx));
  else
    snprintf(out->where, sizeof out->where, "%s%s", v->url_text, v->dead ? " (connection lost)" : "");
  out->records = out->local ? 0 : ferry_recorder_live(&v->log);
  out->launches = __atomic_load_n(&v->launches, __ATOMIC_RELAXED);
  pthread_mutex_lock(&v->arena_lock);
  out->regions = v->arena.nregions;
  out->live_bytes = v->arena.live_bytes;
  pthread_mutex_unlock(&v->arena_lock);
  return 0;
}

/* ---- one migration ---- */

struct var_copy {
  uint64_t src, dst, size;
};

struct mig {
  struct ferry_vgpu *v;
  int gpu;
  struct ferry_local *L;
  double t_phase;
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
};

/* closes the running phase's clock; phase < 0 keeps the last one shown
   (a failed migration then says where it stopped) */
static void enter_phase(struct mig *m, int phase) {
  double t = now_ms();
  pthread_mutex_lock(&mig_lock);
  m->v->mig.phase_ms[m->v->mig.phase] = t - m->t_phase;
  if (phase >= 0) m->v->mig.phase = phase;
  pthread_mutex_unlock(&mig_lock);
  m->t_phase = t;
}

static int module_loaded(void *ctx, uint32_t module, ferry_blob source, ferry_blob local) {
  struct mig *m = ctx;
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

static const char *error_name(int e) { return cudaGetErrorName((cudaError_t)e); }

/* mem-sync's source: gather requests to the remote server */
struct remote_src {
  struct ferry_vgpu *v;
  int batches;
};
static int src_request(void *ctx, const uint64_t *pairs, uint32_t n) {
  struct remote_src *s = ctx;
  struct ferry_memcpy_dtoh_gather_args a = {.ranges = {pairs, n * 16}};
  return ferry_remote_send(s->v, FERRY_CALL_memcpy_dtoh_gather, &a) ? -1 : 0;
}
static int src_receive(void *ctx, void *dst, uint64_t len) {
  struct remote_src *s = ctx;
  struct ferry_bulk bulk = {.out = dst, .out_len = len};
  int rc = ferry_remote_reply(s->v, FERRY_CALL_memcpy_dtoh_gather, NULL, &bulk);
  if (rc) return s->v->dead ? -1 : 1;
  if (s->batches++ == 0 && fault("memsync")) return 1;
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

/* a CUDA array's content: read remotely, written through the local executor */
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
  int rc = ferry_remote_call(m->v, FERRY_CALL_memcpy3d_dtoh, &rd, NULL, &bulk);
  if (!rc) {
    struct ferry_memcpy3d_htod_args wr = {.dst_kind = 1, .dst = a->array, .width = w, .height = h,
                                          .depth = d};
    struct ferry_bulk in = {.in = buf, .in_len = bytes};
    rc = ferry_local_call(m->v, FERRY_CALL_memcpy3d_htod, &wr, NULL, &in);
  }
  free(buf);
  if (rc) snprintf(m->err, m->errlen, "copying CUDA array %u failed: cudaError %d", a->array, rc);
  return rc;
}

/* __device__ and __constant__ variables, by name: one gather from the
   remote GPU, then each written where the local GPU placed it */
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
    rc = ferry_remote_call(m->v, FERRY_CALL_memcpy_dtoh_gather, &a, NULL, &bulk);
  }
  const char *p = buf;
  for (size_t i = 0; i < m->nvars && !rc; i++) {
    struct ferry_memcpy_htod_args w = {m->vars[i].dst, 0};
    struct ferry_bulk in = {.in = p, .in_len = m->vars[i].size};
    rc = ferry_local_call(m->v, FERRY_CALL_memcpy_htod, &w, NULL, &in);
    p += m->vars[i].size;
  }
  free(pairs);
  free(buf);
  if (rc) snprintf(m->err, m->errlen, "copying module variables failed: cudaError %d", rc);
  return rc;
}

/* device-side malloc/new memory lives in a heap the driver places and owns */
static int uses_device_heap(void *ctx, const struct ferry_record *rec) {
  (void)ctx;
  return rec->call == FERRY_CALL_device_set_limit &&
         ((const struct ferry_device_set_limit_args *)(const void *)rec->args)->limit ==
             cudaLimitMallocHeapSize;
}

/* ---- events recorded before the migration ---- */

struct ev_scan {
  uint32_t *ids;
  size_t n, cap;
};
static int timing_of(void *ctx, const struct ferry_record *rec) {
  const uint32_t *id = ctx;
  if (rec->call != FERRY_CALL_event_create) return 0;
  const struct ferry_event_create_args *a = (const void *)rec->args;
  if (a->event != *id) return 0;
  return a->flags & cudaEventDisableTiming ? 1 : 2;
}
static int recorded_event(void *ctx, const struct ferry_record *rec) {
  struct ev_scan *e = ctx;
  if (rec->call != FERRY_CALL_event_record) return 0;
  if (e->n == e->cap) {
    size_t cap = e->cap ? e->cap * 2 : 16;
    uint32_t *p = realloc(e->ids, cap * sizeof *p);
    if (!p) return 1;
    e->ids = p;
    e->cap = cap;
  }
  e->ids[e->n++] = ((const struct ferry_event_record_args *)(const void *)rec->args)->event;
  return 0;
}

/* Their timestamps stay on the remote GPU; the offsets between them are
   read now, so cudaEventElapsedTime keeps giving the times the program
   measured (replay records them again locally, so they are complete). */
static int capture_event_times(struct ferry_vgpu *v) {
  struct ev_scan scan = {NULL, 0, 0};
  if (ferry_recorder_foreach(&v->log, recorded_event, &scan)) {
    free(scan.ids);
    return -1;
  }
  struct ferry_pre_event *pre = malloc((scan.n ? scan.n : 1) * sizeof *pre);
  size_t n = 0;
  float last = 0;
  for (size_t i = 0; pre && i < scan.n; i++) {
    if (ferry_recorder_foreach(&v->log, timing_of, &scan.ids[i]) != 2) continue;
    float off = 0;
    if (n) {
      struct ferry_event_elapsed_args a = {pre[0].id, scan.ids[i]};
      struct ferry_event_elapsed_rets r;
      if (ferry_remote_call(v, FERRY_CALL_event_elapsed, &a, &r, NULL)) continue;
      off = r.ms;
    }
    pre[n++] = (struct ferry_pre_event){scan.ids[i], off};
    if (off > last) last = off;
  }
  free(scan.ids);
  if (!pre) return -1;
  pthread_mutex_lock(&v->pre_lock);
  free(v->pre_events);
  v->pre_events = pre;
  v->npre = n;
  v->pre_last_ms = last;
  pthread_mutex_unlock(&v->pre_lock);
  return 0;
}

static long pre_find(struct ferry_vgpu *v, uint32_t id) {
  for (size_t i = 0; i < v->npre; i++)
    if (v->pre_events[i].id == id) return (long)i;
  return -1;
}

void ferry_pre_forget(struct ferry_vgpu *v, uint32_t id) {
  pthread_mutex_lock(&v->pre_lock);
  long i = pre_find(v, id);
  if (i >= 0) v->pre_events[i] = v->pre_events[--v->npre];
  pthread_mutex_unlock(&v->pre_lock);
}

int ferry_pre_elapsed(struct ferry_vgpu *v, uint32_t a, uint32_t b, float *ms, int *rc) {
  if (!ferry_is_local(v) || !__atomic_load_n(&v->npre, __ATOMIC_RELAXED)) return 0;
  pthread_mutex_lock(&v->pre_lock);
  long ia = pre_find(v, a), ib = pre_find(v, b);
  float oa = ia >= 0 ? v->pre_events[ia].off_ms : 0, ob = ib >= 0 ? v->pre_events[ib].off_ms : 0;
  float last = v->pre_last_ms;
  double bridge = v->bridge_ms;
  pthread_mutex_unlock(&v->pre_lock);
  if (ia < 0 && ib < 0) return 0;
  *rc = 0;
  if (ia >= 0 && ib >= 0) { /* both on the remote GPU: exactly as measured there */
    *ms = ob - oa;
    return 1;
  }
  /* one on each side: remote time to the drain, the migration, local time
     from the re-recording (a's or b's local twin marks the switch) */
  uint32_t pre_id = ia >= 0 ? a : b, post_id = ia >= 0 ? b : a;
  struct ferry_event_elapsed_args e = {pre_id, post_id};
  struct ferry_event_elapsed_rets r;
  *rc = ferry_call(v, FERRY_CALL_event_elapsed, &e, &r, NULL);
  if (*rc) return 1;
  double span = (last - (ia >= 0 ? oa : ob)) + bridge + r.ms;
  *ms = (float)(ia >= 0 ? span : -span);
  return 1;
}

/* the remote session ends: the server frees everything it held */
static void close_remote(struct ferry_vgpu *v) {
  pthread_mutex_lock(&v->call_lock);
  pthread_mutex_lock(&v->send_lock);
  pthread_mutex_lock(&v->sock_lock);
  if (v->conn) v->conn->ops->close(v->conn);
  v->conn = NULL;
  free(v->reader);
  v->reader = NULL;
  pthread_mutex_unlock(&v->sock_lock);
  pthread_mutex_unlock(&v->send_lock);
  pthread_mutex_unlock(&v->call_lock);
}

/* the first reason wins; always -1 */
__attribute__((format(printf, 2, 3))) static int fail(struct mig *m, const char *fmt, ...) {
  if (!m->err[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, m->errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* the steps under the gate; -1 with m->err on failure */
static int move(struct mig *m, uint64_t *bytes, uint64_t *records) {
  struct ferry_vgpu *v = m->v;
  char why[256] = "";
  enter_phase(m, FERRY_PHASE_DRAIN);
  int rc = ferry_flush(v);
  struct ferry_device_synchronize_args sync = {0};
  if (!rc) rc = ferry_remote_call(v, FERRY_CALL_device_synchronize, &sync, NULL, NULL);
  if (v->dead) return fail(m, "the remote GPU is unreachable");
  if (rc) {
    /* a second wait tells a sticky error (the context is lost) from one
       that was only latched; either way the program still gets to see it */
    int again = ferry_remote_call(v, FERRY_CALL_device_synchronize, &sync, NULL, NULL);
    __atomic_store_n(&v->carry_error, rc, __ATOMIC_RELEASE);
    if (again) return fail(m, "the device has a sticky error (%s); it stays remote",
                           cudaGetErrorName((cudaError_t)rc));
  }
  if (ferry_deferred_pending(v)) return fail(m, "asynchronous copies did not complete");
  if (ferry_recorder_foreach(&v->log, uses_device_heap, NULL))
    return fail(m, "the program sized the device malloc heap (cudaLimitMallocHeapSize): memory "
                   "allocated by kernels (malloc/new) lives in the driver's heap and cannot be "
                   "moved");
  if (capture_event_times(v)) return fail(m, "out of memory reading event times");
  double drained = now_ms();

  enter_phase(m, FERRY_PHASE_SETUP);
  if (fault("reserve")) {
    ferry_placeholder_release(v);
    return fail(m, "cannot reserve the device arena at the same address (injected fault)");
  }
  m->L = ferry_local_open(v, m->gpu, why, sizeof why);
  if (!m->L) return fail(m, "%s", why);

  enter_phase(m, FERRY_PHASE_REPLAY);
  struct ferry_replay_hooks hooks = {module_loaded, error_name, m};
  struct ferry_replay_stats rs;
  if (ferry_replay(&v->log, ferry_local_exec(m->L), &hooks, &rs, why, sizeof why))
    return fail(m, "%s", why);
  *records = rs.records;
  pthread_mutex_lock(&v->pre_lock);
  v->bridge_ms = now_ms() - drained;
  pthread_mutex_unlock(&v->pre_lock);
  pthread_mutex_lock(&mig_lock);
  v->mig.records_replayed = rs.records;
  v->mig.modules_replayed = rs.modules;
  v->mig.replay_module_ms = rs.module_ms;
  v->mig.replay_other_ms = rs.other_ms;
  pthread_mutex_unlock(&mig_lock);
  if (fault("replay")) return fail(m, "replaying the log failed (injected fault)");

  enter_phase(m, FERRY_PHASE_MEMSYNC);
  v->lx = m->L; /* ferry_local_call works from here on, for this thread only */
  struct ferry_memsync_opts o;
  ferry_memsync_defaults(&o);
  uint64_t *pairs = NULL;
  long n = ferry_memsync_plan(v->arena.regions, v->arena.nregions, v->arena.maps, v->arena.nmaps,
                              o.merge_gap, &pairs);
  if (n < 0) return fail(m, "out of memory planning mem-sync");
  o.progress = progress;
  o.progress_ctx = v;
  struct remote_src src = {v, 0};
  struct ferry_memsync_source source = {src_request, src_receive, &src};
  struct ferry_memsync_stats ms;
  rc = ferry_memsync_run(ferry_local_exec(m->L), pairs, (size_t)n, &source, &o, &ms, why, sizeof why);
  free(pairs);
  if (rc) return fail(m, "%s", why);
  *bytes = ms.bytes;
  pthread_mutex_lock(&mig_lock);
  v->mig.bytes_copied = ms.bytes;
  v->mig.ranges_copied = ms.ranges;
  v->mig.requests = ms.requests;
  pthread_mutex_unlock(&mig_lock);

  enter_phase(m, FERRY_PHASE_VARS);
  if (copy_vars(m) || ferry_recorder_foreach(&v->log, copy_array, m))
    return fail(m, "copying variables failed");
  if (fault("vars")) return fail(m, "copying variables failed (injected fault)");

  enter_phase(m, FERRY_PHASE_SWITCH);
  for (size_t i = 0; i < m->nrebinds; i++)
    ferry_modules_rebind(v->index, m->rebinds[i].module,
                         (ferry_blob){m->rebinds[i].info, m->rebinds[i].len});
  __atomic_add_fetch(&v->generation, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&v->local, 1, __ATOMIC_RELEASE);
  close_remote(v);
  ferry_host_register_local(m->L);
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

int ferry_migrate(int vi, int gpu, char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  int rc = ferry_ensure_init();
  if (rc) {
    snprintf(err, errlen, "CUDA is not usable in this program (%s)", cudaGetErrorName((cudaError_t)rc));
    return -1;
  }
  if (vi < 0 || vi >= ferry.count)
    return refuse(err, errlen, "no device %d: this program has %d device(s)", vi, ferry.count);
  if (gpu < 0) return refuse(err, errlen, "bad local GPU %d", gpu);
  struct ferry_vgpu *v = &ferry.vgpus[vi];
  pthread_mutex_lock(&mig_lock);
  const char *busy = NULL;
  if (v->mig.state == FERRY_MIG_RUNNING) busy = "a migration of device %d is already running";
  else if (ferry_is_local(v)) busy = "device %d already runs on a local GPU";
  else if (v->dead) busy = "device %d lost its server; there is nothing left to migrate";
  else if (v->log_broken) busy = "device %d lost a record (out of memory); it cannot migrate";
  int other = -1; /* two vGPUs on one GPU would share its primary context */
  for (int i = 0; i < ferry.count && !busy; i++) {
    struct ferry_vgpu *o = &ferry.vgpus[i];
    if (i != vi && ferry_is_local(o) && ferry_local_gpu(o->lx) == gpu) other = i;
  }
  if (busy || other >= 0) {
    pthread_mutex_unlock(&mig_lock);
    if (busy) return refuse(err, errlen, busy, vi);
    return refuse(err, errlen, "local GPU %d already runs device %d", gpu, other);
  }
  v->mig = (struct ferry_vgpu_status){.state = FERRY_MIG_RUNNING, .phase = FERRY_PHASE_HOLD,
                                      .launch_at_start = v->launches};
  pthread_mutex_unlock(&mig_lock);

  struct mig m = {.v = v, .gpu = gpu, .err = err, .errlen = errlen, .t_phase = now_ms()};
  double t0 = m.t_phase;
  /* arena_lock first: a thread in cudaMalloc holds it while its mem_map
     call waits at the gate */
  pthread_mutex_lock(&v->arena_lock);
  pthread_rwlock_wrlock(&v->gate);
  uint64_t bytes = 0, records = 0;
  int failed = move(&m, &bytes, &records);
  if (failed) {
    v->lx = NULL;
    if (m.L) ferry_local_close(m.L);
    if (!v->placeholder && ferry_placeholder_reserve(v))
      ferry_log("device %d: the address range of its memory could not be set aside again; host "
                "memory may now be mapped there", vi);
  }
  enter_phase(&m, -1);
  pthread_rwlock_unlock(&v->gate);
  pthread_mutex_unlock(&v->arena_lock);
  for (size_t i = 0; i < m.nrebinds; i++) free(m.rebinds[i].info);
  free(m.rebinds);
  free(m.vars);

  double total = now_ms() - t0;
  pthread_mutex_lock(&mig_lock);
  v->mig.state = failed ? FERRY_MIG_FAILED : FERRY_MIG_DONE;
  v->mig.total_ms = total;
  if (failed) snprintf(v->mig.error, sizeof v->mig.error, "%s", err);
  pthread_mutex_unlock(&mig_lock);
  if (failed) {
    pthread_mutex_lock(&v->pre_lock);
    v->npre = 0;
    pthread_mutex_unlock(&v->pre_lock);
    ferry_log("migration of device %d to local GPU %d failed: %s", vi, gpu, err);
    return -1;
  }
  ferry_recorder_destroy(&v->log);
  ferry_recorder_init(&v->log);
  ferry_log("device %d now runs on local GPU %d (%s): %llu records replayed, %.1f MiB copied, "
            "%.1f ms", vi, gpu, ferry_local_name(v->lx), (unsigned long long)records,
            bytes / 1048576.0, total);
  if (getenv("FERRY_STATS")) {
    struct ferry_vgpu_status st;
    ferry_vgpu_status(vi, &st);
    ferry_log("migration stats: device=%d records=%llu modules=%llu replay_module_ms=%.3f "
              "replay_other_ms=%.3f bytes=%llu ranges=%llu requests=%llu hold_ms=%.3f "
              "drain_ms=%.3f setup_ms=%.3f replay_ms=%.3f memsync_ms=%.3f vars_ms=%.3f "
              "switch_ms=%.3f total_ms=%.3f", vi, (unsigned long long)st.records_replayed,
              (unsigned long long)st.modules_replayed, st.replay_module_ms, st.replay_other_ms,
              (unsigned long long)st.bytes_copied, (unsigned long long)st.ranges_copied,
              (unsigned long long)st.requests, st.phase_ms[0], st.phase_ms[1], st.phase_ms[2],
              st.phase_ms[3], st.phase_ms[4], st.phase_ms[5], st.phase_ms[6], st.total_ms);
  }
  if (ferry_symbol_address_taken)
    ferry_log("warning: the program took a __device__ variable's address (cudaGetSymbolAddress) "
              "before the migration; that address is not valid on the local GPU");
  return 0;
}

/* ---- FERRY_MIGRATE_AT=<vgpu>:<local>:launch=<N> ---- */

static int at_vgpu = -1, at_gpu;
static uint64_t at_launch;
static pthread_once_t at_once = PTHREAD_ONCE_INIT;

static void parse_at(void) {
  const char *s = getenv("FERRY_MIGRATE_AT");
  if (!s || !*s) return;
  int vg, g, used = 0;
  unsigned long long n;
  if (sscanf(s, "%d:%d:launch=%llu%n", &vg, &g, &n, &used) != 3 || s[used] || vg < 0 || g < 0 ||
      n == 0) {
    ferry_log("FERRY_MIGRATE_AT='%s' ignored: expected <vgpu>:<local-gpu>:launch=<N> (N >= 1)", s);
    return;
  }
  at_vgpu = vg;
  at_gpu = g;
  at_launch = n;
}

void ferry_migrate_at_launch(int vgpu) {
  pthread_once(&at_once, parse_at);
  struct ferry_vgpu *v = &ferry.vgpus[vgpu];
  uint64_t n = __atomic_add_fetch(&v->launches, 1, __ATOMIC_RELAXED);
  if (at_vgpu != vgpu || n != at_launch) return;
  char err[300];
  ferry_migrate(vgpu, at_gpu, err, sizeof err); /* it says why when it fails */
}
