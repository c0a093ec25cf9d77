/*
 * Simulated device memory. "Physical" memory handles are ranges of one
 * sparse memfd (the pool); mapping one maps its range at exactly the
 * requested device address, so device pointers are ordinary host pointers
 * at the same values a GPU would use.
 * Every range that may be touched is tracked, so a copy to an unmapped
 * address fails with CUDA_ERROR_INVALID_VALUE instead of crashing.
 * Each handle's memory counts against its own device; reservations and
 * mappings are process-wide (unified addressing), and a kernel reaches a
 * mapping only with the access cuMemSetAccess gave its device.
 *
 * Sharing with another process (cuMemExportToShareableHandle, POSIX file
 * descriptors, for CUDA IPC through ferry-server): at its first export a
 * handle's pages move out of the pool into a memfd of their own, its live
 * mappings remapped onto it, and the export is that memfd; an import maps
 * the memfd it is given. Only exported and imported handles hold a
 * descriptor, so their number bounds this process's.
 */
#include "sim/sim.h"

#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/setting.h"

/* ---- tracked ranges ---- */

/* index of the last range starting at or below addr, or -1 */
static long range_floor(uint64_t addr) {
  long lo = 0, hi = (long)sim.nranges - 1, best = -1;
  while (lo <= hi) {
    long mid = (lo + hi) / 2;
    if (sim.ranges[mid].start <= addr) {
      best = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return best;
}

int sim_range_ok(uint64_t addr, size_t len, int prot) {
  if (len == 0)
    return 1;
  uint64_t end = addr + len;
  if (end < addr)
    return 0;
  long i = range_floor(addr);
  if (i < 0)
    return 0;
  uint64_t cur = addr;
  for (size_t k = (size_t)i; k < sim.nranges && cur < end; k++) {
    const struct sim_range *r = &sim.ranges[k];
    if (r->start > cur || r->end <= cur || (r->prot & prot) != prot)
      return 0;
    cur = r->end;
  }
  return cur >= end;
}

int sim_range_add(uint64_t start, uint64_t end, enum sim_range_kind kind, int prot,
                  struct sim_memhandle *h) {
  if (sim.nranges == sim.cranges) {
    size_t cap = sim.cranges ? sim.cranges * 2 : 64;
    struct sim_range *p = realloc(sim.ranges, cap * sizeof *p);
    if (!p)
      return -1;
    sim.ranges = p;
    sim.cranges = cap;
  }
  size_t at = (size_t)(range_floor(start) + 1);
  memmove(&sim.ranges[at + 1], &sim.ranges[at], (sim.nranges - at) * sizeof *sim.ranges);
  sim.ranges[at] = (struct sim_range){.start = start, .end = end, .kind = kind, .prot = prot,
                                     .handle = h};
  memset(sim.ranges[at].dprot, prot, sizeof sim.ranges[at].dprot);
  sim.nranges++;
  return 0;
}

void sim_range_del(uint64_t start) {
  long i = range_floor(start);
  if (i < 0 || sim.ranges[i].start != start)
    return;
  memmove(&sim.ranges[i], &sim.ranges[i + 1], (sim.nranges - (size_t)i - 1) * sizeof *sim.ranges);
  sim.nranges--;
}

/* [ptr, ptr+size) made of whole, back-to-back mappings: first index, count */
static int whole_mappings(uint64_t ptr, size_t size, size_t *first, size_t *count) {
  long i = range_floor(ptr);
  if (size == 0 || i < 0 || sim.ranges[i].start != ptr)
    return 0;
  uint64_t cur = ptr, end = ptr + size;
  size_t k = (size_t)i;
  while (k < sim.nranges && cur < end && sim.ranges[k].start == cur &&
         sim.ranges[k].kind == SIM_RANGE_MAP)
    cur = sim.ranges[k++].end;
  if (cur != end)
    return 0;
  *first = (size_t)i;
  *count = k - (size_t)i;
  return 1;
}

/* ---- reservations and handles ---- */

static struct sim_reservation *find_reservation(uint64_t start, uint64_t end) {
  for (size_t i = 0; i < sim.nresv; i++)
    if (sim.resv[i].start <= start && end <= sim.resv[i].end)
      return &sim.resv[i];
  return NULL;
}

/* ---- the pool: offsets of one sparse memfd, first fit ---- */
#define POOL_SIZE (1ull << 46)

static int pool_open(void) {
  if (sim.pool_free)
    return 0;
  int fd = memfd_create("ferry-sim-vram", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)POOL_SIZE) != 0 ||
      !(sim.pool_free = malloc(16 * sizeof *sim.pool_free))) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  sim.cpool_free = 16;
  sim.pool_free[0] = (struct sim_reservation){0, POOL_SIZE};
  sim.npool_free = 1;
  sim.pool_fd = fd;
  return 0;
}

