// Calls CUDA runtime functions ferry does not forward, and misuses the API
// in ways plain CUDA leaves undefined (a destroyed stream, a copy past the
// end of an allocation). Under ferry the program must still load and run,
// get cudaErrorNotSupported / clear errors, and see one warning per call
// name. Only meaningful under ferry.
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime.h>

// never runs: every launch of it below is refused before it reaches the GPU
__global__ void touch(int *p) { *p = 1; }

int main() {
  // a level of a mipmapped array (not served), twice: one warning
  cudaArray_t level = nullptr;
  cudaError_t a = cudaGetMipmappedArrayLevel(&level, nullptr, 0);
  cudaError_t b = cudaGetMipmappedArrayLevel(&level, nullptr, 0);
  // graph memory allocation nodes (not served)
  cudaGraphNode_t node;
  cudaError_t c = cudaGraphAddMemAllocNode(&node, NULL, NULL, 0, NULL);
  // the program keeps working afterwards
  int *dev = nullptr;
  cudaError_t e = cudaMalloc(&dev, 64);
  cudaError_t f = cudaFree(dev);
  printf("mipmap_level=%s again=%s graph=%s malloc=%s free=%s\n", cudaGetErrorName(a),
         cudaGetErrorName(b), cudaGetErrorName(c), cudaGetErrorName(e), cudaGetErrorName(f));
  // a fork()ed child cannot use the parent's GPUs, and must not disturb them
  int *shared = nullptr;
  cudaMalloc(&shared, 64);
  int value = 1234, back = 0;
  cudaMemcpy(shared, &value, sizeof value, cudaMemcpyHostToDevice);
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    int *mine = nullptr;
    cudaError_t in_child = cudaMalloc(&mine, 64);
    _exit(in_child == cudaErrorInitializationError ? 0 : 1);
  }
  int child_status = -1;
  waitpid(child, &child_status, 0);
  cudaError_t after_fork = cudaMemcpy(&back, shared, sizeof back, cudaMemcpyDeviceToHost);
  cudaFree(shared);
  printf("fork: child=%s parent_after=%s value=%d\n",
         WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0 ? "refused" : "WRONG",
         cudaGetErrorName(after_fork), back);
  int fork_ok = WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0 &&
                after_fork == cudaSuccess && back == 1234;

  // misuse that ferry catches before it reaches the GPU
  int *small = nullptr, host[17];
  cudaStream_t s;
  cudaMalloc(&small, 16 * sizeof(int));
  cudaError_t past_end = cudaMemcpy(host, small, 17 * sizeof(int), cudaMemcpyDeviceToHost);
  cudaStreamCreate(&s);
  cudaStreamDestroy(s);
  cudaError_t stale = cudaStreamSynchronize(s);
  cudaFree(small);
  cudaGetLastError();
  printf("past_end=%s stale_stream=%s\n", cudaGetErrorName(past_end), cudaGetErrorName(stale));
  // launch attributes whose values hold handles of this process (an event
  // here) or that ferry does not know are refused, each with one warning
  cudaEvent_t ev;
  cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  cudaLaunchAttribute at[2] = {};
  at[0].id = cudaLaunchAttributeIgnore;
  at[1].id = cudaLaunchAttributeProgrammaticEvent;
  at[1].val.programmaticEvent.event = ev;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(1);
  cfg.attrs = at;
  cfg.numAttrs = 2;
  cudaError_t pev = cudaLaunchKernelEx(&cfg, touch, dev);
  cudaError_t pev_again = cudaLaunchKernelEx(&cfg, touch, dev);
  at[1].id = (cudaLaunchAttributeID)99;
  cudaError_t unknown_attr = cudaLaunchKernelEx(&cfg, touch, dev);
  cudaError_t no_config = cudaLaunchKernelExC(nullptr, (const void *)touch, nullptr);
  cudaEventDestroy(ev);
  cudaGetLastError();
  printf("programmatic_event=%s again=%s unknown_attribute=%s no_config=%s\n", cudaGetErrorName(pev),
         cudaGetErrorName(pev_again), cudaGetErrorName(unknown_attr), cudaGetErrorName(no_config));
  int ok = fork_ok && past_end == cudaErrorInvalidValue && stale == cudaErrorInvalidResourceHandle &&
           pev == cudaErrorNotSupported && pev_again == cudaErrorNotSupported &&
           unknown_attr == cudaErrorNotSupported && no_config == cudaErrorInvalidValue &&
           a == cudaErrorNotSupported && b == cudaErrorNotSupported &&
           c == cudaErrorNotSupported && e == cudaSuccess &&
           f == cudaSuccess;
  printf("unsupported: %s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
