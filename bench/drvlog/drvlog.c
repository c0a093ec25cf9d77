/*
 * drvlog: a pass-through libcuda.so.1 that logs the driver's private
 * tables. Every public function jumps straight to NVIDIA's driver; the
 * tables cuGetExportTable hands out (all but the runtime's own, whose
 * addresses its integrity hash covers) are copied with each function slot
 * replaced by a thunk that logs (table, slot, six integer arguments, the
 * result, the calling library) and calls the real slot. Used to learn what
 * frameworks ask of the driver (docs/driver-export-tables.md); not part of
 * ferry. Float or stack arguments are not forwarded: discovery only.
 *   DRVLOG_REAL=/path/to/NVIDIA/libcuda.so.1 DRVLOG_FILE=log LD_LIBRARY_PATH=dir prog
 */
#define _GNU_SOURCE
#include <cuda.h>
#undef cuGetProcAddress
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "names.h"

/* DRVLOG_ERRORS=1: every driver function that returns an error is logged
   (name, result, caller), also those the runtime got from cuGetProcAddress */
#define MAXPROC 2048
#define PROC(n) void drvlog_proc_##n(void);
#include "procs.h"
#undef PROC
#define PROC(n) drvlog_proc_##n,
static void (*const proc_thunks[MAXPROC])(void) = {
#include "procs.h"
};
#undef PROC
__attribute__((visibility("hidden"))) void *drvlog_proc_real[MAXPROC];
static const char *proc_name[MAXPROC];
static int nprocs, errors_on;
static unsigned err_count[MAXPROC + 1024];

