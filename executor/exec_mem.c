/*
 * Device memory: mappings at client-chosen addresses inside the arena, and
 * the copies. Bulk bytes stream through two pinned staging buffers so that
 * reading chunk k+1 from the connection overlaps the DMA of chunk k (and
 * the other way round for device-to-host). A copy that fails still
 * consumes (or produces) every announced byte, so the stream stays framed.
 */
#include "executor/exec_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

void ferry_exec_set_limits(struct ferry_exec *ex, uint64_t max_deferred, uint64_t max_mem) {
  ex->max_deferred = max_deferred;
  ex->max_mem = max_mem;
}

uint64_t ferry_exec_mapped(const struct ferry_exec *ex) { return ex->mapped; }

/* "256 MiB" for log lines */
static const char *bytes_str(uint64_t n, char *out, size_t len) {
  static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && n >= 1024 && n % 1024 == 0)
    n /= 1024, u++;
  snprintf(out, len, "%" PRIu64 " %s", n, unit[u]);
  return out;
}

/* ---- mappings ---- */

/* first mapping with addr >= a */
static size_t map_lower(const struct ferry_exec *ex, uint64_t a) {
  size_t lo = 0, hi = ex->nmaps;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ex->maps[mid].addr < a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* maps fresh device memory at [addr, addr + size), which the caller checked
   is granularity-aligned inside a reservation */
int exec_map_at(struct ferry_exec *ex, uint64_t addr, uint64_t size) {
  const struct ferry_driver *d = ex->d;
  uint64_t end = addr + size;
  size_t at = map_lower(ex, addr);
  if ((at < ex->nmaps && ex->maps[at].addr < end) ||
      (at > 0 && ex->maps[at - 1].addr + ex->maps[at - 1].size > addr))
    return EXEC_INVALID_VALUE; /* overlaps a live mapping */
  if (ex->max_mem && (size > ex->max_mem || ex->mapped > ex->max_mem - size)) {
    if (!ex->mem_logged) {
      char b1[32], b2[32], b3[32];
      ferry_log("device memory quota reached: %s more would exceed %s (--max-session-mem), %s "
                "mapped; this session's allocations fail with cudaErrorMemoryAllocation",
                bytes_str(size, b1, sizeof b1), bytes_str(ex->max_mem, b2, sizeof b2),
                bytes_str(ex->mapped, b3, sizeof b3));
      ex->mem_logged = 1;
    }
    return EXEC_MEMORY_ALLOCATION;
  }
  if (ex->nmaps == ex->cmaps) {
    size_t cap = ex->cmaps ? ex->cmaps * 2 : 64;
    struct exec_mapping *p = realloc(ex->maps, cap * sizeof *p);
    if (!p)
      return EXEC_MEMORY_ALLOCATION;
    ex->maps = p;
    ex->cmaps = cap;
  }
  /* exportable for CUDA IPC where a broker could take it */
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .requestedHandleTypes = ex->ipc_fd ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
                                                                 : CU_MEM_HANDLE_TYPE_NONE,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = ex->dev}};
  CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CUmemGenericAllocationHandle h;
  CUresult res = d->MemCreate(&h, size, &prop, 0);
  if (res != CUDA_SUCCESS)
    return CU(res);
  if ((res = d->MemMap(addr, size, 0, h, 0)) != CUDA_SUCCESS) {
    d->MemRelease(h);
    return CU(res);
  }
  if ((res = d->MemSetAccess(addr, size, &access, 1)) != CUDA_SUCCESS) {
    d->MemUnmap(addr, size);
    d->MemRelease(h);
    return CU(res);
  }
  memmove(&ex->maps[at + 1], &ex->maps[at], (ex->nmaps - at) * sizeof *ex->maps);
  ex->maps[at] = (struct exec_mapping){addr, size, h};
  ex->nmaps++;
  ex->mapped += size;
  return EXEC_OK;
}

size_t exec_map_after(const struct ferry_exec *ex, uint64_t addr) {
  size_t i = map_lower(ex, addr);
  if (i > 0 && ex->maps[i - 1].addr + ex->maps[i - 1].size > addr)
    i--;
  return i;
}

