/*
 * mem_hash, migration's change check: ferry_chunk_hash itself (fixed
 * values, zero padding, the GPU kernel's order of summing), and the call
 * through an executor on the CPU simulation, whose built-in twin of ferry's
 * kernel must give exactly ferry_chunk_hash of the same bytes; refusals come
 * before any kernel runs, so a bad range never faults the context.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/chunk_hash.h"
#include "executor/exec.h"

#define MiB (1ull << 20)
#define ARENA 0x200000000000ull
#define ARENA_SIZE (1ull << 40)
#define BASE (ARENA + 64 * MiB)
#define MAX_PIECES (1u << 16)

enum { OK = 0, INVALID_VALUE = 1 };

extern const char ferry_hash_ptx[]; /* the executor's embedded PTX */

static const struct ferry_driver *drv;
static struct ferry_exec *ex;
static unsigned char *shadow; /* what the test wrote at BASE, 4 MiB */

/* ---- the hash alone ---- */

/* the definition, written out plainly: bytes assembled into words one by one */
static uint64_t spec_hash(const unsigned char *p, uint64_t len) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i * 8 < len; i++) {
    uint64_t w = 0;
    for (unsigned k = 0; k < 8 && i * 8 + k < len; k++)
      w |= (uint64_t)p[i * 8 + k] << (8 * k);
    sum += ferry_mix64(w + (i + 1) * 0x9E3779B97F4A7C15ull);
  }
  return ferry_mix64(sum ^ len);
}

/* the kernel's order: strided per-thread sums, the tail by thread 0, a tree */
static uint64_t kernel_order_hash(const unsigned char *p, uint64_t len) {
  uint64_t part[FERRY_HASH_THREADS] = {0}, nfull = len / 8;
  for (unsigned t = 0; t < FERRY_HASH_THREADS; t++)
    for (uint64_t i = t; i < nfull; i += FERRY_HASH_THREADS) {
      uint64_t w;
      memcpy(&w, p + 8 * i, 8);
      part[t] += ferry_hash_term(w, i);
    }
  if (len % 8)
    part[0] += ferry_hash_term(ferry_hash_tail(p + 8 * nfull, len % 8), nfull);
  for (unsigned s = FERRY_HASH_THREADS / 2; s > 0; s /= 2)
    for (unsigned t = 0; t < s; t++)
      part[t] += part[t + s];
  return ferry_hash_final(part[0], len);
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = (unsigned char)x;
  }
}

static void test_fixed_values(void **state) {
  (void)state;
  unsigned char b[1027];
  for (int i = 0; i < 1024; i++)
    b[i] = (unsigned char)i;
  memcpy(b + 1024, "abc", 3);
  /* from an independent implementation: a change here changes the hashes
     GPUs compute, and hash_kernel.ptx must be made again */
  assert_int_equal(ferry_chunk_hash(b, 0), 0);
  assert_int_equal(ferry_chunk_hash("\0\0\0\0\0\0\0\0", 8), 0x2756f015088477d6ull);
  assert_int_equal(ferry_chunk_hash("ferry", 5), 0x2555f10f1beb75a7ull);
  assert_int_equal(ferry_chunk_hash(b, 20), 0xe11fa8db4423f43cull);
  assert_int_equal(ferry_chunk_hash(b, 1027), 0x8aef95ad0ca4339aull);
}

static void test_definition_and_kernel_order(void **state) {
  (void)state;
  size_t max = 8 * FERRY_HASH_THREADS * 3 + 13;
  unsigned char *b = malloc(max);
  assert_non_null(b);
  fill(b, max, 1);
  for (size_t len = 0; len <= max; len += len < 80 ? 1 : 97) {
    assert_int_equal(ferry_chunk_hash(b, len), spec_hash(b, len));
    assert_int_equal(kernel_order_hash(b, len), spec_hash(b, len));
  }
  free(b);
}

static void test_padding_and_position(void **state) {
  (void)state;
  const unsigned char five[8] = {1, 2, 3, 4, 5, 0, 0, 0};
  /* the same words, but len is mixed in */
  assert_int_not_equal(ferry_chunk_hash(five, 5), ferry_chunk_hash(five, 8));
  assert_int_not_equal(ferry_chunk_hash(five, 0), ferry_chunk_hash("\0\0\0\0\0\0\0\0", 8));
  /* swapped words: each word's term depends on its position */
  uint64_t ab[2] = {1, 2}, ba[2] = {2, 1};
  assert_int_not_equal(ferry_chunk_hash(ab, 16), ferry_chunk_hash(ba, 16));
}

/* ---- through the executor ---- */