static int pool_alloc(uint64_t size, uint64_t *base) {
  if (pool_open())
    return -1;
  for (size_t i = 0; i < sim.npool_free; i++) {
    struct sim_reservation *f = &sim.pool_free[i];
    if (f->end - f->start < size)
      continue;
    *base = f->start;
    f->start += size;
    if (f->start == f->end) {
      memmove(f, f + 1, (sim.npool_free - i - 1) * sizeof *f);
      sim.npool_free--;
    }
    return 0;
  }
  return -1;
}

/* gives [base, base + size) back (its pages first), merging neighbours */
static void pool_free_range(uint64_t base, uint64_t size) {
  fallocate(sim.pool_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)base, (off_t)size);
  size_t i = 0;
  while (i < sim.npool_free && sim.pool_free[i].start < base)
    i++;
  int left = i > 0 && sim.pool_free[i - 1].end == base;
  int right = i < sim.npool_free && sim.pool_free[i].start == base + size;
  if (left && right) {
    sim.pool_free[i - 1].end = sim.pool_free[i].end;
    memmove(&sim.pool_free[i], &sim.pool_free[i + 1], (sim.npool_free - i - 1) * sizeof *sim.pool_free);
    sim.npool_free--;
  } else if (left) {
    sim.pool_free[i - 1].end = base + size;
  } else if (right) {
    sim.pool_free[i].start = base;
  } else {
    if (sim.npool_free == sim.cpool_free) {
      struct sim_reservation *p = realloc(sim.pool_free, 2 * sim.cpool_free * sizeof *p);
      if (!p)
        return; /* the offsets are lost, the pages are not */
      sim.pool_free = p;
      sim.cpool_free *= 2;
    }
    memmove(&sim.pool_free[i + 1], &sim.pool_free[i], (sim.npool_free - i) * sizeof *sim.pool_free);
    sim.pool_free[i] = (struct sim_reservation){base, base + size};
    sim.npool_free++;
  }
}

static void handle_put(struct sim_memhandle *h) {
  if (h->released && h->maps == 0) {
    if (!h->imported)
      sim.devs[h->obj.dev].physical -= h->size;
    if (h->fd >= 0)
      close(h->fd);
    else
      pool_free_range(h->base, h->size);
    free(h);
  }
}

/* the range goes back to reserved-but-inaccessible */
static void unmap_range_at(size_t idx) {
  struct sim_range r = sim.ranges[idx];
  mmap((void *)(uintptr_t)r.start, r.end - r.start, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  sim_range_del(r.start);
  r.handle->maps--;
  handle_put(r.handle);
}

static CUresult check_prop(const CUmemAllocationProp *prop) {
  if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.id < 0 || prop->location.id >= sim.ngpus)
    return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

CUresult sim_MemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                         CUmemAllocationGranularity_flags option) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                       option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if ((r = check_prop(prop)))
    return sim_leave(r);
  *granularity = SIM_GRANULARITY;
  return sim_leave(CUDA_SUCCESS);
}

static int add_reservation(uint64_t start, uint64_t end, int dev) {
  if (sim.nresv == sim.cresv) {
    size_t cap = sim.cresv ? sim.cresv * 2 : 8;
    struct sim_reservation *p = realloc(sim.resv, cap * sizeof *p);
    if (!p)
      return -1;
    sim.resv = p;
    sim.cresv = cap;
  }
  sim.resv[sim.nresv++] = (struct sim_reservation){start, end, dev};
  return 0;
}

