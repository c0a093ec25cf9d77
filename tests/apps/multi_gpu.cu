// A multi-GPU program doing what multi-GPU MPI+CUDA and OpenMP+CUDA codes
// do: per device its own buffers (small < 4 KiB, big ~3 MiB, a halo), its
// own __device__ and __constant__ symbols rewritten with cudaMemcpyToSymbol,
// a non-default stream, an event and pinned host memory filled by
// cudaMemcpyAsync; peer access queried and enabled; and in every iteration
// a halo exchange around the ring of devices (device d's first words of big
// go into the halo of device (d+1)%K) by a copy method that rotates with the
// iteration: cudaMemcpyPeer, cudaMemcpyPeerAsync on the destination's
// stream, cudaMemcpy with cudaMemcpyDefault, cudaMemcpyAsync
// DeviceToDevice on the source's stream. With one device, the neighbour is
// the device itself (same code path). All arithmetic is on integers, so the
// results are exact wherever the program runs; it checks itself against a
// host model that does the same iterations (the exchange included).
// usage: multi_gpu [--threads] [--tolerate-loss] [--devices K]
//                  [ITERATIONS=30 [PAUSE_US=0 [STOP_FILE]]]
//   --threads: one host thread per device (as OpenMP codes do), in lockstep
//     through a pthread barrier around the exchange phase; otherwise one
//     thread drives every device with cudaSetDevice.
//   --devices K: use the first K devices (default: all of them).
//   --tolerate-loss: no exchange (each device's result depends on it alone);
//     a CUDA error on device d prints "device d lost: <error>" once, and the
//     program goes on with the other devices and never calls on d again.
//   PAUSE_US sleeps after each iteration; STOP_FILE ends the run early when
//   it exists (every device stops after the same iteration); a program that
//   has done ITERATIONS first holds until it exists ("multi_gpu: holding
//   after N iterations"), so that the tests bound the work to check.
// Prints "multi_gpu: K devices", "peer i->j: can=<0|1>" for every ordered
// pair (and "peer i->j enable: <error>" where peer access cannot be had),
// "multi_gpu: running pid P" after the first iteration; at the end, per
// device "device d checksum: <hex>" and "device d launches: n", then
// "iterations: N", "launches: L", "checksum: <hex>" (all devices in order),
// per device "device d memory in use at exit: B" (cudaMemGetInfo once all is
// freed), with --tolerate-loss "device d: verified" per surviving device,
// and "PASSED" when the results match the host model.
// Exit: 0 PASSED, 1 mismatch, 2 usage, 3 CUDA error (not with
// --tolerate-loss, where losses are reported and survivors verified).
// CPU twins of its kernels: tests/twins/app_twins.c.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <unistd.h>
#include <vector>

#include <cuda_runtime.h>

static int g_threads; // exit from a worker thread without running atexit handlers under the others

static void fatal_exit() {
  fflush(stdout);
  if (g_threads) _exit(3);
  exit(3);
}

#define CHECK(call)                                                                       \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      printf("FAIL %s:%d: %s -> %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
      fatal_exit();                                                                       \
    }                                                                                     \
  } while (0)

static const int NBIG = (3 << 20) / 4 + 19; // big: a little over 3 MiB
static const int NSMALL = 900;              // small: 3600 bytes
static const int NHALO = 32768 + 11;        // halo: ~128 KiB, from the first words of big
static const int BLOCK = 256;

__constant__ unsigned mg_coef[16];
__device__ unsigned mg_round;
__device__ unsigned long long mg_acc;

__global__ void mg_stir(unsigned *big, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) big[i] = (big[i] ^ mg_coef[i & 15]) * 2654435761u + mg_round + (unsigned)i;
}

__global__ void mg_mix(unsigned *small, int ns, const unsigned *big, int nb) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < ns) {
    unsigned v = small[i] * 747796405u + big[(unsigned)i * 1031u % (unsigned)nb] + mg_coef[(i >> 4) & 15];
    v ^= v >> 13;
    small[i] = v;
    atomicAdd(&mg_acc, (unsigned long long)v);
  }
}