static int call_mem_hash(const uint64_t *pairs, uint32_t nranges, uint64_t chunk, ferry_blob *out) {
  struct ferry_mem_hash_args a = {.ranges = {pairs, nranges * 16}, .chunk = chunk};
  struct ferry_mem_hash_rets r = {.hashes = {NULL, 12345}};
  int rc = ferry_exec_call(ex, FERRY_CALL_mem_hash, &a, &r, NULL);
  if (out)
    *out = r.hashes;
  return rc;
}

static int map(uint64_t addr, uint64_t size) {
  struct ferry_mem_map_args a = {.addr = addr, .size = size};
  struct ferry_mem_map_rets r;
  return ferry_exec_call(ex, FERRY_CALL_mem_map, &a, &r, NULL);
}

struct mem_in {
  const unsigned char *p;
};
static int mem_read(void *ctx, void *dst, size_t n) {
  struct mem_in *m = ctx;
  memcpy(dst, m->p, n);
  m->p += n;
  return 0;
}

/* writes bytes at BASE + off through the executor, and into the shadow */
static void put(uint64_t off, const void *p, uint64_t n) {
  struct mem_in m = {p};
  struct ferry_bulk_in in = {n, mem_read, &m};
  struct ferry_io io = {.in = &in};
  struct ferry_memcpy_htod_args a = {.dst = BASE + off, .stream = 0};
  struct ferry_memcpy_htod_rets r;
  assert_int_equal(ferry_exec_call(ex, FERRY_CALL_memcpy_htod, &a, &r, &io), OK);
  memmove(shadow + off, p, n);
}

/* the simulation's table with ModuleLoadData counted (test_loaded_once) */
static struct ferry_driver counting;
static int count_loads, loads;
static CUresult (*real_load)(CUmodule *, const void *);
static CUresult counted_load(CUmodule *m, const void *image) {
  loads++;
  return real_load(m, image);
}

/* 4 MiB at BASE as two adjacent mappings, filled with seeded bytes */
static void open_exec(const char *twins) {
  char err[256];
  drv = ferry_driver_sim(twins, err, sizeof err);
  assert_non_null(drv);
  if (count_loads) {
    counting = *drv;
    real_load = drv->ModuleLoadData;
    counting.ModuleLoadData = counted_load;
    drv = &counting;
    loads = 0;
  }
  ex = ferry_exec_open(drv, 0, ARENA, ARENA_SIZE, err, sizeof err);
  assert_non_null(ex);
  assert_int_equal(map(BASE, 2 * MiB), OK);
  assert_int_equal(map(BASE + 2 * MiB, 2 * MiB), OK);
  unsigned char *b = malloc(4 * MiB);
  assert_non_null(b);
  fill(b, 4 * MiB, 7);
  put(0, b, 4 * MiB);
  free(b);
}

static int setup(void **state) {
  (void)state;
  shadow = malloc(4 * MiB);
  return shadow ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ferry_exec_close(ex);
  ex = NULL;
  free(shadow);
  return 0;
}

/* every piece's hash equals ferry_chunk_hash of the shadow's bytes */
static void expect_hashes(const uint64_t *pairs, uint32_t nranges, uint64_t chunk) {
  ferry_blob h;
  assert_int_equal(call_mem_hash(pairs, nranges, chunk, &h), OK);
  uint64_t k = 0;
  for (uint32_t i = 0; i < nranges; i++) {
    uint64_t off = pairs[2 * i] - BASE, size = pairs[2 * i + 1];
    for (uint64_t at = 0; at < size; at += chunk, k++) {
      uint64_t len = size - at < chunk ? size - at : chunk, got;
      assert_true((k + 1) * 8 <= h.len);
      memcpy(&got, (const char *)h.ptr + 8 * k, 8);
      assert_int_equal(got, ferry_chunk_hash(shadow + off + at, len));
    }
  }
  assert_int_equal(h.len, k * 8);
}

static void test_matches_cpu(void **state) {
  (void)state;
  open_exec(NULL);
  uint64_t pairs[] = {
      BASE, 1 * MiB,                  /* whole chunks */
      BASE + 8, 100003,               /* neither a multiple of chunk nor of 8 */
      BASE + 2 * MiB - 4096, 8192 + 5, /* across the two mappings */
      BASE + 3 * MiB, 0,              /* no pieces */
      BASE + 4 * MiB - 24, 24,        /* the very end, shorter than a chunk */
  };
  expect_hashes(pairs, 5, 64 * 1024);
  expect_hashes(pairs + 2, 4, 8); /* the first range has too many 8-byte pieces */
  expect_hashes(pairs + 2, 1, 4096 + 8);
  /* a piece of a whole mapping: 2 MiB, and the whole 4 MiB in one piece */
  uint64_t whole[] = {BASE, 4 * MiB};
  expect_hashes(whole, 1, 2 * MiB);
  expect_hashes(whole, 1, 4 * MiB);
  /* no ranges at all: no hashes */
  ferry_blob h;
  assert_int_equal(call_mem_hash(NULL, 0, 8, &h), OK);
  assert_int_equal(h.len, 0);
}

