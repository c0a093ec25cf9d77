/*
 * link_complete on the executor over the CPU simulation: a link of two PTX
 * inputs brings back a cubin, the logs and what the driver wrote into the
 * options; a failed link still answers, with the driver's CUresult and its
 * error log; malformed requests are refused with their bulk bytes skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "executor/exec.h"
#include "protocol/jitlink.h"

#define ARENA 0x200000000000ull
#define INVALID_VALUE 1 /* cudaErrorInvalidValue */

static const struct ferry_driver *drv;
static struct ferry_exec *ex;

#define HEAD ".version 9.0\n.target sm_90\n.address_size 64\n"
static const char kernel_ptx[] =
    HEAD ".extern .func (.param .b32 r) helper(.param .b32 x);\n"
         ".visible .entry _Z3incPii(.param .u64 p, .param .u32 n)\n{\n\tret;\n}\n";
static const char helper_ptx[] = HEAD ".visible .func (.param .b32 r) helper(.param .b32 x)\n{\n\tret;\n}\n";

struct mem_in {
  const char *data;
  uint64_t pos;
};
static int mem_read(void *ctx, void *dst, size_t n) {
  struct mem_in *m = ctx;
  memcpy(dst, m->data + m->pos, n);
  m->pos += n;
  return 0;
}

/* a link_complete of options and the inputs' table over data[0..len) */
static int link(const struct ferry_buf *opts, const struct ferry_buf *table, const char *data,
                uint64_t len, struct ferry_link_complete_rets *r, struct mem_in *m) {
  struct ferry_link_complete_args a = {.options = {opts->data, (uint32_t)opts->len},
                                       .inputs = {table->data, (uint32_t)table->len}};
  *m = (struct mem_in){data, 0};
  struct ferry_bulk_in in = {len, mem_read, m};
  struct ferry_io io = {.in = &in};
  memset(r, 0, sizeof *r);
  return ferry_exec_call(ex, FERRY_CALL_link_complete, &a, r, &io);
}

static void log_options(struct ferry_buf *o) {
  assert_int_equal(ferry_jit_put_option(o, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, 4096), 0);
  assert_int_equal(ferry_jit_put_option(o, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, 4096), 0);
  assert_int_equal(ferry_jit_put_option(o, CU_JIT_LOG_VERBOSE, 1), 0);
  assert_int_equal(ferry_jit_put_option(o, CU_JIT_WALL_TIME, 0), 0);
  assert_int_equal(ferry_jit_put_option(o, CU_JIT_THREADS_PER_BLOCK, 128), 0);
}

static void test_link_pair(void **state) {
  (void)state;
  struct ferry_buf o = {0}, t = {0}, data = {0};
  log_options(&o);
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_PTX, sizeof kernel_ptx, "k.ptx", NULL, 0), 0);
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_PTX, sizeof helper_ptx, "h.ptx", NULL, 0), 0);
  assert_int_equal(ferry_buf_append(&data, kernel_ptx, sizeof kernel_ptx), 0);
  assert_int_equal(ferry_buf_append(&data, helper_ptx, sizeof helper_ptx), 0);
  struct ferry_link_complete_rets r;
  struct mem_in m;
  assert_int_equal(link(&o, &t, data.data, data.len, &r, &m), 0);
  assert_int_equal(m.pos, data.len);
  assert_int_equal(r.result, CUDA_SUCCESS);
  assert_true(r.image.len > 64);
  assert_memory_equal(r.image.ptr, "\177ELF", 4);
  assert_true(r.info_log.len > 0);
  assert_non_null(memmem(r.info_log.ptr, r.info_log.len, "'_Z3incPii'", 11));
  assert_int_equal(r.info_filled, r.info_log.len);
  assert_int_equal(r.error_log.len, 0);
  assert_int_equal(r.error_filled, 0);
  assert_int_equal(r.wall_by_pointer, 0); /* the simulation writes over the value */
  assert_int_equal(r.threads, 128);
  ferry_buf_free(&o);
  ferry_buf_free(&t);
  ferry_buf_free(&data);
}

static void test_link_fails(void **state) {
  (void)state;
  struct ferry_buf o = {0}, t = {0};
  log_options(&o);
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_PTX, sizeof kernel_ptx, NULL, NULL, 0), 0);
  struct ferry_link_complete_rets r;
  struct mem_in m;
  /* the call succeeds; the link's own result is in the reply */
  assert_int_equal(link(&o, &t, kernel_ptx, sizeof kernel_ptx, &r, &m), 0);
  assert_int_equal(r.result, CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(r.image.len, 0);
  assert_non_null(memmem(r.error_log.ptr, r.error_log.len, "Undefined reference to 'helper'", 31));
  assert_int_equal(r.error_filled, r.error_log.len);
  ferry_buf_free(&o);
  ferry_buf_free(&t);
}

static void test_malformed(void **state) {
  (void)state;
  struct ferry_buf o = {0}, bad = {0}, t = {0}, t2 = {0}, per = {0};
  struct ferry_link_complete_rets r;
  struct mem_in m;
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_PTX, sizeof helper_ptx, "h", NULL, 0), 0);
  /* a client pointer among the options: refused, the bytes skipped */
  assert_int_equal(ferry_jit_put_option(&bad, CU_JIT_INFO_LOG_BUFFER, 0x1000), 0);
  assert_int_equal(link(&bad, &t, helper_ptx, sizeof helper_ptx, &r, &m), INVALID_VALUE);
  assert_int_equal(m.pos, sizeof helper_ptx);
  /* the table's sizes and the bulk disagree */
  assert_int_equal(link(&o, &t, helper_ptx, sizeof helper_ptx - 1, &r, &m), INVALID_VALUE);
  assert_int_equal(m.pos, sizeof helper_ptx - 1);
  /* a malformed table */
  t.len -= 1;
  assert_int_equal(link(&o, &t, helper_ptx, sizeof helper_ptx, &r, &m), INVALID_VALUE);
  assert_int_equal(m.pos, sizeof helper_ptx);
  /* an output option given to one input */
  assert_int_equal(ferry_jit_put_option(&per, CU_JIT_WALL_TIME, 0), 0);
  assert_int_equal(ferry_jit_put_input(&t2, CU_JIT_INPUT_PTX, sizeof helper_ptx, "h", &per, 1), 0);
  assert_int_equal(link(&o, &t2, helper_ptx, sizeof helper_ptx, &r, &m), INVALID_VALUE);
  assert_int_equal(m.pos, sizeof helper_ptx);
  /* and the executor still links */
  t.len += 1;
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_PTX, sizeof kernel_ptx, "k", NULL, 0), 0);
  char both[sizeof helper_ptx + sizeof kernel_ptx];
  memcpy(both, helper_ptx, sizeof helper_ptx);
  memcpy(both + sizeof helper_ptx, kernel_ptx, sizeof kernel_ptx);
  assert_int_equal(link(&o, &t, both, sizeof both, &r, &m), 0);
  assert_int_equal(r.result, CUDA_SUCCESS);
  ferry_buf_free(&bad);
  ferry_buf_free(&t);
  ferry_buf_free(&t2);
  ferry_buf_free(&per);
}

static int setup(void **state) {
  (void)state;
  char err[256];
  drv = ferry_driver_sim(UNIT_TWINS, err, sizeof err);
  if (!drv) return -1;
  ex = ferry_exec_open(drv, 0, ARENA, 1ull << 40, err, sizeof err);
  return ex ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ferry_exec_close(ex);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_link_pair),
      cmocka_unit_test(test_link_fails),
      cmocka_unit_test(test_malformed),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