#define NNAMES (sizeof drvlog_names / sizeof *drvlog_names)
__attribute__((visibility("hidden"))) void *drvlog_real[NNAMES];
static void *real_lib;
static CUresult (*real_export)(const void **, const CUuuid *);
static CUresult (*real_proc_v2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static CUresult (*real_proc)(const char *, void **, int, cuuint64_t);
static FILE *logf_;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define MAXTHUNK 2048
typedef uint64_t (*slot_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
static slot_fn thunk_real[MAXTHUNK];
static char thunk_tag[MAXTHUNK][24];
static unsigned thunk_calls[MAXTHUNK];
static int nthunks;

static const char *who(void *ra, char *buf, size_t n) {
  Dl_info di;
  if (ra && dladdr(ra, &di) && di.dli_fname) {
    const char *b = strrchr(di.dli_fname, '/');
    snprintf(buf, n, "%s+0x%lx", b ? b + 1 : di.dli_fname,
             (unsigned long)((char *)ra - (char *)di.dli_fbase));
  } else
    snprintf(buf, n, "%p", ra);
  return buf;
}

/* up to 64 readable bytes at p, as hex, into out (DRVLOG_DUMP=1): an
   argument that is a pointer shows what it points at */
static void dump(uint64_t p, char *out, size_t n) {
  unsigned char buf[64];
  out[0] = 0;
  if (p < 4096) return;
  struct iovec l = {buf, sizeof buf}, r = {(void *)p, sizeof buf};
  ssize_t got = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
  if (got <= 0) return;
  size_t k = 0;
  for (ssize_t j = 0; j < got && k + 4 < n; j++) k += (size_t)snprintf(out + k, n - k, "%02x%s", buf[j], j % 8 == 7 ? " " : "");
}

static uint64_t logcall(int i, void *ra, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
                        uint64_t e, uint64_t f) {
  static int dumping = -1;
  if (dumping < 0) dumping = getenv("DRVLOG_DUMP") != NULL;
  uint64_t args[6] = {a, b, c, d, e, f};
  char before[6][200];
  if (dumping)
    for (int k = 0; k < 6; k++) dump(args[k], before[k], sizeof before[k]);
  uint64_t r = thunk_real[i](a, b, c, d, e, f);
  pthread_mutex_lock(&lock);
  if (dumping && thunk_calls[i] < 30)
    for (int k = 0; k < 6; k++) {
      char after[200];
      dump(args[k], after, sizeof after);
      if (before[k][0] || after[0]) fprintf(logf_, "  %s arg%d before %s\n  %s arg%d after  %s\n", thunk_tag[i], k, before[k], thunk_tag[i], k, after);
    }
  if (thunk_calls[i]++ < 30) {
    char w[128];
    fprintf(logf_, "call %s (%#lx, %#lx, %#lx, %#lx, %#lx, %#lx) = %#lx from %s\n", thunk_tag[i],
            (unsigned long)a, (unsigned long)b, (unsigned long)c, (unsigned long)d,
            (unsigned long)e, (unsigned long)f, (unsigned long)r, who(ra, w, sizeof w));
    fflush(logf_);
  }
  pthread_mutex_unlock(&lock);
  return r;
}

#define THUNK(n)                                                                                \
  static uint64_t thunk_##n(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e,          \
                            uint64_t f) {                                                        \
    return logcall(n, __builtin_return_address(0), a, b, c, d, e, f);                           \
  }
#include "thunks.h"
#undef THUNK
#define THUNK(n) thunk_##n,
static slot_fn const thunks[MAXTHUNK] = {
#include "thunks.h"
};

__attribute__((constructor)) static void drvlog_init(void) {
  const char *path = getenv("DRVLOG_REAL");
  const char *file = getenv("DRVLOG_FILE");
  logf_ = file ? fopen(file, "a") : NULL;
  if (!logf_) logf_ = stderr;
  const char *tries[] = {path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1",
                         "/usr/lib64/libcuda.so.1"};
  for (size_t i = 0; i < 4 && !real_lib; i++)
    if (tries[i]) real_lib = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
  if (!real_lib) {
    fprintf(stderr, "drvlog: NVIDIA's libcuda.so.1 not found (set DRVLOG_REAL)\n");
    abort();
  }
  for (size_t i = 0; i < NNAMES; i++) drvlog_real[i] = dlsym(real_lib, drvlog_names[i]);
  real_export = (CUresult(*)(const void **, const CUuuid *))dlsym(real_lib, "cuGetExportTable");
  real_proc_v2 = dlsym(real_lib, "cuGetProcAddress_v2");
  real_proc = dlsym(real_lib, "cuGetProcAddress");
  errors_on = getenv("DRVLOG_ERRORS") != NULL;
  fprintf(logf_, "drvlog: forwarding to %s\n", path ? path : "the system driver");
}

static void report(const char *name, unsigned *count, int rc, void *ra, const uint64_t *args) {
  if (!errors_on || __atomic_fetch_add(count, 1, __ATOMIC_RELAXED) >= 20) return;
  char w[128];
  pthread_mutex_lock(&lock);
  fprintf(logf_, "error %s(%#lx, %#lx, %#lx, %#lx) = %d from %s\n", name, (unsigned long)args[0],
          (unsigned long)args[1], (unsigned long)args[2], (unsigned long)args[3], rc,
          who(ra, w, sizeof w));
  fflush(logf_);
  pthread_mutex_unlock(&lock);
}
__attribute__((visibility("hidden"))) void drvlog_error(int i, int rc, void *ra, const uint64_t *args) {
  report(drvlog_names[i], &err_count[MAXPROC + (i < 1024 ? i : 1023)], rc, ra, args);
}
__attribute__((visibility("hidden"))) void drvlog_proc_error(int k, int rc, void *ra, const uint64_t *args) {
  report(proc_name[k], &err_count[k], rc, ra, args);
}

/* the function cuGetProcAddress found, wrapped so that its errors are logged */
static void *wrap_proc(const char *sym, void *fn) {
  if (!errors_on || !fn) return fn;
  pthread_mutex_lock(&lock);
  int k;
  for (k = 0; k < nprocs && drvlog_proc_real[k] != fn; k++) {
  }
  if (k == nprocs && nprocs < MAXPROC) {
    drvlog_proc_real[k] = fn;
    proc_name[k] = strdup(sym);
    nprocs++;
  }
  pthread_mutex_unlock(&lock);
  return k < nprocs ? (void *)proc_thunks[k] : fn;
}

static const char *const known[] = {
    /* the runtime's own tables: served by the real driver untouched */
    "\x6b\xd5\xfb\x6c\x5b\xf4\xe7\x4a\x89\x87\xd9\x39\x12\xfd\x9d\xf9", /* CUDART_INTERFACE */
    "\xd4\x08\x20\x55\xbd\xe6\x70\x4b\x8d\x34\xba\x12\x3c\x66\xe1\xf2", /* INTEGRITY_CHECK */
    "\xc6\x93\x33\x6e\x11\x21\xdf\x11\xa8\xc3\x68\xf3\x55\xd8\x95\x93", /* CONTEXT_LOCAL_STORAGE */
};

struct proxy {
  CUuuid id;
  const void *real;
  void **copy;
};
static struct proxy proxies[64];
static int nproxies;

static int in_real(const void *p) {
  Dl_info di;
  if (!p || !dladdr(p, &di)) return 0;
  Dl_info me;
  dladdr((void *)drvlog_init, &me);
  void *h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
  int r = h == real_lib;
  if (h) dlclose(h);
  return r;
}

CUresult cuGetExportTable(const void **table, const CUuuid *id) {
  CUresult rc = real_export(table, id);
  char w[128], u[40];
  for (int i = 0; i < 16; i++) sprintf(u + 2 * i, "%02x", (unsigned char)id->bytes[i]);
  pthread_mutex_lock(&lock);
  fprintf(logf_, "export %s = %d table %p from %s\n", u, rc, rc ? NULL : *table,
          who(__builtin_return_address(0), w, sizeof w));
  int skip = rc != CUDA_SUCCESS;
  for (size_t k = 0; k < sizeof known / sizeof *known && !skip; k++)
    if (!memcmp(known[k], id->bytes, 16)) skip = 1;
  if (!skip) {
    struct proxy *p = NULL;
    for (int k = 0; k < nproxies; k++)
      if (!memcmp(&proxies[k].id, id, 16) && proxies[k].real == *table) p = &proxies[k];
    if (!p && nproxies < 64) {
      uint64_t const *src = *table;
      size_t n = src[0] < 4096 && src[0] % 8 == 0 && src[0] >= 8 ? src[0] / 8 : 64;
      fprintf(logf_, "table %s slot0 %#lx, %zu slots\n", u, (unsigned long)src[0], n);
      void **copy = calloc(n, sizeof *copy);
      for (size_t s = 0; s < n; s++) {
        copy[s] = (void *)src[s];
        if (in_real(copy[s]) && nthunks < MAXTHUNK) {
          thunk_real[nthunks] = (slot_fn)copy[s];
          snprintf(thunk_tag[nthunks], sizeof thunk_tag[0], "%.8s[%zu]", u, s);
          copy[s] = (void *)thunks[nthunks++];
        } else
          fprintf(logf_, "table %s slot %zu = %#lx (data)\n", u, s, (unsigned long)src[s]);
      }
      p = &proxies[nproxies++];
      memcpy(&p->id, id, 16);
      p->real = *table;
      p->copy = copy;
    }
    if (p) *table = p->copy;
  }
  fflush(logf_);
  pthread_mutex_unlock(&lock);
  return rc;
}

CUresult cuGetProcAddress(const char *sym, void **fn, int ver, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char *sym, void **fn, int ver, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *st) {
  CUresult rc = real_proc_v2(sym, fn, ver, flags, st);
  if (rc == CUDA_SUCCESS && sym && strcmp(sym, "cuGetExportTable") && strcmp(sym, "cuGetProcAddress"))
    *fn = wrap_proc(sym, *fn);
  if (rc == CUDA_SUCCESS && sym && !strcmp(sym, "cuGetExportTable")) *fn = (void *)cuGetExportTable;
  /* the runtime asks for cuGetProcAddress itself and uses what it gets */
  if (rc == CUDA_SUCCESS && sym && !strcmp(sym, "cuGetProcAddress"))
    *fn = *fn == (void *)real_proc ? (void *)cuGetProcAddress : (void *)cuGetProcAddress_v2;
  return rc;
}
CUresult cuGetProcAddress(const char *sym, void **fn, int ver, cuuint64_t flags) {
  CUresult rc = real_proc(sym, fn, ver, flags);
  if (rc == CUDA_SUCCESS && sym && strcmp(sym, "cuGetExportTable") && strcmp(sym, "cuGetProcAddress"))
    *fn = wrap_proc(sym, *fn);
  if (rc == CUDA_SUCCESS && sym && !strcmp(sym, "cuGetExportTable")) *fn = (void *)cuGetExportTable;
  if (rc == CUDA_SUCCESS && sym && !strcmp(sym, "cuGetProcAddress"))
    *fn = *fn == (void *)real_proc ? (void *)cuGetProcAddress : (void *)cuGetProcAddress_v2;
  return rc;
}
