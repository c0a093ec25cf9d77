/*
 * Program VMM: the driver's virtual memory management calls
 * (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess, ...), which
 * PyTorch's expandable segments and XLA use. All of it is client-side, over
 * the vGPU's arena (common/arena.h): a reservation is an extent of the
 * arena of the current context's device, a handle is a record here, and
 * mapping a handle is the recorded mem_map of its range, an arena region
 * tagged with the handle, so that a migration replays it and mem-sync
 * copies it like any allocation.
 *
 * The physical memory belongs to the handle, as in CUDA. A handle the
 * program unmaps but still holds stays mapped on the GPU where it was
 * ("parked", still copied by mem-sync); mapped again at the same address it
 * is simply the program's again, mapped elsewhere its memory is mapped
 * there, copied device to device, and the old range unmapped. A parked
 * handle in the way of a new mapping, or in a reservation being freed, is
 * moved the same way into a reservation of its own. Releasing a handle
 * that is still mapped keeps its memory until it is unmapped.
 *
 * Shareable handles (POSIX file descriptors) between programs whose vGPUs
 * are on one ferry-server: an export is CUDA IPC's (runtime/ipc.c) of the
 * handle's server mapping, whole, handed to the program as a sealed memfd
 * holding ferry's record (common/ipc_fd.h). A handle not mapped yet gets
 * its memory at export, parked in a reservation of its own, and from then
 * on its memory stays where importers share it: mapping it elsewhere is
 * refused, and a freed reservation holding its parked memory stays, the
 * handle's, until the handle goes. An imported handle has no memory of
 * its own: cuMemMap is the server's ipc_mem_import at that address, and
 * cuMemUnmap its ipc_mem_close. Both keep the vGPU from migrating.
 *
 * Not served (one line each): a handle mapped at two addresses at once,
 * partial maps, access for another device, fabric/Win32 handle types, and
 * (weak stubs) arrays and multicast.
 *
 * Lock order: vmm_lock, then a vGPU's arena_lock (then its gate, in
 * ferry_call), as cudaMalloc and migration take them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/ipc_fd.h"
#include "common/log.h"
#include "shim/driver/cu.h"
#include "shim/migrate/migrate.h"

/* PyTorch reserves about the device's memory per expandable segment: the
   arena holds 16 of the largest devices' (and room for cudaMalloc) */
_Static_assert(FERRY_ARENA_STRIDE >= 16 * (192ull << 30) + (512ull << 30),
               "the arena holds many device-sized reservations");

#define HANDLE_TAG 0xfe00000000000000ull

struct vmm_handle {
  uint32_t gen; /* bumped each time the slot is reused */
  int used;
  int vgpu;
  uint64_t size;
  CUmemAllocationProp prop;
  int refs;          /* the program's: cuMemCreate, retains, minus releases */
  uint64_t at;       /* where its memory is mapped on the GPU; 0: none yet */
  int mapped;        /* the program's mapping is at `at` (else parked there) */
  int access;        /* cuMemSetAccess gave its device read/write */
  uint64_t own_resv; /* a reservation of its own it was moved into, or 0 */
  int share;         /* SHARE_*: exported or imported, counted in ipc_open */
  uint64_t instance; /* shared: the server's id and the broker's key */
  uint8_t key[FERRY_IPC_KEY_LEN];
};
enum { SHARE_NONE, SHARE_EXPORTED, SHARE_IMPORTED };

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vmm_handle *handles;
static size_t nhandles, handles_cap;
static size_t *free_slots; /* slots to reuse (same capacity as handles) */
static size_t nfree_slots;
/* by vGPU: bytes of handles not yet mapped anywhere (cuMemCreate's check) */
static uint64_t pending[FERRY_MAX_VGPUS];

static uint64_t handle_value(size_t i) {
  return HANDLE_TAG | (uint64_t)(handles[i].gen & 0xffffff) << 32 | (uint64_t)(i + 1);
}

