/* cuLink*'s wire blobs (protocol/jitlink.c): which JIT options travel, the
   options and inputs round trip in their fixed layout, and every way a
   blob can be malformed is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "protocol/jitlink.h"

static void option_uses(void **state) {
  (void)state;
  assert_int_equal(ferry_jit_option_use(CU_JIT_OPTIMIZATION_LEVEL), FERRY_JIT_PLAIN);
  assert_int_equal(ferry_jit_option_use(CU_JIT_TARGET), FERRY_JIT_PLAIN);
  assert_int_equal(ferry_jit_option_use(CU_JIT_SPLIT_COMPILE), FERRY_JIT_PLAIN);
  assert_int_equal(ferry_jit_option_use(CU_JIT_THREADS_PER_BLOCK), FERRY_JIT_THREADS);
  assert_int_equal(ferry_jit_option_use(CU_JIT_WALL_TIME), FERRY_JIT_WALL_TIME);
  assert_int_equal(ferry_jit_option_use(CU_JIT_INFO_LOG_BUFFER), FERRY_JIT_LOG_BUFFER);
  assert_int_equal(ferry_jit_option_use(CU_JIT_ERROR_LOG_BUFFER), FERRY_JIT_LOG_BUFFER);
  assert_int_equal(ferry_jit_option_use(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES), FERRY_JIT_LOG_SIZE);
  assert_int_equal(ferry_jit_option_use(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES), FERRY_JIT_LOG_SIZE);
  assert_int_equal(ferry_jit_option_use(CU_JIT_GLOBAL_SYMBOL_ADDRESSES), FERRY_JIT_REFUSED);
  assert_int_equal(ferry_jit_option_use(CU_JIT_GLOBAL_SYMBOL_NAMES), FERRY_JIT_REFUSED);
  assert_int_equal(ferry_jit_option_use(CU_JIT_REFERENCED_KERNEL_NAMES), FERRY_JIT_REFUSED);
  assert_int_equal(ferry_jit_option_use(CU_JIT_NUM_OPTIONS), FERRY_JIT_REFUSED);
  /* the names follow cuda.h's values */
  assert_string_equal(ferry_jit_option_name(CU_JIT_GLOBAL_SYMBOL_ADDRESSES), "CU_JIT_GLOBAL_SYMBOL_ADDRESSES");
  assert_string_equal(ferry_jit_option_name(CU_JIT_FMA), "CU_JIT_FMA");
  assert_string_equal(ferry_jit_option_name(CU_JIT_SPLIT_COMPILE), "CU_JIT_SPLIT_COMPILE");
  assert_string_equal(ferry_jit_option_name(99), "CUjit_option 99");
}

static void options_round_trip(void **state) {
  (void)state;
  struct ferry_buf b = {0};
  assert_int_equal(ferry_jit_put_option(&b, CU_JIT_OPTIMIZATION_LEVEL, 3), 0);
  assert_int_equal(ferry_jit_put_option(&b, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, 1ull << 33), 0);
  assert_int_equal(b.len, 2 * FERRY_JIT_OPTION_BYTES);
  /* the layout: u32 option, u64 value, little-endian, no padding */
  const unsigned char want[12] = {7, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0};
  assert_memory_equal(b.data, want, sizeof want);
  assert_int_equal(ferry_jit_options_count(b.data, b.len), 2);
  uint32_t o;
  uint64_t v;
  ferry_jit_option_at(b.data, 1, &o, &v);
  assert_int_equal(o, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
  assert_true(v == 1ull << 33);
  ferry_buf_free(&b);
}

static void options_malformed(void **state) {
  (void)state;
  struct ferry_buf b = {0};
  assert_int_equal(ferry_jit_options_count(NULL, 0), 0);
  assert_int_equal(ferry_jit_put_option(&b, CU_JIT_FMA, 1), 0);
  assert_int_equal(ferry_jit_options_count(b.data, b.len - 1), -1); /* a partial option */
  /* a pointer option never travels */
  assert_int_equal(ferry_jit_put_option(&b, CU_JIT_ERROR_LOG_BUFFER, 0x1000), 0);
  assert_int_equal(ferry_jit_options_count(b.data, b.len), -1);
  ferry_buf_free(&b);
  for (unsigned i = 0; i <= FERRY_JIT_MAX_OPTIONS; i++)
    assert_int_equal(ferry_jit_put_option(&b, CU_JIT_FMA, 1), 0);
  assert_int_equal(ferry_jit_options_count(b.data, b.len), -1); /* too many */
  assert_int_equal(ferry_jit_options_count(b.data, b.len - FERRY_JIT_OPTION_BYTES),
                   (int)FERRY_JIT_MAX_OPTIONS);
  ferry_buf_free(&b);
}

static void inputs_round_trip(void **state) {
  (void)state;
  struct ferry_buf t = {0}, opts = {0};
  assert_int_equal(ferry_jit_put_option(&opts, CU_JIT_MAX_REGISTERS, 32), 0);
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_PTX, 1234, "a.ptx", &opts, 1), 0);
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_LIBRARY, 5ull << 30, NULL, NULL, 0), 0);
  assert_int_equal(t.len, (16 + 5 + 4 + 12) + (16 + 4));
  size_t pos = 0;
  struct ferry_jit_input in;
  assert_int_equal(ferry_jit_next_input(t.data, t.len, &pos, &in), 1);
  assert_int_equal(in.type, CU_JIT_INPUT_PTX);
  assert_int_equal(in.size, 1234);
  assert_int_equal(in.name_len, 5);
  assert_memory_equal(in.name, "a.ptx", 5);
  assert_int_equal(in.nopts, 1);
  uint32_t o;
  uint64_t v;
  ferry_jit_option_at(in.options, 0, &o, &v);
  assert_int_equal(o, CU_JIT_MAX_REGISTERS);
  assert_int_equal(v, 32);
  assert_int_equal(ferry_jit_next_input(t.data, t.len, &pos, &in), 1);
  assert_int_equal(in.type, CU_JIT_INPUT_LIBRARY);
  assert_true(in.size == 5ull << 30);
  assert_int_equal(in.name_len, 0);
  assert_int_equal(in.nopts, 0);
  assert_int_equal(ferry_jit_next_input(t.data, t.len, &pos, &in), 0);
  assert_int_equal(pos, t.len);
  ferry_buf_free(&t);
  ferry_buf_free(&opts);
}

