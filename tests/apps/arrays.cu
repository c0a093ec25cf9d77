// CUDA arrays, texture objects and surface objects, natively and on
// ferry's CPU simulation (twins in tests/twins/app_twins.c): data goes
// host -> array -> array -> device -> host in 2D and 3D (pitched host and
// device sides, sub-boxes, layers, the deprecated 1D forms), array facts
// come back from cudaArrayGetInfo, and texture/surface objects are created
// over arrays and pitched memory, read by tex2D and written by
// surf2Dwrite in kernels. Only what CUDA itself guarantees is checked
// (point sampling at texel centers is exact).
// Prints "PASSED" and exits 0 on success.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

static int failures;

#include "cuda_check.h"

#define EXPECT(cond, ...)                                      \
  do {                                                         \
    if (!(cond)) {                                             \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
      printf(__VA_ARGS__);                                     \
      printf("\n");                                            \
      failures++;                                              \
    }                                                          \
  } while (0)

static float value2d(size_t x, size_t y) { return (float)(y * 1000 + x) * 0.5f; }

// host -> array (pitched host rows) -> array -> pitched device -> host
static void test_2d_roundtrip() {
  const size_t W = 300, H = 77, spitch = W * sizeof(float) + 64;
  std::vector<char> src(spitch * H);
  for (size_t y = 0; y < H; y++)
    for (size_t x = 0; x < W; x++) {
      float v = value2d(x, y);
      memcpy(&src[y * spitch + x * sizeof(float)], &v, sizeof v);
    }
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  cudaArray_t a, b;
  CHECK(cudaMallocArray(&a, &desc, W, H));
  CHECK(cudaMallocArray(&b, &desc, W, H));

  cudaChannelFormatDesc got;
  cudaExtent ext;
  unsigned flags = 99;
  CHECK(cudaArrayGetInfo(&got, &ext, &flags, a));
  EXPECT(got.x == 32 && got.y == 0 && got.f == cudaChannelFormatKindFloat, "desc %d %d %d", got.x,
         got.y, (int)got.f);
  EXPECT(ext.width == W && ext.height == H, "extent %zu x %zu", ext.width, ext.height);

  CHECK(cudaMemcpy2DToArray(a, 0, 0, src.data(), spitch, W * sizeof(float), H,
                            cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy2DArrayToArray(b, 0, 0, a, 0, 0, W * sizeof(float), H,
                                 cudaMemcpyDeviceToDevice));
  float *dev;
  size_t dpitch;
  CHECK(cudaMallocPitch((void **)&dev, &dpitch, W * sizeof(float), H));
  CHECK(cudaMemcpy2DFromArray(dev, dpitch, b, 0, 0, W * sizeof(float), H,
                              cudaMemcpyDeviceToDevice));
  std::vector<float> out(W * H, -1.0f);
  CHECK(cudaMemcpy2D(out.data(), W * sizeof(float), dev, dpitch, W * sizeof(float), H,
                     cudaMemcpyDeviceToHost));
  int bad = 0;
  for (size_t y = 0; y < H; y++)
    for (size_t x = 0; x < W; x++)
      if (out[y * W + x] != value2d(x, y)) bad++;
  EXPECT(bad == 0, "%d of %zu values differ after host->array->array->device->host", bad, W * H);

  // a sub-rectangle straight to the host, through a stream
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  const size_t sx = 16, sy = 10, sw = 50, sh = 20;
  std::vector<float> sub(sw * sh, -1.0f);
  CHECK(cudaMemcpy2DFromArrayAsync(sub.data(), sw * sizeof(float), b, sx * sizeof(float), sy,
                                   sw * sizeof(float), sh, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  bad = 0;
  for (size_t y = 0; y < sh; y++)
    for (size_t x = 0; x < sw; x++)
      if (sub[y * sw + x] != value2d(sx + x, sy + y)) bad++;
  EXPECT(bad == 0, "%d values of the sub-rectangle differ", bad);

  // an asynchronous upload of a block into the middle, read back whole
  std::vector<float> block(sw * sh);
  for (size_t i = 0; i < block.size(); i++) block[i] = -(float)i;
  CHECK(cudaMemcpy2DToArrayAsync(b, sx * sizeof(float), sy, block.data(), sw * sizeof(float),
                                 sw * sizeof(float), sh, cudaMemcpyHostToDevice, s));
  CHECK(cudaMemcpy2DFromArrayAsync(out.data(), W * sizeof(float), b, 0, 0, W * sizeof(float), H,
                                   cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  bad = 0;
  for (size_t y = 0; y < H; y++)
    for (size_t x = 0; x < W; x++) {
      int inside = x >= sx && x < sx + sw && y >= sy && y < sy + sh;
      float want = inside ? -(float)((y - sy) * sw + (x - sx)) : value2d(x, y);
      if (out[y * W + x] != want) bad++;
    }
  EXPECT(bad == 0, "%d values differ after the block upload", bad);
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(dev));
  CHECK(cudaFreeArray(a));
  CHECK(cudaFreeArray(b));
}

// a few MiB: the upload is sent apart from the batched calls and crosses
// the server's staging buffers in several chunks
static void test_big() {
  const size_t W = 1024, H = 600;
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  cudaArray_t a;
  CHECK(cudaMallocArray(&a, &desc, W, H));
  std::vector<float> in(W * H), out(W * H, -1.0f);
  for (size_t i = 0; i < in.size(); i++) in[i] = (float)(i % 100003) - 7.5f;
  CHECK(cudaMemcpy2DToArray(a, 0, 0, in.data(), W * sizeof(float), W * sizeof(float), H,
                            cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy2DFromArray(out.data(), W * sizeof(float), a, 0, 0, W * sizeof(float), H,
                              cudaMemcpyDeviceToHost));
  EXPECT(memcmp(in.data(), out.data(), in.size() * sizeof(float)) == 0,
         "a %zu-byte round trip through an array differs", in.size() * sizeof(float));
  CHECK(cudaFreeArray(a));
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
// the deprecated 1D forms run on across rows
static void test_linear_forms() {
  const size_t W = 40, H = 8; // 40 uchar4 = 160 bytes a row
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<uchar4>();
  cudaArray_t a;
  CHECK(cudaMallocArray(&a, &desc, W, H));
  std::vector<unsigned char> zero(W * 4 * H, 0), in(500), out(500, 0xee), all(W * 4 * H);
  for (size_t i = 0; i < in.size(); i++) in[i] = (unsigned char)(i * 7 + 1);
  CHECK(cudaMemcpy2DToArray(a, 0, 0, zero.data(), W * 4, W * 4, H, cudaMemcpyHostToDevice));
  // from byte 24 of row 2 on: the rest of row 2, rows 3 and 4, part of row 5
  CHECK(cudaMemcpyToArray(a, 24, 2, in.data(), in.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpyFromArray(out.data(), a, 24, 2, out.size(), cudaMemcpyDeviceToHost));
  EXPECT(memcmp(in.data(), out.data(), in.size()) == 0, "1D round trip across rows differs");
  CHECK(cudaMemcpy2DFromArray(all.data(), W * 4, a, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
  size_t start = 2 * W * 4 + 24;
  int bad = 0;
  for (size_t i = 0; i < all.size(); i++) {
    unsigned char want = i >= start && i < start + in.size() ? in[i - start] : 0;
    if (all[i] != want) bad++;
  }
  EXPECT(bad == 0, "%d bytes differ around the 1D copy", bad);
  CHECK(cudaFreeArray(a));
}
#pragma GCC diagnostic pop

static int value3d(size_t x, size_t y, size_t z) { return (int)(z * 10000 + y * 100 + x); }

// 3D: host -> array -> pitched device -> host, and a sub-box with positions
static void test_3d() {
  const size_t W = 24, H = 12, D = 6;
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<int>();
  cudaArray_t a;
  CHECK(cudaMalloc3DArray(&a, &desc, make_cudaExtent(W, H, D), 0));
  cudaExtent ext;
  CHECK(cudaArrayGetInfo(NULL, &ext, NULL, a));
  EXPECT(ext.width == W && ext.height == H && ext.depth == D, "3D extent %zu %zu %zu",
         ext.width, ext.height, ext.depth);

  // the host source has padded rows and padded slices
  const size_t hpitch = (W + 3) * sizeof(int), hrows = H + 2;
  std::vector<int> host(hpitch / sizeof(int) * hrows * D, -7);
  for (size_t z = 0; z < D; z++)
    for (size_t y = 0; y < H; y++)
      for (size_t x = 0; x < W; x++) host[(z * hrows + y) * (hpitch / sizeof(int)) + x] = value3d(x, y, z);
  cudaMemcpy3DParms p = {};
  p.srcPtr = make_cudaPitchedPtr(host.data(), hpitch, W, hrows);
  p.dstArray = a;
  p.extent = make_cudaExtent(W, H, D);
  p.kind = cudaMemcpyHostToDevice;
  CHECK(cudaMemcpy3D(&p));

  // to pitched device memory, then to packed host memory
  cudaPitchedPtr pitched;
  CHECK(cudaMalloc3D(&pitched, make_cudaExtent(W * sizeof(int), H, D)));
  EXPECT(pitched.pitch >= W * sizeof(int) && pitched.ysize == H, "cudaMalloc3D pitch %zu ysize %zu",
         pitched.pitch, pitched.ysize);
  const size_t dpitch = pitched.pitch;
  char *dev = (char *)pitched.ptr;
  p = cudaMemcpy3DParms{};
  p.srcArray = a;
  p.dstPtr = pitched;
  p.extent = make_cudaExtent(W, H, D);
  p.kind = cudaMemcpyDeviceToDevice;
  CHECK(cudaMemcpy3D(&p));
  std::vector<int> out(W * H * D, -1);
  p = cudaMemcpy3DParms{};
  p.srcPtr = make_cudaPitchedPtr(dev, dpitch, W, H);
  p.dstPtr = make_cudaPitchedPtr(out.data(), W * sizeof(int), W, H);
  p.extent = make_cudaExtent(W * sizeof(int), H, D); // no array: bytes
  p.kind = cudaMemcpyDeviceToHost;
  CHECK(cudaMemcpy3D(&p));
  int bad = 0;
  for (size_t z = 0; z < D; z++)
    for (size_t y = 0; y < H; y++)
      for (size_t x = 0; x < W; x++)
        if (out[(z * H + y) * W + x] != value3d(x, y, z)) bad++;
  EXPECT(bad == 0, "%d of %zu values differ after host->array->device->host (3D)", bad, out.size());

  // a sub-box at a position (elements for the array), asynchronously
  const size_t px = 3, py = 2, pz = 1, bw = 8, bh = 5, bd = 3;
  std::vector<int> box(bw * bh * bd, -1);
  p = cudaMemcpy3DParms{};
  p.srcArray = a;
  p.srcPos = make_cudaPos(px, py, pz);
  p.dstPtr = make_cudaPitchedPtr(box.data(), bw * sizeof(int), bw, bh);
  p.extent = make_cudaExtent(bw, bh, bd);
  p.kind = cudaMemcpyDeviceToHost;
  CHECK(cudaMemcpy3DAsync(&p, 0));
  CHECK(cudaDeviceSynchronize());
  bad = 0;
  for (size_t z = 0; z < bd; z++)
    for (size_t y = 0; y < bh; y++)
      for (size_t x = 0; x < bw; x++)
        if (box[(z * bh + y) * bw + x] != value3d(px + x, py + y, pz + z)) bad++;
  EXPECT(bad == 0, "%d values of the 3D sub-box differ", bad);
  CHECK(cudaFree(dev));
  CHECK(cudaFreeArray(a));
}

// a layered array: each layer is a slice
static void test_layered() {
  const size_t W = 64, H = 16, L = 3;
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  cudaArray_t a;
  CHECK(cudaMalloc3DArray(&a, &desc, make_cudaExtent(W, H, L), cudaArrayLayered));
  unsigned flags = 0;
  CHECK(cudaArrayGetInfo(NULL, NULL, &flags, a));
  EXPECT(flags & cudaArrayLayered, "flags %#x lack cudaArrayLayered", flags);
  std::vector<float> in(W * H * L), out(W * H * L, -1.0f);
  for (size_t i = 0; i < in.size(); i++) in[i] = (float)i;
  cudaMemcpy3DParms p = {};
  p.srcPtr = make_cudaPitchedPtr(in.data(), W * sizeof(float), W, H);
  p.dstArray = a;
  p.extent = make_cudaExtent(W, H, L);
  p.kind = cudaMemcpyHostToDevice;
  CHECK(cudaMemcpy3D(&p));
  p = cudaMemcpy3DParms{};
  p.srcArray = a;
  p.dstPtr = make_cudaPitchedPtr(out.data(), W * sizeof(float), W, H);
  p.extent = make_cudaExtent(W, H, L);
  p.kind = cudaMemcpyDeviceToHost;
  CHECK(cudaMemcpy3D(&p));
  EXPECT(memcmp(in.data(), out.data(), in.size() * sizeof(float)) == 0, "layered round trip differs");
  CHECK(cudaFreeArray(a));
}

static void test_objects() {
  const size_t W = 128, H = 32;
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  cudaArray_t a;
  CHECK(cudaMallocArray(&a, &desc, W, H, cudaArraySurfaceLoadStore));
  unsigned flags = 0;
  CHECK(cudaArrayGetInfo(NULL, NULL, &flags, a));
  EXPECT(flags & cudaArraySurfaceLoadStore, "flags %#x lack cudaArraySurfaceLoadStore", flags);

  // a texture over the array
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = a;
  cudaTextureDesc tex = {};
  tex.addressMode[0] = tex.addressMode[1] = cudaAddressModeClamp;
  tex.filterMode = cudaFilterModeLinear;
  tex.readMode = cudaReadModeElementType;
  tex.normalizedCoords = 1;
  cudaTextureObject_t t = 0;
  CHECK(cudaCreateTextureObject(&t, &res, &tex, NULL));
  EXPECT(t != 0, "texture object is 0");
  cudaResourceDesc back = {};
  CHECK(cudaGetTextureObjectResourceDesc(&back, t));
  EXPECT(back.resType == cudaResourceTypeArray && back.res.array.array == a,
         "resource desc of the array texture");

  // a texture over pitched device memory
  float *dev;
  size_t pitch;
  CHECK(cudaMallocPitch((void **)&dev, &pitch, W * sizeof(float), H));
  cudaResourceDesc pres = {};
  pres.resType = cudaResourceTypePitch2D;
  pres.res.pitch2D.devPtr = dev;
  pres.res.pitch2D.desc = desc;
  pres.res.pitch2D.width = W;
  pres.res.pitch2D.height = H;
  pres.res.pitch2D.pitchInBytes = pitch;
  cudaTextureDesc ptex = {};
  ptex.filterMode = cudaFilterModePoint;
  ptex.readMode = cudaReadModeElementType;
  cudaTextureObject_t pt = 0;
  CHECK(cudaCreateTextureObject(&pt, &pres, &ptex, NULL));
  EXPECT(pt != 0 && pt != t, "pitch2D texture object %llu (array one %llu)", pt, t);
  CHECK(cudaGetTextureObjectResourceDesc(&back, pt));
  EXPECT(back.resType == cudaResourceTypePitch2D && back.res.pitch2D.devPtr == dev &&
             back.res.pitch2D.width == W && back.res.pitch2D.height == H &&
             back.res.pitch2D.pitchInBytes == pitch,
         "resource desc of the pitch2D texture");

  // a texture over linear memory (a large allocation: aligned for textures)
  float *lin;
  const size_t lin_bytes = 4u << 20;
  CHECK(cudaMalloc((void **)&lin, lin_bytes));
  cudaResourceDesc lres = {};
  lres.resType = cudaResourceTypeLinear;
  lres.res.linear.devPtr = lin;
  lres.res.linear.desc = desc;
  lres.res.linear.sizeInBytes = lin_bytes;
  cudaTextureDesc ltex = {};
  ltex.readMode = cudaReadModeElementType;
  cudaTextureObject_t lt = 0;
  CHECK(cudaCreateTextureObject(&lt, &lres, &ltex, NULL));
  // CUDA does not check that a linear texture ends inside its allocation
  // (convolutionFFT2D's spans more than its buffer): neither may ferry
  cudaResourceDesc over = lres;
  over.res.linear.sizeInBytes = lin_bytes + 4096;
  cudaTextureObject_t lt_over = 0;
  CHECK(cudaCreateTextureObject(&lt_over, &over, &ltex, NULL));
  CHECK(cudaDestroyTextureObject(lt_over));

  // a surface over the array
  cudaSurfaceObject_t surf = 0;
  CHECK(cudaCreateSurfaceObject(&surf, &res));
  EXPECT(surf != 0, "surface object is 0");

  CHECK(cudaDestroySurfaceObject(surf));
  CHECK(cudaDestroyTextureObject(lt));
  CHECK(cudaDestroyTextureObject(pt));
  CHECK(cudaDestroyTextureObject(t));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(lin));
  CHECK(cudaFree(dev));
  CHECK(cudaFreeArray(a));
}

// texel (x, y), point-sampled at its center
__global__ void tex_fetch(cudaTextureObject_t t, float *out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f);
}

__global__ void surf_fill(cudaSurfaceObject_t s, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) surf2Dwrite((float)(y * 1000 + x) * 0.25f, s, x * (int)sizeof(float), y);
}

// kernels read textures and write surfaces (point sampling: exact values)
static void test_sampling() {
  const int W = 200, H = 40;
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  cudaArray_t a;
  CHECK(cudaMallocArray(&a, &desc, W, H, cudaArraySurfaceLoadStore));
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = a;
  cudaSurfaceObject_t surf;
  CHECK(cudaCreateSurfaceObject(&surf, &res));
  dim3 grid((W + 63) / 64, H);
  surf_fill<<<grid, 64>>>(surf, W, H);
  CHECK(cudaGetLastError());
  std::vector<float> out(W * H, -1.0f);
  CHECK(cudaMemcpy2DFromArray(out.data(), W * sizeof(float), a, 0, 0, W * sizeof(float), H,
                              cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++)
      if (out[y * W + x] != (float)(y * 1000 + x) * 0.25f) bad++;
  EXPECT(bad == 0, "%d values written through the surface differ", bad);

  cudaTextureDesc tex = {};
  tex.addressMode[0] = tex.addressMode[1] = cudaAddressModeClamp;
  tex.filterMode = cudaFilterModePoint;
  tex.readMode = cudaReadModeElementType;
  cudaTextureObject_t t;
  CHECK(cudaCreateTextureObject(&t, &res, &tex, NULL));
  float *dev;
  CHECK(cudaMalloc((void **)&dev, W * H * sizeof(float)));
  CHECK(cudaMemset(dev, 0, W * H * sizeof(float)));
  tex_fetch<<<grid, 64>>>(t, dev, W, H);
  CHECK(cudaGetLastError());
  std::vector<float> fetched(W * H, -1.0f);
  CHECK(cudaMemcpy(fetched.data(), dev, W * H * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT(memcmp(fetched.data(), out.data(), W * H * sizeof(float)) == 0,
         "tex2D over the array differs from the array");

  // the same values through a texture over pitched memory
  float *pitched;
  size_t pitch;
  CHECK(cudaMallocPitch((void **)&pitched, &pitch, W * sizeof(float), H));
  CHECK(cudaMemcpy2DFromArray(pitched, pitch, a, 0, 0, W * sizeof(float), H,
                              cudaMemcpyDeviceToDevice));
  cudaResourceDesc pres = {};
  pres.resType = cudaResourceTypePitch2D;
  pres.res.pitch2D.devPtr = pitched;
  pres.res.pitch2D.desc = desc;
  pres.res.pitch2D.width = W;
  pres.res.pitch2D.height = H;
  pres.res.pitch2D.pitchInBytes = pitch;
  cudaTextureObject_t pt;
  CHECK(cudaCreateTextureObject(&pt, &pres, &tex, NULL));
  CHECK(cudaMemset(dev, 0, W * H * sizeof(float)));
  tex_fetch<<<grid, 64>>>(pt, dev, W, H);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(fetched.data(), dev, W * H * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT(memcmp(fetched.data(), out.data(), W * H * sizeof(float)) == 0,
         "tex2D over pitched memory differs");

  CHECK(cudaDestroyTextureObject(pt));
  CHECK(cudaDestroyTextureObject(t));
  CHECK(cudaDestroySurfaceObject(surf));
  CHECK(cudaFree(pitched));
  CHECK(cudaFree(dev));
  CHECK(cudaFreeArray(a));
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s\n", prop.name);
  test_2d_roundtrip();
  test_big();
  test_linear_forms();
  test_3d();
  test_layered();
  test_objects();
  test_sampling();
  CHECK(cudaGetLastError());
  printf("arrays: %d failed\n", failures);
  if (failures) return 1;
  printf("PASSED\n");
  return 0;
}