#define SIM_HINT_LIMIT (1ull << 46)

CUresult sim_MemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                               unsigned long long flags) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!ptr || size == 0 || size % SIM_GRANULARITY || flags != 0 ||
      (alignment & (alignment - 1)))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if (alignment < SIM_GRANULARITY)
    alignment = SIM_GRANULARITY;
  const int base = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void *got = MAP_FAILED;
  /* hints from 64 TiB up are not honoured, as the H200's driver did not
     (0x4c0000000000, 0x7f84cdbe0000), while ferry's windows below are */
  if (addr && addr % alignment == 0 && addr < SIM_HINT_LIMIT) {
    got = mmap((void *)(uintptr_t)addr, size, PROT_NONE, base | MAP_FIXED_NOREPLACE, -1, 0);
    if (got != MAP_FAILED && (uintptr_t)got != addr) { /* kernel without NOREPLACE */
      munmap(got, size);
      got = MAP_FAILED;
    }
  }
  if (got == MAP_FAILED) {
    /* like the real driver: a hint that cannot be honoured is ignored */
    char *p = mmap(NULL, size + alignment, PROT_NONE, base, -1, 0);
    if (p == MAP_FAILED)
      return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
    uintptr_t a = ((uintptr_t)p + alignment - 1) & ~(uintptr_t)(alignment - 1);
    if (a > (uintptr_t)p)
      munmap(p, a - (uintptr_t)p);
    if ((uintptr_t)p + size + alignment > a + size)
      munmap((void *)(a + size), (uintptr_t)p + size + alignment - (a + size));
    got = (void *)a;
  }
  if (add_reservation((uintptr_t)got, (uintptr_t)got + size, sim_cur()->dev)) {
    munmap(got, size);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  *ptr = (CUdeviceptr)(uintptr_t)got;
  return sim_leave(CUDA_SUCCESS);
}

static void drop_mappings_in(uint64_t start, uint64_t end) {
  for (size_t i = 0; i < sim.nranges;) {
    if (sim.ranges[i].kind == SIM_RANGE_MAP && sim.ranges[i].start >= start &&
        sim.ranges[i].end <= end)
      unmap_range_at(i);
    else
      i++;
  }
}

CUresult sim_MemAddressFree(CUdeviceptr ptr, size_t size) {
  CUresult r = sim_enter();
  if (r)
    return r;
  for (size_t i = 0; i < sim.nresv; i++) {
    if (sim.resv[i].start == ptr && sim.resv[i].end == ptr + size) {
      drop_mappings_in(ptr, ptr + size);
      munmap((void *)(uintptr_t)ptr, size);
      sim.resv[i] = sim.resv[--sim.nresv];
      return sim_leave(CUDA_SUCCESS);
    }
  }
  return sim_leave(CUDA_ERROR_INVALID_VALUE);
}