int exec_map_overlaps(const struct ferry_exec *ex, uint64_t addr, uint64_t size) {
  size_t i = exec_map_after(ex, addr);
  return i < ex->nmaps && ex->maps[i].addr < addr + size;
}

int exec_mapped_at(const struct ferry_exec *ex, uint64_t addr, uint64_t size) {
  size_t at = map_lower(ex, addr);
  return at < ex->nmaps && ex->maps[at].addr == addr && ex->maps[at].size == size;
}

int exec_unmap_at(struct ferry_exec *ex, uint64_t addr, uint64_t size) {
  size_t at = map_lower(ex, addr);
  if (at >= ex->nmaps || ex->maps[at].addr != addr || ex->maps[at].size != size)
    return EXEC_INVALID_VALUE;
  CUresult res = ex->d->MemUnmap(addr, size);
  if (res != CUDA_SUCCESS)
    return CU(res);
  exec_ipc_unmapped(ex, addr, size);
  res = ex->d->MemRelease(ex->maps[at].handle);
  memmove(&ex->maps[at], &ex->maps[at + 1], (ex->nmaps - at - 1) * sizeof *ex->maps);
  ex->nmaps--;
  ex->mapped -= size;
  return CU(res);
}

int ferry_x_mem_map(struct ferry_exec *ex, const struct ferry_mem_map_args *a,
                    struct ferry_mem_map_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  uint64_t end = a->addr + a->size;
  if (!ex->arena_ok || a->size == 0 || a->addr % ex->gran || a->size % ex->gran ||
      end < a->addr || a->addr < ex->arena_base || end > ex->arena_base + ex->arena_size)
    return EXEC_INVALID_VALUE;
  return exec_map_at(ex, a->addr, a->size);
}

int ferry_x_mem_unmap(struct ferry_exec *ex, const struct ferry_mem_unmap_args *a,
                      struct ferry_mem_unmap_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  /* shadows are the client's shadow_unmap to remove, not the program's */
  if (!ex->arena_ok || a->addr < ex->arena_base || a->addr - ex->arena_base >= ex->arena_size)
    return EXEC_INVALID_VALUE;
  return exec_unmap_at(ex, a->addr, a->size);
}

void exec_free_memory(struct ferry_exec *ex, int driver_ok) {
  exec_ipc_free(ex, driver_ok);
  for (size_t i = 0; i < ex->nmaps && driver_ok; i++) {
    ex->d->MemUnmap(ex->maps[i].addr, ex->maps[i].size);
    ex->d->MemRelease(ex->maps[i].handle);
  }
  ex->nmaps = 0;
  ex->mapped = 0;
  if (ex->arena_ok && driver_ok)
    ex->d->MemAddressFree(ex->arena_base, ex->arena_size);
  ex->arena_ok = 0;
  exec_free_windows(ex, driver_ok);
}

/* ---- staging ---- */

static int staging(struct ferry_exec *ex) {
  if (ex->stage[1])
    return EXEC_OK;
  for (int i = 0; i < 2; i++) {
    CUresult res = ex->d->MemHostAlloc(&ex->stage[i], EXEC_CHUNK, 0);
    if (res == CUDA_SUCCESS)
      res = ex->d->EventCreate(&ex->stage_ev[i], CU_EVENT_DISABLE_TIMING);
    if (res != CUDA_SUCCESS) {
      exec_free_staging(ex, 1);
      return CU(res);
    }
  }
  return EXEC_OK;
}

void exec_free_staging(struct ferry_exec *ex, int driver_ok) {
  for (int i = 0; i < 2; i++) {
    if (ex->stage_ev[i] && driver_ok)
      ex->d->EventDestroy(ex->stage_ev[i]);
    if (ex->stage[i] && driver_ok)
      ex->d->MemFreeHost(ex->stage[i]);
    ex->stage_ev[i] = NULL;
    ex->stage[i] = NULL;
    ex->stage_busy[i] = 0;
  }
}

