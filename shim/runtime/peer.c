/*
 * Peer access between two vGPUs on one ferry-server: cudaDeviceCanAccessPeer,
 * cudaDeviceEnablePeerAccess, cudaDeviceDisablePeerAccess (the driver's
 * cuCtx*PeerAccess call them), and copies between such vGPUs on the server.
 * A program's vGPUs on one server are sibling sessions there. Enabling
 * access from device d to p maps each of p's server mappings in d's session
 * at its own address (the CUDA IPC pair, executor/exec_ipc.c), and every
 * mapping p makes or drops later is mirrored the same way (ferry_peer_mapped
 * and ferry_peer_unmapping, from memory.c's device backend). d's kernels
 * then reach p's memory over the server's NVLink or PCIe, and a copy between
 * them runs on the server. cudaMemPoolSetAccess giving d access to a pool of
 * p mirrors the same way (all of p's memory: more than CUDA maps, never
 * less). While access is on, neither vGPU migrates: a move waits as for
 * CUDA IPC. Anywhere else (local GPUs, helpers, two servers), and
 * everywhere with FERRY_PEER=0 (for programs that must stay movable:
 * PyTorch enables peer access at its first copy between devices),
 * CanAccessPeer answers 0 and copies go through this host.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/log.h"
#include "common/setting.h"
#include "protocol/ipc.h"
#include "shim/core/link.h"
#include "shim/migrate/migrate.h"
#include "shim/runtime/runtime.h"

struct mirror {
  int d, p;            /* d's session maps this memory of p */
  uint64_t addr, size; /* one of p's server mappings, whole */
};

/* taken after the exporting vGPU's arena_lock, never around another */
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
/* on[d][p]: why d maps p's memory (FERRY_PEER_*), 0: it does not */
static unsigned char on[FERRY_MAX_VGPUS][FERRY_MAX_VGPUS];
static int any_on;                                         /* atomic: some on[][] */
static struct mirror *mirrors;
static size_t nmirrors, cmirrors;

static int on_a_server(const struct ferry_vgpu *v) {
  return !ferry_is_local(v) && !v->link.helper_pid && !ferry_dead(v);
}

/* two GPUs of one ferry-server, as their URLs say */
static int same_server(const struct ferry_vgpu *a, const struct ferry_vgpu *b) {
  return on_a_server(a) && on_a_server(b) && !strcmp(a->url.scheme, b->url.scheme) &&
         !strcmp(a->url.host, b->url.host) && a->url.port == b->url.port && a->url.gpu >= 0 &&
         b->url.gpu >= 0 && a->url.gpu != b->url.gpu;
}

/* FERRY_PEER: 1 (default) serves peer access where it can be had, 0 never */
static int peer_wanted = 1;
static pthread_once_t peer_once = PTHREAD_ONCE_INIT;
static void read_peer_setting(void) {
  uint64_t v;
  if (ferry_env_uint("FERRY_PEER", 0, 1, &v, "0 or 1", "1")) peer_wanted = (int)v;
}

/* *can: d's GPU reaches p's memory (the server's cuDeviceCanAccessPeer) */
static int can_access(struct ferry_vgpu *d, struct ferry_vgpu *p, int *can) {
  *can = 0;
  pthread_once(&peer_once, read_peer_setting);
  if (!peer_wanted || !same_server(d, p)) return 0;
  struct ferry_peer_access_args a = {(uint32_t)p->url.gpu};
  struct ferry_peer_access_rets r = {0};
  int rc = ferry_call(d, FERRY_CALL_peer_access, &a, &r, NULL);
  if (!rc) *can = r.can != 0;
  return rc;
}

/* ---- mirrors (peer_lock held) ---- */

