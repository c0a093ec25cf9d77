/*
 * The executor against the CPU simulation: arena reservation at the
 * client's address, mappings, bulk copies in several chunks, deferred
 * device-to-host copies, module loading with parameter layouts, kernels and
 * variables resolved one name at a time (the driver API's calls), 16- and
 * 32-bit memsets, launches, error latching of ASYNC calls and recovery by
 * device_reset, and the calls that wait in two steps (local mode's).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "executor/exec.h"

#define MiB (1ull << 20)
#define ARENA 0x200000000000ull
#define ARENA_SIZE (1ull << 40)

/* cudaError_t values the tests expect */
enum { OK = 0, INVALID_VALUE = 1, INVALID_PITCH = 12, INVALID_DEVICE_FUNC = 98,
       INVALID_IMAGE = 200, INVALID_HANDLE = 400, NOT_FOUND = 500, ILLEGAL_ADDRESS = 700 };

static const struct ferry_driver *drv;
static struct ferry_exec *ex;

/* ---- bulk bytes from and to memory ---- */

struct mem_in {
  const unsigned char *data; /* NULL: zeros */
  uint64_t pos;
  unsigned reads;
};
static int mem_read(void *ctx, void *dst, size_t n) {
  struct mem_in *m = ctx;
  if (m->data)
    memcpy(dst, m->data + m->pos, n);
  else
    memset(dst, 0, n);
  m->pos += n;
  m->reads++;
  return 0;
}

struct mem_out {
  unsigned char *data;
  uint64_t len, announced;
  int begun;
  unsigned writes;
};
static int mem_begin(void *ctx, uint64_t len) {
  struct mem_out *m = ctx;
  m->begun++;
  m->announced = len;
  m->data = realloc(m->data, len ? len : 1);
  m->len = 0;
  return m->data ? 0 : -1;
}
static int mem_write(void *ctx, const void *p, size_t n) {
  struct mem_out *m = ctx;
  assert_true(m->len + n <= m->announced);
  memcpy(m->data + m->len, p, n);
  m->len += n;
  m->writes++;
  return 0;
}

static int call_in(unsigned call, const void *args, void *rets, const void *data, uint64_t len,
                   struct mem_in *st) {
  struct mem_in local = {data, 0, 0};
  if (!st)
    st = &local;
  st->data = data;
  struct ferry_bulk_in in = {len, mem_read, st};
  struct ferry_io io = {.in = &in};
  return ferry_exec_call(ex, call, args, rets, &io);
}

static int call_out(unsigned call, const void *args, void *rets, struct mem_out *out) {
  struct ferry_bulk_out bo = {mem_begin, mem_write, out};
  struct ferry_io io = {.out = &bo};
  return ferry_exec_call(ex, call, args, rets, &io);
}

static int call0(unsigned call, const void *args, void *rets) {
  return ferry_exec_call(ex, call, args, rets, NULL);
}

static int map(uint64_t addr, uint64_t size) {
  struct ferry_mem_map_args a = {.addr = addr, .size = size};
  struct ferry_mem_map_rets r;
  return call0(FERRY_CALL_mem_map, &a, &r);
}

static int unmap(uint64_t addr, uint64_t size) {
  struct ferry_mem_unmap_args a = {.addr = addr, .size = size};
  struct ferry_mem_unmap_rets r;
  return call0(FERRY_CALL_mem_unmap, &a, &r);
}

static int htod(uint64_t dst, const void *p, uint64_t n, struct mem_in *st) {
  struct ferry_memcpy_htod_args a = {.dst = dst, .stream = 0};
  struct ferry_memcpy_htod_rets r;
  return call_in(FERRY_CALL_memcpy_htod, &a, &r, p, n, st);
}

static int dtoh(uint64_t src, uint64_t n, struct mem_out *out) {
  struct ferry_memcpy_dtoh_args a = {.src = src, .size = n, .stream = 0};
  struct ferry_memcpy_dtoh_rets r;
  return call_out(FERRY_CALL_memcpy_dtoh, &a, &r, out);
}

static int setup(void **state) {
  (void)state;
  char err[256];
  drv = ferry_driver_sim(UNIT_TWINS, err, sizeof err);
  if (!drv)
    return -1;
  ex = ferry_exec_open(drv, 0, ARENA, ARENA_SIZE, err, sizeof err);
  return ex ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ferry_exec_close(ex);
  ex = NULL;
  return 0;
}

/* ---- tests ---- */

static void test_open_errors(void **state) {
  (void)state;
  char err[256] = "";
  assert_null(ferry_exec_open(drv, 3, ARENA, ARENA_SIZE, err, sizeof err));
  assert_string_equal(err, "GPU 3 out of range: this server has 1 GPU(s)");
  /* the arena of a second session overlaps ours: the hint is taken */
  err[0] = '\0';
  assert_null(ferry_exec_open(drv, 0, ARENA + (1ull << 30), 1ull << 30, err, sizeof err));
  assert_non_null(strstr(err, "already in use"));
  assert_null(ferry_exec_open(drv, 0, ARENA + 4096, 1ull << 30, err, sizeof err));
  assert_non_null(strstr(err, "granularity"));
}

static void test_describe(void **state) {
  (void)state;
  struct ferry_hello_rets r;
  char name[128];
  int32_t attrs[FERRY_NATTRS];
  uint8_t uuid[16];
  assert_int_equal(ferry_exec_describe(ex, &r, name, sizeof name, attrs, FERRY_NATTRS, uuid), OK);
  assert_string_equal(r.name, "ferry CPU simulation (sm_90)");
  assert_int_equal(r.granularity, 2 * MiB);
  assert_int_equal(r.total_mem, 80ull << 30);
  assert_int_equal(r.driver_version, 13000);
  assert_int_equal(r.attrs.len, FERRY_NATTRS * 4);
  assert_int_equal(r.uuid.len, 16);
  assert_int_equal(attrs[0], 0);
  assert_int_equal(attrs[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT], 132);
  assert_int_equal(attrs[CU_DEVICE_ATTRIBUTE_WARP_SIZE], 32);
  assert_int_equal(attrs[FERRY_NATTRS - 1], 0); /* beyond the driver's enum */
}