/* waits until the DMA that last used buffer i is done */
static int stage_wait(struct ferry_exec *ex, int i) {
  if (!ex->stage_busy[i])
    return EXEC_OK;
  ex->stage_busy[i] = 0;
  return CU(ex->d->EventSynchronize(ex->stage_ev[i]));
}

static int stage_mark(struct ferry_exec *ex, int i, CUstream s) {
  CUresult res = ex->d->EventRecord(ex->stage_ev[i], s);
  ex->stage_busy[i] = res == CUDA_SUCCESS;
  return CU(res);
}

int exec_drain(struct ferry_bulk_in *in, uint64_t n) {
  char buf[65536];
  while (n) {
    size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
    if (in->read(in->ctx, buf, k))
      return -1;
    n -= k;
  }
  return 0;
}

/* ---- packed host bytes <-> (pitched) device rows ---- */

static CUresult piece(struct ferry_exec *ex, const struct exec_xfer *x, uint64_t dev, void *host,
                      size_t n) {
  return x->to_device ? ex->d->MemcpyHtoDAsync(dev, host, n, x->s)
                      : ex->d->MemcpyDtoHAsync(host, dev, n, x->s);
}

/* enqueues the copy of packed bytes [off, off + n) */
static int xfer_span(struct ferry_exec *ex, const struct exec_xfer *x, uint64_t off, char *buf,
                     size_t n) {
  if (x->span)
    return x->span(ex, x, off, buf, n);
  uint64_t row = off / x->width, col = off % x->width;
  CUresult res = CUDA_SUCCESS;
  if (col) { /* the rest of a row cut by the previous chunk */
    size_t k = x->width - col < n ? (size_t)(x->width - col) : n;
    if ((res = piece(ex, x, x->dev + row * x->pitch + col, buf, k)))
      return CU(res);
    buf += k, n -= k, row++;
  }
  uint64_t rows = n / x->width;
  if (rows == 1) {
    res = piece(ex, x, x->dev + row * x->pitch, buf, x->width);
  } else if (rows > 1) {
    CUDA_MEMCPY2D c = {.WidthInBytes = x->width, .Height = rows};
    if (x->to_device) {
      c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = buf, c.srcPitch = x->width;
      c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = x->dev + row * x->pitch;
      c.dstPitch = x->pitch;
    } else {
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = x->dev + row * x->pitch;
      c.srcPitch = x->pitch;
      c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = buf, c.dstPitch = x->width;
    }
    res = ex->d->Memcpy2DAsync(&c, x->s);
  }
  if (res)
    return CU(res);
  buf += rows * x->width, n -= rows * x->width, row += rows;
  if (n) /* the start of a row the next chunk finishes */
    res = piece(ex, x, x->dev + row * x->pitch, buf, n);
  return CU(res);
}

/* the chunk size of a copy of len bytes: about a quarter of it, rounded up
   to EXEC_MIN_CHUNK and capped by the staging buffers. A tiny copy stays one
   chunk (one event, no pipelining to gain); from 2 * EXEC_MIN_CHUNK up the
   socket transfer of one chunk overlaps the DMA of the previous one. */
static size_t chunk_for(uint64_t len) {
  uint64_t c = (len / 4 + EXEC_MIN_CHUNK - 1) / EXEC_MIN_CHUNK * EXEC_MIN_CHUNK;
  if (c < EXEC_MIN_CHUNK)
    c = EXEC_MIN_CHUNK;
  return c > EXEC_CHUNK ? EXEC_CHUNK : (size_t)c;
}

/* host -> device: reads every byte of `in`; `err` is an error found
   before any copy (the bytes are then only drained) */
int exec_pull(struct ferry_exec *ex, struct exec_xfer *x, struct ferry_bulk_in *in, int err) {
  uint64_t len = in->len;
  if (!err && len)
    err = staging(ex);
  if (err)
    return exec_drain(in, len) ? EXEC_UNKNOWN : err;
  size_t chunk = chunk_for(len);
  uint64_t off = 0;
  for (unsigned k = 0; off < len; k++) {
    int i = k & 1;
    size_t n = len - off < chunk ? (size_t)(len - off) : chunk;
    int w = stage_wait(ex, i); /* even after an error: a DMA may still read it */
    if (!err)
      err = w;
    if (in->read(in->ctx, ex->stage[i], n)) {
      ferry_log("connection broke during a host-to-device copy");
      return EXEC_UNKNOWN;
    }
    if (!err)
      err = xfer_span(ex, x, off, ex->stage[i], n);
    if (!err)
      err = stage_mark(ex, i, x->s);
    off += n;
  }
  return err;
}

