// CUDA IPC between two programs (tests/e2e/ipc.sh), as cuda-samples'
// simpleIPC does it: handles pass through files in DIR, the programs wait
// for each other's files (never for a fixed time).
//   ipc_pair export DIR [hold]  fills an allocation that does not start on a
//       granule, exports it and an interprocess event, writes DIR/mem and
//       DIR/event, waits for DIR/done (the importer's), then waits for the
//       event and checks what the importer computed into its memory; with
//       hold it only holds its exports until DIR/stop (migration, kill),
//       then frees them, waits for DIR/after and fills fresh memory
//   ipc_pair import DIR         opens both handles, checks the exporter's
//       values through a copy, accumulates into them with a kernel,
//       records the event, closes, writes DIR/done
//   ipc_pair open DIR           only opens DIR/mem: prints the error name
//   ipc_pair get                exports fresh memory: prints the error name
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "cuda_check.h"
#include "file_handoff.h"
#include "fill_kernels.h"

static const int N = 300000; // not a granule multiple: the handle carries an offset

static int exporter(const char *dir, int hold) {
  unsigned *before, *mem;
  CHECK(cudaMalloc(&before, 1000)); // mem then starts inside a granule
  CHECK(cudaMalloc(&mem, N * sizeof(unsigned)));
  mp_fill<<<(N + 255) / 256, 256>>>(mem, N, 7);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  cudaIpcMemHandle_t mh, again;
  CHECK(cudaIpcGetMemHandle(&mh, mem));
  CHECK(cudaIpcGetMemHandle(&again, mem));
  if (memcmp(&mh, &again, sizeof mh)) {
    printf("FAIL a second cudaIpcGetMemHandle gave another handle\n");
    return 1;
  }
  void *self = NULL;
  cudaError_t e = cudaIpcOpenMemHandle(&self, mh, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaErrorDeviceUninitialized) {
    printf("FAIL opening its own handle: %s, expected cudaErrorDeviceUninitialized\n",
           cudaGetErrorName(e));
    return 1;
  }
  cudaGetLastError();
  cudaEvent_t ev, timed;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
  CHECK(cudaEventCreate(&timed));
  cudaIpcEventHandle_t eh;
  e = cudaIpcGetEventHandle(&eh, timed);
  if (e != cudaErrorInvalidResourceHandle) {
    printf("FAIL exporting an event without cudaEventInterprocess: %s\n", cudaGetErrorName(e));
    return 1;
  }
  cudaGetLastError();
  CHECK(cudaIpcGetEventHandle(&eh, ev));
  put_file(dir, "event", &eh, sizeof eh);
  put_file(dir, "mem", &mh, sizeof mh);
  printf("ipc_pair: running pid %d\n", (int)getpid());
  fflush(stdout);
  if (hold) {
    // then releases what it shares (a move asked meanwhile waited for
    // this, and starts now), and works on wherever the vGPU then is
    wait_file(dir, "stop");
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaFree(mem));
    wait_file(dir, "after");
    unsigned *fresh, *host = (unsigned *)malloc(N * sizeof(unsigned));
    CHECK(cudaMalloc(&fresh, N * sizeof(unsigned)));
    mp_fill<<<(N + 255) / 256, 256>>>(fresh, N, 11);
    CHECK(cudaMemcpy(host, fresh, N * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
      if (host[i] != fill_value(11, i)) {
        printf("FAIL fresh[%d] = %u after the release\n", i, host[i]);
        return 1;
      }
    CHECK(cudaFree(fresh));
    free(host);
    printf("PASSED\n");
    return 0;
  }
  wait_file(dir, "done");
  CHECK(cudaStreamWaitEvent(0, ev, 0));
  CHECK(cudaEventSynchronize(ev));
  unsigned *host = (unsigned *)malloc(N * sizeof(unsigned));
  CHECK(cudaMemcpy(host, mem, N * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (int i = 0; i < N; i++) {
    unsigned want = fill_value(7, i) * 31u + fill_value(9, i);
    if (host[i] != want) {
      printf("FAIL mem[%d] = %u, expected %u (the importer's kernel)\n", i, host[i], want);
      return 1;
    }
  }
  CHECK(cudaEventDestroy(ev));
  CHECK(cudaFree(mem));
  CHECK(cudaFree(before));
  free(host);
  printf("PASSED\n");
  return 0;
}

static int importer(const char *dir) {
  wait_file(dir, "mem");
  cudaIpcMemHandle_t mh;
  cudaIpcEventHandle_t eh;
  get_file(dir, "mem", &mh, sizeof mh);
  get_file(dir, "event", &eh, sizeof eh);
  unsigned *theirs, *again, *mine;
  CHECK(cudaIpcOpenMemHandle((void **)&theirs, mh, cudaIpcMemLazyEnablePeerAccess));
  CHECK(cudaIpcOpenMemHandle((void **)&again, mh, cudaIpcMemLazyEnablePeerAccess));
  if (again != theirs) {
    printf("FAIL opening a handle twice gave %p and %p\n", (void *)theirs, (void *)again);
    return 1;
  }
  CHECK(cudaIpcCloseMemHandle(again));
  unsigned *host = (unsigned *)malloc(N * sizeof(unsigned));
  CHECK(cudaMemcpy(host, theirs, N * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (int i = 0; i < N; i++)
    if (host[i] != fill_value(7, i)) {
      printf("FAIL theirs[%d] = %u, expected %u (the exporter's fill)\n", i, host[i], fill_value(7, i));
      return 1;
    }
  CHECK(cudaMalloc(&mine, N * sizeof(unsigned)));
  mp_fill<<<(N + 255) / 256, 256>>>(mine, N, 9);
  mp_accum<<<(N + 255) / 256, 256>>>(theirs, mine, N);
  CHECK(cudaGetLastError());
  cudaEvent_t ev;
  CHECK(cudaIpcOpenEventHandle(&ev, eh));
  CHECK(cudaEventRecord(ev, 0));
  CHECK(cudaEventSynchronize(ev));
  CHECK(cudaIpcCloseMemHandle(theirs));
  cudaError_t e = cudaIpcCloseMemHandle(theirs);
  if (e != cudaErrorInvalidValue) {
    printf("FAIL closing a closed handle: %s\n", cudaGetErrorName(e));
    return 1;
  }
  cudaGetLastError();
  CHECK(cudaEventDestroy(ev));
  CHECK(cudaFree(mine));
  free(host);
  put_file(dir, "done", "1", 1);
  printf("PASSED\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "export"))
    return exporter(argv[2], argc > 3 && !strcmp(argv[3], "hold"));
  if (argc == 3 && !strcmp(argv[1], "import")) return importer(argv[2]);
  if (argc == 3 && !strcmp(argv[1], "open")) {
    cudaIpcMemHandle_t mh;
    get_file(argv[2], "mem", &mh, sizeof mh);
    void *p;
    printf("open: %s\n", cudaGetErrorName(cudaIpcOpenMemHandle(&p, mh, 0)));
    return 0;
  }
  if (argc == 2 && !strcmp(argv[1], "get")) {
    void *p;
    CHECK(cudaMalloc(&p, 4096));
    cudaIpcMemHandle_t mh;
    printf("get: %s\n", cudaGetErrorName(cudaIpcGetMemHandle(&mh, p)));
    return 0;
  }
  fprintf(stderr, "usage: ipc_pair export DIR [hold] | import DIR | open DIR | get\n");
  return 2;
}