__global__ void mg_spread(unsigned *big, int nb, const unsigned *small, int ns, unsigned k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < nb) big[i] += (small[i % ns] ^ (unsigned)i) * 3u + k;
}

// the halo lands on the last nh words of big
__global__ void mg_fold(unsigned *big, int nb, const unsigned *halo, int nh) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < nh) {
    int j = nb - nh + i;
    big[j] = (big[j] ^ halo[i]) * 9u + mg_round;
  }
}

static int blocks(int n) { return (n + BLOCK - 1) / BLOCK; }

static unsigned coef(int d, int it, int k) {
  return (unsigned)(it + 1) * 2654435761u ^ ((unsigned)k * 40503u + 17u) ^ (unsigned)d * 0x9e3779b9u;
}
static unsigned round_of(int d, int it) {
  return (unsigned)it * 0x9e3779b9u + 0x7f4a7c15u + (unsigned)d * 0x85ebca6bu;
}
static unsigned spread_k(int d, int it) { return (unsigned)d * 0x10001u + (unsigned)it * 31u + 5u; }

static const unsigned long long FNV_BASIS = 14695981039346656037ull;
static unsigned long long fnv(unsigned long long h, const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// what one device ends with; the GPU run and the host model fill one each
struct State {
  std::vector<unsigned> big, small, halo;
  unsigned long long acc = 0, snaps = FNV_BASIS; // snaps: the pinned copies of small, every iteration
  unsigned round = 0;

  unsigned long long hash(unsigned long long h) const {
    h = fnv(h, big.data(), big.size() * 4);
    h = fnv(h, small.data(), small.size() * 4);
    h = fnv(h, halo.data(), halo.size() * 4);
    h = fnv(h, &acc, sizeof acc);
    return fnv(h, &round, sizeof round);
  }
};

static void initial(State &st, int d) {
  st.big.resize(NBIG);
  for (int i = 0; i < NBIG; i++) st.big[i] = ((unsigned)i * 2246822519u + 3266489917u) ^ (unsigned)d * 0x01000193u;
  st.small.resize(NSMALL);
  for (int i = 0; i < NSMALL; i++) st.small[i] = (unsigned)(i * i) ^ (0xabcdu + (unsigned)d);
  st.halo.resize(NHALO);
  for (int i = 0; i < NHALO; i++) st.halo[i] = (unsigned)i * 40503u + (unsigned)d * 7u + 1u;
}

// ---- the host model: the same phases, the same order ----
static void model_compute(State &m, int d, int it) {
  unsigned c[16], r = round_of(d, it), k = spread_k(d, it);
  for (int q = 0; q < 16; q++) c[q] = coef(d, it, q);
  for (int i = 0; i < NBIG; i++) m.big[i] = (m.big[i] ^ c[i & 15]) * 2654435761u + r + (unsigned)i;
  for (int i = 0; i < NSMALL; i++) {
    unsigned v = m.small[i] * 747796405u + m.big[(unsigned)i * 1031u % (unsigned)NBIG] + c[(i >> 4) & 15];
    v ^= v >> 13;
    m.small[i] = v;
    m.acc += v;
  }
  for (int i = 0; i < NBIG; i++) m.big[i] += (m.small[i % NSMALL] ^ (unsigned)i) * 3u + k;
  m.snaps = fnv(m.snaps, m.small.data(), NSMALL * 4);
  m.round = r;
}

static void model_fold(State &m, int d, int it) {
  unsigned r = round_of(d, it);
  for (int i = 0; i < NHALO; i++) {
    int j = NBIG - NHALO + i;
    m.big[j] = (m.big[j] ^ m.halo[i]) * 9u + r;
  }
}

static void model(std::vector<State> &m, int iterations, int exchange) {
  int K = (int)m.size();
  for (int it = 0; it < iterations; it++) {
    for (int d = 0; d < K; d++) model_compute(m[d], d, it);
    if (exchange)
      for (int d = 0; d < K; d++) memcpy(m[(d + 1) % K].halo.data(), m[d].big.data(), NHALO * 4);
    for (int d = 0; d < K; d++) model_fold(m[d], d, it);
  }
}

// ---- the GPU run ----
struct Dev {
  int id, lost, launches;
  unsigned *big, *small, *halo, *pinned;
  cudaStream_t stream;
  cudaEvent_t event;
  size_t mem_in_use;
  State got;
};

static int K, g_tolerate, g_iterations, g_pause_us;
static const char *g_stop_file;
static Dev *g_devs;
static pthread_barrier_t g_barrier;
static int g_stop, g_ran; // the leader's decision for the iteration, and how many ran

// a CUDA call on device dev: fatal, or with --tolerate-loss the end of that
// device (the calling function returns false and dev is never used again)
#define DCHECK(dev, call)                                                                  \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      device_error(dev, __FILE__, __LINE__, #call, e_);                                    \
      return false;                                                                        \
    }                                                                                      \
  } while (0)