/* the live handle h names, or NULL (under vmm_lock) */
static struct vmm_handle *handle_of(CUmemGenericAllocationHandle h) {
  if ((h & 0xff00000000000000ull) != HANDLE_TAG) return NULL;
  size_t i = (size_t)(h & 0xffffffffu);
  if (i == 0 || i > nhandles) return NULL;
  struct vmm_handle *e = &handles[i - 1];
  return e->used && (e->gen & 0xffffff) == ((h >> 32) & 0xffffff) ? e : NULL;
}

static CUresult handle_new(size_t *out) {
  size_t i;
  if (nfree_slots) {
    i = free_slots[--nfree_slots];
  } else {
    if (nhandles == handles_cap) {
      size_t cap = handles_cap ? handles_cap * 2 : 64;
      if (cap > 0xffffffffu) return CUDA_ERROR_OUT_OF_MEMORY;
      struct vmm_handle *p = realloc(handles, cap * sizeof *p);
      if (p) handles = p;
      size_t *f = p ? realloc(free_slots, cap * sizeof *f) : NULL;
      if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
      free_slots = f;
      handles_cap = cap;
    }
    i = nhandles++;
    handles[i].gen = 0;
  }
  uint32_t gen = handles[i].gen + 1;
  memset(&handles[i], 0, sizeof *handles);
  handles[i].gen = gen;
  handles[i].used = 1;
  *out = i;
  return CUDA_SUCCESS;
}

static void handle_drop(struct vmm_handle *e) {
  if (!e->at && e->share != SHARE_IMPORTED) pending[e->vgpu] -= e->size;
  if (e->share) ferry_ipc_release(&ferry.vgpus[e->vgpu], 0);
  e->used = 0;
  free_slots[nfree_slots++] = (size_t)(e - handles);
}

/* ---- the GPU side: the arena's backend is the recorded mem_map
   (ferry_device_backend) ---- */
/* e's memory moves to [to, to + size), already reserved (under vmm_lock
   and v's arena_lock): mapped there, copied, unmapped where it was */
static CUresult move_memory(struct ferry_vgpu *v, struct vmm_handle *e, uint64_t value,
                            uint64_t to) {
  struct ferry_arena_backend be = ferry_device_backend(v);
  int rc = ferry_arena_map_at(&v->arena, to, e->size, value, &be);
  if (rc) return ferry_cu_result(rc);
  /* the legacy default stream: after the work the program already queued */
  struct ferry_memcpy_dtod_args c = {to, e->at, e->size, 0};
  rc = ferry_call(v, FERRY_CALL_memcpy_dtod, &c, NULL, NULL);
  if (!rc) rc = ferry_arena_unmap_at(&v->arena, e->at, &be);
  if (rc) {
    ferry_arena_unmap_at(&v->arena, to, &be);
    return ferry_cu_result(rc);
  }
  if (e->own_resv) ferry_arena_unreserve(&v->arena, e->own_resv);
  e->own_resv = 0;
  e->at = to;
  return CUDA_SUCCESS;
}

/* a parked handle's memory leaves [lo, hi) for a reservation of its own.
   An exported handle's memory stays where importers map it: when the
   reservation resv is being freed, that reservation becomes its own (the
   last such handle freed gives it back; *kept counts them), else
   (a new mapping in the way) the move is refused */