CUresult sim_MemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                       const CUmemAllocationProp *prop, unsigned long long flags) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!handle || size == 0 || size % SIM_GRANULARITY || flags != 0)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if ((r = check_prop(prop)))
    return sim_leave(r);
  struct sim_dev *dv = &sim.devs[prop->location.id];
  if (size > SIM_TOTAL_MEM - dv->physical)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  struct sim_memhandle *h = calloc(1, sizeof *h);
  if (!h)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  h->obj.kind = SIM_MEMHANDLE;
  h->obj.dev = dv->dev;
  h->size = size;
  h->fd = -1;
  if (pool_alloc(size, &h->base)) {
    free(h);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  if (sim_register(h)) {
    pool_free_range(h->base, size);
    free(h);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  dv->physical += size;
  *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_MemRelease(CUmemGenericAllocationHandle handle) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_memhandle *h = sim_lookup((void *)(uintptr_t)handle, SIM_MEMHANDLE);
  if (!h)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  sim_unregister(h);
  h->released = 1; /* live mappings keep the pages */
  handle_put(h);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_MemMap(CUdeviceptr ptr, size_t size, size_t offset,
                    CUmemGenericAllocationHandle handle, unsigned long long flags) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_memhandle *h = sim_lookup((void *)(uintptr_t)handle, SIM_MEMHANDLE);
  if (!h)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (flags != 0 || size == 0 || ptr % SIM_GRANULARITY || size % SIM_GRANULARITY ||
      offset % SIM_GRANULARITY || offset > h->size || size > h->size - offset ||
      ptr + size < ptr || !find_reservation(ptr, ptr + size))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  /* CUDA 13: "offset ... currently must be zero"; an imported handle
     mapped from its middle failed on the H200 */
  if (offset != 0)
    return sim_leave(CUDA_ERROR_NOT_SUPPORTED);
  long i = range_floor(ptr + size - 1);
  if (i >= 0 && sim.ranges[i].end > ptr)
    return sim_leave(CUDA_ERROR_INVALID_VALUE); /* already mapped */
  void *p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                 h->fd >= 0 ? h->fd : sim.pool_fd, (off_t)(h->fd >= 0 ? offset : h->base + offset));
  if (p == MAP_FAILED)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  if (sim_range_add(ptr, ptr + size, SIM_RANGE_MAP, PROT_NONE, h)) {
    mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  sim.ranges[range_floor(ptr)].hoff = offset;
  h->maps++;
  return sim_leave(CUDA_SUCCESS);
}

/* h's pages move from the pool into a memfd of their own, and every live
   mapping of h onto it (under the lock): 0 or -1 */
static int own_memfd(struct sim_memhandle *h) {
  int fd = memfd_create("ferry-sim-ipc", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)h->size) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  static char buf[1 << 20];
  for (uint64_t off = 0; off < h->size;) {
    size_t n = h->size - off < sizeof buf ? (size_t)(h->size - off) : sizeof buf;
    ssize_t r = pread(sim.pool_fd, buf, n, (off_t)(h->base + off));
    if (r <= 0 || pwrite(fd, buf, (size_t)r, (off_t)off) != r) {
      close(fd);
      return -1;
    }
    off += (uint64_t)r;
  }
  /* the same bytes under the same protection: nothing else can tell; a
     failure puts the pool's pages back (they are untouched until the end) */
  for (size_t k = 0; k < sim.nranges; k++) {
    const struct sim_range *rg = &sim.ranges[k];
    if (rg->kind != SIM_RANGE_MAP || rg->handle != h)
      continue;
    if (mmap((void *)(uintptr_t)rg->start, rg->end - rg->start, rg->prot, MAP_SHARED | MAP_FIXED,
             fd, (off_t)rg->hoff) != MAP_FAILED)
      continue;
    for (size_t j = 0; j < k; j++) {
      const struct sim_range *b = &sim.ranges[j];
      if (b->kind == SIM_RANGE_MAP && b->handle == h)
        mmap((void *)(uintptr_t)b->start, b->end - b->start, b->prot, MAP_SHARED | MAP_FIXED,
             sim.pool_fd, (off_t)(h->base + b->hoff));
    }
    close(fd);
    return -1;
  }
  pool_free_range(h->base, h->size);
  h->fd = fd;
  return 0;
}