static void test_mem_map(void **state) {
  (void)state;
  assert_int_equal(map(ARENA + 4096, 2 * MiB), INVALID_VALUE);        /* unaligned */
  assert_int_equal(map(ARENA, 3 * MiB), INVALID_VALUE);               /* size */
  assert_int_equal(map(ARENA - 2 * MiB, 2 * MiB), INVALID_VALUE);     /* below the arena */
  assert_int_equal(map(ARENA + ARENA_SIZE, 2 * MiB), INVALID_VALUE);  /* above */
  assert_int_equal(map(ARENA + 10 * MiB, 4 * MiB), OK);
  assert_int_equal(map(ARENA + 12 * MiB, 4 * MiB), INVALID_VALUE);    /* overlaps */
  assert_int_equal(map(ARENA + 8 * MiB, 4 * MiB), INVALID_VALUE);     /* overlaps */
  assert_int_equal(map(ARENA + 14 * MiB, 2 * MiB), OK);
  /* device pointers are the client's: the bytes are at that very address */
  memset((void *)(uintptr_t)(ARENA + 10 * MiB), 0x5a, 16);
  struct ferry_mem_get_info_args ga = {0};
  struct ferry_mem_get_info_rets gr;
  assert_int_equal(call0(FERRY_CALL_mem_get_info, &ga, &gr), OK);
  assert_int_equal(gr.total_bytes - gr.free_bytes, 6 * MiB);
  assert_int_equal(unmap(ARENA + 10 * MiB, 2 * MiB), INVALID_VALUE); /* not what was mapped */
  assert_int_equal(unmap(ARENA + 10 * MiB, 4 * MiB), OK);
  assert_int_equal(unmap(ARENA + 10 * MiB, 4 * MiB), INVALID_VALUE);
  assert_int_equal(unmap(ARENA + 14 * MiB, 2 * MiB), OK);
}

static void test_roundtrip_multichunk(void **state) {
  (void)state;
  const uint64_t n = 9 * MiB + 123;
  unsigned char *src = malloc(n);
  for (uint64_t i = 0; i < n; i++)
    src[i] = (unsigned char)(i * 7 + (i >> 13));
  assert_int_equal(map(ARENA, 16 * MiB), OK);
  struct mem_in st = {0};
  assert_int_equal(htod(ARENA + 5, src, n, &st), OK);
  assert_int_equal(st.pos, n);
  assert_true(st.reads >= 3); /* chunked */
  assert_memory_equal((void *)(uintptr_t)(ARENA + 5), src, n);
  struct mem_out out = {0};
  assert_int_equal(dtoh(ARENA + 5, n, &out), OK);
  assert_int_equal(out.begun, 1);
  assert_int_equal(out.len, n);
  assert_memory_equal(out.data, src, n);
  /* async flavour of host-to-device */
  struct ferry_memcpy_htod_async_args aa = {.dst = ARENA + 1, .stream = 2};
  struct ferry_memcpy_htod_async_rets ar;
  assert_int_equal(call_in(FERRY_CALL_memcpy_htod_async, &aa, &ar, src + 100, 5 * MiB, NULL), OK);
  assert_memory_equal((void *)(uintptr_t)(ARENA + 1), src + 100, 5 * MiB);
  free(out.data);
  free(src);
  assert_int_equal(unmap(ARENA, 16 * MiB), OK);
}

static void test_copy_errors_keep_framing(void **state) {
  (void)state;
  assert_int_equal(map(ARENA, 4 * MiB), OK);
  /* past the mapping: the error comes back and every bulk byte was read */
  struct mem_in st = {0};
  assert_int_equal(htod(ARENA + MiB, NULL, 6 * MiB, &st), INVALID_VALUE);
  assert_int_equal(st.pos, 6 * MiB);
  struct ferry_memcpy_htod_args a = {.dst = ARENA, .stream = 77};
  struct ferry_memcpy_htod_rets r;
  st = (struct mem_in){0};
  assert_int_equal(call_in(FERRY_CALL_memcpy_htod, &a, &r, NULL, 1000, &st), INVALID_HANDLE);
  assert_int_equal(st.pos, 1000);
  /* a device-to-host copy failing in its first chunk sends no bulk at all */
  struct mem_out out = {0};
  assert_int_equal(dtoh(ARENA + 5 * MiB, 100, &out), INVALID_VALUE);
  assert_int_equal(out.begun, 0);
  /* failing in a later chunk: all bytes still go out, the error is reported */
  memset((void *)(uintptr_t)ARENA, 0x77, 4 * MiB);
  assert_int_equal(dtoh(ARENA, 6 * MiB, &out), INVALID_VALUE);
  assert_int_equal(out.begun, 1);
  assert_int_equal(out.announced, 6 * MiB);
  assert_int_equal(out.len, 6 * MiB);
  assert_int_equal(out.data[6 * MiB - 1], 0);
  free(out.data);
  assert_int_equal(unmap(ARENA, 4 * MiB), OK);
}

struct got {
  uint64_t tokens[8];
  unsigned char first[8];
  size_t sizes[8];
  int n;
};
static int on_deferred(void *ctx, uint64_t token, const void *p, size_t n, const char *refused) {
  assert_null(refused); /* no limit set here */
  struct got *g = ctx;
  assert_true(g->n < 8);
  g->tokens[g->n] = token;
  g->sizes[g->n] = n;
  g->first[g->n] = n ? *(const unsigned char *)p : 0;
  g->n++;
  return 0;
}

static void test_deferred_dtoh(void **state) {
  (void)state;
  assert_int_equal(map(ARENA, 2 * MiB), OK);
  memset((void *)(uintptr_t)ARENA, 0x11, 4096);
  memset((void *)(uintptr_t)(ARENA + 4096), 0x22, 4096);
  struct ferry_memcpy_dtoh_async_args a = {.src = ARENA, .size = 4096, .stream = 0, .token = 7};
  struct ferry_memcpy_dtoh_async_rets r;
  assert_int_equal(call0(FERRY_CALL_memcpy_dtoh_async, &a, &r), OK);
  a.src = ARENA + 4096, a.token = 8;
  assert_int_equal(call0(FERRY_CALL_memcpy_dtoh_async, &a, &r), OK);
  a.src = ARENA + 4 * MiB, a.token = 9; /* unmapped: delivered empty, error latched */
  assert_int_equal(call0(FERRY_CALL_memcpy_dtoh_async, &a, &r), INVALID_VALUE);
  struct got g = {0};
  assert_int_equal(ferry_exec_flush_deferred(ex, on_deferred, &g), 0);
  assert_int_equal(g.n, 3);
  assert_int_equal(g.tokens[0], 7);
  assert_int_equal(g.first[0], 0x11);
  assert_int_equal(g.sizes[0], 4096);
  assert_int_equal(g.tokens[1], 8);
  assert_int_equal(g.first[1], 0x22);
  assert_int_equal(g.tokens[2], 9);
  assert_int_equal(g.sizes[2], 0);
  assert_int_equal(ferry_exec_take_async_error(ex), INVALID_VALUE);
  g.n = 0;
  assert_int_equal(ferry_exec_flush_deferred(ex, on_deferred, &g), 0);
  assert_int_equal(g.n, 0);
  assert_int_equal(unmap(ARENA, 2 * MiB), OK);
}