/* enqueues chunk k of size `chunk` (into buffer k & 1; n bytes, the last
   one may be short) unless an earlier chunk failed */
static int issue(struct ferry_exec *ex, const struct exec_xfer *x, uint64_t k, size_t chunk,
                 size_t n, int *stop) {
  int b = (int)(k & 1), e = *stop;
  if (!e)
    e = xfer_span(ex, x, k * (uint64_t)chunk, ex->stage[b], n);
  if (!e)
    e = stage_mark(ex, b, x->s);
  *stop = e;
  return e;
}

/* device -> host: on success of the first chunk, begin(len) and write
   exactly len bytes (zeros after a later failure) */
int exec_push(struct ferry_exec *ex, struct exec_xfer *x, uint64_t len,
              struct ferry_bulk_out *out) {
  if (!out)
    return EXEC_INVALID_VALUE;
  if (len == 0)
    return out->begin(out->ctx, 0) ? EXEC_UNKNOWN : EXEC_OK;
  int err = staging(ex);
  if (err)
    return err;
  size_t chunk = chunk_for(len);
  uint64_t nchunks = (len + chunk - 1) / chunk;
#define CHUNK_LEN(k) ((k) + 1 < nchunks ? chunk : (size_t)(len - (k) * (uint64_t)chunk))
  for (int i = 0; i < 2; i++)
    if ((err = stage_wait(ex, i)))
      return err;
  /* chunk k goes to buffer k & 1; cerr holds the error of enqueuing it.
     After a failure nothing more is enqueued. */
  int cerr[2] = {EXEC_OK, EXEC_OK}, stop = EXEC_OK;
  cerr[0] = issue(ex, x, 0, chunk, CHUNK_LEN(0), &stop);
  int begun = 0;
  for (uint64_t k = 0; k < nchunks; k++) {
    int i = k & 1;
    if (k + 1 < nchunks)
      cerr[i ^ 1] = issue(ex, x, k + 1, chunk, CHUNK_LEN(k + 1), &stop);
    int e = cerr[i] ? cerr[i] : stage_wait(ex, i);
    if (!err)
      err = e;
    if (!begun) {
      if (err)
        return err; /* nothing sent yet: a plain error reply */
      if (out->begin(out->ctx, len))
        return EXEC_UNKNOWN;
      begun = 1;
    }
    if (err)
      memset(ex->stage[i], 0, CHUNK_LEN(k));
    if (out->write(out->ctx, ex->stage[i], CHUNK_LEN(k))) {
      stage_wait(ex, i ^ 1);
      ferry_log("connection broke during a device-to-host copy");
      return EXEC_UNKNOWN;
    }
  }
#undef CHUNK_LEN
  return err;
}

/* ---- the copy calls ---- */

static int htod(struct ferry_exec *ex, uint64_t dst, uint32_t stream, struct ferry_io *io, int wait) {
  if (!io->in)
    return EXEC_INVALID_VALUE;
  struct exec_xfer x = {dst, io->in->len, io->in->len, NULL, 1, NULL, NULL};
  int err = exec_stream(ex, stream, &x.s);
  err = exec_pull(ex, &x, io->in, err);
  if (!err && wait)
    err = CU(ex->d->StreamSynchronize(x.s));
  return err;
}

int ferry_x_memcpy_htod(struct ferry_exec *ex, const struct ferry_memcpy_htod_args *a,
                        struct ferry_memcpy_htod_rets *r, struct ferry_io *io) {
  (void)r;
  return htod(ex, a->dst, a->stream, io, 1);
}

