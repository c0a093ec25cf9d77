/* JIT linking on the simulation (sim/sim_link.c): a PTX kernel linked with
   the PTX that defines its extern function loads with its kernel; the
   logs, their sizes and the wall time are written as the driver writes
   them; broken PTX, undefined and twice-defined functions, inputs the
   simulation does not link and misuse fail with their codes and logs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/image.h"
#include "executor/driver.h"
#include "image_files.h"

static const struct ferry_driver *d;
static CUcontext ctx;
/* a fat binary container: the simulation does not link one */
static const unsigned char fatbin[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0};

#define HEAD ".version 9.0\n.target sm_90\n.address_size 64\n"
static const char kernel_ptx[] =
    "//\n// a kernel calling helper\n//\n" HEAD
    ".extern .func  (.param .b32 func_retval0) helper\n(\n\t.param .b32 helper_param_0\n)\n;\n"
    ".visible .entry _Z3incPii(\n\t.param .u64 p0,\n\t.param .u32 p1\n)\n{\n\tret;\n}\n";
static const char helper_ptx[] =
    "// helper\n" HEAD
    ".visible .func  (.param .b32 func_retval0) helper(\n\t.param .b32 helper_param_0\n)\n{\n\tret;\n}\n";

struct logs {
  char info[256], error[256];
  CUjit_option opt[6];
  void *val[6];
};

static void logs_init(struct logs *g, unsigned size) {
  memset(g, 0, sizeof *g);
  CUjit_option o[6] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                       CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                       CU_JIT_LOG_VERBOSE, CU_JIT_WALL_TIME};
  void *v[6] = {g->info, (void *)(uintptr_t)size, g->error, (void *)(uintptr_t)size, (void *)1,
                (void *)(uintptr_t)0xdeadbeefdeadbeefull};
  memcpy(g->opt, o, sizeof o);
  memcpy(g->val, v, sizeof v);
}

static int setup(void **state) {
  (void)state;
  char err[256];
  d = ferry_driver_sim(UNIT_TWINS, err, sizeof err);
  if (!d || d->Init(0) || d->DevicePrimaryCtxRetain(&ctx, 0) || d->CtxSetCurrent(ctx)) return -1;
  return 0;
}

static CUresult add_ptx(CUlinkState st, const char *text, const char *name) {
  return d->LinkAddData(st, CU_JIT_INPUT_PTX, (void *)text, strlen(text) + 1, name, 0, NULL, NULL);
}

