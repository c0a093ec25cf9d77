/*
 * Aliases for the shadows of memory the program registered. A server's or
 * helper's driver grants a fixed device address only where it likes (the
 * H200's refused the program's own addresses, which that process may use
 * itself), so such a shadow lives in the alias window at an address picked
 * here, the same on every server, and each call sent there carries the
 * alias in place of the program's address: kernel parameters, the ends of
 * memsets and device copies. A GPU in this process maps the memory itself
 * and sees the program's addresses. Addresses hidden inside structures in
 * device memory are not translated (docs/mapped-memory.md).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/layout.h"
#include "protocol/wire.h"
#include "shim/core/shadow.h"

#define ALIAS_GRAIN (2ull << 20) /* every driver's mapping granularity so far */
#define MAX_HOLES 64

static struct {
  pthread_mutex_t lock;
  uint64_t top; /* offset of the window's unused rest */
  struct hole {
    uint64_t at, size;
  } holes[MAX_HOLES]; /* given back below top */
  int nholes;
} A = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t grains(uint64_t addr, uint64_t span) {
  return (addr % ALIAS_GRAIN + span + ALIAS_GRAIN - 1) / ALIAS_GRAIN * ALIAS_GRAIN;
}

/* the alias keeps addr's offset in its grain, so that granules map alike */
uint64_t ferry_alias_take(uint64_t addr, uint64_t span) {
  uint64_t size = grains(addr, span), at = UINT64_MAX;
  pthread_mutex_lock(&A.lock);
  for (int i = 0; i < A.nholes && at == UINT64_MAX; i++)
    if (A.holes[i].size >= size) {
      at = A.holes[i].at;
      A.holes[i].at += size;
      A.holes[i].size -= size;
      if (!A.holes[i].size) A.holes[i] = A.holes[--A.nholes];
    }
  if (at == UINT64_MAX && A.top + size <= FERRY_ALIAS_WINDOW_SIZE) {
    at = A.top;
    A.top += size;
  }
  pthread_mutex_unlock(&A.lock);
  return at == UINT64_MAX ? 0 : FERRY_ALIAS_WINDOW_BASE + at + addr % ALIAS_GRAIN;
}

void ferry_alias_give(uint64_t alias, uint64_t span) {
  uint64_t size = grains(alias, span), at = alias / ALIAS_GRAIN * ALIAS_GRAIN - FERRY_ALIAS_WINDOW_BASE;
  pthread_mutex_lock(&A.lock);
  if (at + size == A.top) {
    A.top = at;
  } else if (A.nholes < MAX_HOLES) {
    A.holes[A.nholes++] = (struct hole){at, size};
  } /* else lost: only room, never correctness */
  pthread_mutex_unlock(&A.lock);
}

/* ---- the calls ---- */

static __thread unsigned char params_out[FERRY_MAX_PARAM_BYTES];

static void fix(int vgpu, uint64_t *addr) { *addr = ferry_shadow_dev(vgpu, *addr); }

const void *ferry_shadow_translate(struct ferry_vgpu *v, unsigned call, const void *args,
                                   void *scratch) {
  if (!ferry_shadow_aliased(v)) return args;
  int vi = v->index;
  switch (call) {
  case FERRY_CALL_launch: {
    struct ferry_launch_args *a = scratch;
    _Static_assert(sizeof *a <= FERRY_ALIAS_SCRATCH, "scratch too small");
    memcpy(a, args, sizeof *a);
    if (a->params.len > sizeof params_out) return args; /* refused by the server anyway */
    if (a->params.len) memcpy(params_out, a->params.ptr, a->params.len);
    for (size_t at = 0; at + 8 <= a->params.len; at += 8) {
      uint64_t w;
      memcpy(&w, params_out + at, 8);
      uint64_t d = ferry_shadow_dev(vi, w);
      if (d != w) memcpy(params_out + at, &d, 8);
    }
    a->params.ptr = params_out;
    return a;
  }
#define ENDS(name, ...)                                                                \
  case FERRY_CALL_##name: {                                                            \
    struct ferry_##name##_args *a = scratch;                                           \
    _Static_assert(sizeof *a <= FERRY_ALIAS_SCRATCH, "scratch too small");             \
    memcpy(a, args, sizeof *a);                                                        \
    uint64_t *ends[] = {__VA_ARGS__};                                                  \
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) fix(vi, ends[i]);        \
    return a;                                                                          \
  }
    ENDS(memset, &a->dst)
    ENDS(memset2d, &a->dst)
    ENDS(memset_wide, &a->dst)
    ENDS(memcpy_dtod, &a->dst, &a->src)
    ENDS(memcpy_dtod_async, &a->dst, &a->src)
    ENDS(memcpy2d_dtod, &a->dst, &a->src)
    ENDS(memcpy3d_dtod, &a->dst, &a->src)
#undef ENDS
  default: return args;
  }
}