int ferry_x_memcpy_htod_async(struct ferry_exec *ex, const struct ferry_memcpy_htod_async_args *a,
                              struct ferry_memcpy_htod_async_rets *r, struct ferry_io *io) {
  (void)r;
  return htod(ex, a->dst, a->stream, io, 0);
}

int ferry_x_memcpy_dtoh(struct ferry_exec *ex, const struct ferry_memcpy_dtoh_args *a,
                        struct ferry_memcpy_dtoh_rets *r, struct ferry_io *io) {
  (void)r;
  struct exec_xfer x = {a->src, a->size, a->size, NULL, 0, NULL, NULL};
  int err = exec_stream(ex, a->stream, &x.s);
  return err ? err : exec_push(ex, &x, a->size, io->out);
}

int ferry_x_memcpy2d_htod(struct ferry_exec *ex, const struct ferry_memcpy2d_htod_args *a,
                          struct ferry_memcpy2d_htod_rets *r, struct ferry_io *io) {
  (void)r;
  if (!io->in)
    return EXEC_INVALID_VALUE;
  struct exec_xfer x = {a->dst, a->dpitch, a->width, NULL, 1, NULL, NULL};
  int err = exec_stream(ex, a->stream, &x.s);
  if (!err && (a->height && a->width > UINT64_MAX / a->height))
    err = EXEC_INVALID_VALUE;
  else if (!err && io->in->len != a->width * a->height)
    err = EXEC_INVALID_VALUE;
  else if (!err && a->height > 1 && a->dpitch < a->width)
    err = EXEC_INVALID_PITCH;
  err = exec_pull(ex, &x, io->in, err);
  if (!err && !a->async)
    err = CU(ex->d->StreamSynchronize(x.s));
  return err;
}

int ferry_x_memcpy2d_dtoh(struct ferry_exec *ex, const struct ferry_memcpy2d_dtoh_args *a,
                          struct ferry_memcpy2d_dtoh_rets *r, struct ferry_io *io) {
  (void)r;
  struct exec_xfer x = {a->src, a->spitch, a->width, NULL, 0, NULL, NULL};
  int err = exec_stream(ex, a->stream, &x.s);
  if (err)
    return err;
  if (a->height && a->width > UINT64_MAX / a->height)
    return EXEC_INVALID_VALUE;
  if (a->height > 1 && a->spitch < a->width)
    return EXEC_INVALID_PITCH;
  return exec_push(ex, &x, a->width * a->height, io->out);
}

int ferry_x_memcpy2d_dtod(struct ferry_exec *ex, const struct ferry_memcpy2d_dtod_args *a,
                          struct ferry_memcpy2d_dtod_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  CUstream s;
  int err = exec_stream(ex, a->stream, &s);
  if (err)
    return err;
  if (a->height > 1 && (a->dpitch < a->width || a->spitch < a->width))
    return EXEC_INVALID_PITCH;
  CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = a->src,
                     .srcPitch = a->spitch, .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                     .dstDevice = a->dst, .dstPitch = a->dpitch, .WidthInBytes = a->width,
                     .Height = a->height};
  return CU(ex->d->Memcpy2DAsync(&c, s));
}

static int dtod(struct ferry_exec *ex, uint64_t dst, uint64_t src, uint64_t size, uint32_t stream) {
  CUstream s;
  int err = exec_stream(ex, stream, &s);
  return err ? err : CU(ex->d->MemcpyDtoDAsync(dst, src, size, s));
}

int ferry_x_memcpy_dtod(struct ferry_exec *ex, const struct ferry_memcpy_dtod_args *a,
                        struct ferry_memcpy_dtod_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return dtod(ex, a->dst, a->src, a->size, a->stream);
}

int ferry_x_memcpy_dtod_async(struct ferry_exec *ex, const struct ferry_memcpy_dtod_async_args *a,
                              struct ferry_memcpy_dtod_async_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  return dtod(ex, a->dst, a->src, a->size, a->stream);
}