/* p's server mapping at [addr, addr + size) is mapped in d's session too */
static int mirror(struct ferry_vgpu *d, struct ferry_vgpu *p, uint64_t addr, uint64_t size) {
  if (ferry_grow((void **)&mirrors, &cmirrors, nmirrors + 1, sizeof *mirrors)) return cudaErrorMemoryAllocation;
  struct ferry_ipc_mem_export_args ea = {addr, size};
  struct ferry_ipc_mem_export_rets ex = {0};
  int rc = ferry_call(p, FERRY_CALL_ipc_mem_export, &ea, &ex, NULL);
  if (!rc && ex.refusal) return ferry_ipc_refusal("cudaDeviceEnablePeerAccess", p, ex.refusal);
  if (!rc && (!ex.key.ptr || ex.key.len != FERRY_IPC_KEY_LEN || ex.at > addr ||
              ex.at + ex.span < addr + size))
    rc = cudaErrorUnknown;
  if (rc) return rc;
  struct ferry_ipc_mem_import_args ia = {.instance = ex.instance, .key = ex.key,
                                         .addr = ex.at, .size = ex.span};
  struct ferry_ipc_mem_import_rets ir = {0};
  rc = ferry_call(d, FERRY_CALL_ipc_mem_import, &ia, &ir, NULL);
  if (!rc && ir.refusal) return ferry_ipc_refusal("cudaDeviceEnablePeerAccess", d, ir.refusal);
  if (rc) return rc;
  mirrors[nmirrors++] = (struct mirror){d->index, p->index, ex.at, ex.span};
  return 0;
}

/* d's session no longer maps mirrors[i] */
static int unmirror(size_t i) {
  struct ferry_ipc_mem_close_args a = {mirrors[i].addr};
  int rc = ferry_call(&ferry.vgpus[mirrors[i].d], FERRY_CALL_ipc_mem_close, &a, NULL, NULL);
  mirrors[i] = mirrors[--nmirrors];
  return rc;
}

static void unmirror_pair(int d, int p) {
  for (size_t i = 0; i < nmirrors;)
    if (mirrors[i].d == d && mirrors[i].p == p) unmirror(i);
    else i++;
}

/* no session maps p's memory in [addr, addr + size) any more */
static void unmirror_range(const struct ferry_vgpu *p, uint64_t addr, uint64_t size) {
  for (size_t i = 0; i < nmirrors;)
    if (mirrors[i].p == p->index && mirrors[i].addr < addr + size && addr < mirrors[i].addr + mirrors[i].size)
      unmirror(i);
    else
      i++;
}

/* ---- the device backend's hooks (p's arena_lock held) ---- */

int ferry_peer_mapped(struct ferry_vgpu *p, uint64_t addr, uint64_t size) {
  if (!__atomic_load_n(&any_on, __ATOMIC_ACQUIRE)) return 0;
  int rc = 0;
  pthread_mutex_lock(&peer_lock);
  for (int d = 0; d < ferry.count && !rc; d++)
    if (on[d][p->index]) rc = mirror(&ferry.vgpus[d], p, addr, size);
  if (rc) { /* the mapping fails whole: no peer keeps a part of it */
    unmirror_range(p, addr, size);
    ferry_log("device %d: memory it maps for a new allocation could not be mapped for the devices "
              "with peer access to it (%s); the allocation fails", p->index,
              cudaGetErrorName((cudaError_t)rc));
  }
  pthread_mutex_unlock(&peer_lock);
  return rc;
}

void ferry_peer_unmapping(struct ferry_vgpu *p, uint64_t addr, uint64_t size) {
  if (!__atomic_load_n(&any_on, __ATOMIC_ACQUIRE)) return;
  pthread_mutex_lock(&peer_lock);
  unmirror_range(p, addr, size);
  pthread_mutex_unlock(&peer_lock);
}

/* ---- the calls ---- */

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) {
  if (!can) return ferry_ret(cudaErrorInvalidValue);
  struct ferry_vgpu *d, *p;
  int rc = ferry_vgpu_at(device, &d);
  if (!rc) rc = ferry_vgpu_at(peer, &p);
  if (!rc) rc = can_access(d, p, can); /* CUDA says 0 for a device and itself */
  return ferry_ret(rc);
}