/* copies below the staging size are still cut into chunks (so the network
   and the DMA overlap), tiny ones are not; pitched rows cut by chunks too */
static void test_medium_copies_chunked(void **state) {
  (void)state;
  const uint64_t n = 300000; /* chunks of 128 KiB: three of them */
  unsigned char *src = malloc(n);
  for (uint64_t i = 0; i < n; i++)
    src[i] = (unsigned char)(i * 11 + (i >> 10));
  assert_int_equal(map(ARENA, 2 * MiB), OK);
  struct mem_in st = {0};
  assert_int_equal(htod(ARENA + 3, src, 4000, &st), OK);
  assert_int_equal(st.reads, 1);
  st = (struct mem_in){0};
  assert_int_equal(htod(ARENA + 3, src, n, &st), OK);
  assert_int_equal(st.reads, 3);
  assert_memory_equal((void *)(uintptr_t)(ARENA + 3), src, n);
  struct mem_out out = {0};
  assert_int_equal(dtoh(ARENA + 3, n, &out), OK);
  assert_int_equal(out.writes, 3);
  assert_int_equal(out.len, n);
  assert_memory_equal(out.data, src, n);
  /* 300 rows of 1000 bytes at pitch 1024: 128 KiB chunks end mid-row */
  const uint64_t w = 1000, h = 300, pitch = 1024;
  struct ferry_memcpy2d_htod_args a = {.dst = ARENA + MiB, .dpitch = pitch, .width = w, .height = h};
  struct ferry_memcpy2d_htod_rets r;
  st = (struct mem_in){0};
  assert_int_equal(call_in(FERRY_CALL_memcpy2d_htod, &a, &r, src, w * h, &st), OK);
  assert_int_equal(st.reads, 3);
  const unsigned char *dev = (const unsigned char *)(uintptr_t)(ARENA + MiB);
  for (uint64_t y = 0; y < h; y++)
    assert_memory_equal(dev + y * pitch, src + y * w, w);
  struct ferry_memcpy2d_dtoh_args b = {.src = ARENA + MiB, .spitch = pitch, .width = w, .height = h};
  struct ferry_memcpy2d_dtoh_rets br;
  struct mem_out out2 = {0};
  assert_int_equal(call_out(FERRY_CALL_memcpy2d_dtoh, &b, &br, &out2), OK);
  assert_int_equal(out2.writes, 3);
  assert_int_equal(out2.len, w * h);
  assert_memory_equal(out2.data, src, w * h);
  free(out.data);
  free(out2.data);
  free(src);
  assert_int_equal(unmap(ARENA, 2 * MiB), OK);
}

static void test_2d_and_memset(void **state) {
  (void)state;
  assert_int_equal(map(ARENA, 16 * MiB), OK);
  /* 3000 x 3000 packed bytes into rows of pitch 4096: chunks cut rows */
  const uint64_t w = 3000, h = 3000, pitch = 4096;
  unsigned char *src = malloc(w * h);
  for (uint64_t i = 0; i < w * h; i++)
    src[i] = (unsigned char)(i % 251);
  struct ferry_memcpy2d_htod_args a = {.dst = ARENA, .dpitch = pitch, .width = w, .height = h};
  struct ferry_memcpy2d_htod_rets r;
  assert_int_equal(call_in(FERRY_CALL_memcpy2d_htod, &a, &r, src, w * h, NULL), OK);
  const unsigned char *dev = (const unsigned char *)(uintptr_t)ARENA;
  assert_memory_equal(dev + 1234 * pitch, src + 1234 * w, w);
  assert_memory_equal(dev + 2999 * pitch, src + 2999 * w, w);
  struct ferry_memcpy2d_dtoh_args b = {.src = ARENA, .spitch = pitch, .width = w, .height = h};
  struct ferry_memcpy2d_dtoh_rets br;
  struct mem_out out = {0};
  assert_int_equal(call_out(FERRY_CALL_memcpy2d_dtoh, &b, &br, &out), OK);
  assert_int_equal(out.len, w * h);
  assert_memory_equal(out.data, src, w * h);
  a.dpitch = 100; /* below the width */
  assert_int_equal(call_in(FERRY_CALL_memcpy2d_htod, &a, &r, src, w * h, NULL), INVALID_PITCH);
  a.dpitch = pitch; /* bulk length disagrees with width * height */
  assert_int_equal(call_in(FERRY_CALL_memcpy2d_htod, &a, &r, src, w * h - 1, NULL), INVALID_VALUE);
  /* memset, memset2d (value & 0xff), dtod, 2D dtod */
  struct ferry_memset_args ms = {.dst = ARENA, .value = 0x1ab, .size = 100};
  struct ferry_memset_rets msr;
  assert_int_equal(call0(FERRY_CALL_memset, &ms, &msr), OK);
  assert_int_equal(dev[99], 0xab);
  struct ferry_memset2d_args m2 = {.dst = ARENA + 12 * MiB, .pitch = 64, .value = 3, .width = 10, .height = 4};
  struct ferry_memset2d_rets m2r;
  assert_int_equal(call0(FERRY_CALL_memset2d, &m2, &m2r), OK);
  assert_int_equal(dev[12 * MiB + 3 * 64 + 9], 3);
  assert_int_equal(dev[12 * MiB + 3 * 64 + 10], 0);
  struct ferry_memcpy_dtod_args dd = {.dst = ARENA + 13 * MiB, .src = ARENA, .size = 100};
  struct ferry_memcpy_dtod_rets ddr;
  assert_int_equal(call0(FERRY_CALL_memcpy_dtod, &dd, &ddr), OK);
  assert_int_equal(dev[13 * MiB + 50], 0xab);
  struct ferry_memcpy2d_dtod_args d2 = {.dst = ARENA + 14 * MiB, .dpitch = 16, .src = ARENA + 12 * MiB,
                                        .spitch = 64, .width = 10, .height = 4};
  struct ferry_memcpy2d_dtod_rets d2r;
  assert_int_equal(call0(FERRY_CALL_memcpy2d_dtod, &d2, &d2r), OK);
  assert_int_equal(dev[14 * MiB + 3 * 16 + 9], 3);
  free(out.data);
  free(src);
  assert_int_equal(unmap(ARENA, 16 * MiB), OK);
}

static const unsigned char fatbin[32] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 16};