int ferry_x_memset(struct ferry_exec *ex, const struct ferry_memset_args *a,
                   struct ferry_memset_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  CUstream s;
  int err = exec_stream(ex, a->stream, &s);
  return err ? err : CU(ex->d->MemsetD8Async(a->dst, (unsigned char)(a->value & 0xff), a->size, s));
}

int ferry_x_memset2d(struct ferry_exec *ex, const struct ferry_memset2d_args *a,
                     struct ferry_memset2d_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  CUstream s;
  int err = exec_stream(ex, a->stream, &s);
  if (err)
    return err;
  if (a->height > 1 && a->pitch < a->width)
    return EXEC_INVALID_PITCH;
  return CU(ex->d->MemsetD2D8Async(a->dst, a->pitch, (unsigned char)(a->value & 0xff), a->width,
                                   a->height, s));
}

/* cuMemsetD2D16Async / cuMemsetD2D32Async; the driver checks pitch and
   alignment, with the driver API's errors */
int ferry_x_memset_wide(struct ferry_exec *ex, const struct ferry_memset_wide_args *a,
                        struct ferry_memset_wide_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  CUstream s;
  int err = exec_stream(ex, a->stream, &s);
  if (err)
    return err;
  if (a->elem == 2)
    return CU(ex->d->MemsetD2D16Async(a->dst, a->pitch, (unsigned short)(a->value & 0xffff),
                                      a->width, a->height, s));
  if (a->elem == 4)
    return CU(ex->d->MemsetD2D32Async(a->dst, a->pitch, a->value, a->width, a->height, s));
  return EXEC_INVALID_VALUE;
}

/* ---- deferred device-to-host copies ---- */

/* whether [addr, addr + size) lies in this session's mappings, which may
   be several adjacent ones */
int exec_mapped_range(const struct ferry_exec *ex, uint64_t addr, uint64_t size) {
  if (size == 0 || addr + size < addr || addr == UINT64_MAX)
    return 0;
  size_t i = map_lower(ex, addr + 1); /* the first mapping past addr */
  if (i == 0)
    return 0;
  uint64_t at = addr, end = addr + size;
  for (i--; i < ex->nmaps && ex->maps[i].addr <= at; i++) {
    uint64_t stop = ex->maps[i].addr + ex->maps[i].size;
    if (stop <= at)
      return 0;
    if (stop >= end)
      return 1;
    at = stop;
  }
  return 0;
}

/*
 * Whether a copy of `size` bytes may hold that much pinned memory until the
 * client collects it. The data cannot be pushed to the client early: the
 * shim reads the connection only while it waits for a reply, so a server
 * blocked sending it would deadlock with a client blocked sending a large
 * copy. Hence a bound, and a clear error beyond it.
 */
static int deferred_fits(struct ferry_exec *ex, const struct ferry_memcpy_dtoh_async_args *a,
                         uint64_t charge) {
  if (!ex->max_deferred || (charge <= ex->max_deferred &&
                            ex->pend_bytes <= ex->max_deferred - charge))
    return 1;
  /* a lone copy of memory the session holds on the device (one large
     cudaMemcpyAsync, then a synchronize) costs no more host memory than it
     already holds device memory */
  if (ex->pend_bytes == 0 && exec_mapped_range(ex, a->src, a->size))
    return 1;
  char b1[32], b2[32], b3[32];
  snprintf(ex->refused_why, sizeof ex->refused_why,
           "the server holds at most %s (--max-deferred) of such copies' data until the "
           "program's next synchronizing call, and %s was held",
           bytes_str(ex->max_deferred, b2, sizeof b2), bytes_str(ex->pend_bytes, b3, sizeof b3));
  if (!ex->deferred_logged) {
    ferry_log("asynchronous device-to-host copies: %s more would exceed %s (--max-deferred) "
              "held for the client's next synchronizing call (%s held); such copies fail "
              "with cudaErrorMemoryAllocation",
              bytes_str(charge, b1, sizeof b1), bytes_str(ex->max_deferred, b2, sizeof b2),
              bytes_str(ex->pend_bytes, b3, sizeof b3));
    ex->deferred_logged = 1;
  }
  return 0;
}

