/*
 * Internal state of the CPU simulation of the CUDA driver. The simulation
 * models FERRY_SIM_GPUS identical sm_90 devices (default 1), each with its
 * own primary context. Device memory is host memory mapped at exactly the
 * device addresses the caller chose, so pointers are the same as on a GPU
 * and every device sees every mapping (unified addressing). Work runs
 * synchronously at enqueue time, which is one valid CUDA schedule. Every
 * entry point takes the one lock, so the simulation is thread safe.
 */
#ifndef FERRY_SIM_H
#define FERRY_SIM_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#include "executor/driver.h"
#include "sim/twin.h"
#include "sim/twin_vars.h"

#define SIM_GRANULARITY (2ull << 20)
#define SIM_TOTAL_MEM sim_total_mem()
/* per device: 80 GiB, or FERRY_SIM_TOTAL_MEM bytes (tests of a full GPU) */
uint64_t sim_total_mem(void);
#define SIM_MAX_GPUS 8
#define SIM_MAX_SHARED_DEFAULT (48 * 1024)
#define SIM_MAX_SHARED_OPTIN (227 * 1024)

/* every handle the simulation gives out starts with its kind, and lives in
   a registry so that destroyed or made-up handles are recognised */
enum sim_kind { SIM_STREAM = 1, SIM_EVENT, SIM_MODULE, SIM_FUNC, SIM_MEMHANDLE, SIM_ARRAY,
                SIM_TEXOBJ, SIM_SURFOBJ, SIM_GRAPH, SIM_GRAPH_NODE, SIM_GRAPH_EXEC, SIM_LINK };
struct sim_obj {
  enum sim_kind kind;
  /* the device whose context was current at creation (sim_register sets
     it); for a memory handle, the device holding its memory */
  int dev;
};

struct sim_module;

struct sim_func {
  struct sim_obj obj;
  struct sim_module *mod;
  const struct ferry_twin *twin;
  int attrs[CU_FUNC_ATTRIBUTE_MAX]; /* settable attributes */
  CUfunc_cache cache;
};

struct sim_var {
  const char *name;
  void *mem;
  size_t size;
};

struct sim_module {
  struct sim_obj obj;
  const struct ferry_twin *twins; /* the twins table when it was loaded */
  /* a cubin's or PTX text's kernels (named): only these resolve; from a
     fat binary container any twin does */
  char **kernels;
  size_t nkernels;
  int named;
  struct sim_func **funcs; /* created on demand, one per name */
  size_t nfuncs;
  struct sim_var *vars;
  size_t nvars;
};

struct sim_stream {
  struct sim_obj obj;
  unsigned flags;
  int priority;
};

struct sim_event {
  struct sim_obj obj;
  unsigned flags;
  int recorded;
  uint64_t ns; /* CLOCK_MONOTONIC at the last record */
};

struct sim_memhandle {
  struct sim_obj obj;
  uint64_t base; /* its "physical" pages: [base, base + size) of the pool memfd */
  size_t size;
  unsigned maps; /* live mappings: the pages stay until released and unmapped */
  int released;
  /* exported or imported (CUDA IPC): its pages are this memfd's, which
     another process maps too, instead of the pool's; else -1 */
  int fd;
  int imported; /* another process's memory: not counted against a device */
};

/* a CUDA array: host memory of width x rows x slices elements, rows and
   slices at least 1 (a 1D array has one row; layers and cube faces are
   slices) */
struct sim_array {
  struct sim_obj obj;
  CUDA_ARRAY3D_DESCRIPTOR desc;
  size_t elem;             /* bytes per element */
  size_t row_bytes, rows, slices;
  unsigned char *mem;
};

/* texture and surface objects keep their descriptors; the value handed
   out is the object's address */
struct sim_texobj {
  struct sim_obj obj;
  CUDA_RESOURCE_DESC res;
  CUDA_TEXTURE_DESC tex;
  CUDA_RESOURCE_VIEW_DESC view;
  int has_view;
  size_t elem; /* bytes per element of the resource (sim/twin_tex.h reads it) */
};

/* address ranges that kernels and copies may touch */
enum sim_range_kind { SIM_RANGE_MAP, SIM_RANGE_VAR, SIM_RANGE_HOST, SIM_RANGE_REGISTERED };
struct sim_range {
  uint64_t start, end;
  enum sim_range_kind kind;
  int prot; /* PROT_* granted to any device: what the host pages allow */
  unsigned char dprot[SIM_MAX_GPUS]; /* SIM_RANGE_MAP: per device (cuMemSetAccess) */
  struct sim_memhandle *handle; /* SIM_RANGE_MAP */
  uint64_t hoff;                /* SIM_RANGE_MAP: where in the handle's pages it starts */
};

/* address ranges are process-wide, but a reset of the device whose context
   reserved one frees it, as a reset frees every allocation of the context */
struct sim_reservation {
  uint64_t start, end;
  int dev;
};

/* one device and its primary context; the CUcontext is its address */
struct sim_dev {
  int dev;
  unsigned refs;       /* primary context retain count */
  unsigned flags;
  CUresult sticky;     /* CUDA_ERROR_ILLEGAL_ADDRESS after a faulting kernel */
  /* as measured on driver 580: after a kernel fault the device stays
     unusable in the process; a reset destroys the context
     (CUDA_ERROR_CONTEXT_IS_DESTROYED) and retaining a new one fails with
     CUDA_ERROR_ILLEGAL_ADDRESS */
  int poisoned;
  size_t limits[CU_LIMIT_MAX];
  CUfunc_cache cache_config;
  uint64_t physical;   /* bytes held by memory handles of this device */
};