static void test_one_byte_changes_one_piece(void **state) {
  (void)state;
  open_exec(NULL);
  uint64_t pairs[] = {BASE + 4096, 10 * 4096 + 3, BASE + 3 * MiB, 5 * 512};
  const uint64_t chunk = 4096;
  const uint32_t n = 11 + 1;
  uint64_t before[12], after[12];
  ferry_blob h;
  assert_int_equal(call_mem_hash(pairs, 2, chunk, &h), OK);
  assert_int_equal(h.len, n * 8);
  memcpy(before, h.ptr, h.len);
  /* bytes in piece 3, in the short last piece 10, in the second range's piece */
  const uint64_t offs[] = {4096 + 3 * 4096 + 77, 4096 + 10 * 4096 + 2, 3 * MiB + 2559};
  const uint32_t piece[] = {3, 10, 11};
  for (int t = 0; t < 3; t++) {
    unsigned char c = shadow[offs[t]] ^ 0x10;
    put(offs[t], &c, 1);
    assert_int_equal(call_mem_hash(pairs, 2, chunk, &h), OK);
    memcpy(after, h.ptr, h.len);
    for (uint32_t k = 0; k < n; k++) {
      if (k == piece[t])
        assert_int_not_equal(after[k], before[k]);
      else
        assert_int_equal(after[k], before[k]);
    }
    memcpy(before, after, sizeof after);
  }
  /* the byte after a short piece's end is not part of it */
  unsigned char c = shadow[4096 + 10 * 4096 + 3] ^ 1;
  put(4096 + 10 * 4096 + 3, &c, 1);
  assert_int_equal(call_mem_hash(pairs, 2, chunk, &h), OK);
  assert_memory_equal(h.ptr, before, n * 8);
}

static void test_refused(void **state) {
  (void)state;
  open_exec(NULL);
  uint64_t ok[] = {BASE, 4096};
  assert_int_equal(call_mem_hash(ok, 1, 64, NULL), OK);
  uint64_t unaligned[] = {BASE, 64, BASE + 4, 64};
  assert_int_equal(call_mem_hash(unaligned, 2, 64, NULL), INVALID_VALUE);
  assert_int_equal(call_mem_hash(ok, 1, 0, NULL), INVALID_VALUE);
  assert_int_equal(call_mem_hash(ok, 1, 12, NULL), INVALID_VALUE);
  assert_int_equal(call_mem_hash(ok, 1, 4, NULL), INVALID_VALUE);
  /* ranges that are not whole {addr, size} pairs */
  struct ferry_mem_hash_args a = {.ranges = {ok, 15}, .chunk = 64};
  struct ferry_mem_hash_rets r;
  assert_int_equal(ferry_exec_call(ex, FERRY_CALL_mem_hash, &a, &r, NULL), INVALID_VALUE);
  /* the most pieces one call may have, and one more, also over two ranges */
  uint64_t most[] = {BASE, MAX_PIECES * 8ull};
  ferry_blob h;
  assert_int_equal(call_mem_hash(most, 1, 8, &h), OK);
  assert_int_equal(h.len, MAX_PIECES * 8);
  uint64_t more[] = {BASE, MAX_PIECES * 8ull + 1};
  assert_int_equal(call_mem_hash(more, 1, 8, NULL), INVALID_VALUE);
  uint64_t split[] = {BASE, MAX_PIECES * 4ull, BASE + MiB, MAX_PIECES * 4ull + 8};
  assert_int_equal(call_mem_hash(split, 2, 8, NULL), INVALID_VALUE);
  /* a range whose end wraps around */
  uint64_t wrap[] = {BASE, UINT64_MAX - BASE + 9};
  assert_int_equal(call_mem_hash(wrap, 1, 1ull << 62, NULL), INVALID_VALUE);
}

static void test_unmapped_is_an_error(void **state) {
  (void)state;
  open_exec(NULL);
  uint64_t bad[][2] = {
      {BASE + 4 * MiB, 64},       /* in the arena, never mapped */
      {BASE + 4 * MiB - 64, 128}, /* runs past the last mapping */
      {BASE - 8, 64},             /* starts before the first */
      {0x1000, 64},               /* outside the arena */
      {ARENA + 2 * ARENA_SIZE, 8},
  };
  for (int i = 0; i < 5; i++)
    assert_int_not_equal(call_mem_hash(bad[i], 1, 64, NULL), OK);
  /* with good ranges before it, nothing is hashed either */
  uint64_t mixed[] = {BASE, 4096, BASE + 8 * MiB, 4096};
  assert_int_not_equal(call_mem_hash(mixed, 2, 64, NULL), OK);
  /* the context took no fault: the session goes on */
  struct ferry_device_synchronize_args sa;
  struct ferry_device_synchronize_rets sr;
  assert_int_equal(ferry_exec_call(ex, FERRY_CALL_device_synchronize, &sa, &sr, NULL), OK);
  uint64_t ok[] = {BASE, 8192};
  expect_hashes(ok, 1, 4096);
}