int ferry_x_memcpy_dtoh_async(struct ferry_exec *ex, const struct ferry_memcpy_dtoh_async_args *a,
                              struct ferry_memcpy_dtoh_async_rets *r, struct ferry_io *io) {
  (void)r, (void)io;
  if (ex->npend >= EXEC_MAX_PENDING) {
    /* only a client that never synchronizes gets here: every entry costs
       memory (and an event) until it does */
    if (!ex->violation[0])
      snprintf(ex->violation, sizeof ex->violation,
               "more than %u asynchronous device-to-host copies without a synchronizing call",
               EXEC_MAX_PENDING);
    return EXEC_MEMORY_ALLOCATION;
  }
  struct exec_pending *p = calloc(1, sizeof *p);
  if (!p)
    return EXEC_MEMORY_ALLOCATION;
  p->token = a->token;
  /* queued even when it fails, so that the client hears about the token */
  if (ex->pend_tail)
    ex->pend_tail->next = p;
  else
    ex->pend_head = p;
  ex->pend_tail = p;
  ex->npend++;
  CUstream s;
  int err = exec_stream(ex, a->stream, &s);
  if (err || a->size == 0)
    return err;
  /* pinned memory comes in whole pages */
  if (a->size > UINT64_MAX - 4095)
    return EXEC_MEMORY_ALLOCATION;
  uint64_t charge = (a->size + 4095) & ~(uint64_t)4095;
  if (!deferred_fits(ex, a, charge)) {
    p->refused = 1;
    return EXEC_MEMORY_ALLOCATION;
  }
  const struct ferry_driver *d = ex->d;
  CUresult res = d->MemHostAlloc(&p->buf, a->size, 0);
  if (res != CUDA_SUCCESS) {
    p->buf = NULL;
    return CU(res);
  }
  p->size = a->size;
  if ((res = d->EventCreate(&p->ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS ||
      (res = d->MemcpyDtoHAsync(p->buf, a->src, a->size, s)) != CUDA_SUCCESS ||
      (res = d->EventRecord(p->ev, s)) != CUDA_SUCCESS) {
    if (p->ev)
      d->EventDestroy(p->ev);
    d->MemFreeHost(p->buf);
    p->ev = NULL;
    p->buf = NULL;
    p->size = 0;
    return CU(res);
  }
  p->charge = charge;
  ex->pend_bytes += charge;
  return EXEC_OK;
}

static void pending_release(struct ferry_exec *ex, struct exec_pending *p, int driver_ok) {
  if (p->ev && driver_ok)
    ex->d->EventDestroy(p->ev);
  if (p->buf && driver_ok)
    ex->d->MemFreeHost(p->buf);
  ex->pend_bytes -= p->charge;
  p->charge = 0;
  p->ev = NULL;
  p->buf = NULL;
  p->size = 0;
}

void exec_fail_pending(struct ferry_exec *ex, int driver_ok) {
  for (struct exec_pending *p = ex->pend_head; p; p = p->next)
    pending_release(ex, p, driver_ok);
}

int ferry_exec_flush_deferred(struct ferry_exec *ex, ferry_deferred_fn fn, void *ctx) {
  struct exec_pending **link = &ex->pend_head, *prev = NULL;
  int rc = 0;
  while (*link) {
    struct exec_pending *p = *link;
    if (p->ev) {
      CUresult q = ex->d->EventQuery(p->ev);
      if (q == CUDA_ERROR_NOT_READY) {
        prev = p;
        link = &p->next;
        continue;
      }
      if (q != CUDA_SUCCESS) { /* the copy failed: the client gets no data */
        if (ex->latched == EXEC_OK)
          ex->latched = CU(q);
        pending_release(ex, p, 1);
      }
    }
    /* an entry without an event is a failed or empty copy */
    if (rc == 0 && fn(ctx, p->token, p->buf, p->size, p->refused ? ex->refused_why : NULL))
      rc = -1;
    pending_release(ex, p, 1);
    *link = p->next;
    if (ex->pend_tail == p)
      ex->pend_tail = prev;
    free(p);
    ex->npend--;
    if (rc)
      break;
  }
  return rc;
}