static void device_error(Dev *dv, const char *file, int line, const char *call, cudaError_t e) {
  if (!g_tolerate) {
    printf("FAIL %s:%d: %s -> %s (device %d)\n", file, line, call, cudaGetErrorName(e), dv->id);
    fatal_exit();
  }
  // the error is also this thread's last error: it must not show up in the
  // cudaGetLastError of another device's launches (one thread, K devices)
  (void)cudaGetLastError();
  if (!dv->lost) {
    dv->lost = 1;
    printf("device %d lost: %s\n", dv->id, cudaGetErrorName(e));
    printf("  at %s:%d: %s\n", file, line, call);
    fflush(stdout);
  }
}

static bool setup(Dev *dv) {
  int d = dv->id;
  State start;
  initial(start, d);
  DCHECK(dv, cudaSetDevice(d));
  DCHECK(dv, cudaMalloc(&dv->big, NBIG * 4));
  DCHECK(dv, cudaMalloc(&dv->small, NSMALL * 4));
  DCHECK(dv, cudaMalloc(&dv->halo, NHALO * 4));
  DCHECK(dv, cudaStreamCreate(&dv->stream));
  DCHECK(dv, cudaEventCreate(&dv->event));
  DCHECK(dv, cudaMallocHost(&dv->pinned, NSMALL * 4));
  DCHECK(dv, cudaMemcpy(dv->big, start.big.data(), NBIG * 4, cudaMemcpyHostToDevice));
  DCHECK(dv, cudaMemcpy(dv->halo, start.halo.data(), NHALO * 4, cudaMemcpyHostToDevice));
  memcpy(dv->pinned, start.small.data(), NSMALL * 4);
  DCHECK(dv, cudaMemcpyAsync(dv->small, dv->pinned, NSMALL * 4, cudaMemcpyHostToDevice, dv->stream));
  DCHECK(dv, cudaStreamSynchronize(dv->stream));
  unsigned long long zero = 0;
  unsigned r0 = 0;
  DCHECK(dv, cudaMemcpyToSymbol(mg_acc, &zero, sizeof zero));
  DCHECK(dv, cudaMemcpyToSymbol(mg_round, &r0, sizeof r0));
  dv->got.snaps = FNV_BASIS;
  return true;
}

