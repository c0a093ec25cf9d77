/*
 * JIT linking through the driver API (issue 22), as NVIDIA's ptxjit sample,
 * Numba and CuPy link: drv_jit_step's PTX, whose kernel calls an extern
 * device function, and drv_jit_mix's PTX, which defines it, linked with
 * cuLinkCreate/AddData/AddData/Complete (log buffers, verbose, wall time),
 * loaded with cuModuleLoadData and launched; the same linked again with
 * cuLinkAddFile from a temporary file; a broken PTX and a missing function
 * whose links fail with an error code and an error log. Then both linked
 * kernels run in turns, and the results are checked on the host. The first
 * launch comes between the first link and the others, so that a run moved
 * there links again where it runs then. A run migrated at any launch must
 * end with the same checksum.
 * usage: drv_jitlink STEP.ptx MIX.ptx ITERATIONS
 * Prints "launches: L" and "checksum: <hex>", then PASSED or FAILED.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp, strdup */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drv_check.h"

#define LOG_SIZE 8192
#define N 1000

static int launches;

struct logs {
  char info[LOG_SIZE], error[LOG_SIZE];
  float wall;
  CUjit_option opt[7];
  void *val[7];
};

/* the options ptxjit passes, and an optimisation level */
static void logs_init(struct logs *g) {
  memset(g, 0, sizeof *g);
  CUjit_option o[7] = {CU_JIT_WALL_TIME, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                       CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                       CU_JIT_LOG_VERBOSE, CU_JIT_OPTIMIZATION_LEVEL};
  void *v[7] = {&g->wall, g->info, (void *)(uintptr_t)LOG_SIZE, g->error,
                (void *)(uintptr_t)LOG_SIZE, (void *)1, (void *)3};
  memcpy(g->opt, o, sizeof o);
  memcpy(g->val, v, sizeof v);
}

/* the first line of a log, for the output */
static void first_line(const char *what, const char *log) {
  const char *nl = strchr(log, '\n');
  printf("%s: %.*s\n", what, (int)(nl ? nl - log : (long)strlen(log)), log);
}

/* links step with mix (as data, or from the file mix_path) and loads it */
static CUmodule link_and_load(const char *step, const char *mix, const char *mix_path) {
  struct logs g;
  logs_init(&g);
  CUlinkState st;
  void *cubin = NULL;
  size_t size = 0;
  CU(cuLinkCreate(7, g.opt, g.val, &st));
  CU(cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)step, strlen(step) + 1, "drv_jit_step.ptx", 0,
                   NULL, NULL));
  if (mix_path)
    CU(cuLinkAddFile(st, CU_JIT_INPUT_PTX, mix_path, 0, NULL, NULL));
  else
    CU(cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)mix, strlen(mix) + 1, "drv_jit_mix.ptx", 0, NULL,
                     NULL));
  MUST(cuLinkComplete(st, &cubin, &size));
  EXPECT(size > 64 && memcmp(cubin, "\177ELF", 4) == 0);
  /* the sizes written back fit the buffers, and the logs end inside them */
  EXPECT((uintptr_t)g.val[2] <= LOG_SIZE && memchr(g.info, 0, LOG_SIZE) != NULL);
  EXPECT((uintptr_t)g.val[4] <= LOG_SIZE && g.error[0] == '\0');
  first_line(mix_path ? "info log (file)" : "info log", g.info);
  CUmodule mod;
  CU(cuModuleLoadData(&mod, cubin));
  /* the module keeps its own copy: the link may go */
  CU(cuLinkDestroy(st));
  return mod;
}

