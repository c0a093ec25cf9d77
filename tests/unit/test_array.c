/*
 * CUDA arrays, texture and surface objects: the simulation's driver
 * functions directly (errors as the driver gives them), and the executor's
 * calls on top (client ids, 2D/3D box copies through the staging buffers
 * in several chunks, descriptors, and handles the client never created).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "executor/exec.h"

#define ARENA 0x200000000000ull
#define ARENA_SIZE (1ull << 40)
#define MAP_SIZE (8ull << 20)

enum { OK = 0, INVALID_VALUE = 1, INVALID_PITCH = 12, INVALID_HANDLE = 400 };

static const struct ferry_driver *drv;
static struct ferry_exec *ex;

/* ---- bulk bytes from and to memory ---- */
struct mem_in {
  const unsigned char *data;
  uint64_t pos;
  unsigned reads;
};
static int mem_read(void *ctx, void *dst, size_t n) {
  struct mem_in *m = ctx;
  memcpy(dst, m->data + m->pos, n);
  m->pos += n;
  m->reads++;
  return 0;
}
struct mem_out {
  unsigned char *data;
  uint64_t len, announced;
};
static int mem_begin(void *ctx, uint64_t len) {
  struct mem_out *m = ctx;
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
  return 0;
}

static int call0(unsigned call, const void *args, void *rets) {
  return ferry_exec_call(ex, call, args, rets, NULL);
}

static int setup(void **state) {
  (void)state;
  char err[256];
  drv = ferry_driver_sim(NULL, err, sizeof err);
  if (!drv)
    return -1;
  ex = ferry_exec_open(drv, 0, ARENA, ARENA_SIZE, err, sizeof err);
  if (!ex)
    return -1;
  struct ferry_mem_map_args m = {ARENA, MAP_SIZE};
  struct ferry_mem_map_rets mr;
  return call0(FERRY_CALL_mem_map, &m, &mr) ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  ferry_exec_close(ex);
  ex = NULL;
  return 0;
}

static int create(uint32_t id, uint64_t w, uint64_t h, uint64_t d, CUarray_format f, unsigned n,
                  unsigned flags) {
  struct ferry_array_create_args a = {id, w, h, d, (uint32_t)f, n, flags};
  struct ferry_array_create_rets r;
  return call0(FERRY_CALL_array_create, &a, &r);
}

/* packed bytes into a box of array `id` (kind 1) or device memory (kind 0) */
static int put_box(uint32_t kind, uint64_t addr, uint64_t pitch, uint64_t rows, uint64_t x,
                   uint64_t y, uint64_t z, uint64_t w, uint64_t h, uint64_t d, const void *p,
                   uint64_t len, unsigned *reads) {
  struct ferry_memcpy3d_htod_args a = {kind, addr, pitch, rows, x, y, z, w, h, d, 0, 0};
  struct ferry_memcpy3d_htod_rets r;
  struct mem_in st = {p, 0, 0};
  struct ferry_bulk_in in = {len, mem_read, &st};
  struct ferry_io io = {.in = &in};
  int rc = ferry_exec_call(ex, FERRY_CALL_memcpy3d_htod, &a, &r, &io);
  assert_int_equal(st.pos, len); /* every byte is consumed, even after an error */
  if (reads)
    *reads = st.reads;
  return rc;
}

static int get_box(uint32_t kind, uint64_t addr, uint64_t pitch, uint64_t rows, uint64_t x,
                   uint64_t y, uint64_t z, uint64_t w, uint64_t h, uint64_t d,
                   struct mem_out *out) {
  struct ferry_memcpy3d_dtoh_args a = {kind, addr, pitch, rows, x, y, z, w, h, d, 0};
  struct ferry_memcpy3d_dtoh_rets r;
  struct ferry_bulk_out bo = {mem_begin, mem_write, out};
  struct ferry_io io = {.out = &bo};
  return ferry_exec_call(ex, FERRY_CALL_memcpy3d_dtoh, &a, &r, &io);
}

/* ---- the simulation's driver functions ---- */