// the device's own work of an iteration, up to the results in pinned memory
static bool compute(Dev *dv, int it) {
  int d = dv->id;
  unsigned c[16], r = round_of(d, it);
  for (int q = 0; q < 16; q++) c[q] = coef(d, it, q);
  DCHECK(dv, cudaSetDevice(d));
  DCHECK(dv, cudaMemcpyToSymbol(mg_coef, c, sizeof c));
  DCHECK(dv, cudaMemcpyToSymbol(mg_round, &r, sizeof r));
  mg_stir<<<blocks(NBIG), BLOCK, 0, dv->stream>>>(dv->big, NBIG);
  mg_mix<<<blocks(NSMALL), BLOCK, 0, dv->stream>>>(dv->small, NSMALL, dv->big, NBIG);
  mg_spread<<<blocks(NBIG), BLOCK, 0, dv->stream>>>(dv->big, NBIG, dv->small, NSMALL, spread_k(d, it));
  dv->launches += 3;
  DCHECK(dv, cudaGetLastError());
  DCHECK(dv, cudaEventRecord(dv->event, dv->stream));
  DCHECK(dv, cudaMemcpyAsync(dv->pinned, dv->small, NSMALL * 4, cudaMemcpyDeviceToHost, dv->stream));
  DCHECK(dv, cudaStreamSynchronize(dv->stream));
  DCHECK(dv, cudaEventQuery(dv->event)); // recorded before the copy: done
  dv->got.snaps = fnv(dv->got.snaps, dv->pinned, NSMALL * 4);
  return true;
}

// device d's first NHALO words of big into the halo of device (d+1)%K;
// every device's compute phase is complete (the barrier before)
static bool exchange(Dev *dv, int it) {
  int src = dv->id, dst = (src + 1) % K;
  Dev *to = &g_devs[dst];
  const size_t bytes = NHALO * 4;
  DCHECK(dv, cudaSetDevice(src));
  switch (it % 4) {
  case 0: // serialized with all work of both devices, before and after
    DCHECK(dv, cudaMemcpyPeer(to->halo, dst, dv->big, src, bytes));
    break;
  case 1: // on the destination's stream
    DCHECK(dv, cudaSetDevice(dst));
    DCHECK(dv, cudaMemcpyPeerAsync(to->halo, dst, dv->big, src, bytes, to->stream));
    DCHECK(dv, cudaStreamSynchronize(to->stream));
    DCHECK(dv, cudaSetDevice(src));
    break;
  case 2: // unified addressing: the pointers say which devices; D2D may return early
    DCHECK(dv, cudaMemcpy(to->halo, dv->big, bytes, cudaMemcpyDefault));
    DCHECK(dv, cudaDeviceSynchronize());
    break;
  default: // on the source's stream
    DCHECK(dv, cudaMemcpyAsync(to->halo, dv->big, bytes, cudaMemcpyDeviceToDevice, dv->stream));
    DCHECK(dv, cudaStreamSynchronize(dv->stream));
    break;
  }
  return true;
}

// the halo into big; the next compute phase synchronizes the stream
static bool fold(Dev *dv) {
  DCHECK(dv, cudaSetDevice(dv->id));
  mg_fold<<<blocks(NHALO), BLOCK, 0, dv->stream>>>(dv->big, NBIG, dv->halo, NHALO);
  dv->launches++;
  DCHECK(dv, cudaGetLastError());
  return true;
}

// results back, then everything freed
static bool finish(Dev *dv) {
  State &g = dv->got;
  DCHECK(dv, cudaSetDevice(dv->id));
  DCHECK(dv, cudaStreamSynchronize(dv->stream));
  DCHECK(dv, cudaDeviceSynchronize());
  g.big.resize(NBIG);
  g.small.resize(NSMALL);
  g.halo.resize(NHALO);
  DCHECK(dv, cudaMemcpy(g.big.data(), dv->big, NBIG * 4, cudaMemcpyDeviceToHost));
  DCHECK(dv, cudaMemcpy(g.small.data(), dv->small, NSMALL * 4, cudaMemcpyDeviceToHost));
  DCHECK(dv, cudaMemcpy(g.halo.data(), dv->halo, NHALO * 4, cudaMemcpyDeviceToHost));
  DCHECK(dv, cudaMemcpyFromSymbol(&g.acc, mg_acc, sizeof g.acc));
  DCHECK(dv, cudaMemcpyFromSymbol(&g.round, mg_round, sizeof g.round));
  DCHECK(dv, cudaFreeHost(dv->pinned));
  DCHECK(dv, cudaEventDestroy(dv->event));
  DCHECK(dv, cudaStreamDestroy(dv->stream));
  DCHECK(dv, cudaFree(dv->big));
  DCHECK(dv, cudaFree(dv->small));
  DCHECK(dv, cudaFree(dv->halo));
  return true;
}

