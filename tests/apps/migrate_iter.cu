// An iterative program that carries every kind of GPU state a migration
// must move: allocations small (< 4 KiB) and large (MiBs), one freed and
// re-allocated every few iterations, a __device__ counter fed by atomicAdd,
// a __device__ variable and a __constant__ array rewritten with
// cudaMemcpyToSymbol each iteration, two non-default streams ordered by
// events, pinned host memory filled by cudaMemcpyAsync, cudaMemset, and a
// CUDA 2D array, written every third iteration and read in every one.
// All arithmetic is on integers, so the result does not depend on where (or
// when) the program ran: the migration tests compare its checksum with a run
// without migration, and the program checks itself against a host model.
// usage: migrate_iter [--texture] [--readonly] [ITERATIONS=40 [PAUSE_US=0 [STOP_FILE]]]
//   PAUSE_US sleeps after each iteration; STOP_FILE ends the run early when
//   it exists (the output then says how many iterations ran). With a
//   STOP_FILE, a program that has done ITERATIONS holds, every GPU state
//   alive, until the file exists ("migrate_iter: holding after N
//   iterations"): the tests bound the work to check at the end, however
//   long a loaded machine makes them take.
//   --texture reads the array through a texture object (made and destroyed
//   in each iteration) instead of a copy to linear memory; the results are
//   the same. A texture object's handle cannot be kept across a migration,
//   so a migration while one exists must fail and leave the program whole.
//   --readonly adds 16 MiB written once and only read back at the end (a
//   migration copying ahead finds it unchanged); the checksum is the same.
// Prints "migrate_iter: running pid P" after the first iteration, then
// "iterations: N", "launches: L", "device memory in use at exit: B" (what
// cudaMemGetInfo says once everything is freed), "checksum: <hex>" and
// "PASSED" when the results match the host model.
// CPU twins of its kernels: tests/twins/app_twins.c.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <vector>
#include <unistd.h>

#include <cuda_runtime.h>

#include "cuda_check.h"

static const int NA = 1 << 20;              // big_a: 4 MiB
static const int NB = (3 << 20) / 4 + 37;   // big_b: a little over 3 MiB
static const int NS = 700;                  // small: 2800 bytes
static const int NSCRATCH = 900;            // scratch: 900 bytes
static const int IMG_W = 64, IMG_H = 24;    // the CUDA array (floats)
static const int BLOCK = 256;

__constant__ unsigned mi_coef[16];
__device__ unsigned mi_round;
__device__ unsigned long long mi_acc;

__global__ void mi_stir(unsigned *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * 1664525u + mi_coef[i & 15] + mi_round;
}

__global__ void mi_fold(unsigned *b, int nb, const unsigned *a, int na) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < nb) b[i] += a[i % na] ^ (unsigned)i;
}

__global__ void mi_accum(unsigned *s, int n, const unsigned char *scratch) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned v = s[i] ^ (scratch[i] * 16777619u);
    v = ((v << 3) | (v >> 29)) + mi_round;
    s[i] = v;
    atomicAdd(&mi_acc, (unsigned long long)v);
  }
}

__global__ void mi_bump(unsigned *t, int n, unsigned k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) t[i] += (unsigned)i * 7u + k;
}

// floats that hold integers below 2^16: exact everywhere
__global__ void mi_image(float *img, const unsigned *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) img[i] = (float)(a[i] & 0xffffu);
}

// point sampling at texel centers returns the texel exactly
__global__ void mi_sample(cudaTextureObject_t tex, unsigned *out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h)
    out[y * w + x] += (unsigned)tex2D<float>(tex, x + 0.5f, y + 0.5f) * 3u + (unsigned)x;
}

// the same from a copy of the array in linear memory
__global__ void mi_gather(const float *img, unsigned *out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) out[y * w + x] += (unsigned)img[y * w + x] * 3u + (unsigned)x;
}

static int blocks(int n) { return (n + BLOCK - 1) / BLOCK; }

static unsigned coef(int it, int k) { return (unsigned)(it + 1) * 2654435761u ^ (unsigned)(k * 40503 + 17); }
static unsigned round_of(int it) { return (unsigned)it * 0x9e3779b9u + 0x7f4a7c15u; }
// the size of the buffer that is freed and re-allocated, in words: small
// and large in turn, never above 1.4 MiB however long the run
static int tmp_words(int generation) {
  int g = generation % 50;
  return generation % 2 ? 600 + g * 10 : 150000 + g * 4099;
}