struct sim_state {
  pthread_mutex_t lock;
  int initialized;
  /* exit began after the first cuInit: like NVIDIA's driver, whose teardown
     registers at its start, every call then fails CUDA_ERROR_DEINITIALIZED
     (a program's static objects made before cuInit are destroyed after) */
  int torn_down;
  int ngpus; /* FERRY_SIM_GPUS, read at the first cuInit */
  struct sim_dev devs[SIM_MAX_GPUS];
  void *twins_dl;
  const struct ferry_twin *twins;
  const struct ferry_twin_var *twin_vars;
  void *registry; /* tsearch tree of live handles */
  struct sim_range *ranges; /* sorted by start, never overlapping */
  size_t nranges, cranges;
  struct sim_reservation *resv;
  size_t nresv, cresv;
  /* every handle's pages live in one sparse memfd, so that the number of
     handles is not bounded by the open-file limit (sim_vmm.c) */
  int pool_fd;
  struct sim_reservation *pool_free; /* free offset ranges, sorted */
  size_t npool_free, cpool_free;
};

extern struct sim_state sim;

/* entry checks: initialised, a current context, no sticky error on its
   device. On success the lock is held. */
CUresult sim_enter(void);
CUresult sim_enter_noctx(void); /* initialised only */
CUresult sim_leave(CUresult r);
/* the calling thread's current context (device), or NULL */
struct sim_dev *sim_cur(void);

/* registry (lock held) */
int sim_register(void *obj);
void sim_unregister(void *obj);
/* a live handle of the current context (any context for memory handles) */
void *sim_lookup(const void *handle, enum sim_kind kind);
/* a live handle of any context */
void *sim_lookup_any(const void *handle, enum sim_kind kind);
int sim_stream_ok(CUstream s);

/* ranges (lock held) */
int sim_range_ok(uint64_t addr, size_t len, int prot);
int sim_range_add(uint64_t start, uint64_t end, enum sim_range_kind kind, int prot,
                  struct sim_memhandle *h);
void sim_range_del(uint64_t start);
/* around a kernel of device dev: its mappings allow only what dev was
   granted (on), then what any device was granted again (off) */
void sim_access_as(int dev, int on);

/* runs fn(arg) with SIGSEGV/SIGBUS turned into a return value of -1 */
int sim_guarded(void (*fn)(void *), void *arg);
/* ends the guarded work at once, as a device trap does: sim_guarded then
   returns SIM_TRAPPED (a failed device assert) */
#define SIM_TRAPPED 2
void sim_trap(void) __attribute__((noreturn));

/* frees every object owned by device dev's context (modules, streams,
   events, arrays, texture and surface objects) */
void sim_ctx_destroy_objects(int dev);
/* frees device dev's memory handles (and their mappings) and the
   reservations made in its context */
void sim_vmm_destroy_dev(int dev);
void sim_module_free(struct sim_module *m);
/* the kernel names a cubin or PTX image declares (sim_image.c); a fat
   binary container names none (*named 0); CUDA_ERROR_INVALID_IMAGE for
   anything else cuModuleLoadData does not take */
CUresult sim_image_kernels(const void *image, char ***names, size_t *n, int *named);
void sim_image_names_free(char **names, size_t n);
/* a PTX text's form as far as the simulation checks it (a module header,
   braces that close): CUDA_ERROR_INVALID_PTX with ptxas's kind of line in why */
CUresult sim_ptx_check(const char *text, char *why, size_t n);
/* the device functions a PTX text defines and those it declares .extern */
CUresult sim_ptx_funcs(const char *text, char ***defined, size_t *nd, char ***externs, size_t *ne);
/* frees an array, texture or surface object (already unregistered) */
void sim_array_obj_free(struct sim_obj *o);
/* bytes per element of an array format with n channels; 0: invalid */
size_t sim_format_bytes(CUarray_format f, unsigned n);
/* a 3D copy (lock held): any mix of host, device and array sides */
CUresult sim_copy3d(const CUDA_MEMCPY3D *c);
/* cuMemsetD2D8/16/32 (lock held): rows of width values of elem (1, 2 or 4)
   bytes, pitch bytes apart; value in host order */
CUresult sim_memset(CUdeviceptr dst, size_t pitch, const void *value, size_t elem, size_t width,
                    size_t height);
/* launches (sim_module.c, lock held): the checks of every launch, those of
   one launch attribute, and cuLaunchKernelEx itself (f NULL: a dead handle) */
CUresult sim_check_launch(struct sim_func *f, CUstream stream, unsigned gx, unsigned gy,
                          unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem);
CUresult sim_check_attr(const struct sim_func *f, const CUlaunchConfig *c,
                        const CUlaunchAttribute *at);
CUresult sim_launch_ex(const CUlaunchConfig *c, struct sim_func *f, void **params, void **extra);
/* frees a graph with its nodes, or an executable graph (sim_graph.c; already unregistered) */
void sim_graph_obj_free(struct sim_obj *o);
/* frees a pending JIT link (sim_link.c; already unregistered) */
void sim_link_free(struct sim_obj *o);

uint64_t sim_now_ns(void);

/* twins of ferry's own kernels (sim_builtin.c), NULL-terminated: found
   for a PTX or cubin module that declares them, after the loaded table */
extern const struct ferry_twin sim_builtin_twins[];

/* the individual entry points, grouped by file */
/* shared memory per SM the simulation reports (228 KiB, as an H100's) */
#define SIM_SMEM_PER_SM 233472

#define SIM_DECLARE(member, symbol, params) CUresult sim_##member params;
FERRY_DRIVER_FUNCS(SIM_DECLARE)
#undef SIM_DECLARE

#endif