// nothing is left: a migration that leaked on the GPU it moved to shows here
static bool memory_in_use(Dev *dv) {
  size_t free_bytes, total_bytes;
  DCHECK(dv, cudaSetDevice(dv->id));
  DCHECK(dv, cudaMemGetInfo(&free_bytes, &total_bytes));
  dv->mem_in_use = total_bytes - free_bytes;
  return true;
}

static void sync_all() {
  if (g_threads) pthread_barrier_wait(&g_barrier);
}

// the iterations, for the devices [first, first + n): all of them from one
// thread, or one each from K threads in lockstep
static void iterate(int first, int n, int leader) {
  for (int it = 0;; it++) {
    sync_all(); // every device has finished iteration it - 1
    if (leader) {
      if (it == 1) {
        printf("multi_gpu: running pid %d\n", (int)getpid());
        fflush(stdout);
      }
      if (it > 0 && g_pause_us) usleep(g_pause_us);
      if (it >= g_iterations && g_stop_file) {
        printf("multi_gpu: holding after %d iterations\n", it);
        fflush(stdout);
        while (access(g_stop_file, F_OK) != 0) usleep(10000);
      }
      g_stop = it >= g_iterations || (g_stop_file && access(g_stop_file, F_OK) == 0);
      if (!g_stop) g_ran = it + 1;
    }
    sync_all();
    if (g_stop) break;
    for (int d = first; d < first + n; d++)
      if (!g_devs[d].lost) compute(&g_devs[d], it);
    sync_all(); // every source is ready, no fold reads a halo any more
    if (!g_tolerate)
      for (int d = first; d < first + n; d++) exchange(&g_devs[d], it);
    sync_all(); // every halo is in place
    for (int d = first; d < first + n; d++)
      if (!g_devs[d].lost) fold(&g_devs[d]);
  }
}

static void *worker(void *arg) {
  Dev *dv = (Dev *)arg;
  // the device is current for the thread's whole life, as in an OpenMP region
  setup(dv); // a failure there is fatal, or with --tolerate-loss the device is lost
  iterate(dv->id, 1, dv->id == 0);
  if (!dv->lost) finish(dv);
  return NULL;
}

static int usage() {
  fprintf(stderr,
          "usage: multi_gpu [--threads] [--tolerate-loss] [--devices K] "
          "[ITERATIONS=30 [PAUSE_US=0 [STOP_FILE]]]\n");
  return 2;
}

static bool number(const char *s, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < 0 || v > 1000000000) return false;
  *out = (int)v;
  return true;
}