CUresult sim_MemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
                                        CUmemAllocationHandleType type,
                                        unsigned long long flags) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_memhandle *h = sim_lookup_any((void *)(uintptr_t)handle, SIM_MEMHANDLE);
  if (!h)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!shareable || flags || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if (h->fd < 0 && own_memfd(h))
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  int fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return sim_leave(errno == EMFILE ? CUDA_ERROR_TOO_MANY_PEERS : CUDA_ERROR_OUT_OF_MEMORY);
  *(int *)shareable = fd;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_MemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os_handle,
                                          CUmemAllocationHandleType type) {
  CUresult r = sim_enter();
  if (r)
    return r;
  int given = (int)(intptr_t)os_handle;
  struct stat st;
  if (!handle || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || given < 0 ||
      fstat(given, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
      st.st_size % SIM_GRANULARITY)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_memhandle *h = calloc(1, sizeof *h);
  if (!h)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  h->obj.kind = SIM_MEMHANDLE;
  h->obj.dev = sim_cur()->dev;
  h->size = (size_t)st.st_size;
  h->imported = 1;
  if ((h->fd = fcntl(given, F_DUPFD_CLOEXEC, 0)) < 0 || sim_register(h)) {
    if (h->fd >= 0)
      close(h->fd);
    free(h);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_MemUnmap(CUdeviceptr ptr, size_t size) {
  CUresult r = sim_enter();
  if (r)
    return r;
  size_t first, count;
  if (!whole_mappings(ptr, size, &first, &count))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  while (count--)
    unmap_range_at(first);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_MemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                          size_t count) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!desc || count == 0)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  int prot[SIM_MAX_GPUS] = {0}, set[SIM_MAX_GPUS] = {0};
  for (size_t i = 0; i < count; i++) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
      return sim_leave(CUDA_ERROR_INVALID_VALUE);
    int id = desc[i].location.id;
    if (id < 0 || id >= sim.ngpus)
      return sim_leave(CUDA_ERROR_INVALID_DEVICE);
    switch (desc[i].flags) { /* a later entry for the same device wins */
    case CU_MEM_ACCESS_FLAGS_PROT_NONE: prot[id] = PROT_NONE; break;
    case CU_MEM_ACCESS_FLAGS_PROT_READ: prot[id] = PROT_READ; break;
    case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: prot[id] = PROT_READ | PROT_WRITE; break;
    default: return sim_leave(CUDA_ERROR_INVALID_VALUE);
    }
    set[id] = 1;
  }
  size_t first, n;
  if (!whole_mappings(ptr, size, &first, &n))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  /* devices not named keep their access; the host pages allow the union,
     since copies may use any device's memory */
  for (size_t k = first; k < first + n; k++) {
    struct sim_range *rg = &sim.ranges[k];
    int any = PROT_NONE;
    for (int g = 0; g < sim.ngpus; g++)
      any |= set[g] ? prot[g] : rg->dprot[g];
    if (mprotect((void *)(uintptr_t)rg->start, rg->end - rg->start, any) != 0)
      return sim_leave(CUDA_ERROR_INVALID_VALUE);
    for (int g = 0; g < sim.ngpus; g++)
      if (set[g])
        rg->dprot[g] = (unsigned char)prot[g];
    rg->prot = any;
  }
  return sim_leave(CUDA_SUCCESS);
}

/* only simulation code, under the lock, touches these pages, so taking
   access away from the host for the length of a kernel is safe */
void sim_access_as(int dev, int on) {
  if (sim.ngpus == 1) /* the one device's access is the union */
    return;
  for (size_t k = 0; k < sim.nranges; k++) {
    const struct sim_range *rg = &sim.ranges[k];
    if (rg->kind == SIM_RANGE_MAP && rg->dprot[dev] != rg->prot)
      mprotect((void *)(uintptr_t)rg->start, rg->end - rg->start, on ? rg->dprot[dev] : rg->prot);
  }
}

CUresult sim_MemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (free_bytes) /* the current context's device */
    *free_bytes = SIM_TOTAL_MEM - sim_cur()->physical;
  if (total_bytes)
    *total_bytes = SIM_TOTAL_MEM;
  return sim_leave(CUDA_SUCCESS);
}

static struct sim_memhandle **handles_found;
static size_t handles_n;
static int handles_dev;
static void collect_handle(const void *node, VISIT which, int depth) {
  (void)depth;
  struct sim_obj *o = *(struct sim_obj *const *)node;
  if ((which == postorder || which == leaf) && o->kind == SIM_MEMHANDLE && o->dev == handles_dev)
    handles_found[handles_n++] = (struct sim_memhandle *)o;
}
static size_t count_n;
static void count_nodes(const void *node, VISIT which, int depth) {
  (void)node, (void)depth;
  if (which == postorder || which == leaf)
    count_n++;
}