static unsigned long long fnv(unsigned long long h, const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// everything the program ends with; the GPU run and the host model fill one each
struct State {
  std::vector<unsigned> a, b, s, tmp, samp;
  unsigned long long acc = 0, snaps = 14695981039346656037ull;
  unsigned round = 0;

  unsigned long long checksum() const {
    unsigned long long h = 14695981039346656037ull;
    h = fnv(h, a.data(), a.size() * 4);
    h = fnv(h, b.data(), b.size() * 4);
    h = fnv(h, s.data(), s.size() * 4);
    h = fnv(h, tmp.data(), tmp.size() * 4);
    h = fnv(h, samp.data(), samp.size() * 4);
    h = fnv(h, &acc, sizeof acc);
    h = fnv(h, &round, sizeof round);
    return fnv(h, &snaps, sizeof snaps);
  }
};

static void initial(State &st) {
  st.a.resize(NA);
  for (int i = 0; i < NA; i++) st.a[i] = (unsigned)i * 2246822519u + 3266489917u;
  st.b.assign(NB, 0);
  st.s.resize(NS);
  for (int i = 0; i < NS; i++) st.s[i] = (unsigned)(i * i) ^ 0xabcdu;
  st.tmp.assign(tmp_words(0), 0);
  st.samp.assign(IMG_W * IMG_H, 0);
}

// the same iterations on the host
static void model(State &st, int iterations) {
  std::vector<float> image(IMG_W * IMG_H);
  std::vector<unsigned char> scratch(NSCRATCH);
  int generation = 0;
  for (int it = 0; it < iterations; it++) {
    unsigned c[16], r = round_of(it);
    for (int k = 0; k < 16; k++) c[k] = coef(it, k);
    if (it % 7 == 6) { // re-allocation: the common prefix survives, the rest is zero
      std::vector<unsigned> next(tmp_words(++generation), 0);
      memcpy(next.data(), st.tmp.data(), std::min(next.size(), st.tmp.size()) * 4);
      st.tmp.swap(next);
    }
    memset(scratch.data(), (it * 37) & 0xff, scratch.size());
    for (int i = 0; i < NA; i++) st.a[i] = st.a[i] * 1664525u + c[i & 15] + r;
    for (size_t i = 0; i < st.tmp.size(); i++) st.tmp[i] += (unsigned)i * 7u + r;
    if (it % 3 == 0)
      for (int i = 0; i < IMG_W * IMG_H; i++) image[i] = (float)(st.a[i] & 0xffffu);
    for (int i = 0; i < NB; i++) st.b[i] += st.a[i % NA] ^ (unsigned)i;
    for (int i = 0; i < NS; i++) {
      unsigned v = st.s[i] ^ (scratch[i] * 16777619u);
      v = ((v << 3) | (v >> 29)) + r;
      st.s[i] = v;
      st.acc += v;
    }
    for (int y = 0; y < IMG_H; y++)
      for (int x = 0; x < IMG_W; x++)
        st.samp[y * IMG_W + x] += (unsigned)image[y * IMG_W + x] * 3u + (unsigned)x;
    st.snaps = fnv(st.snaps, st.s.data(), NS * 4);
    st.round = r;
  }
}

int main(int argc, char **argv) {
  int texture = 0, readonly = 0;
  for (; argc > 1 && !strncmp(argv[1], "--", 2); argv++, argc--) {
    if (!strcmp(argv[1], "--texture")) texture = 1;
    else if (!strcmp(argv[1], "--readonly")) readonly = 1;
    else return fprintf(stderr, "migrate_iter: unknown option %s\n", argv[1]), 2;
  }
  const size_t NRO = 4u << 20; // --readonly: 16 MiB of words
  std::vector<unsigned> ro_host(readonly ? NRO : 0);
  for (size_t i = 0; i < ro_host.size(); i++) ro_host[i] = (unsigned)(i * 2654435761u);
  unsigned *ro = NULL;
  if (readonly) {
    CHECK(cudaMalloc(&ro, NRO * 4));
    CHECK(cudaMemcpy(ro, ro_host.data(), NRO * 4, cudaMemcpyHostToDevice));
  }
  int iterations = argc > 1 ? atoi(argv[1]) : 40;
  int pause_us = argc > 2 ? atoi(argv[2]) : 0;
  const char *stop_file = argc > 3 ? argv[3] : NULL;

  State start;
  initial(start);
  unsigned *a, *b, *s, *tmp, *samp;
  unsigned char *scratch;
  float *img, *img_copy;
  CHECK(cudaMalloc(&a, NA * 4));
  CHECK(cudaMalloc(&b, NB * 4));
  CHECK(cudaMalloc(&s, NS * 4));
  CHECK(cudaMalloc(&scratch, NSCRATCH));
  CHECK(cudaMalloc(&img, IMG_W * IMG_H * 4));
  CHECK(cudaMalloc(&img_copy, IMG_W * IMG_H * 4));
  CHECK(cudaMalloc(&samp, IMG_W * IMG_H * 4));
  int ntmp = tmp_words(0), generation = 0;
  CHECK(cudaMalloc(&tmp, ntmp * 4));
  CHECK(cudaMemcpy(a, start.a.data(), NA * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(s, start.s.data(), NS * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(b, 0, NB * 4));
  CHECK(cudaMemset(tmp, 0, ntmp * 4));
  CHECK(cudaMemset(samp, 0, IMG_W * IMG_H * 4));
  unsigned long long zero = 0;
  CHECK(cudaMemcpyToSymbol(mi_acc, &zero, sizeof zero));

  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  cudaArray_t arr;
  CHECK(cudaMallocArray(&arr, &desc, IMG_W, IMG_H));
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = arr;
  cudaTextureDesc td = {};
  td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
  td.filterMode = cudaFilterModePoint;
  td.readMode = cudaReadModeElementType;

  cudaStream_t s1, s2;
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaStreamCreate(&s2));
  cudaEvent_t ev_start, ev_mid, ev_end;
  CHECK(cudaEventCreate(&ev_start));
  CHECK(cudaEventCreate(&ev_mid));
  CHECK(cudaEventCreate(&ev_end));
  unsigned *pinned;
  CHECK(cudaMallocHost(&pinned, NS * 4));

  unsigned long long snaps = 14695981039346656037ull;
  int launches = 0, it;
  for (it = 0; it < iterations; it++) {
    if (stop_file && access(stop_file, F_OK) == 0) break;
    unsigned c[16], r = round_of(it);
    for (int k = 0; k < 16; k++) c[k] = coef(it, k);
    CHECK(cudaMemcpyToSymbol(mi_coef, c, sizeof c));
    CHECK(cudaMemcpyToSymbol(mi_round, &r, sizeof r));
    if (it % 7 == 6) { // a new address and size; the old contents move over
      unsigned *next;
      int nnext = tmp_words(++generation);
      CHECK(cudaMalloc(&next, nnext * 4));
      CHECK(cudaMemset(next, 0, nnext * 4));
      CHECK(cudaMemcpy(next, tmp, std::min(nnext, ntmp) * 4, cudaMemcpyDeviceToDevice));
      CHECK(cudaFree(tmp));
      tmp = next;
      ntmp = nnext;
    }
    CHECK(cudaMemset(scratch, (it * 37) & 0xff, NSCRATCH));

    // stream 1 writes a, tmp and (every third iteration) the array
    CHECK(cudaEventRecord(ev_start, s1));
    mi_stir<<<blocks(NA), BLOCK, 0, s1>>>(a, NA);
    mi_bump<<<blocks(ntmp), BLOCK, 0, s1>>>(tmp, ntmp, r);
    launches += 2;
    if (it % 3 == 0) {
      mi_image<<<blocks(IMG_W * IMG_H), BLOCK, 0, s1>>>(img, a, IMG_W * IMG_H);
      launches++;
      CHECK(cudaMemcpy2DToArrayAsync(arr, 0, 0, img, IMG_W * 4, IMG_W * 4, IMG_H,
                                     cudaMemcpyDeviceToDevice, s1));
    }
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(ev_mid, s1));

    // stream 2 reads them once stream 1 is done
    CHECK(cudaStreamWaitEvent(s2, ev_mid, 0));
    cudaTextureObject_t tex = 0;
    if (texture) CHECK(cudaCreateTextureObject(&tex, &res, &td, NULL));
    mi_fold<<<blocks(NB), BLOCK, 0, s2>>>(b, NB, a, NA);
    mi_accum<<<blocks(NS), BLOCK, 0, s2>>>(s, NS, scratch);
    dim3 grid((IMG_W + 63) / 64, IMG_H);
    if (texture) {
      mi_sample<<<grid, 64, 0, s2>>>(tex, samp, IMG_W, IMG_H);
    } else {
      CHECK(cudaMemcpy2DFromArrayAsync(img_copy, IMG_W * 4, arr, 0, 0, IMG_W * 4, IMG_H,
                                       cudaMemcpyDeviceToDevice, s2));
      mi_gather<<<grid, 64, 0, s2>>>(img_copy, samp, IMG_W, IMG_H);
    }
    launches += 3;
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(pinned, s, NS * 4, cudaMemcpyDeviceToHost, s2));
    CHECK(cudaEventRecord(ev_end, s2));
    CHECK(cudaEventSynchronize(ev_end));
    float ms = -1.0f;
    CHECK(cudaEventElapsedTime(&ms, ev_start, ev_end));
    if (!(ms >= 0.0f)) {
      printf("FAIL: elapsed time %f ms at iteration %d\n", ms, it);
      return 1;
    }
    if (texture) CHECK(cudaDestroyTextureObject(tex));
    snaps = fnv(snaps, pinned, NS * 4);
    if (it == 0) {
      printf("migrate_iter: running pid %d\n", (int)getpid());
      fflush(stdout);
    }
    if (pause_us) usleep(pause_us);
  }
  if (stop_file && it == iterations) {
    printf("migrate_iter: holding after %d iterations\n", it);
    fflush(stdout);
    while (access(stop_file, F_OK) != 0) usleep(10000);
  }
  CHECK(cudaDeviceSynchronize());

  State got;
  got.a.resize(NA);
  got.b.resize(NB);
  got.s.resize(NS);
  got.tmp.resize(ntmp);
  got.samp.resize(IMG_W * IMG_H);
  CHECK(cudaMemcpy(got.a.data(), a, NA * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(got.b.data(), b, NB * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(got.s.data(), s, NS * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(got.tmp.data(), tmp, ntmp * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(got.samp.data(), samp, IMG_W * IMG_H * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpyFromSymbol(&got.acc, mi_acc, sizeof got.acc));
  CHECK(cudaMemcpyFromSymbol(&got.round, mi_round, sizeof got.round));
  got.snaps = snaps;
  int ro_bad = 0;
  if (readonly) {
    std::vector<unsigned> back(NRO);
    CHECK(cudaMemcpy(back.data(), ro, NRO * 4, cudaMemcpyDeviceToHost));
    ro_bad = back != ro_host;
    CHECK(cudaFree(ro));
  }

  CHECK(cudaFreeHost(pinned));
  CHECK(cudaEventDestroy(ev_start));
  CHECK(cudaEventDestroy(ev_mid));
  CHECK(cudaEventDestroy(ev_end));
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s2));
  CHECK(cudaFreeArray(arr));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(s));
  CHECK(cudaFree(scratch));
  CHECK(cudaFree(img));
  CHECK(cudaFree(img_copy));
  CHECK(cudaFree(samp));
  CHECK(cudaFree(tmp));
  // nothing is left: a migration that leaked on the GPU it moved to shows here
  size_t free_bytes, total_bytes;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));

  State want = start;
  model(want, it);
  int bad = 0;
  const char *names[] = {"a", "b", "small", "tmp", "sampled"};
  const std::vector<unsigned> *g[] = {&got.a, &got.b, &got.s, &got.tmp, &got.samp};
  const std::vector<unsigned> *w[] = {&want.a, &want.b, &want.s, &want.tmp, &want.samp};
  for (int k = 0; k < 5; k++)
    if (*g[k] != *w[k]) {
      size_t first = 0;
      while (first < g[k]->size() && first < w[k]->size() && (*g[k])[first] == (*w[k])[first]) first++;
      printf("FAIL: buffer %s differs from the host model (first at word %zu)\n", names[k], first);
      bad++;
    }
  if (got.acc != want.acc) printf("FAIL: mi_acc %llu, want %llu\n", got.acc, want.acc), bad++;
  if (got.round != want.round) printf("FAIL: mi_round %u, want %u\n", got.round, want.round), bad++;
  if (got.snaps != want.snaps) printf("FAIL: pinned snapshots differ from the host model\n"), bad++;
  if (ro_bad) printf("FAIL: the read-only buffer changed\n"), bad++;

  printf("iterations: %d\n", it);
  printf("launches: %d\n", launches);
  printf("device memory in use at exit: %zu\n", total_bytes - free_bytes);
  printf("checksum: %016llx\n", got.checksum());
  if (bad) return 1;
  printf("PASSED\n");
  return 0;
}
