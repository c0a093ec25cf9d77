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

#include "common/grow.h"
#include "protocol/layout.h"
#include "protocol/wire.h"
#include "shim/core/shadow.h"

/* An alias keeps the low half of its address: translation rewrites only a
   word's high half. A structure parameter often pairs a 32-bit field with
   padding the program never set (miniFE's PODMap: an int count, then four
   stale bytes), and the pair can read as an address of a registered block;
   the field then keeps its value. */
#define SLOT (1ull << 32)
_Static_assert(FERRY_ALIAS_WINDOW_BASE % SLOT == 0 && FERRY_ALIAS_WINDOW_SIZE % SLOT == 0,
               "the alias window is made of whole slots");

static struct {
  pthread_mutex_t lock;
  struct taken {
    uint64_t at, size;
  } *taken;
  size_t n, cap;
} A = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int alias_free(uint64_t at, uint64_t size) {
  if (at < FERRY_ALIAS_WINDOW_BASE || at - FERRY_ALIAS_WINDOW_BASE + size > FERRY_ALIAS_WINDOW_SIZE)
    return 0;
  for (size_t i = 0; i < A.n; i++)
    if (at < A.taken[i].at + A.taken[i].size && A.taken[i].at < at + size) return 0;
  return 1;
}

/* the alias of [addr, addr + span): addr's place in the window if free (the
   same on every server and in every run of the program), else the first
   free slot at the same low half; 0 when the window is full */
uint64_t ferry_alias_take(uint64_t addr, uint64_t span) {
  uint64_t at = 0, want = FERRY_ALIAS_WINDOW_BASE + addr % FERRY_ALIAS_WINDOW_SIZE;
  pthread_mutex_lock(&A.lock);
  if (alias_free(want, span)) at = want;
  for (uint64_t k = 0; !at && k < FERRY_ALIAS_WINDOW_SIZE / SLOT; k++) {
    uint64_t c = FERRY_ALIAS_WINDOW_BASE + k * SLOT + addr % SLOT;
    if (alias_free(c, span)) at = c;
  }
  if (at && ferry_grow((void **)&A.taken, &A.cap, A.n + 1, sizeof *A.taken)) at = 0;
  if (at) A.taken[A.n++] = (struct taken){at, span};
  pthread_mutex_unlock(&A.lock);
  return at;
}

void ferry_alias_give(uint64_t alias) {
  pthread_mutex_lock(&A.lock);
  for (size_t i = 0; i < A.n; i++)
    if (A.taken[i].at == alias) {
      A.taken[i] = A.taken[--A.n];
      break;
    }
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
