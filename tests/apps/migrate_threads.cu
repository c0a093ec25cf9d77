// Four host threads share one GPU, each with its own stream, event,
// buffers and pinned memory, each doing many launches and copies and
// checking its own results against a host model. The migration tests move
// the GPU under it while the threads run: every thread's calls must wait,
// then go on against the same pointers, streams and events.
// usage: migrate_threads [ROUNDS=300 [PAUSE_US=0 [STOP_FILE]]]
//   PAUSE_US sleeps after each round; STOP_FILE ends every thread early.
// Prints "migrate_threads: running pid P" once every thread is under way,
// then "launches: L" (4 x ROUNDS unless stopped early) and "PASSED" when
// every thread got what it expected. CPU twin: tests/twins/app_twins.c.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <unistd.h>
#include <vector>

#include <cuda_runtime.h>

static const int THREADS = 4;
static const int WORDS[THREADS] = {700, 5000, 60000, 300000};

__global__ void mt_step(unsigned *x, int n, unsigned salt) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 747796405u + salt + (unsigned)i;
}

struct Worker {
  int id, rounds, pause_us, done, launches, failures, announced;
  const char *stop_file;
  pthread_t thread;
  char error[200];
};

// workers that have finished a round (or ended): main says "running" once
// all four are under way, so a migration from outside lands mid-run
static int under_way;
static void announce(Worker *w) {
  if (!w->announced) w->announced = 1, __atomic_add_fetch(&under_way, 1, __ATOMIC_RELEASE);
}

static unsigned salt(int id, int round) { return (unsigned)(id + 1) * 0x632be5abu ^ (unsigned)round * 2891336453u; }

#define TRY(call)                                                                          \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      snprintf(w->error, sizeof w->error, "%s:%d: %s -> %s", __FILE__, __LINE__, #call,    \
               cudaGetErrorName(e_));                                                      \
      w->failures++;                                                                       \
      return NULL;                                                                         \
    }                                                                                      \
  } while (0)

static void *work_body(Worker *w) {
  const int n = WORDS[w->id];
  const size_t bytes = (size_t)n * 4;
  std::vector<unsigned> model(n), patch(n / 4 + 1);
  for (int i = 0; i < n; i++) model[i] = (unsigned)i * 2654435761u + (unsigned)w->id;
  cudaStream_t s;
  cudaEvent_t ev;
  unsigned *d, *pinned;
  TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  TRY(cudaEventCreate(&ev));
  TRY(cudaMalloc(&d, bytes));
  TRY(cudaMallocHost(&pinned, bytes));
  memcpy(pinned, model.data(), bytes);
  TRY(cudaMemcpyAsync(d, pinned, bytes, cudaMemcpyHostToDevice, s));
  TRY(cudaStreamSynchronize(s));
  int r;
  for (r = 0; r < w->rounds; r++) {
    if (w->stop_file && access(w->stop_file, F_OK) == 0) break;
    unsigned k = salt(w->id, r);
    mt_step<<<(n + 255) / 256, 256, 0, s>>>(d, n, k);
    TRY(cudaGetLastError());
    w->launches++;
    for (int i = 0; i < n; i++) model[i] = model[i] * 747796405u + k + (unsigned)i;
    if (r % 5 == 4) { // read back and compare, through an event
      TRY(cudaMemcpyAsync(pinned, d, bytes, cudaMemcpyDeviceToHost, s));
      TRY(cudaEventRecord(ev, s));
      TRY(cudaEventSynchronize(ev));
      if (memcmp(pinned, model.data(), bytes)) {
        snprintf(w->error, sizeof w->error, "round %d: results differ", r);
        w->failures++;
        return NULL;
      }
    }
    if (r % 23 == 11) { // overwrite a quarter from pageable memory
      int off = (r * 97) % (n - (int)patch.size() + 1);
      for (size_t i = 0; i < patch.size(); i++) patch[i] = (unsigned)(r * 31 + i);
      TRY(cudaMemcpyAsync(d + off, patch.data(), patch.size() * 4, cudaMemcpyHostToDevice, s));
      TRY(cudaStreamSynchronize(s)); // patch is reused
      memcpy(&model[off], patch.data(), patch.size() * 4);
    }
    if (r % 40 == 39) { // a new allocation takes over
      unsigned *next;
      TRY(cudaMalloc(&next, bytes));
      TRY(cudaMemcpyAsync(next, d, bytes, cudaMemcpyDeviceToDevice, s));
      TRY(cudaStreamSynchronize(s));
      TRY(cudaFree(d));
      d = next;
    }
    announce(w);
    if (w->pause_us) usleep(w->pause_us);
  }
  TRY(cudaMemcpyAsync(pinned, d, bytes, cudaMemcpyDeviceToHost, s));
  TRY(cudaStreamSynchronize(s));
  if (memcmp(pinned, model.data(), bytes)) {
    snprintf(w->error, sizeof w->error, "final results differ after %d rounds", r);
    w->failures++;
  }
  w->done = r;
  TRY(cudaFree(d));
  TRY(cudaFreeHost(pinned));
  TRY(cudaEventDestroy(ev));
  TRY(cudaStreamDestroy(s));
  return NULL;
}

static void *work(void *arg) {
  Worker *w = (Worker *)arg;
  work_body(w);
  announce(w);
  return NULL;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 300;
  int pause_us = argc > 2 ? atoi(argv[2]) : 0;
  const char *stop_file = argc > 3 ? argv[3] : NULL;
  // the context exists before the threads start, like in most programs
  if (cudaFree(0) != cudaSuccess) {
    printf("FAIL: no device\n");
    return 3;
  }
  Worker w[THREADS];
  for (int t = 0; t < THREADS; t++) {
    memset(&w[t], 0, sizeof w[t]);
    w[t].id = t;
    w[t].rounds = rounds;
    w[t].pause_us = pause_us;
    w[t].stop_file = stop_file;
    if (pthread_create(&w[t].thread, NULL, work, &w[t])) {
      printf("FAIL: pthread_create\n");
      return 3;
    }
  }
  while (__atomic_load_n(&under_way, __ATOMIC_ACQUIRE) < THREADS) usleep(1000);
  printf("migrate_threads: running pid %d\n", (int)getpid());
  fflush(stdout);
  int failures = 0, launches = 0;
  for (int t = 0; t < THREADS; t++) {
    pthread_join(w[t].thread, NULL);
    launches += w[t].launches;
    failures += w[t].failures;
    if (w[t].failures)
      printf("thread %d: FAIL %s\n", t, w[t].error);
    else
      printf("thread %d: %d rounds ok\n", t, w[t].done);
  }
  if (cudaDeviceSynchronize() != cudaSuccess) failures++;
  printf("launches: %d\n", launches);
  if (failures) return 1;
  printf("PASSED\n");
  return 0;
}