/* d maps p's memory for `why` too; `call` names the program's call in the lines */
int ferry_peer_grant(struct ferry_vgpu *d, struct ferry_vgpu *p, unsigned why, const char *call) {
  int can = 0, rc = can_access(d, p, &can);
  if (rc) return rc;
  if (!can) {
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
      ferry_log("%s: ferry gives device %d access to device %d's memory only where both are GPUs "
                "of one ferry-server that reach each other (here %s and %s)%s; cudaMemcpyPeer and "
                "cudaMemcpy between devices work, through this host; returning "
                "cudaErrorPeerAccessUnsupported", call, d->index, p->index, d->url_text, p->url_text,
                peer_wanted ? "" : ", and not with FERRY_PEER=0");
    return cudaErrorPeerAccessUnsupported;
  }
  pthread_mutex_lock(&p->arena_lock);
  pthread_mutex_lock(&peer_lock);
  unsigned char *o = &on[d->index][p->index];
  if (*o & why) rc = why == FERRY_PEER_DEVICE ? cudaErrorPeerAccessAlreadyEnabled : 0;
  for (size_t i = 0; !*o && !rc && i < p->arena.nmaps; i++) {
    rc = mirror(d, p, p->arena.maps[i].addr, p->arena.maps[i].size);
    if (rc == cudaErrorInvalidValue) rc = 0; /* memory p imported: not p's to share */
  }
  if (rc && rc != cudaErrorPeerAccessAlreadyEnabled) {
    if (!*o) unmirror_pair(d->index, p->index);
    ferry_log("%s: the memory of device %d could not be mapped for device %d (%s)", call, p->index,
              d->index, cudaGetErrorName((cudaError_t)rc));
  } else if (!rc && !(*o & why)) {
    if (!*o) { /* neither moves while d maps p's memory */
      __atomic_add_fetch(&d->ipc_open, 1, __ATOMIC_ACQ_REL);
      __atomic_add_fetch(&p->ipc_open, 1, __ATOMIC_ACQ_REL);
    }
    *o |= (unsigned char)why;
    __atomic_store_n(&any_on, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&peer_lock);
  pthread_mutex_unlock(&p->arena_lock);
  return rc;
}

/* d no longer maps p's memory for `why`; 0, or 1 when it did not */
int ferry_peer_revoke(struct ferry_vgpu *d, struct ferry_vgpu *p, unsigned why) {
  pthread_mutex_lock(&p->arena_lock);
  pthread_mutex_lock(&peer_lock);
  unsigned char *o = &on[d->index][p->index];
  int was = (*o & why) != 0, last = *o == why;
  *o &= (unsigned char)~why;
  if (was && last) unmirror_pair(d->index, p->index);
  pthread_mutex_unlock(&peer_lock);
  pthread_mutex_unlock(&p->arena_lock);
  if (was && last) {
    ferry_ipc_release(d, 0); /* a move waiting for it may start */
    ferry_ipc_release(p, 0);
  }
  return !was;
}

int ferry_peer_has(const struct ferry_vgpu *d, const struct ferry_vgpu *p, unsigned why) {
  pthread_mutex_lock(&peer_lock);
  int has = (on[d->index][p->index] & why) != 0;
  pthread_mutex_unlock(&peer_lock);
  return has;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  int err;
  struct ferry_vgpu *d = ferry_current(&err), *p;
  if (!d) return ferry_ret(err);
  if ((err = ferry_vgpu_at(peer, &p)) || p == d) return ferry_ret(cudaErrorInvalidDevice);
  if (flags) return ferry_ret(cudaErrorInvalidValue);
  char call[64];
  snprintf(call, sizeof call, "cudaDeviceEnablePeerAccess(%d) from device %d", peer, d->index);
  return ferry_ret(ferry_peer_grant(d, p, FERRY_PEER_DEVICE, call));
}

cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  int err;
  struct ferry_vgpu *d = ferry_current(&err), *p;
  if (!d) return ferry_ret(err);
  if ((err = ferry_vgpu_at(peer, &p)) || p == d) return ferry_ret(cudaErrorInvalidDevice);
  if (ferry_peer_revoke(d, p, FERRY_PEER_DEVICE)) return ferry_ret(cudaErrorPeerAccessNotEnabled);
  return cudaSuccess;
}