static void test_link_pair(void **state) {
  (void)state;
  struct logs g;
  logs_init(&g, sizeof g.info);
  CUlinkState st;
  void *image;
  size_t size;
  assert_int_equal(d->LinkCreate(6, g.opt, g.val, &st), CUDA_SUCCESS);
  assert_int_equal(add_ptx(st, kernel_ptx, "kernel.ptx"), CUDA_SUCCESS);
  assert_int_equal(add_ptx(st, helper_ptx, "helper.ptx"), CUDA_SUCCESS);
  assert_int_equal(d->LinkComplete(st, &image, &size), CUDA_SUCCESS);
  /* a cubin as ferry measures one, naming the kernel (and no twin else) */
  uint64_t n;
  const char *kind;
  assert_int_equal(ferry_image_size(image, size, &n, &kind), 0);
  assert_string_equal(kind, "cubin");
  assert_int_equal(n, size);
  CUmodule m;
  CUfunction f;
  assert_int_equal(d->ModuleLoadData(&m, image), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z3incPii"), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z4pokePi"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(d->ModuleUnload(m), CUDA_SUCCESS);
  /* verbose: the info log says what was compiled; its size is written back */
  assert_non_null(strstr(g.info, "Compiling entry function '_Z3incPii'"));
  assert_int_equal((uintptr_t)g.val[1], strlen(g.info));
  assert_int_equal((uintptr_t)g.val[3], 0);
  assert_string_equal(g.error, "");
  /* the wall time overwrites its option's value */
  float ms;
  memcpy(&ms, &g.val[5], sizeof ms);
  assert_true(ms >= 0 && ms < 60000);
  assert_true(((uintptr_t)g.val[5] >> 32) == 0);
  assert_int_equal(d->LinkDestroy(st), CUDA_SUCCESS);
  assert_int_equal(d->LinkDestroy(st), CUDA_ERROR_INVALID_HANDLE);
}

/* one link of the given PTX inputs: its result, with the error log in g */
static CUresult link_of(struct logs *g, const char *a, const char *b, unsigned logsize) {
  logs_init(g, logsize);
  CUlinkState st;
  void *image;
  size_t size;
  assert_int_equal(d->LinkCreate(6, g->opt, g->val, &st), CUDA_SUCCESS);
  CUresult r = add_ptx(st, a, "a.ptx");
  if (!r && b) r = add_ptx(st, b, "b.ptx");
  if (!r) r = d->LinkComplete(st, &image, &size);
  assert_int_equal(d->LinkDestroy(st), CUDA_SUCCESS);
  return r;
}

static void test_link_errors(void **state) {
  (void)state;
  struct logs g;
  assert_int_equal(link_of(&g, kernel_ptx, NULL, 256), CUDA_ERROR_INVALID_IMAGE);
  assert_string_equal(g.error, "error   : Undefined reference to 'helper'\n");
  assert_int_equal((uintptr_t)g.val[3], strlen(g.error));
  assert_int_equal(link_of(&g, helper_ptx, helper_ptx, 256), CUDA_ERROR_INVALID_IMAGE);
  assert_non_null(strstr(g.error, "Multiple definition of 'helper' in 'b.ptx'"));
  /* a truncated text: its last brace gone */
  char *cut = strdup(helper_ptx);
  *strrchr(cut, '}') = ' ';
  assert_int_equal(link_of(&g, cut, NULL, 256), CUDA_ERROR_INVALID_PTX);
  assert_non_null(strstr(g.error, "ptxas application ptx input, line 11; fatal   : Parsing error"));
  *strchr(cut, '{') = '}';
  assert_int_equal(link_of(&g, cut, NULL, 256), CUDA_ERROR_INVALID_PTX);
  free(cut);
  assert_int_equal(link_of(&g, "not ptx at all", NULL, 256), CUDA_ERROR_INVALID_PTX);
  assert_non_null(strstr(g.error, "Missing .version"));
  /* a small buffer: the log is cut, NUL-terminated inside it */
  assert_int_equal(link_of(&g, kernel_ptx, NULL, 16), CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(strlen(g.error), 15);
  assert_memory_equal(g.error, "error   : Undef", 15);
}

static void test_link_inputs(void **state) {
  (void)state;
  CUlinkState st;
  void *image;
  size_t size;
  uint64_t len;
  unsigned char *cubin = slurp("kernels.cubin", &len);
  assert_int_equal(d->LinkCreate(0, NULL, NULL, &st), CUDA_SUCCESS);
  /* nothing added yet */
  assert_int_equal(d->LinkComplete(st, &image, &size), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->LinkAddData(st, CU_JIT_INPUT_CUBIN, cubin, 8, "x", 0, NULL, NULL),
                   CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(d->LinkAddData(st, CU_JIT_INPUT_FATBINARY, (void *)fatbin, sizeof fatbin, "f",
                                  0, NULL, NULL), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(d->LinkAddData(st, CU_JIT_NUM_INPUT_TYPES, cubin, len, "x", 0, NULL, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->LinkAddData(st, CU_JIT_INPUT_CUBIN, NULL, len, "x", 0, NULL, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  /* a cubin's kernels are the linked image's */
  assert_int_equal(d->LinkAddData(st, CU_JIT_INPUT_CUBIN, cubin, len, NULL, 0, NULL, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(d->LinkComplete(st, &image, &size), CUDA_SUCCESS);
  CUmodule m;
  CUfunction f;
  assert_int_equal(d->ModuleLoadData(&m, image), CUDA_SUCCESS);
  assert_int_equal(d->ModuleGetFunction(&f, m, "_Z3incPii"), CUDA_SUCCESS);
  assert_int_equal(d->ModuleUnload(m), CUDA_SUCCESS);
  assert_int_equal(d->LinkDestroy(st), CUDA_SUCCESS);
  free(cubin);
  /* bad arguments */
  CUjit_option bad = CU_JIT_NUM_OPTIONS;
  void *v = NULL;
  assert_int_equal(d->LinkCreate(1, &bad, &v, &st), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->LinkCreate(1, NULL, NULL, &st), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->LinkCreate(0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(d->LinkComplete(NULL, &image, &size), CUDA_ERROR_INVALID_HANDLE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_link_pair),
      cmocka_unit_test(test_link_errors),
      cmocka_unit_test(test_link_inputs),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