/* a device reset frees the kernel's module and buffer; the next call loads them again */
static void test_after_reset(void **state) {
  (void)state;
  open_exec(NULL);
  uint64_t ok[] = {BASE + 16, 3 * 4096 + 1};
  expect_hashes(ok, 1, 4096);
  struct ferry_device_reset_args ra;
  struct ferry_device_reset_rets rr;
  assert_int_equal(ferry_exec_call(ex, FERRY_CALL_device_reset, &ra, &rr, NULL), OK);
  assert_int_equal(map(BASE, 2 * MiB), OK);
  assert_int_equal(map(BASE + 2 * MiB, 2 * MiB), OK);
  put(0, shadow, 4 * MiB);
  expect_hashes(ok, 1, 4096);
}

/* the kernel is loaded once, by the first call that is not refused, even
   one with no ranges (a warm-up before a migration's pause) */
static void test_loaded_once(void **state) {
  (void)state;
  count_loads = 1;
  open_exec(NULL);
  count_loads = 0;
  uint64_t ok[] = {BASE, 8192};
  assert_int_equal(call_mem_hash(ok, 1, 12, NULL), INVALID_VALUE);
  assert_int_equal(loads, 0);
  ferry_blob h;
  assert_int_equal(call_mem_hash(NULL, 0, 8, &h), OK);
  assert_int_equal(h.len, 0);
  assert_int_equal(loads, 1);
  expect_hashes(ok, 1, 4096);
  expect_hashes(ok, 1, 64);
  assert_int_equal(loads, 1);
}

/* the built-in twin is found beside a loaded twins table */
static void test_with_twins_table(void **state) {
  (void)state;
  open_exec(UNIT_TWINS);
  uint64_t ok[] = {BASE + 8, MiB + 5};
  expect_hashes(ok, 1, 65536);
}

/* the simulation takes the embedded PTX, finds the kernel, and its twin's
   layout is the PTX's: two 8-byte parameters */
static void test_ptx_and_twin_layout(void **state) {
  (void)state;
  open_exec(NULL);
  const char *entry = strstr(ferry_hash_ptx, ".entry " FERRY_HASH_KERNEL "(");
  assert_non_null(entry);
  const char *end = strchr(entry, ')');
  assert_non_null(end);
  unsigned nparams = 0, nu64 = 0;
  for (const char *p = strstr(entry, ".param "); p && p < end; p = strstr(p + 1, ".param "))
    nparams++, nu64 += strncmp(p, ".param .u64 ", 12) == 0;
  assert_int_equal(nparams, 2);
  assert_int_equal(nu64, 2);

  CUmodule mod;
  CUfunction fn;
  unsigned count = 0;
  assert_int_equal(drv->ModuleLoadData(&mod, ferry_hash_ptx), CUDA_SUCCESS);
  assert_int_equal(drv->ModuleGetFunctionCount(&count, mod), CUDA_SUCCESS);
  assert_int_equal(count, 1);
  assert_int_equal(drv->ModuleGetFunction(&fn, mod, FERRY_HASH_KERNEL), CUDA_SUCCESS);
  size_t off = 99, size = 99;
  assert_int_equal(drv->FuncGetParamInfo(fn, 0, &off, &size), CUDA_SUCCESS);
  assert_int_equal(off, 0);
  assert_int_equal(size, 8);
  assert_int_equal(drv->FuncGetParamInfo(fn, 1, &off, &size), CUDA_SUCCESS);
  assert_int_equal(off, 8);
  assert_int_equal(size, 8);
  assert_int_equal(drv->FuncGetParamInfo(fn, 2, &off, &size), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(drv->ModuleUnload(mod), CUDA_SUCCESS);
  /* a fat binary container does not get the built-in twin */
  static const unsigned char fatbin[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0};
  assert_int_equal(drv->ModuleLoadData(&mod, fatbin), CUDA_SUCCESS);
  assert_int_equal(drv->ModuleGetFunction(&fn, mod, FERRY_HASH_KERNEL), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(drv->ModuleUnload(mod), CUDA_SUCCESS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixed_values),
      cmocka_unit_test(test_definition_and_kernel_order),
      cmocka_unit_test(test_padding_and_position),
      cmocka_unit_test_setup_teardown(test_matches_cpu, setup, teardown),
      cmocka_unit_test_setup_teardown(test_one_byte_changes_one_piece, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unmapped_is_an_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_after_reset, setup, teardown),
      cmocka_unit_test_setup_teardown(test_loaded_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_with_twins_table, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ptx_and_twin_layout, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
