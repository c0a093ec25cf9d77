/*
 * How programs reach the driver front end without linking it: NVIDIA's
 * runtime (static or inside cuBLAS, cuFFT, ...) resolves every driver call
 * through cuGetProcAddress, by name and CUDA version, so one table maps
 * both onto ferry's exports (generated from the toolkit, see gen_cu.sh).
 * Also the driver's error names and the calls ferry refuses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "shim/driver/cu.h"
#include "shim/driver/cu_tables.h"

static int by_name(const void *key, const void *elem) {
  return strcmp(key, ((const struct ferry_cu_export *)elem)->name);
}

static const struct ferry_cu_export *export_named(const char *name) {
  return bsearch(name, ferry_cu_exports, ferry_cu_nexports, sizeof *ferry_cu_exports, by_name);
}

/* the export for name at version: the newest signature not newer than
   version, in the stream variant asked for (else the plain one). 0, or
   1 when name exists only in newer versions, 2 when it is unknown. */
static int proc_lookup(const char *name, int version, int per_thread, const char **export_name) {
  int known = 0;
  for (int want = per_thread; want >= 0; want--) {
    const char *best = NULL;
    int best_version = -1;
    for (unsigned i = 0; i < ferry_cu_nprocs; i++) {
      const struct ferry_cu_proc *p = &ferry_cu_procs[i];
      if (p->per_thread != want || strcmp(p->name, name)) continue;
      known = 1;
      if (p->version <= version && p->version > best_version) best = p->export_name, best_version = p->version;
    }
    if (best) {
      *export_name = best;
      return 0;
    }
  }
  return known ? 1 : 2;
}

static CUresult get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
                         CUdriverProcAddressQueryResult *status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (flags > (CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return CUDA_ERROR_INVALID_VALUE;
  const char *name = NULL;
  int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  int found = proc_lookup(symbol, version, per_thread, &name);
  const struct ferry_cu_export *e = export_named(found == 0 ? name : symbol);
  if (found == 1 || !e) {
    *pfn = NULL;
    ferry_debug("cuGetProcAddress(%s, %d, %llu): %s", symbol, version, (unsigned long long)flags,
                found == 1 ? "only in newer versions" : "unknown");
    /* the driver (580) answers success and says why in the status; the
       first form, which has no status, gets an error */
    if (!status) return CUDA_ERROR_NOT_FOUND;
    *status = found == 1 ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                         : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
  }
  *pfn = e->fn;
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  ferry_debug("cuGetProcAddress(%s, %d, %llu) -> %s%s", symbol, version, (unsigned long long)flags,
              e->name, e->fn == e->stub ? " (not served)" : "");
  return CUDA_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
  return get_proc(symbol, pfn, cudaVersion, flags, status);
}

/* the CUDA 11.3 form, still exported */
#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  return get_proc(symbol, pfn, cudaVersion, flags, NULL);
}

int ferry_cu_served(const char *export_name) {
  const struct ferry_cu_export *e = export_named(export_name);
  return e && e->fn != e->stub;
}

const char *ferry_cu_export_name(const void *fn) {
  for (unsigned i = 0; fn && i < ferry_cu_nexports; i++)
    if (ferry_cu_exports[i].fn == fn) return ferry_cu_exports[i].name;
  return NULL;
}

/* ---- errors ---- */
CUresult cuGetErrorName(CUresult error, const char **str) {
  if (!str) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < ferry_cu_nerrors; i++)
    if (ferry_cu_errors[i].value == (int)error) {
      *str = ferry_cu_errors[i].name;
      return CUDA_SUCCESS;
    }
  *str = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

/* the runtime's sentence for the same number where there is one (most
   CUresult values and cudaError_t values coincide), else the name */
CUresult cuGetErrorString(CUresult error, const char **str) {
  const char *name;
  CUresult rc = cuGetErrorName(error, &name);
  if (!str || rc) return rc;
  const char *sentence = cudaGetErrorString((cudaError_t)error);
  *str = strcmp(sentence, cudaGetErrorString((cudaError_t)-1)) ? sentence : name;
  return CUDA_SUCCESS;
}

/* runtime codes the driver spells differently; every other value is the same */
CUresult ferry_cu_result(int e) {
  switch (e) {
  case cudaErrorInvalidConfiguration:
  case cudaErrorInvalidPitchValue:
  case cudaErrorInvalidHostPointer:
  case cudaErrorInvalidDevicePointer:
  case cudaErrorInvalidMemcpyDirection:
  case cudaErrorMissingConfiguration:
    return CUDA_ERROR_INVALID_VALUE;
  case cudaErrorInvalidSymbol:
    return CUDA_ERROR_NOT_FOUND;
  case cudaErrorInvalidDeviceFunction:
    return CUDA_ERROR_INVALID_HANDLE;
  case cudaErrorDevicesUnavailable:
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
  default:
    return (CUresult)e;
  }
}

/* ---- what ferry does not serve ---- */
int ferry_cu_unsupported_call(int *warned, const char *name) {
  if (!warned || __atomic_exchange_n(warned, 1, __ATOMIC_RELAXED) == 0)
    fprintf(stderr, "ferry: %s is not supported by ferry; returning CUDA_ERROR_NOT_SUPPORTED\n",
            name ? name : "(unnamed call)");
  return CUDA_ERROR_NOT_SUPPORTED;
}

/* named refusals (an argument or a mode rather than a whole call): once each */
CUresult ferry_cu_unsupported(const char *what) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char *said[64];
  static int nsaid;
  int first = 1;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nsaid; i++)
    if (!strcmp(said[i], what)) first = 0;
  if (first && nsaid < 64 && (said[nsaid] = strdup(what))) nsaid++;
  pthread_mutex_unlock(&lock);
  if (first) fprintf(stderr, "ferry: %s is not supported by ferry; returning CUDA_ERROR_NOT_SUPPORTED\n", what);
  return CUDA_ERROR_NOT_SUPPORTED;
}

/* executor/driver_cuda.c looks for this symbol so that it never takes ferry's
   own libcuda.so.1 for NVIDIA's driver */
const int ferry_driver_front_end = 1;

/* ---- the runtime front end's way into the driver front end ---- */
/* cudaEnable* flags and cudaDriverEntryPointQueryResult values are the
   driver's; cudaEnableDefault means the legacy stream unless the program
   was built for per-thread default streams (the _ptsz entry points) */
static cudaError_t entry_point(const char *symbol, void **fn, int version,
                               unsigned long long flags, enum cudaDriverEntryPointQueryResult *st,
                               int per_thread) {
  if (per_thread && flags == cudaEnableDefault) flags = cudaEnablePerThreadDefaultStream;
  CUdriverProcAddressQueryResult r = CU_GET_PROC_ADDRESS_SUCCESS;
  CUresult rc = get_proc(symbol, fn, version, flags, &r);
  if (st) *st = (enum cudaDriverEntryPointQueryResult)r;
  return rc ? ferry_ret(cudaErrorInvalidValue) : cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *st) {
  return entry_point(symbol, fn, (int)version, flags, st, 0);
}
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **fn,
                                                  unsigned int version, unsigned long long flags,
                                                  enum cudaDriverEntryPointQueryResult *st) {
  return entry_point(symbol, fn, (int)version, flags, st, 1);
}
/* the version this runtime was built for */
cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *st) {
  return entry_point(symbol, fn, CUDART_VERSION, flags, st, 0);
}
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn, unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *st) {
  return entry_point(symbol, fn, CUDART_VERSION, flags, st, 1);
}