/* a link that must fail: its result and error log */
static void link_fails(const char *what, const char *a, const char *b) {
  struct logs g;
  logs_init(&g);
  CUlinkState st;
  void *cubin = NULL;
  size_t size = 0;
  CU(cuLinkCreate(7, g.opt, g.val, &st));
  /* an input's error may show when it is added or at the end (ferry) */
  CUresult r = cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)a, strlen(a) + 1, "a.ptx", 0, NULL, NULL);
  if (r == CUDA_SUCCESS && b)
    r = cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)b, strlen(b) + 1, "b.ptx", 0, NULL, NULL);
  if (r == CUDA_SUCCESS) r = cuLinkComplete(st, &cubin, &size);
  printf("%s: %s\n", what, cu_name(r));
  drv_check(r != CUDA_SUCCESS, __FILE__, __LINE__, what, "the link did not fail");
  EXPECT(g.error[0] != '\0' && memchr(g.error, 0, LOG_SIZE) != NULL);
  first_line("error log", g.error);
  CU(cuLinkDestroy(st));
}

static unsigned mix(unsigned v, unsigned k) { return (v ^ (v >> 7)) * 2654435761u + k; }

static void launch(CUfunction f, CUdeviceptr x, unsigned k) {
  int n = N;
  void *args[] = {&x, &n, &k};
  MUST(cuLaunchKernel(f, (N + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
  launches++;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s STEP.ptx MIX.ptx ITERATIONS\n", argv[0]);
    return 2;
  }
  int iters = atoi(argv[3]);
  size_t len;
  char *step = drv_read_file(argv[1], &len), *mixptx = drv_read_file(argv[2], &len);
  CUdevice dev;
  drv_primary(&dev);

  unsigned host[N], want[N];
  for (unsigned i = 0; i < N; i++) host[i] = want[i] = i * 2654435761u;
  CUdeviceptr x;
  MUST(cuMemAlloc(&x, sizeof host));
  MUST(cuMemcpyHtoD(x, host, sizeof host));
  CUmodule m1 = link_and_load(step, mixptx, NULL);
  CUfunction f1, f2;
  CU(cuModuleGetFunction(&f1, m1, "jit_step"));
  /* launch 1: a run moved there links the rest where it runs then */
  launch(f1, x, 7777);
  for (unsigned i = 0; i < N; i++) want[i] = mix(want[i], 7777 + i);
  /* cuLinkAddFile reads a file of the program's machine */
  char path[] = "/tmp/drv_jitlink.XXXXXX";
  int fd = mkstemp(path);
  EXPECT(fd >= 0 && write(fd, mixptx, strlen(mixptx)) == (ssize_t)strlen(mixptx));
  if (fd >= 0) close(fd);
  CUmodule m2 = link_and_load(step, mixptx, path);
  unlink(path);
  struct logs g;
  CUlinkState st;
  logs_init(&g);
  CU(cuLinkCreate(7, g.opt, g.val, &st));
  CU_IS(cuLinkAddFile(st, CU_JIT_INPUT_PTX, path, 0, NULL, NULL), CUDA_ERROR_FILE_NOT_FOUND);
  CU(cuLinkDestroy(st));

  /* a truncated PTX (its last brace gone), and a kernel without its function */
  char *broken = strdup(mixptx);
  char *brace = strrchr(broken, '}');
  if (brace) *brace = ' ';
  link_fails("broken PTX", step, broken);
  link_fails("missing function", step, NULL);

  CU(cuModuleGetFunction(&f2, m2, "jit_step"));
  for (int it = 0; it < iters; it++) {
    launch(f1, x, 2u * it);
    launch(f2, x, 2u * it + 1);
    for (unsigned i = 0; i < N; i++) {
      want[i] = mix(want[i], 2u * it + i);
      want[i] = mix(want[i], 2u * it + 1 + i);
    }
  }
  MUST(cuMemcpyDtoH(host, x, sizeof host));
  EXPECT(memcmp(host, want, sizeof host) == 0);
  CU(cuMemFree(x));
  CU(cuModuleUnload(m1));
  CU(cuModuleUnload(m2));
  printf("iterations: %d\n", iters);
  printf("launches: %d\n", launches);
  printf("checksum: %016llx\n", drv_fnv(1469598103934665603ull, host, sizeof host));
  free(step);
  free(mixptx);
  free(broken);
  return drv_summary();
}