/* every prefix of a valid table short of a whole entry is malformed */
static void inputs_truncated(void **state) {
  (void)state;
  struct ferry_buf t = {0}, opts = {0};
  assert_int_equal(ferry_jit_put_option(&opts, CU_JIT_FMA, 1), 0);
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_CUBIN, 8, "x.cubin", &opts, 1), 0);
  for (size_t len = 1; len < t.len; len++) {
    size_t pos = 0;
    struct ferry_jit_input in;
    assert_int_equal(ferry_jit_next_input(t.data, len, &pos, &in), -1);
  }
  ferry_buf_free(&t);
  ferry_buf_free(&opts);
}

static int one(const struct ferry_buf *t) {
  size_t pos = 0;
  struct ferry_jit_input in;
  return ferry_jit_next_input(t->data, t->len, &pos, &in);
}

static void inputs_malformed(void **state) {
  (void)state;
  struct ferry_buf t = {0}, opts = {0};
  /* a type past CU_JIT_INPUT_NVVM */
  assert_int_equal(ferry_jit_put_input(&t, FERRY_JIT_INPUT_TYPES, 8, "x", NULL, 0), 0);
  assert_int_equal(one(&t), -1);
  ferry_buf_free(&t);
  /* a NUL inside the name */
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_PTX, 8, "ab", NULL, 0), 0);
  ((char *)t.data)[17] = '\0';
  assert_int_equal(one(&t), -1);
  ferry_buf_free(&t);
  /* a name longer than allowed */
  char *name = malloc(FERRY_JIT_MAX_NAME + 2);
  memset(name, 'n', FERRY_JIT_MAX_NAME + 1);
  name[FERRY_JIT_MAX_NAME + 1] = '\0';
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_PTX, 8, name, NULL, 0), 0);
  assert_int_equal(one(&t), -1);
  ferry_buf_free(&t);
  free(name);
  /* an option of the input that cannot travel */
  assert_int_equal(ferry_jit_put_option(&opts, CU_JIT_GLOBAL_SYMBOL_ADDRESSES, 0x1000), 0);
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_PTX, 8, "x", &opts, 1), 0);
  assert_int_equal(one(&t), -1);
  ferry_buf_free(&t);
  /* more options announced than there are */
  assert_int_equal(ferry_jit_put_input(&t, CU_JIT_INPUT_PTX, 8, "x", NULL, 0), 0);
  ((unsigned char *)t.data)[t.len - 4] = 2;
  assert_int_equal(one(&t), -1);
  ferry_buf_free(&t);
  ferry_buf_free(&opts);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(option_uses),        cmocka_unit_test(options_round_trip),
      cmocka_unit_test(options_malformed),  cmocka_unit_test(inputs_round_trip),
      cmocka_unit_test(inputs_truncated),   cmocka_unit_test(inputs_malformed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