static void test_sim_arrays(void **state) {
  (void)state;
  CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 64, .Height = 32, .Format = CU_AD_FORMAT_FLOAT,
                               .NumChannels = 1};
  CUarray a = NULL, bad = NULL;
  assert_int_equal(drv->Array3DCreate(&a, &d), CUDA_SUCCESS);
  CUDA_ARRAY3D_DESCRIPTOR wrong = d;
  wrong.NumChannels = 3;
  assert_int_equal(drv->Array3DCreate(&bad, &wrong), CUDA_ERROR_INVALID_VALUE);
  wrong = d;
  wrong.Width = 0;
  assert_int_equal(drv->Array3DCreate(&bad, &wrong), CUDA_ERROR_INVALID_VALUE);
  wrong = d;
  wrong.Flags = CUDA_ARRAY3D_CUBEMAP; /* needs width == height and 6 faces */
  assert_int_equal(drv->Array3DCreate(&bad, &wrong), CUDA_ERROR_INVALID_VALUE);

  /* host -> array (a sub-rectangle) -> host, as 2D copies */
  float in[4 * 8], out[4 * 8];
  for (int i = 0; i < 32; i++)
    in[i] = (float)i + 0.25f;
  CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = in, .srcPitch = 8 * 4,
                     .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a, .dstXInBytes = 40,
                     .dstY = 5, .WidthInBytes = 8 * 4, .Height = 4};
  assert_int_equal(drv->Memcpy2DAsync(&c, NULL), CUDA_SUCCESS);
  CUDA_MEMCPY2D back = {.srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a, .srcXInBytes = 40,
                        .srcY = 5, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = out,
                        .dstPitch = 8 * 4, .WidthInBytes = 8 * 4, .Height = 4};
  assert_int_equal(drv->Memcpy2DAsync(&back, NULL), CUDA_SUCCESS);
  assert_memory_equal(in, out, sizeof in);
  /* past the last row or column */
  c.dstY = 29;
  assert_int_equal(drv->Memcpy2DAsync(&c, NULL), CUDA_ERROR_INVALID_VALUE);
  c.dstY = 0, c.dstXInBytes = 64 * 4 - 16;
  assert_int_equal(drv->Memcpy2DAsync(&c, NULL), CUDA_ERROR_INVALID_VALUE);

  /* a 3D array: a box at (x, y, z) and back */
  CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 10, .Height = 6, .Depth = 4,
                                .Format = CU_AD_FORMAT_UNSIGNED_INT16, .NumChannels = 2};
  CUarray a3;
  assert_int_equal(drv->Array3DCreate(&a3, &d3), CUDA_SUCCESS);
  uint32_t box[3][2][5], box_out[3][2][5];
  for (unsigned i = 0; i < 30; i++)
    ((uint32_t *)box)[i] = 0x10001u * i;
  CUDA_MEMCPY3D c3 = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = box, .srcPitch = 20,
                      .srcHeight = 2, .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a3,
                      .dstXInBytes = 4 * 4, .dstY = 3, .dstZ = 1, .WidthInBytes = 20, .Height = 2,
                      .Depth = 3};
  assert_int_equal(drv->Memcpy3DAsync(&c3, NULL), CUDA_SUCCESS);
  CUDA_MEMCPY3D b3 = {.srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a3, .srcXInBytes = 16,
                      .srcY = 3, .srcZ = 1, .dstMemoryType = CU_MEMORYTYPE_HOST,
                      .dstHost = box_out, .dstPitch = 20, .dstHeight = 2, .WidthInBytes = 20,
                      .Height = 2, .Depth = 3};
  assert_int_equal(drv->Memcpy3DAsync(&b3, NULL), CUDA_SUCCESS);
  assert_memory_equal(box, box_out, sizeof box);
  c3.dstZ = 2; /* 2 + 3 slices > 4 */
  assert_int_equal(drv->Memcpy3DAsync(&c3, NULL), CUDA_ERROR_INVALID_VALUE);

  /* destroyed and made-up arrays */
  assert_int_equal(drv->ArrayDestroy(a3), CUDA_SUCCESS);
  assert_int_equal(drv->ArrayDestroy(a3), CUDA_ERROR_INVALID_HANDLE);
  b3.srcZ = 0;
  assert_int_equal(drv->Memcpy3DAsync(&b3, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(drv->ArrayDestroy((CUarray)&d), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(drv->ArrayDestroy(a), CUDA_SUCCESS);
}

static void test_sim_objects(void **state) {
  (void)state;
  CUDA_ARRAY3D_DESCRIPTOR d = {.Width = 16, .Height = 16, .Format = CU_AD_FORMAT_FLOAT,
                               .NumChannels = 4};
  CUarray plain, ldst;
  assert_int_equal(drv->Array3DCreate(&plain, &d), CUDA_SUCCESS);
  d.Flags = CUDA_ARRAY3D_SURFACE_LDST;
  assert_int_equal(drv->Array3DCreate(&ldst, &d), CUDA_SUCCESS);

  CUDA_RESOURCE_DESC res;
  memset(&res, 0, sizeof res);
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = plain;
  CUDA_TEXTURE_DESC tex;
  memset(&tex, 0, sizeof tex);
  tex.filterMode = CU_TR_FILTER_MODE_LINEAR;
  tex.flags = CU_TRSF_NORMALIZED_COORDINATES;
  CUtexObject t = 0;
  assert_int_equal(drv->TexObjectCreate(&t, &res, &tex, NULL), CUDA_SUCCESS);
  assert_true(t != 0);
  tex.addressMode[1] = (CUaddress_mode)7;
  CUtexObject t2 = 0;
  assert_int_equal(drv->TexObjectCreate(&t2, &res, &tex, NULL), CUDA_ERROR_INVALID_VALUE);
  tex.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;

  /* pitch2D over mapped memory: aligned and inside, or refused */
  memset(&res, 0, sizeof res);
  res.resType = CU_RESOURCE_TYPE_PITCH2D;
  res.res.pitch2D.devPtr = ARENA;
  res.res.pitch2D.format = CU_AD_FORMAT_FLOAT;
  res.res.pitch2D.numChannels = 1;
  res.res.pitch2D.width = 100;
  res.res.pitch2D.height = 50;
  res.res.pitch2D.pitchInBytes = 512;
  assert_int_equal(drv->TexObjectCreate(&t2, &res, &tex, NULL), CUDA_SUCCESS);
  assert_int_equal(drv->TexObjectDestroy(t2), CUDA_SUCCESS);
  res.res.pitch2D.pitchInBytes = 300; /* not a multiple of 32 */
  assert_int_equal(drv->TexObjectCreate(&t2, &res, &tex, NULL), CUDA_ERROR_INVALID_VALUE);
  res.res.pitch2D.pitchInBytes = 512;
  res.res.pitch2D.devPtr = ARENA + MAP_SIZE; /* not mapped */
  assert_int_equal(drv->TexObjectCreate(&t2, &res, &tex, NULL), CUDA_ERROR_INVALID_VALUE);

  /* surfaces need an array made for load/store */
  memset(&res, 0, sizeof res);
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = plain;
  CUsurfObject s = 0;
  assert_int_equal(drv->SurfObjectCreate(&s, &res), CUDA_ERROR_INVALID_VALUE);
  res.res.array.hArray = ldst;
  assert_int_equal(drv->SurfObjectCreate(&s, &res), CUDA_SUCCESS);
  assert_int_equal(drv->SurfObjectDestroy(s), CUDA_SUCCESS);
  assert_int_equal(drv->SurfObjectDestroy(s), CUDA_ERROR_INVALID_VALUE);

  /* a texture of a destroyed array, and destroyed objects */
  assert_int_equal(drv->ArrayDestroy(ldst), CUDA_SUCCESS);
  assert_int_equal(drv->TexObjectCreate(&t2, &res, &tex, NULL), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(drv->TexObjectDestroy(t), CUDA_SUCCESS);
  assert_int_equal(drv->TexObjectDestroy(t), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(drv->SurfObjectDestroy((CUsurfObject)t), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(drv->ArrayDestroy(plain), CUDA_SUCCESS);
}

/* ---- the executor's calls ---- */

static void test_exec_2d_roundtrip(void **state) {
  (void)state;
  /* 700 x 500 floats: 1.4 MB, several staging chunks cutting rows */
  const uint64_t W = 700, H = 500, rowb = W * 4, bytes = rowb * H;
  assert_int_equal(create(20, W, H, 0, CU_AD_FORMAT_FLOAT, 1, 0), OK);
  assert_int_equal(create(21, W, H, 0, CU_AD_FORMAT_FLOAT, 1, 0), OK);
  assert_int_equal(create(20, 4, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0), INVALID_VALUE); /* live id */
  float *in = malloc(bytes);
  assert_non_null(in);
  for (uint64_t i = 0; i < W * H; i++)
    in[i] = (float)i * 0.5f;
  unsigned reads = 0;
  assert_int_equal(put_box(1, 20, 0, 0, 0, 0, 0, rowb, H, 1, in, bytes, &reads), OK);
  assert_true(reads > 2); /* it went through the staging buffers in chunks */

  /* array -> array, array -> pitched device memory, device -> host */
  struct ferry_memcpy3d_dtod_args aa = {1, 21, 0, 0, 0, 0, 0, 1, 20, 0, 0, 0, 0, 0,
                                        rowb, H, 1, 0};
  struct ferry_memcpy3d_dtod_rets ar;
  assert_int_equal(call0(FERRY_CALL_memcpy3d_dtod, &aa, &ar), OK);
  const uint64_t pitch = 3072;
  struct ferry_memcpy3d_dtod_args ad = {0, ARENA, pitch, H, 0, 0, 0, 1, 21, 0, 0, 0, 0, 0,
                                        rowb, H, 1, 0};
  assert_int_equal(call0(FERRY_CALL_memcpy3d_dtod, &ad, &ar), OK);
  struct mem_out out = {0};
  assert_int_equal(get_box(0, ARENA, pitch, H, 0, 0, 0, rowb, H, 1, &out), OK);
  assert_int_equal(out.len, bytes);
  assert_memory_equal(out.data, in, bytes);
  /* a sub-rectangle straight from the array */
  assert_int_equal(get_box(1, 21, 0, 0, 12 * 4, 7, 0, 30 * 4, 9, 1, &out), OK);
  for (uint64_t y = 0; y < 9; y++)
    assert_memory_equal(out.data + y * 120, in + (7 + y) * W + 12, 120);

  /* errors: past the end, a device pitch below the width */
  assert_int_equal(get_box(1, 21, 0, 0, 0, 495, 0, rowb, 6, 1, &out), INVALID_VALUE);
  assert_null(ferry_exec_violation(ex));
  ad.dst_pitch = 100;
  assert_int_equal(call0(FERRY_CALL_memcpy3d_dtod, &ad, &ar), INVALID_PITCH);
  /* announced bytes that do not match the box are drained */
  assert_int_equal(put_box(1, 20, 0, 0, 0, 0, 0, rowb, 2, 1, in, rowb, NULL), INVALID_VALUE);

  struct ferry_array_destroy_args d1 = {20}, d2 = {21};
  struct ferry_array_destroy_rets dr;
  assert_int_equal(call0(FERRY_CALL_array_destroy, &d1, &dr), OK);
  assert_int_equal(call0(FERRY_CALL_array_destroy, &d2, &dr), OK);
  free(out.data);
  free(in);
}

static void test_exec_3d_and_layers(void **state) {
  (void)state;
  /* 40 x 30 x 20 int2 elements: 192 000 bytes, three chunks */
  const uint64_t W = 40, H = 30, D = 20, rowb = W * 8, bytes = rowb * H * D;
  assert_int_equal(create(30, W, H, D, CU_AD_FORMAT_SIGNED_INT32, 2, 0), OK);
  unsigned char *in = malloc(bytes);
  assert_non_null(in);
  for (uint64_t i = 0; i < bytes; i++)
    in[i] = (unsigned char)(i * 13 + i / 251);
  assert_int_equal(put_box(1, 30, 0, 0, 0, 0, 0, rowb, H, D, in, bytes, NULL), OK);
  struct mem_out out = {0};
  assert_int_equal(get_box(1, 30, 0, 0, 0, 0, 0, rowb, H, D, &out), OK);
  assert_memory_equal(out.data, in, bytes);
  /* a box at (3, 4, 5) through pitched device slices and back */
  const uint64_t bw = 7 * 8, bh = 6, bd = 4, pitch = 64, rows = 8;
  struct ferry_memcpy3d_dtod_args c = {0, ARENA, pitch, rows, 0, 0, 0, 1, 30, 0, 0, 3 * 8, 4, 5,
                                       bw, bh, bd, 0};
  struct ferry_memcpy3d_dtod_rets r;
  assert_int_equal(call0(FERRY_CALL_memcpy3d_dtod, &c, &r), OK);
  assert_int_equal(get_box(0, ARENA, pitch, rows, 0, 0, 0, bw, bh, bd, &out), OK);
  for (uint64_t z = 0; z < bd; z++)
    for (uint64_t y = 0; y < bh; y++)
      assert_memory_equal(out.data + (z * bh + y) * bw,
                          in + ((5 + z) * H + 4 + y) * rowb + 3 * 8, bw);

  /* layered: 1D layers are rows of one slice each */
  assert_int_equal(create(31, 64, 0, 3, CU_AD_FORMAT_UNSIGNED_INT8, 4, CUDA_ARRAY3D_LAYERED), OK);
  assert_int_equal(put_box(1, 31, 0, 0, 0, 0, 0, 256, 1, 3, in, 768, NULL), OK);
  assert_int_equal(get_box(1, 31, 0, 0, 0, 0, 2, 256, 1, 1, &out), OK);
  assert_memory_equal(out.data, in + 512, 256);
  /* a 3D array without a height is refused by the driver */
  assert_int_equal(create(32, 64, 0, 3, CU_AD_FORMAT_FLOAT, 1, 0), INVALID_VALUE);
  free(out.data);
  free(in);
  /* close (teardown) destroys what is left */
}

static void test_exec_objects(void **state) {
  (void)state;
  assert_int_equal(create(40, 32, 32, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SURFACE_LDST), OK);
  CUDA_TEXTURE_DESC tex;
  memset(&tex, 0, sizeof tex);
  tex.flags = CU_TRSF_NORMALIZED_COORDINATES;
  CUDA_RESOURCE_VIEW_DESC view;
  memset(&view, 0, sizeof view);
  view.format = CU_RES_VIEW_FORMAT_FLOAT_1X32;
  view.width = 32, view.height = 32;
  struct ferry_tex_create_args a = {.res_type = CU_RESOURCE_TYPE_ARRAY, .array = 40,
                                    .tex = {&tex, sizeof tex}, .view = {&view, sizeof view}};
  struct ferry_tex_create_rets r = {0};
  assert_int_equal(call0(FERRY_CALL_tex_create, &a, &r), OK);
  uint64_t t_array = r.object;
  assert_true(t_array != 0);

  /* pitch2D over the mapped arena; a short descriptor blob is refused */
  struct ferry_tex_create_args p = {.res_type = CU_RESOURCE_TYPE_PITCH2D, .dev = ARENA,
                                    .format = CU_AD_FORMAT_FLOAT, .channels = 1, .width = 64,
                                    .height = 64, .pitch = 512, .tex = {&tex, sizeof tex}};
  assert_int_equal(call0(FERRY_CALL_tex_create, &p, &r), OK);
  uint64_t t_pitch = r.object;
  assert_true(t_pitch != t_array);
  p.tex.len = sizeof tex - 4;
  assert_int_equal(call0(FERRY_CALL_tex_create, &p, &r), INVALID_VALUE);
  p.tex.len = sizeof tex;
  p.res_type = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  assert_int_equal(call0(FERRY_CALL_tex_create, &p, &r), INVALID_VALUE);

  struct ferry_surf_create_args s = {40};
  struct ferry_surf_create_rets sr = {0};
  assert_int_equal(call0(FERRY_CALL_surf_create, &s, &sr), OK);
  assert_true(sr.object != 0);
  assert_null(ferry_exec_violation(ex));

  struct ferry_tex_destroy_args td = {t_pitch};
  struct ferry_tex_destroy_rets tr;
  assert_int_equal(call0(FERRY_CALL_tex_destroy, &td, &tr), OK);
  struct ferry_surf_destroy_args sd = {sr.object};
  struct ferry_surf_destroy_rets sdr;
  assert_int_equal(call0(FERRY_CALL_surf_destroy, &sd, &sdr), OK);
  /* the array texture stays: close destroys it (ASan would see a leak) */
  assert_int_equal(ferry_exec_take_async_error(ex), OK);
}

static void test_exec_bad_handles(void **state) {
  (void)state;
  /* ids and objects the client never created are protocol violations */
  struct ferry_array_destroy_args d = {77};
  struct ferry_array_destroy_rets dr;
  assert_int_equal(call0(FERRY_CALL_array_destroy, &d, &dr), INVALID_HANDLE);
  assert_non_null(ferry_exec_violation(ex));
  assert_string_equal(ferry_exec_violation(ex), "array id 77 was never created");

  unsigned char bytes[64] = {0};
  assert_int_equal(put_box(1, 78, 0, 0, 0, 0, 0, 64, 1, 1, bytes, 64, NULL), INVALID_HANDLE);
  assert_string_equal(ferry_exec_violation(ex), "array id 78 was never created");
  assert_int_equal(ferry_exec_take_async_error(ex), INVALID_HANDLE); /* an ASYNC call latches */

  struct ferry_tex_destroy_args td = {0x1234};
  struct ferry_tex_destroy_rets tr;
  assert_int_equal(call0(FERRY_CALL_tex_destroy, &td, &tr), INVALID_HANDLE);
  assert_string_equal(ferry_exec_violation(ex), "texture object 0x1234 was never created");
  struct ferry_surf_create_args s = {79};
  struct ferry_surf_create_rets sr;
  assert_int_equal(call0(FERRY_CALL_surf_create, &s, &sr), INVALID_HANDLE);
  CUDA_TEXTURE_DESC tex;
  memset(&tex, 0, sizeof tex);
  struct ferry_tex_create_args a = {.res_type = CU_RESOURCE_TYPE_ARRAY, .array = 80,
                                    .tex = {&tex, sizeof tex}};
  struct ferry_tex_create_rets r;
  assert_int_equal(call0(FERRY_CALL_tex_create, &a, &r), INVALID_HANDLE);
  assert_string_equal(ferry_exec_violation(ex), "array id 80 was never created");
  ferry_exec_take_async_error(ex);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sim_arrays, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sim_objects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exec_2d_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exec_3d_and_layers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exec_objects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exec_bad_handles, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