static void load_test_module(uint32_t id, struct ferry_module_load_rets *r) {
  static const char funcs[] = "_Z3incPii\0_Z7missingv\0_Z5mixedPif1Scd\0_Z4pokePi\0_Z8copy_varPiPKi";
  static const char vars[] = "g_counter\0nope\0";
  struct ferry_module_load_args a = {.module = id,
                                     .func_names = {funcs, sizeof funcs},
                                     .var_names = {vars, sizeof vars - 1}};
  assert_int_equal(call_in(FERRY_CALL_module_load, &a, r, fatbin, sizeof fatbin, NULL), OK);
}

static uint32_t u32_at(ferry_blob b, unsigned i) {
  uint32_t v;
  assert_true((i + 1) * 4 <= b.len);
  memcpy(&v, (const char *)b.ptr + i * 4, 4);
  return v;
}

static void test_module_load(void **state) {
  (void)state;
  struct ferry_module_load_rets r;
  load_test_module(1, &r);
  static const uint32_t want[] = {2, 0, 8, 8, 4, 0xFFFFFFFFu, 5, 0, 8, 8, 4, 16, 24, 40, 1, 48, 8,
                                  1, 0, 8, 2, 0, 8, 8, 8};
  assert_int_equal(r.func_layouts.len, sizeof want);
  for (unsigned i = 0; i < sizeof want / 4; i++)
    assert_int_equal(u32_at(r.func_layouts, i), want[i]);
  assert_int_equal(r.var_info.len, 32);
  uint64_t vi[4];
  memcpy(vi, r.var_info.ptr, 32);
  assert_true(vi[0] != 0);
  assert_int_equal(vi[1], 4);
  assert_int_equal(vi[2], 0);
  assert_int_equal(vi[3], 0);
  /* the id is taken now; a bad image is refused and its bytes drained */
  struct ferry_module_load_args a = {.module = 1};
  struct mem_in st = {0};
  assert_int_equal(call_in(FERRY_CALL_module_load, &a, &r, fatbin, sizeof fatbin, &st), INVALID_VALUE);
  assert_int_equal(st.pos, sizeof fatbin);
  static const unsigned char elf[32] = {0x7f, 'E', 'L', 'F'};
  a.module = 2;
  assert_int_equal(call_in(FERRY_CALL_module_load, &a, &r, elf, sizeof elf, NULL), INVALID_IMAGE);
  struct ferry_module_unload_args u = {.module = 1};
  struct ferry_module_unload_rets ur;
  assert_int_equal(call0(FERRY_CALL_module_unload, &u, &ur), OK);
  assert_int_equal(call0(FERRY_CALL_module_unload, &u, &ur), INVALID_HANDLE);
}

static int launch(uint32_t func, uint32_t grid, uint32_t block, uint32_t stream, const void *params,
                  uint32_t len) {
  struct ferry_launch_args a = {.func = func, .gx = grid, .gy = 1, .gz = 1, .bx = block, .by = 1,
                                .bz = 1, .stream = stream, .params = {params, len}};
  struct ferry_launch_rets r;
  return call0(FERRY_CALL_launch, &a, &r);
}