int main(int argc, char **argv) {
  int want_devices = 0, a = 1;
  for (; a < argc && !strncmp(argv[a], "--", 2); a++) {
    if (!strcmp(argv[a], "--threads")) {
      g_threads = 1;
    } else if (!strcmp(argv[a], "--tolerate-loss")) {
      g_tolerate = 1;
    } else if (!strcmp(argv[a], "--devices") && a + 1 < argc) {
      if (!number(argv[++a], &want_devices) || want_devices < 1) return usage();
    } else {
      return usage();
    }
  }
  g_iterations = 30;
  if (a < argc && !number(argv[a++], &g_iterations)) return usage();
  if (a < argc && !number(argv[a++], &g_pause_us)) return usage();
  if (a < argc) g_stop_file = argv[a++];
  if (a < argc) return usage();

  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  if (want_devices > count) {
    printf("FAIL: --devices %d, but only %d devices exist\n", want_devices, count);
    return 2;
  }
  K = want_devices ? want_devices : count;
  printf("multi_gpu: %d devices\n", K);

  // peer access, wherever it can be had; refused (and said so) elsewhere
  for (int i = 0; i < K; i++)
    for (int j = 0; j < K; j++) {
      if (i == j) continue;
      int can = 0;
      CHECK(cudaDeviceCanAccessPeer(&can, i, j));
      printf("peer %d->%d: can=%d\n", i, j, can);
      CHECK(cudaSetDevice(i));
      cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);
      if (can) {
        if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
        else CHECK(e);
      } else {
        printf("peer %d->%d enable: %s\n", i, j, cudaGetErrorName(e));
        (void)cudaGetLastError();
      }
    }
  fflush(stdout);

  std::vector<Dev> devs(K);
  g_devs = devs.data();
  for (int d = 0; d < K; d++) {
    devs[d].id = d;
    devs[d].lost = devs[d].launches = 0;
    devs[d].mem_in_use = 0;
  }
  if (g_threads) {
    std::vector<pthread_t> threads(K);
    if (pthread_barrier_init(&g_barrier, NULL, K)) {
      printf("FAIL: pthread_barrier_init\n");
      return 3;
    }
    for (int d = 0; d < K; d++)
      if (pthread_create(&threads[d], NULL, worker, &devs[d])) {
        printf("FAIL: pthread_create\n");
        fatal_exit();
      }
    for (int d = 0; d < K; d++) pthread_join(threads[d], NULL);
    pthread_barrier_destroy(&g_barrier);
  } else {
    for (int d = 0; d < K; d++) setup(&devs[d]);
    iterate(0, K, 1);
    for (int d = 0; d < K; d++)
      if (!devs[d].lost) finish(&devs[d]);
  }
  for (int d = 0; d < K; d++)
    if (!devs[d].lost) memory_in_use(&devs[d]);

  std::vector<State> want(K);
  for (int d = 0; d < K; d++) initial(want[d], d);
  model(want, g_ran, !g_tolerate);

  int bad = 0, survivors = 0, launches = 0;
  unsigned long long all = FNV_BASIS;
  for (int d = 0; d < K; d++) {
    launches += devs[d].launches;
    if (!devs[d].lost) {
      printf("device %d checksum: %016llx\n", d, devs[d].got.hash(FNV_BASIS));
      all = devs[d].got.hash(all);
    }
    printf("device %d launches: %d\n", d, devs[d].launches);
  }
  printf("iterations: %d\n", g_ran);
  printf("launches: %d\n", launches);
  printf("checksum: %016llx\n", all);
  for (int d = 0; d < K; d++)
    if (!devs[d].lost) printf("device %d memory in use at exit: %zu\n", d, devs[d].mem_in_use);

  for (int d = 0; d < K; d++) {
    if (devs[d].lost) continue;
    const State &g = devs[d].got, &w = want[d];
    const char *names[] = {"big", "small", "halo"};
    const std::vector<unsigned> *gv[] = {&g.big, &g.small, &g.halo}, *wv[] = {&w.big, &w.small, &w.halo};
    int ok = 1;
    for (int k = 0; k < 3 && ok; k++)
      if (*gv[k] != *wv[k]) {
        size_t first = 0;
        while (first < gv[k]->size() && (*gv[k])[first] == (*wv[k])[first]) first++;
        printf("FAIL: device %d: %s differs from the host model (first at word %zu: %08x, want %08x)\n",
               d, names[k], first, (*gv[k])[first], (*wv[k])[first]);
        ok = 0;
      }
    if (ok && g.acc != w.acc)
      printf("FAIL: device %d: mg_acc %llu, want %llu\n", d, g.acc, w.acc), ok = 0;
    if (ok && g.round != w.round)
      printf("FAIL: device %d: mg_round %u, want %u\n", d, g.round, w.round), ok = 0;
    if (ok && g.snaps != w.snaps)
      printf("FAIL: device %d: pinned snapshots differ from the host model\n", d), ok = 0;
    if (ok) {
      survivors++;
      if (g_tolerate) printf("device %d: verified\n", d);
    } else {
      bad++;
    }
  }
  if (bad) return 1;
  if (!survivors) {
    printf("FAIL: every device was lost\n");
    return 1;
  }
  printf("PASSED\n");
  return 0;
}