/* ---- copies ---- */

int ferry_peer_copy(void *dst, const void *src, size_t count) {
  if (!__atomic_load_n(&any_on, __ATOMIC_ACQUIRE)) return -1;
  struct ferry_vgpu *dv = ferry_vgpu_of(dst), *sv = ferry_vgpu_of(src);
  if (!dv || !sv || dv == sv) return -1;
  pthread_mutex_lock(&peer_lock);
  /* on the side that maps the other's memory */
  struct ferry_vgpu *run = on[dv->index][sv->index] ? dv : on[sv->index][dv->index] ? sv : NULL;
  pthread_mutex_unlock(&peer_lock);
  if (!run) return -1;
  struct ferry_vgpu *other = run == dv ? sv : dv;
  /* ordered after the other device's work and before its next, as
     cudaMemcpyPeer is: it waits, the copy runs, the copy is waited for */
  struct ferry_device_synchronize_args ds = {0};
  struct ferry_memcpy_dtod_args c = {(uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, count, 0};
  struct ferry_stream_synchronize_args ss = {0};
  int rc = ferry_call(other, FERRY_CALL_device_synchronize, &ds, NULL, NULL);
  if (!rc) rc = ferry_call(run, FERRY_CALL_memcpy_dtod, &c, NULL, NULL);
  if (!rc) rc = ferry_call(run, FERRY_CALL_stream_synchronize, &ss, NULL, NULL);
  return rc;
}

int ferry_peer_copy_async(void *dst, const void *src, size_t count, struct ferry_vgpu *v,
                          uint32_t stream) {
  if (!__atomic_load_n(&any_on, __ATOMIC_ACQUIRE)) return -1;
  struct ferry_vgpu *dv = ferry_vgpu_of(dst), *sv = ferry_vgpu_of(src);
  if (!dv || !sv || dv == sv || (v != dv && v != sv)) return -1;
  struct ferry_vgpu *other = v == dv ? sv : dv;
  pthread_mutex_lock(&peer_lock);
  int maps = on[v->index][other->index] != 0;
  pthread_mutex_unlock(&peer_lock);
  if (!maps) return -1;
  /* in the stream's order only, as CUDA's asynchronous peer copies are */
  struct ferry_memcpy_dtod_async_args a = {(uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src,
                                           count, stream};
  return ferry_call(v, FERRY_CALL_memcpy_dtod_async, &a, NULL, NULL);
}

/* after cudaDeviceReset of vgpu: its server mappings and imports are gone */
void ferry_peer_forget(int vgpu) {
  if (!__atomic_load_n(&any_on, __ATOMIC_ACQUIRE)) return;
  struct ferry_vgpu *released[2 * FERRY_MAX_VGPUS];
  int n = 0;
  pthread_mutex_lock(&peer_lock);
  for (size_t i = 0; i < nmirrors;)
    if (mirrors[i].d == vgpu) mirrors[i] = mirrors[--nmirrors]; /* the reset unmapped it */
    else if (mirrors[i].p == vgpu) unmirror(i);
    else i++;
  for (int k = 0; k < ferry.count; k++) {
    if (on[vgpu][k]) released[n++] = &ferry.vgpus[k];
    if (on[k][vgpu]) released[n++] = &ferry.vgpus[k];
    on[vgpu][k] = on[k][vgpu] = 0;
  }
  pthread_mutex_unlock(&peer_lock);
  for (int i = 0; i < n; i++) ferry_ipc_release(released[i], 0); /* vgpu's own: ferry_ipc_forget */
}