static CUresult evict_parked(struct ferry_vgpu *v, uint64_t lo, uint64_t hi, uint64_t resv,
                             int *kept) {
  for (uint64_t from = lo;;) {
    size_t i = ferry_arena_first_after(&v->arena, from);
    while (i < v->arena.nregions && v->arena.regions[i].addr < hi && !v->arena.regions[i].parked) i++;
    if (i == v->arena.nregions || v->arena.regions[i].addr >= hi) return CUDA_SUCCESS;
    uint64_t value = v->arena.regions[i].handle, to;
    struct vmm_handle *e = handle_of(value);
    if (!e) return CUDA_ERROR_INVALID_VALUE; /* cannot be: parked regions are live handles' */
    if (e->share == SHARE_EXPORTED) {
      if (!resv)
        return ferry_cu_unsupported("cuMemMap over the parked memory of an exported handle "
                                    "(importers map it there; it cannot move)");
      e->own_resv = resv;
      (*kept)++;
      from = v->arena.regions[i].addr + v->arena.regions[i].size;
      continue;
    }
    if (ferry_arena_reserve(&v->arena, e->size, 0, 0, &to)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = move_memory(v, e, value, to); /* gives an older own reservation back */
    if (rc) {
      ferry_arena_unreserve(&v->arena, to);
      return rc;
    }
    ferry_arena_park(&v->arena, to, 1); /* still not the program's */
    e->own_resv = to;
  }
}

/* the first region the program has mapped (not parked) in [lo, hi), or NULL */
static const struct ferry_region *mapped_in(const struct ferry_vgpu *v, uint64_t lo, uint64_t hi) {
  for (size_t i = ferry_arena_first_after(&v->arena, lo);
       i < v->arena.nregions && v->arena.regions[i].addr < hi; i++)
    if (!v->arena.regions[i].parked) return &v->arena.regions[i];
  return NULL;
}

/* e's memory is gone from the GPU (under both locks) */
static int free_memory(struct ferry_vgpu *v, struct vmm_handle *e) {
  struct ferry_arena_backend be = ferry_device_backend(v);
  int rc = ferry_arena_unmap_at(&v->arena, e->at, &be);
  if (!rc && e->own_resv) ferry_arena_unreserve(&v->arena, e->own_resv);
  return rc;
}

/* ---- reservations ---- */
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  if (!ptr || !size || flags || size % 4096 || addr % 4096 || (alignment & (alignment - 1)))
    return CUDA_ERROR_INVALID_VALUE;
  struct ferry_vgpu *v;
  CUresult rc = ferry_cu_current(&v);
  if (rc) return rc;
  uint64_t got;
  pthread_mutex_lock(&v->arena_lock);
  int e = ferry_arena_reserve(&v->arena, size, alignment, addr, &got);
  pthread_mutex_unlock(&v->arena_lock);
  if (e) {
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
      ferry_log("cuMemAddressReserve of %zu bytes: no room left in device %d's %llu GiB of "
                "device addresses; returning CUDA_ERROR_OUT_OF_MEMORY", size, v->index,
                (unsigned long long)(FERRY_ARENA_STRIDE >> 30));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *ptr = got;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_vgpu *v = ferry_vgpu_of((void *)(uintptr_t)ptr);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&vmm_lock);
  pthread_mutex_lock(&v->arena_lock);
  const struct ferry_reservation *r = ferry_arena_reservation(&v->arena, ptr);
  uint64_t g = v->arena.granularity;
  if (!r || r->addr != ptr || (size + g - 1) / g * g != r->size) {
    rc = CUDA_ERROR_INVALID_VALUE;
  } else {
    uint64_t end = r->addr + r->size;
    const struct ferry_region *m = mapped_in(v, ptr, end);
    if (m) { /* CUDA wants the mappings gone first */
      ferry_log("cuMemAddressFree of a reservation whose memory is still mapped (at 0x%llx): "
                "cuMemUnmap it first", (unsigned long long)m->addr);
      rc = CUDA_ERROR_INVALID_VALUE;
    }
    int kept = 0; /* exported handles' memory parked inside: the range stays theirs */
    if (!rc) rc = evict_parked(v, ptr, end, ptr, &kept);
    if (!rc && !kept && ferry_arena_unreserve(&v->arena, ptr)) rc = CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_unlock(&v->arena_lock);
  pthread_mutex_unlock(&vmm_lock);
  return rc;
}

/* ---- handles ---- */
static int host_location(CUmemLocationType t) {
  return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
         t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

/* Host memory from cuMemCreate is pinned memory of the GPU's own machine:
   its granularity is answered here (NCCL asks it before trying), its
   creation refused in cuMemCreate, which NCCL takes as its cue to use
   cudaHostAlloc instead */
static CUresult check_prop(const CUmemAllocationProp *prop, const char *call,
                           struct ferry_vgpu **v) {
  if (prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && host_location(prop->location.type)) {
    int err;
    if (!(*v = ferry_current(&err))) return ferry_cu_result(err);
    return CUDA_SUCCESS;
  }
  if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.id < 0 || prop->location.id >= ferry.count) return CUDA_ERROR_INVALID_DEVICE;
  unsigned types = (unsigned)prop->requestedHandleTypes;
  if (types & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    char what[160];
    snprintf(what, sizeof what, "%s with a fabric or Win32 handle type (memory shared between "
             "processes)", call);
    return ferry_cu_unsupported(what);
  }
  *v = &ferry.vgpus[prop->location.id];
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option) {
  if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                       option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
    return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  struct ferry_vgpu *v = NULL; /* set by check_prop on success */
  if (!rc) rc = check_prop(prop, "cuMemGetAllocationGranularity", &v);
  if (!rc) *granularity = v->granularity;
  return rc;
}

/* A POSIX file descriptor type is a request to be able to export later
   (PyTorch asks it of every expandable segment's handle): nothing happens
   until cuMemExportToShareableHandle. No memory is mapped yet; what CUDA would
   say at once, that the device has no room for it, is asked. */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags) {
  if (!handle || !size || flags) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (!rc && prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
      host_location(prop->location.type)) {
    char what[160];
    snprintf(what, sizeof what, "cuMemCreate of host memory (location type %d; "
             "cudaHostAlloc is served)", (int)prop->location.type);
    return ferry_cu_unsupported(what);
  }
  struct ferry_vgpu *v = NULL; /* set by check_prop on success */
  if (!rc) rc = check_prop(prop, "cuMemCreate", &v);
  if (rc) return rc;
  if (size % v->granularity) return CUDA_ERROR_INVALID_VALUE;
  if (ferry_dead(v)) return CUDA_ERROR_DEVICE_UNAVAILABLE;
  struct ferry_mem_get_info_args ia = {0};
  struct ferry_mem_get_info_rets ir;
  int e = ferry_call(v, FERRY_CALL_mem_get_info, &ia, &ir, NULL);
  if (e) return ferry_cu_result(e);
  pthread_mutex_lock(&vmm_lock);
  size_t i;
  uint64_t *p = &pending[v->index];
  if (*p > ir.free_bytes || size > ir.free_bytes - *p) rc = CUDA_ERROR_OUT_OF_MEMORY;
  else rc = handle_new(&i);
  if (!rc) {
    handles[i].vgpu = v->index;
    handles[i].size = size;
    handles[i].prop = *prop;
    handles[i].refs = 1;
    *p += size;
    *handle = handle_value(i);
  }
  pthread_mutex_unlock(&vmm_lock);
  return rc;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  pthread_mutex_lock(&vmm_lock);
  struct vmm_handle *e = handle_of(handle);
  if (!e || e->refs <= 0) {
    rc = CUDA_ERROR_INVALID_VALUE;
  } else if (--e->refs == 0 && !e->mapped) {
    /* still mapped: the memory stays until cuMemUnmap (CUDA does so) */
    if (e->at) {
      struct ferry_vgpu *v = &ferry.vgpus[e->vgpu];
      pthread_mutex_lock(&v->arena_lock);
      int err = free_memory(v, e);
      pthread_mutex_unlock(&v->arena_lock);
      if (err) {
        e->refs = 1;
        rc = ferry_cu_result(err);
      }
    }
    if (!rc) handle_drop(e);
  }
  pthread_mutex_unlock(&vmm_lock);
  return rc;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle handle) {
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  pthread_mutex_lock(&vmm_lock);
  struct vmm_handle *e = handle_of(handle);
  if (e) *prop = e->prop;
  pthread_mutex_unlock(&vmm_lock);
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- shareable handles (POSIX file descriptors) ---- */
/* e is exported on its server: its memory given a place if it had none
   (parked in a reservation of its own), that mapping handed to the broker
   (under vmm_lock) */
static CUresult export_locked(struct ferry_vgpu *v, struct vmm_handle *e, uint64_t value) {
  const char *call = "cuMemExportToShareableHandle";
  pthread_mutex_lock(&v->arena_lock);
  CUresult rc = CUDA_SUCCESS;
  if (!e->at) {
    uint64_t to;
    struct ferry_arena_backend be = ferry_device_backend(v);
    if (ferry_arena_reserve(&v->arena, e->size, 0, 0, &to)) {
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      int err = ferry_arena_map_at(&v->arena, to, e->size, value, &be);
      if (err) {
        ferry_arena_unreserve(&v->arena, to);
        rc = ferry_cu_result(err);
      } else {
        ferry_arena_park(&v->arena, to, 1); /* not the program's */
        e->own_resv = e->at = to;
        pending[e->vgpu] -= e->size;
      }
    }
  }
  struct ferry_ipc_mem_export_args a = {e->at, e->size};
  struct ferry_ipc_mem_export_rets x = {0};
  int err = rc ? 0 : ferry_call(v, FERRY_CALL_ipc_mem_export, &a, &x, NULL);
  pthread_mutex_unlock(&v->arena_lock);
  if (rc) return rc;
  if (!err && x.refusal) err = ferry_ipc_refusal(call, v, x.refusal);
  if (err) return ferry_cu_result(err);
  /* the handle's memory is one mapping of its own on the server */
  if (!x.key.ptr || x.key.len != FERRY_IPC_KEY_LEN || x.at != e->at || x.span != e->size) {
    ferry_log("%s: %s exported a range other than the handle's; returning CUDA_ERROR_UNKNOWN",
              call, v->url_text);
    return CUDA_ERROR_UNKNOWN;
  }
  memcpy(e->key, x.key.ptr, FERRY_IPC_KEY_LEN);
  e->instance = x.instance;
  e->share = SHARE_EXPORTED;
  __atomic_add_fetch(&v->ipc_open, 1, __ATOMIC_ACQ_REL);
  return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags) {
  if (!shareableHandle || flags) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  pthread_mutex_lock(&vmm_lock);
  struct vmm_handle *e = handle_of(handle);
  struct ferry_vgpu *v = e ? &ferry.vgpus[e->vgpu] : NULL;
  if (!e || e->refs <= 0) {
    rc = CUDA_ERROR_INVALID_VALUE;
  } else if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
             !(e->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
    /* CUDA's answer: a type the handle was not created for */
    ferry_log("cuMemExportToShareableHandle: the handle was not created with this handle type "
              "(cuMemCreate's requestedHandleTypes; ferry exports "
              "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR); returning CUDA_ERROR_INVALID_VALUE");
    rc = CUDA_ERROR_INVALID_VALUE;
  } else if (ferry_dead(v)) {
    rc = CUDA_ERROR_DEVICE_UNAVAILABLE;
  } else {
    int err = ferry_ipc_local_refused("cuMemExportToShareableHandle", v);
    if (err) rc = ferry_cu_result(err);
    else if (e->share == SHARE_NONE) rc = export_locked(v, e, handle);
  }
  /* exported (or imported) already: the same memory, a new descriptor */
  struct ferry_ipc_handle h = {.magic = FERRY_IPC_VMM_MAGIC};
  if (!rc) {
    h.instance = e->instance;
    memcpy(h.key, e->key, FERRY_IPC_KEY_LEN);
    h.range = h.size = e->size;
  }
  pthread_mutex_unlock(&vmm_lock);
  if (rc) return rc;
  int fd = ferry_ipc_fd_make(&h);
  if (fd < 0) {
    ferry_log("cuMemExportToShareableHandle: no file descriptor for the handle (memfd_create: "
              "%s); returning CUDA_ERROR_OUT_OF_MEMORY", strerror(errno));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *(int *)shareableHandle = fd;
  return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType) {
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  const char *call = "cuMemImportFromShareableHandle";
  if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    ferry_log("%s of a handle type other than CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: ferry "
              "imports only the descriptors it exported; returning CUDA_ERROR_INVALID_VALUE", call);
    return CUDA_ERROR_INVALID_VALUE;
  }
  struct ferry_vgpu *v;
  CUresult rc = ferry_cu_current(&v);
  if (rc) return rc;
  int fd = (int)(intptr_t)osHandle;
  struct ferry_ipc_handle h;
  int why = ferry_ipc_fd_read(fd, &h);
  if (!why && h.magic != FERRY_IPC_VMM_MAGIC) why = FERRY_IPC_FD_NOT_OURS; /* a pool's */
  if (why) {
    ferry_log("%s: descriptor %d is %s; ferry imports only descriptors that "
              "cuMemExportToShareableHandle made through ferry; returning "
              "CUDA_ERROR_INVALID_VALUE", call, fd, ferry_ipc_fd_why(why));
    return CUDA_ERROR_INVALID_VALUE;
  }
  int err = ferry_ipc_local_refused(call, v);
  if (err) return ferry_cu_result(err);
  if (h.size % v->granularity) return CUDA_ERROR_INVALID_VALUE; /* not this server's granules */
  pthread_mutex_lock(&vmm_lock);
  /* this program's own export or import of that memory: the same handle */
  for (size_t i = 0; i < nhandles; i++) {
    struct vmm_handle *o = &handles[i];
    if (o->used && o->share && o->refs > 0 && o->vgpu == v->index && o->instance == h.instance &&
        !memcmp(o->key, h.key, FERRY_IPC_KEY_LEN)) {
      o->refs++;
      *handle = handle_value(i);
      pthread_mutex_unlock(&vmm_lock);
      return CUDA_SUCCESS;
    }
  }
  size_t i;
  rc = handle_new(&i);
  if (!rc) {
    struct vmm_handle *e = &handles[i];
    e->vgpu = v->index;
    e->size = h.size;
    e->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    e->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    e->prop.location.id = v->index;
    e->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    e->refs = 1;
    e->share = SHARE_IMPORTED;
    e->instance = h.instance;
    memcpy(e->key, h.key, FERRY_IPC_KEY_LEN);
    __atomic_add_fetch(&v->ipc_open, 1, __ATOMIC_ACQ_REL);
    *handle = handle_value(i);
  }
  pthread_mutex_unlock(&vmm_lock);
  return rc;
}

/* the handle whose mapping holds addr (under vmm_lock and arena_lock) */
static struct vmm_handle *mapped_at(struct ferry_vgpu *v, uint64_t addr, uint64_t *value) {
  const struct ferry_region *r = ferry_arena_find(&v->arena, addr);
  if (!r || !r->handle) return NULL;
  if (value) *value = r->handle;
  return handle_of(r->handle);
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_vgpu *v = ferry_vgpu_of(addr);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&vmm_lock);
  pthread_mutex_lock(&v->arena_lock);
  uint64_t value = 0;
  struct vmm_handle *e = mapped_at(v, (uint64_t)(uintptr_t)addr, &value);
  if (e) {
    e->refs++;
    *handle = value;
  }
  pthread_mutex_unlock(&v->arena_lock);
  pthread_mutex_unlock(&vmm_lock);
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- mapping ---- */
/* an imported handle mapped at ptr: the exporter's memory, through the
   server's broker (under both locks) */
static CUresult map_imported(struct ferry_vgpu *v, struct vmm_handle *e, uint64_t ptr,
                             CUmemGenericAllocationHandle handle) {
  CUresult rc = evict_parked(v, ptr, ptr + e->size, 0, NULL);
  if (rc) return rc;
  /* the server maps the exporter's memory through its broker */
  struct ferry_ipc_import c = {v, e->instance, e->key, 0};
  struct ferry_arena_backend be = ferry_ipc_import_backend(&c);
  int err = ferry_arena_map_at(&v->arena, ptr, e->size, handle, &be);
  if (c.refusal) return ferry_cu_result(ferry_ipc_refusal("cuMemMap", v, c.refusal));
  if (err) {
    ferry_log("cuMemMap of an imported handle: %s could not map the exported memory (%s)",
              v->url_text, cudaGetErrorName((cudaError_t)err));
    return ferry_cu_result(err);
  }
  e->mapped = 1;
  e->access = 0; /* CUDA: no access until cuMemSetAccess */
  return CUDA_SUCCESS;
}

static CUresult map_locked(struct ferry_vgpu *v, uint64_t ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle handle) {
  struct vmm_handle *e = handle_of(handle);
  if (!e || e->refs <= 0) return CUDA_ERROR_INVALID_HANDLE;
  if (offset || size != e->size)
    return ferry_cu_unsupported("cuMemMap of part of a handle (an offset, or a size other than "
                                "the handle's)");
  if (e->vgpu != v->index) {
    ferry_log("cuMemMap of device %d's memory into a reservation of device %d is not supported "
              "by ferry; returning CUDA_ERROR_NOT_SUPPORTED", e->vgpu, v->index);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  const struct ferry_reservation *r = ferry_arena_reservation(&v->arena, ptr);
  if (!r || ptr % v->arena.granularity || size > r->addr + r->size - ptr)
    return CUDA_ERROR_INVALID_VALUE;
  if (mapped_in(v, ptr, ptr + size)) return CUDA_ERROR_INVALID_VALUE; /* CUDA refuses too */
  if (e->mapped)
    return ferry_cu_unsupported("cuMemMap of a handle that is already mapped (one handle at two "
                                "addresses)");
  if (e->share == SHARE_IMPORTED) return map_imported(v, e, ptr, handle);
  if (e->share == SHARE_EXPORTED && e->at != ptr)
    return ferry_cu_unsupported("cuMemMap of an exported handle away from its memory (exported "
                                "before it was mapped, or mapped elsewhere then: map it, then "
                                "export it)");
  if (e->at == ptr) { /* parked right here: the program's again */
    ferry_arena_park(&v->arena, ptr, 0);
  } else {
    CUresult rc = evict_parked(v, ptr, ptr + size, 0, NULL);
    if (rc) return rc;
    if (e->at) {
      if ((rc = move_memory(v, e, handle, ptr))) return rc;
    } else {
      struct ferry_arena_backend be = ferry_device_backend(v);
      int err = ferry_arena_map_at(&v->arena, ptr, size, handle, &be);
      if (err) return ferry_cu_result(err);
      e->at = ptr;
      pending[e->vgpu] -= e->size;
    }
  }
  e->mapped = 1;
  e->access = 0; /* CUDA: no access until cuMemSetAccess */
  return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  if (!ptr || !size || flags) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_vgpu *v = ferry_vgpu_of((void *)(uintptr_t)ptr);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  if (ferry_dead(v)) return CUDA_ERROR_DEVICE_UNAVAILABLE;
  pthread_mutex_lock(&vmm_lock);
  pthread_mutex_lock(&v->arena_lock);
  rc = map_locked(v, ptr, size, offset, handle);
  pthread_mutex_unlock(&v->arena_lock);
  pthread_mutex_unlock(&vmm_lock);
  return rc;
}

/* [ptr, ptr + size) is whole mappings of handles, back to back: 0, else
   CUDA_ERROR_INVALID_VALUE (under both locks) */
static CUresult whole_mappings(struct ferry_vgpu *v, uint64_t ptr, uint64_t size) {
  for (uint64_t p = ptr; p < ptr + size;) {
    const struct ferry_region *r = ferry_arena_find(&v->arena, p);
    if (!r || !r->handle || r->addr != p || r->size > ptr + size - p) return CUDA_ERROR_INVALID_VALUE;
    p += r->size;
  }
  return CUDA_SUCCESS;
}

/* CUDA's cuMemUnmap does not wait for the device either */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  if (!ptr || !size || ptr + size < ptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_vgpu *v = ferry_vgpu_of((void *)(uintptr_t)ptr);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&vmm_lock);
  pthread_mutex_lock(&v->arena_lock);
  rc = whole_mappings(v, ptr, size);
  for (uint64_t p = ptr; !rc && p < ptr + size;) {
    uint64_t value, here = p;
    struct vmm_handle *e = mapped_at(v, p, &value);
    p += e ? e->size : 0;
    if (!e) {
      rc = CUDA_ERROR_INVALID_VALUE;
    } else if (e->share == SHARE_IMPORTED) { /* nothing of its own to keep */
      struct ferry_ipc_import c = {v, e->instance, e->key, 0};
      struct ferry_arena_backend be = ferry_ipc_import_backend(&c);
      int err = ferry_arena_unmap_at(&v->arena, here, &be);
      if (err) {
        rc = ferry_cu_result(err);
      } else {
        e->mapped = 0;
        if (e->refs <= 0) handle_drop(e);
      }
    } else if (e->refs > 0) { /* the handle keeps its memory, here for now */
      ferry_arena_park(&v->arena, e->at, 1);
      e->mapped = 0;
    } else {
      int err = free_memory(v, e);
      if (err) rc = ferry_cu_result(err);
      else handle_drop(e);
    }
  }
  pthread_mutex_unlock(&v->arena_lock);
  pthread_mutex_unlock(&vmm_lock);
  return rc;
}

/* ---- access ---- */
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  if (!ptr || !size || !desc || !count) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_vgpu *v = ferry_vgpu_of((void *)(uintptr_t)ptr);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (desc[i].location.id < 0 || desc[i].location.id >= ferry.count) return CUDA_ERROR_INVALID_DEVICE;
    if (desc[i].location.id != v->index)
      return ferry_cu_unsupported("cuMemSetAccess for a device other than the memory's own (peer "
                                  "access to program VMM memory)");
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return ferry_cu_unsupported("cuMemSetAccess with access other than read/write");
  }
  pthread_mutex_lock(&vmm_lock);
  pthread_mutex_lock(&v->arena_lock);
  rc = whole_mappings(v, ptr, size);
  for (uint64_t p = ptr; !rc && p < ptr + size;) {
    struct vmm_handle *e = mapped_at(v, p, NULL);
    if (!e) break;
    e->access = 1; /* mem_map made it read/write for the vGPU's GPU already */
    p += e->size;
  }
  pthread_mutex_unlock(&v->arena_lock);
  pthread_mutex_unlock(&vmm_lock);
  return rc;
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr) {
  if (!flags || !location) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_vgpu *v = ferry_vgpu_of((void *)(uintptr_t)ptr);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&vmm_lock);
  pthread_mutex_lock(&v->arena_lock);
  struct vmm_handle *e = mapped_at(v, ptr, NULL);
  if (!e) rc = CUDA_ERROR_INVALID_VALUE;
  else
    *flags = e->access && location->type == CU_MEM_LOCATION_TYPE_DEVICE && location->id == v->index
                 ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                 : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  pthread_mutex_unlock(&v->arena_lock);
  pthread_mutex_unlock(&vmm_lock);
  return rc;
}

/* ---- for pointer queries (memory.c) and resets ---- */
unsigned ferry_cu_vmm_handle_types(uint64_t handle) {
  pthread_mutex_lock(&vmm_lock);
  struct vmm_handle *e = handle_of(handle);
  unsigned t = e ? (unsigned)e->prop.requestedHandleTypes : 0;
  pthread_mutex_unlock(&vmm_lock);
  return t;
}

/* the device was reset: its memory is gone, and with it every handle made
   for it (the arena kept its reservations; those handles' own go too) */
void ferry_cu_vmm_forget(int vgpu) {
  struct ferry_vgpu *v = &ferry.vgpus[vgpu];
  pthread_mutex_lock(&vmm_lock);
  pthread_mutex_lock(&v->arena_lock);
  for (size_t i = 0; i < nhandles; i++) {
    struct vmm_handle *e = &handles[i];
    if (!e->used || e->vgpu != vgpu) continue;
    if (e->own_resv) ferry_arena_unreserve(&v->arena, e->own_resv);
    e->share = SHARE_NONE; /* ferry_ipc_forget zeroes ipc_open */
    handle_drop(e);
  }
  pthread_mutex_unlock(&v->arena_lock);
  pthread_mutex_unlock(&vmm_lock);
}