static void test_launch_and_latching(void **state) {
  (void)state;
  struct ferry_module_load_rets r;
  load_test_module(3, &r);
  uint64_t var;
  memcpy(&var, r.var_info.ptr, 8);
  assert_int_equal(map(ARENA, 2 * MiB), OK);
  int32_t *dev = (int32_t *)(uintptr_t)ARENA;
  /* inc(int *p = ARENA, int n = 1000) */
  unsigned char params[16] = {0};
  uint64_t p = ARENA;
  int32_t n = 1000;
  memcpy(params, &p, 8);
  memcpy(params + 8, &n, 4);
  assert_int_equal(launch(3u << 16 | 0, 4, 256, 0, params, 12), OK);
  assert_int_equal(launch(3u << 16 | 0, 4, 256, 2, params, 12), OK);
  assert_int_equal(dev[999], 2);
  assert_int_equal(dev[1000], 0);
  assert_int_equal(ferry_exec_take_async_error(ex), OK);
  /* a kernel reads a __device__ variable through a pointer */
  *(int32_t *)(uintptr_t)var = 4242;
  unsigned char cv[16];
  memcpy(cv, &p, 8);
  memcpy(cv + 8, &var, 8);
  assert_int_equal(launch(3u << 16 | 4, 1, 1, 0, cv, 16), OK);
  assert_int_equal(dev[0], 4242);
  /* errors of ASYNC calls latch, first one wins, and reading clears */
  assert_int_equal(launch(3u << 16 | 0, 0, 256, 0, params, 12), INVALID_VALUE);
  assert_int_equal(launch(3u << 16 | 9, 1, 1, 0, params, 12), INVALID_HANDLE);
  assert_int_equal(launch(7u << 16 | 0, 1, 1, 0, params, 12), INVALID_HANDLE);
  assert_int_equal(launch(3u << 16 | 1, 1, 1, 0, params, 12), INVALID_DEVICE_FUNC);
  assert_int_equal(launch(3u << 16 | 0, 1, 1, 99, params, 12), INVALID_HANDLE);
  assert_int_equal(launch(3u << 16 | 0, 1, 1, 0, params, 8), INVALID_VALUE); /* short blob */
  assert_int_equal(ferry_exec_take_async_error(ex), INVALID_VALUE);
  assert_int_equal(ferry_exec_take_async_error(ex), OK);
  /* SYNC calls do not latch */
  assert_int_equal(unmap(ARENA + 100 * MiB, 2 * MiB), INVALID_VALUE);
  assert_int_equal(ferry_exec_take_async_error(ex), OK);
  /* function attributes and occupancy */
  struct ferry_func_get_attributes_args fa = {.func = 3u << 16};
  struct ferry_func_get_attributes_rets far;
  assert_int_equal(call0(FERRY_CALL_func_get_attributes, &fa, &far), OK);
  assert_int_equal(far.attrs.len, CU_FUNC_ATTRIBUTE_MAX * 4);
  assert_int_equal(u32_at(far.attrs, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 1024);
  struct ferry_occupancy_args oa = {.func = 3u << 16, .block_size = 256};
  struct ferry_occupancy_rets orr;
  assert_int_equal(call0(FERRY_CALL_occupancy, &oa, &orr), OK);
  assert_int_equal(orr.blocks, 8);
  struct ferry_func_set_attribute_args sa = {.func = 3u << 16,
      .attr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, .value = 1 << 30};
  struct ferry_func_set_attribute_rets sar;
  assert_int_equal(call0(FERRY_CALL_func_set_attribute, &sa, &sar), INVALID_VALUE);
  struct ferry_module_unload_args u = {.module = 3};
  struct ferry_module_unload_rets ur;
  assert_int_equal(call0(FERRY_CALL_module_unload, &u, &ur), OK);
  assert_int_equal(unmap(ARENA, 2 * MiB), OK);
}

/* launch attributes travel as a CUlaunchAttribute array and reach
   cuLaunchKernelEx; only plain-valued ones are accepted */
static int launch_attrs(uint32_t func, uint32_t grid, uint32_t cooperative, const void *params,
                        uint32_t len, const void *attrs, uint32_t attrs_len) {
  struct ferry_launch_args a = {.func = func, .gx = grid, .gy = 1, .gz = 1, .bx = 64, .by = 1,
                                .bz = 1, .cooperative = cooperative, .params = {params, len},
                                .attrs = {attrs, attrs_len}};
  struct ferry_launch_rets r;
  return call0(FERRY_CALL_launch, &a, &r);
}

static void test_launch_attributes(void **state) {
  (void)state;
  struct ferry_module_load_rets r;
  load_test_module(6, &r);
  assert_int_equal(map(ARENA, 2 * MiB), OK);
  int32_t *dev = (int32_t *)(uintptr_t)ARENA;
  memset(dev, 0, 4096);
  unsigned char params[16] = {0};
  uint64_t p = ARENA;
  int32_t n = 256;
  memcpy(params, &p, 8);
  memcpy(params + 8, &n, 4);
  /* one byte past the array: the blob sits unaligned, as inside a frame */
  static unsigned char raw[17 * sizeof(CUlaunchAttribute) + 1];
  CUlaunchAttribute at[2];
  memset(at, 0, sizeof at);
  at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  at[0].value.clusterDim.x = 2;
  at[0].value.clusterDim.y = 1;
  at[0].value.clusterDim.z = 1;
  at[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  memcpy(raw + 1, at, sizeof at);
  assert_int_equal(launch_attrs(6u << 16, 4, 0, params, 12, raw + 1, sizeof at), OK);
  assert_int_equal(dev[255], 1);
  assert_int_equal(dev[256], 0);
  /* with the cooperative flag beside them */
  assert_int_equal(launch_attrs(6u << 16, 4, 1, params, 12, raw + 1, sizeof at), OK);
  assert_int_equal(dev[0], 2);
  assert_int_equal(ferry_exec_take_async_error(ex), OK);
  /* the driver's own checks: a cluster that does not divide the grid */
  assert_int_equal(launch_attrs(6u << 16, 3, 0, params, 12, raw + 1, sizeof at),
                   912 /* cudaErrorInvalidClusterSize */);
  assert_int_equal(dev[0], 2);
  /* not a whole number of attributes, too many, or one holding a handle */
  assert_int_equal(launch_attrs(6u << 16, 4, 0, params, 12, raw + 1, sizeof at - 1), INVALID_VALUE);
  memset(raw, 0, sizeof raw); /* 17 entries of CU_LAUNCH_ATTRIBUTE_IGNORE */
  assert_int_equal(launch_attrs(6u << 16, 4, 0, params, 12, raw, 16 * sizeof(CUlaunchAttribute)), OK);
  assert_int_equal(launch_attrs(6u << 16, 4, 0, params, 12, raw, 17 * sizeof(CUlaunchAttribute)),
                   INVALID_VALUE);
  CUlaunchAttribute ev;
  memset(&ev, 0, sizeof ev);
  ev.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT;
  ev.value.programmaticEvent.event = (CUevent)(uintptr_t)0xdead;
  assert_int_equal(launch_attrs(6u << 16, 4, 0, params, 12, &ev, sizeof ev), INVALID_VALUE);
  ev.id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
  assert_int_equal(launch_attrs(6u << 16, 4, 0, params, 12, &ev, sizeof ev), INVALID_VALUE);
  ev.id = (CUlaunchAttributeID)99;
  assert_int_equal(launch_attrs(6u << 16, 4, 0, params, 12, &ev, sizeof ev), INVALID_VALUE);
  assert_int_equal(dev[0], 3); /* only the launch of 16 ignored attributes ran */
  assert_int_equal(ferry_exec_take_async_error(ex), 912);
  struct ferry_module_unload_args u = {.module = 6};
  struct ferry_module_unload_rets ur;
  assert_int_equal(call0(FERRY_CALL_module_unload, &u, &ur), OK);
  assert_int_equal(unmap(ARENA, 2 * MiB), OK);
}

/* ---- the driver API's calls: module_function, module_global, memset_wide ---- */

/* a PTX module as cuModuleLoadData takes it: inc and copy_var, no poke */
static const char ptx[] =
    "//\n// a test module\n//\n.version 8.8\n.target sm_90\n.address_size 64\n"
    ".global .align 4 .u32 g_counter;\n"
    ".visible .entry _Z3incPii(\n  .param .u64 p0,\n  .param .u32 p1\n)\n{\n  ret;\n}\n"
    ".visible .entry _Z8copy_varPiPKi(\n  .param .u64 p0,\n  .param .u64 p1\n)\n{\n  ret;\n}\n";

static void load_ptx_module(uint32_t id) {
  struct ferry_module_load_args a = {.module = id}; /* no names up front */
  struct ferry_module_load_rets r;
  assert_int_equal(call_in(FERRY_CALL_module_load, &a, &r, ptx, sizeof ptx, NULL), OK);
  assert_int_equal(r.func_layouts.len, 0);
  assert_int_equal(r.var_info.len, 0);
}

static int module_function(uint32_t module, const char *name, struct ferry_module_function_rets *r) {
  struct ferry_module_function_args a = {.module = module, .name = name};
  memset(r, 0xee, sizeof *r);
  return call0(FERRY_CALL_module_function, &a, r);
}

static void test_module_function(void **state) {
  (void)state;
  load_ptx_module(8);
  struct ferry_module_function_rets r;
  /* indexes in order of first resolution; the same name keeps its index */
  assert_int_equal(module_function(8, "_Z8copy_varPiPKi", &r), OK);
  assert_int_equal(r.index, 0);
  assert_int_equal(module_function(8, "_Z3incPii", &r), OK);
  assert_int_equal(r.index, 1);
  static const uint32_t inc_layout[] = {2, 0, 8, 8, 4};
  assert_int_equal(r.layout.len, sizeof inc_layout);
  for (unsigned i = 0; i < 5; i++)
    assert_int_equal(u32_at(r.layout, i), inc_layout[i]);
  assert_int_equal(module_function(8, "_Z3incPii", &r), OK);
  assert_int_equal(r.index, 1);
  /* absent names: a twin the PTX does not declare, and no kernel at all;
     cudaErrorSymbolNotFound, no violation, and no index used up */
  assert_int_equal(module_function(8, "_Z4pokePi", &r), NOT_FOUND);
  assert_null(ferry_exec_violation(ex));
  assert_int_equal(module_function(8, "nope", &r), NOT_FOUND);
  assert_int_equal(module_function(8, "", &r), NOT_FOUND);
  assert_int_equal(module_function(8, "_Z8copy_varPiPKi", &r), OK);
  assert_int_equal(r.index, 0);
  struct ferry_module_function_args noname = {.module = 8, .name = NULL};
  assert_int_equal(call0(FERRY_CALL_module_function, &noname, &r), INVALID_VALUE);
  /* launched by module << 16 | index */
  assert_int_equal(map(ARENA, 2 * MiB), OK);
  int32_t *dev = (int32_t *)(uintptr_t)ARENA;
  memset(dev, 0, 4096);
  unsigned char params[16] = {0};
  uint64_t p = ARENA;
  int32_t n = 100;
  memcpy(params, &p, 8);
  memcpy(params + 8, &n, 4);
  assert_int_equal(launch(8u << 16 | 1, 1, 128, 0, params, 12), OK);
  assert_int_equal(dev[99], 1);
  assert_int_equal(dev[100], 0);
  assert_int_equal(launch(8u << 16 | 2, 1, 1, 0, params, 12), INVALID_HANDLE); /* never resolved */
  assert_int_equal(ferry_exec_take_async_error(ex), INVALID_HANDLE);
  /* a module that was never loaded is the client's bug */
  assert_int_equal(module_function(9, "_Z3incPii", &r), INVALID_HANDLE);
  assert_non_null(ferry_exec_violation(ex));
  struct ferry_module_unload_args u = {.module = 8};
  struct ferry_module_unload_rets ur;
  assert_int_equal(call0(FERRY_CALL_module_unload, &u, &ur), OK);
  assert_int_equal(module_function(8, "_Z3incPii", &r), INVALID_HANDLE);
  assert_int_equal(unmap(ARENA, 2 * MiB), OK);
}

/* names given to module_load and names resolved later share one list */
static void test_module_function_after_names(void **state) {
  (void)state;
  struct ferry_module_load_rets lr;
  load_test_module(10, &lr); /* inc, missing, mixed, poke, copy_var */
  struct ferry_module_function_rets r;
  assert_int_equal(module_function(10, "_Z4pokePi", &r), OK);
  assert_int_equal(r.index, 3);
  assert_int_equal(module_function(10, "_Z7missingv", &r), NOT_FOUND);
  assert_int_equal(module_function(10, "_Z5emptyv", &r), OK);
  assert_int_equal(r.index, 5);
  assert_int_equal(r.layout.len, 4);
  assert_int_equal(u32_at(r.layout, 0), 0);
  struct ferry_module_unload_args u = {.module = 10};
  struct ferry_module_unload_rets ur;
  assert_int_equal(call0(FERRY_CALL_module_unload, &u, &ur), OK);
}

static void test_module_global(void **state) {
  (void)state;
  load_ptx_module(11);
  struct ferry_module_global_args a = {.module = 11, .name = "g_counter"};
  struct ferry_module_global_rets r = {0};
  assert_int_equal(call0(FERRY_CALL_module_global, &a, &r), OK);
  assert_true(r.addr != 0);
  assert_int_equal(r.size, 4);
  /* the address is the variable the module's kernels use */
  struct ferry_module_function_rets fr;
  assert_int_equal(module_function(11, "_Z8copy_varPiPKi", &fr), OK);
  assert_int_equal(map(ARENA, 2 * MiB), OK);
  *(int32_t *)(uintptr_t)r.addr = 777;
  uint64_t cv[2] = {ARENA, r.addr};
  assert_int_equal(launch(11u << 16 | fr.index, 1, 1, 0, cv, 16), OK);
  assert_int_equal(*(int32_t *)(uintptr_t)ARENA, 777);
  a.name = "no_such_var";
  r.addr = r.size = 1;
  assert_int_equal(call0(FERRY_CALL_module_global, &a, &r), NOT_FOUND);
  assert_int_equal(r.addr, 0);
  assert_int_equal(r.size, 0);
  assert_null(ferry_exec_violation(ex));
  a.module = 12;
  a.name = "g_counter";
  assert_int_equal(call0(FERRY_CALL_module_global, &a, &r), INVALID_HANDLE);
  assert_non_null(ferry_exec_violation(ex));
  struct ferry_module_unload_args u = {.module = 11};
  struct ferry_module_unload_rets ur;
  assert_int_equal(call0(FERRY_CALL_module_unload, &u, &ur), OK);
  assert_int_equal(unmap(ARENA, 2 * MiB), OK);
}

/* images the driver would read past the bytes that came are refused */
static void test_module_image_checked(void **state) {
  (void)state;
  struct ferry_module_load_args a = {.module = 13};
  struct ferry_module_load_rets r;
  /* a container announcing more than was sent */
  unsigned char big[32] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 17};
  assert_int_equal(call_in(FERRY_CALL_module_load, &a, &r, big, sizeof big, NULL), INVALID_IMAGE);
  /* PTX without its NUL inside the bytes sent */
  assert_int_equal(call_in(FERRY_CALL_module_load, &a, &r, ptx, sizeof ptx - 1, NULL), INVALID_IMAGE);
  /* a wrapper is a pointer of the client's process */
  unsigned char wrapper[24] = {0xb1, 0x43, 0x62, 0x46, 1};
  assert_int_equal(call_in(FERRY_CALL_module_load, &a, &r, wrapper, sizeof wrapper, NULL), INVALID_IMAGE);
  assert_int_equal(module_function(13, "_Z3incPii", &(struct ferry_module_function_rets){0}),
                   INVALID_HANDLE); /* none of them was loaded */
}

static int memset_wide(uint64_t dst, uint64_t pitch, uint32_t value, uint32_t elem, uint64_t width,
                       uint64_t height) {
  struct ferry_memset_wide_args a = {.dst = dst, .pitch = pitch, .value = value, .elem = elem,
                                     .width = width, .height = height};
  struct ferry_memset_wide_rets r;
  return call0(FERRY_CALL_memset_wide, &a, &r);
}

static void test_memset_wide(void **state) {
  (void)state;
  assert_int_equal(map(ARENA, 2 * MiB), OK);
  unsigned char *dev = (unsigned char *)(uintptr_t)ARENA;
  memset(dev, 0, 8192);
  /* 1D, 16-bit: height 1, pitch = width * elem; the value's low half */
  assert_int_equal(memset_wide(ARENA + 2, 200, 0xabcd1234u, 2, 100, 1), OK);
  uint16_t h;
  memcpy(&h, dev + 2, 2);
  assert_int_equal(h, 0x1234);
  memcpy(&h, dev + 2 + 99 * 2, 2);
  assert_int_equal(h, 0x1234);
  assert_int_equal(dev[0] | dev[1] | dev[202], 0);
  /* 1D, 32-bit */
  assert_int_equal(memset_wide(ARENA + 1024, 64 * 4, 0xdeadbeefu, 4, 64, 1), OK);
  uint32_t w;
  memcpy(&w, dev + 1024 + 63 * 4, 4);
  assert_int_equal(w, 0xdeadbeefu);
  assert_int_equal(dev[1024 + 256], 0);
  /* 2D, 16-bit and 32-bit: rows of width values, pitch bytes apart */
  assert_int_equal(memset_wide(ARENA + 4096, 64, 0x0102, 2, 10, 3), OK);
  memcpy(&h, dev + 4096 + 2 * 64 + 9 * 2, 2);
  assert_int_equal(h, 0x0102);
  assert_int_equal(dev[4096 + 2 * 64 + 20], 0); /* past the row */
  assert_int_equal(dev[4096 + 3 * 64], 0);      /* past the last row */
  assert_int_equal(memset_wide(ARENA + 6144, 128, 0x11223344u, 4, 30, 4), OK);
  memcpy(&w, dev + 6144 + 3 * 128 + 29 * 4, 4);
  assert_int_equal(w, 0x11223344u);
  assert_int_equal(dev[6144 + 3 * 128 + 120], 0);
  assert_int_equal(ferry_exec_take_async_error(ex), OK);
  /* bad element sizes, misaligned dst, pitch below the row, unmapped rows */
  assert_int_equal(memset_wide(ARENA, 64, 7, 1, 4, 1), INVALID_VALUE);
  assert_int_equal(memset_wide(ARENA, 64, 7, 3, 4, 1), INVALID_VALUE);
  assert_int_equal(memset_wide(ARENA, 64, 7, 8, 4, 1), INVALID_VALUE);
  assert_int_equal(memset_wide(ARENA + 1, 64, 7, 2, 4, 1), INVALID_VALUE);
  assert_int_equal(memset_wide(ARENA + 2, 64, 7, 4, 4, 1), INVALID_VALUE);
  assert_int_equal(memset_wide(ARENA, 64, 7, 4, 17, 2), INVALID_VALUE);
  assert_int_equal(memset_wide(ARENA + 2 * MiB - 64, 64, 7, 4, 16, 2), INVALID_VALUE);
  assert_int_equal(memset_wide(ARENA, 1ull << 62, 7, 4, 1ull << 62, 1), INVALID_VALUE);
  struct ferry_memset_wide_args bad_stream = {.dst = ARENA, .pitch = 8, .elem = 4, .width = 2,
                                              .height = 1, .stream = 77};
  struct ferry_memset_wide_rets br;
  assert_int_equal(call0(FERRY_CALL_memset_wide, &bad_stream, &br), INVALID_HANDLE);
  assert_int_equal(dev[0] | dev[1], 0); /* none of them wrote */
  assert_int_equal(ferry_exec_take_async_error(ex), INVALID_VALUE); /* ASYNC: latched */
  assert_int_equal(unmap(ARENA, 2 * MiB), OK);
}

static void test_streams_events(void **state) {
  (void)state;
  struct ferry_stream_create_args sc = {.stream = 5};
  struct ferry_stream_create_rets scr;
  assert_int_equal(call0(FERRY_CALL_stream_create, &sc, &scr), OK);
  assert_int_equal(call0(FERRY_CALL_stream_create, &sc, &scr), INVALID_VALUE);
  sc.stream = 2;
  assert_int_equal(call0(FERRY_CALL_stream_create, &sc, &scr), INVALID_VALUE);
  sc.stream = 1000; /* the table grows */
  assert_int_equal(call0(FERRY_CALL_stream_create, &sc, &scr), OK);
  struct ferry_event_create_args ec = {.event = 1};
  struct ferry_event_create_rets ecr;
  assert_int_equal(call0(FERRY_CALL_event_create, &ec, &ecr), OK);
  ec.event = 2;
  assert_int_equal(call0(FERRY_CALL_event_create, &ec, &ecr), OK);
  struct ferry_event_record_args er = {.event = 1, .stream = 5};
  struct ferry_event_record_rets err;
  assert_int_equal(call0(FERRY_CALL_event_record, &er, &err), OK);
  er.event = 2, er.stream = 1000;
  assert_int_equal(call0(FERRY_CALL_event_record, &er, &err), OK);
  struct ferry_event_elapsed_args ea = {.start = 1, .end = 2};
  struct ferry_event_elapsed_rets ear = {.ms = -1};
  assert_int_equal(call0(FERRY_CALL_event_elapsed, &ea, &ear), OK);
  assert_true(ear.ms >= 0);
  struct ferry_stream_wait_event_args sw = {.stream = 5, .event = 2};
  struct ferry_stream_wait_event_rets swr;
  assert_int_equal(call0(FERRY_CALL_stream_wait_event, &sw, &swr), OK);
  struct ferry_stream_synchronize_args ss = {.stream = 5};
  struct ferry_stream_synchronize_rets ssr;
  assert_int_equal(call0(FERRY_CALL_stream_synchronize, &ss, &ssr), OK);
  struct ferry_stream_destroy_args sd = {.stream = 5};
  struct ferry_stream_destroy_rets sdr;
  assert_int_equal(call0(FERRY_CALL_stream_destroy, &sd, &sdr), OK);
  assert_int_equal(call0(FERRY_CALL_stream_destroy, &sd, &sdr), INVALID_HANDLE);
  assert_int_equal(call0(FERRY_CALL_stream_synchronize, &ss, &ssr), INVALID_HANDLE);
  sd.stream = 0;
  assert_int_equal(call0(FERRY_CALL_stream_destroy, &sd, &sdr), INVALID_HANDLE);
  struct ferry_event_destroy_args ed = {.event = 1};
  struct ferry_event_destroy_rets edr;
  assert_int_equal(call0(FERRY_CALL_event_destroy, &ed, &edr), OK);
  struct ferry_event_query_args eq = {.event = 1};
  struct ferry_event_query_rets eqr;
  assert_int_equal(call0(FERRY_CALL_event_query, &eq, &eqr), INVALID_HANDLE);
  /* limits pass through */
  struct ferry_device_set_limit_args sl = {.limit = CU_LIMIT_MALLOC_HEAP_SIZE, .value = 64 * MiB};
  struct ferry_device_set_limit_rets slr;
  assert_int_equal(call0(FERRY_CALL_device_set_limit, &sl, &slr), OK);
  struct ferry_device_get_limit_args gl = {.limit = CU_LIMIT_MALLOC_HEAP_SIZE};
  struct ferry_device_get_limit_rets glr;
  assert_int_equal(call0(FERRY_CALL_device_get_limit, &gl, &glr), OK);
  assert_int_equal(glr.value, 64 * MiB);
  /* hello is the server's, not a call */
  struct ferry_hello_args ha = {0};
  struct ferry_hello_rets hr;
  assert_int_equal(call0(FERRY_CALL_hello, &ha, &hr), INVALID_VALUE);
  assert_int_equal(ferry_exec_call(ex, FERRY_CALL_LIMIT, &ha, &hr, NULL), INVALID_VALUE);
}

/* ferry_exec_wait_of knows exactly the calls flagged WAITS (local mode
   waits outside its lock for those), and its two steps wait */
static void test_waits_match_the_table(void **state) {
  (void)state;
  struct ferry_event_create_args ec = {.event = 0};
  struct ferry_event_create_rets ecr;
  assert_int_equal(call0(FERRY_CALL_event_create, &ec, &ecr), OK);
  _Alignas(8) unsigned char args[1024] = {0}; /* stream 0, event 0 */
  for (unsigned call = 0; call < FERRY_CALL_LIMIT; call++) {
    if (!ferry_call_valid(call)) continue;
    assert_true(ferry_args_size[call] <= sizeof args);
    struct ferry_wait w;
    int rc = ferry_exec_wait_of(ex, call, args, &w);
    if (ferry_calls[call].flags & WAITS) {
      if (rc || ferry_exec_wait(&w)) fail_msg("%s does not wait", ferry_calls[call].name);
    } else if (rc != INVALID_VALUE) {
      fail_msg("%s waits without the WAITS flag", ferry_calls[call].name);
    }
  }
  struct ferry_event_destroy_args ed = {.event = 0};
  struct ferry_event_destroy_rets edr;
  assert_int_equal(call0(FERRY_CALL_event_destroy, &ed, &edr), OK);
}

static void test_close_frees_arena(void **state) {
  (void)state;
  assert_int_equal(map(ARENA, 2 * MiB), OK);
  assert_int_equal(map(ARENA + 4 * MiB, 4 * MiB), OK);
  struct ferry_stream_create_args sc = {.stream = 9};
  struct ferry_stream_create_rets scr;
  assert_int_equal(call0(FERRY_CALL_stream_create, &sc, &scr), OK);
  struct ferry_module_load_rets r;
  load_test_module(5, &r);
  ferry_exec_close(ex);
  char err[256];
  ex = ferry_exec_open(drv, 0, ARENA, ARENA_SIZE, err, sizeof err);
  assert_non_null(ex);
  assert_int_equal(map(ARENA, 8 * MiB), OK); /* a fresh session: all of it is free */
  assert_int_equal(call0(FERRY_CALL_stream_create, &sc, &scr), OK);
}

/* last: as on a real GPU, a kernel fault ends CUDA for the process; a
   reset reports it, and closing still works */
static void test_kernel_fault(void **state) {
  (void)state;
  struct ferry_module_load_rets r;
  load_test_module(4, &r);
  assert_int_equal(map(ARENA + 32 * MiB, 2 * MiB), OK);
  uint64_t bad = ARENA + 64 * MiB;
  assert_int_equal(launch(4u << 16 | 3, 1, 1, 0, &bad, 8), OK);
  assert_int_equal(ferry_exec_take_async_error(ex), OK);
  struct ferry_device_synchronize_args sa = {0};
  struct ferry_device_synchronize_rets sr;
  assert_int_equal(call0(FERRY_CALL_device_synchronize, &sa, &sr), ILLEGAL_ADDRESS);
  struct mem_out out = {0};
  assert_int_equal(dtoh(ARENA + 32 * MiB, 16, &out), ILLEGAL_ADDRESS);
  assert_int_equal(out.begun, 0);
  uint64_t inc_params[2] = {ARENA + 32 * MiB, 1};
  assert_int_equal(launch(4u << 16 | 0, 1, 1, 0, inc_params, 12), ILLEGAL_ADDRESS);
  assert_int_equal(ferry_exec_take_async_error(ex), ILLEGAL_ADDRESS);
  struct ferry_device_reset_args ra = {0};
  struct ferry_device_reset_rets rr;
  assert_int_equal(call0(FERRY_CALL_device_reset, &ra, &rr), ILLEGAL_ADDRESS);
  assert_int_equal(map(ARENA, 2 * MiB), INVALID_VALUE); /* no arena any more */
  /* teardown closes the session */
}

static void test_error_mapping(void **state) {
  (void)state;
  assert_int_equal(ferry_cuda_error_from_cu(CUDA_SUCCESS), 0);
  assert_int_equal(ferry_cuda_error_from_cu(CUDA_ERROR_INVALID_HANDLE), 400);
  assert_int_equal(ferry_cuda_error_from_cu(CUDA_ERROR_NOT_FOUND), 500);
  assert_int_equal(ferry_cuda_error_from_cu(CUDA_ERROR_ILLEGAL_ADDRESS), 700);
  assert_int_equal(ferry_cuda_error_from_cu(CUDA_ERROR_OUT_OF_MEMORY), 2);
  assert_int_equal(ferry_cuda_error_from_cu(CUDA_ERROR_CONTEXT_ALREADY_CURRENT), 1);
  assert_int_equal(ferry_cuda_error_from_cu(123456), 999);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open_errors),
      cmocka_unit_test(test_describe),
      cmocka_unit_test(test_mem_map),
      cmocka_unit_test(test_roundtrip_multichunk),
      cmocka_unit_test(test_copy_errors_keep_framing),
      cmocka_unit_test(test_deferred_dtoh),
      cmocka_unit_test(test_medium_copies_chunked),
      cmocka_unit_test(test_2d_and_memset),
      cmocka_unit_test(test_module_load),
      cmocka_unit_test(test_launch_and_latching),
      cmocka_unit_test(test_launch_attributes),
      cmocka_unit_test(test_module_function),
      cmocka_unit_test(test_module_function_after_names),
      cmocka_unit_test(test_module_global),
      cmocka_unit_test(test_module_image_checked),
      cmocka_unit_test(test_memset_wide),
      cmocka_unit_test(test_streams_events),
      cmocka_unit_test(test_waits_match_the_table),
      cmocka_unit_test(test_close_frees_arena),
      cmocka_unit_test(test_error_mapping),
      cmocka_unit_test(test_kernel_fault),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