void sim_vmm_destroy_dev(int dev) {
  for (size_t i = 0; i < sim.nresv;) {
    struct sim_reservation rv = sim.resv[i];
    if (rv.dev != dev) {
      i++;
      continue;
    }
    drop_mappings_in(rv.start, rv.end);
    munmap((void *)(uintptr_t)rv.start, rv.end - rv.start);
    sim.resv[i] = sim.resv[--sim.nresv];
  }
  /* the device's memory is gone wherever it was mapped */
  for (size_t i = 0; i < sim.nranges;) {
    if (sim.ranges[i].kind == SIM_RANGE_MAP && sim.ranges[i].handle->obj.dev == dev)
      unmap_range_at(i);
    else
      i++;
  }
  count_n = 0;
  twalk(sim.registry, count_nodes);
  handles_found = calloc(count_n + 1, sizeof *handles_found);
  handles_n = 0;
  handles_dev = dev;
  if (handles_found)
    twalk(sim.registry, collect_handle);
  for (size_t i = 0; i < handles_n; i++) {
    struct sim_memhandle *h = handles_found[i];
    sim_unregister(h);
    h->released = 1;
    handle_put(h);
  }
  free(handles_found);
  handles_found = NULL;
}

/* ---- pinned host memory: page-aligned anonymous memory, usable by copies ---- */

CUresult sim_MemHostAlloc(void **pp, size_t bytesize, unsigned int flags) {
  CUresult r = sim_enter();
  if (r)
    return r;
  const unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                         CU_MEMHOSTALLOC_WRITECOMBINED;
  if (!pp || bytesize == 0 || (flags & ~known))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  void *p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  if (sim_range_add((uintptr_t)p, (uintptr_t)p + bytesize, SIM_RANGE_HOST,
                    PROT_READ | PROT_WRITE, NULL)) {
    munmap(p, bytesize);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  *pp = p;
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_MemFreeHost(void *p) {
  CUresult r = sim_enter();
  if (r)
    return r;
  long i = range_floor((uintptr_t)p);
  if (!p || i < 0 || sim.ranges[i].start != (uintptr_t)p || sim.ranges[i].kind != SIM_RANGE_HOST)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  munmap(p, sim.ranges[i].end - sim.ranges[i].start);
  sim_range_del((uintptr_t)p);
  return sim_leave(CUDA_SUCCESS);
}

/* cudaHostRegister'ed memory: tracked so that a second registration and an
   unregistration of unknown memory fail as they do on CUDA */
CUresult sim_MemHostRegister(void *p, size_t bytesize, unsigned int flags) {
  (void)flags;
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!p || bytesize == 0)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  long i = range_floor((uintptr_t)p);
  size_t next = (size_t)(i + 1);
  if ((i >= 0 && sim.ranges[i].end > (uintptr_t)p) ||
      (next < sim.nranges && sim.ranges[next].start < (uintptr_t)p + bytesize))
    return sim_leave(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  if (sim_range_add((uintptr_t)p, (uintptr_t)p + bytesize, SIM_RANGE_REGISTERED,
                    PROT_READ | PROT_WRITE, NULL))
    return sim_leave(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  return sim_leave(CUDA_SUCCESS);
}

CUresult sim_MemHostUnregister(void *p) {
  CUresult r = sim_enter();
  if (r)
    return r;
  long i = range_floor((uintptr_t)p);
  if (!p || i < 0 || sim.ranges[i].start != (uintptr_t)p ||
      sim.ranges[i].kind != SIM_RANGE_REGISTERED)
    return sim_leave(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  sim_range_del((uintptr_t)p);
  return sim_leave(CUDA_SUCCESS);
}

uint64_t sim_total_mem(void) {
  static uint64_t total;
  if (!total) {
    uint64_t v;
    total = ferry_env_uint("FERRY_SIM_TOTAL_MEM", 1u << 20, 1ull << 50, &v,
                           "bytes from 1048576 to 1125899906842624", "85899345920")
                ? v
                : 80ull << 30;
  }
  return total;
}
