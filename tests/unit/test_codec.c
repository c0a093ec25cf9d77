/* The generated msgpack codec: round trips, and rejection of bad bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "protocol/codec.h"

static void launch_round_trip(void **state) {
  (void)state;
  unsigned char params[40];
  for (int i = 0; i < 40; i++) params[i] = (unsigned char)(i * 3);
  struct ferry_launch_args in = {.func = 0x10002, .gx = 7, .gy = 1, .gz = 3, .bx = 256, .by = 2,
                                 .bz = 1, .shmem = 4096, .stream = 17, .params = {params, 40}};
  struct ferry_buf b = {0};
  assert_int_equal(ferry_encode_args(FERRY_CALL_launch, &in, &b), 0);
  struct ferry_decoder d;
  ferry_decoder_init(&d);
  struct ferry_launch_args out;
  memset(&out, 0, sizeof out);
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_launch, b.data, b.len, &out), 0);
  assert_int_equal(out.func, 0x10002);
  assert_int_equal(out.gx, 7);
  assert_int_equal(out.gz, 3);
  assert_int_equal(out.bx, 256);
  assert_int_equal(out.by, 2);
  assert_int_equal(out.shmem, 4096);
  assert_int_equal(out.stream, 17);
  assert_int_equal(out.params.len, 40);
  assert_memory_equal(out.params.ptr, params, 40);
  ferry_decoder_destroy(&d);
  ferry_buf_free(&b);
}

static void rets_with_strings_and_floats(void **state) {
  (void)state;
  int32_t attrs[4] = {1, -2, 3, 1 << 30};
  unsigned char uuid[16] = {9};
  struct ferry_hello_rets in = {.name = "NVIDIA H100", .total_mem = 80ull << 30,
                                .granularity = 2 << 20, .driver_version = 13000,
                                .uuid = {uuid, 16}, .attrs = {attrs, sizeof attrs}};
  struct ferry_buf b = {0};
  assert_int_equal(ferry_encode_rets(FERRY_CALL_hello, &in, &b), 0);
  struct ferry_decoder d;
  ferry_decoder_init(&d);
  struct ferry_hello_rets out;
  assert_int_equal(ferry_decode_rets(&d, FERRY_CALL_hello, b.data, b.len, &out), 0);
  assert_string_equal(out.name, "NVIDIA H100");
  assert_true(out.total_mem == 80ull << 30);
  assert_int_equal(out.driver_version, 13000);
  assert_memory_equal(out.attrs.ptr, attrs, sizeof attrs);
  ferry_buf_free(&b);

  struct ferry_event_elapsed_rets e = {.ms = 1.5f}, e2;
  assert_int_equal(ferry_encode_rets(FERRY_CALL_event_elapsed, &e, &b), 0);
  assert_int_equal(ferry_decode_rets(&d, FERRY_CALL_event_elapsed, b.data, b.len, &e2), 0);
  assert_true(e2.ms == 1.5f);
  struct ferry_stream_priority_range_rets pr = {.least = 0, .greatest = -5}, pr2;
  ferry_buf_free(&b);
  assert_int_equal(ferry_encode_rets(FERRY_CALL_stream_priority_range, &pr, &b), 0);
  assert_int_equal(ferry_decode_rets(&d, FERRY_CALL_stream_priority_range, b.data, b.len, &pr2), 0);
  assert_int_equal(pr2.greatest, -5);
  ferry_decoder_destroy(&d);
  ferry_buf_free(&b);
}

static void rejects_bad_bodies(void **state) {
  (void)state;
  struct ferry_decoder d;
  ferry_decoder_init(&d);
  struct ferry_mem_map_args a = {.addr = 0x200000000000ull, .size = 2 << 20}, out;
  struct ferry_buf b = {0};
  assert_int_equal(ferry_encode_args(FERRY_CALL_mem_map, &a, &b), 0);
  /* truncated */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_mem_map, b.data, b.len - 1, &out), -1);
  assert_non_null(strstr(d.error, "mem_map"));
  /* trailing garbage */
  char longer[64];
  memcpy(longer, b.data, b.len);
  longer[b.len] = 0x01;
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_mem_map, longer, b.len + 1, &out), -1);
  /* the body of another call: wrong field count */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_launch, b.data, b.len, &out), -1);
  assert_non_null(strstr(d.error, "fields"));
  /* a wrong field type: a string where a u64 belongs */
  struct ferry_buf s = {0};
  ferry_buf_append(&s, "\x92\xa2hi\x01", 5); /* [ "hi", 1 ] */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_mem_map, s.data, s.len, &out), -1);
  assert_non_null(strstr(d.error, "addr"));
  /* an unknown call id */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_COUNT + 5, b.data, b.len, &out), -1);
  assert_non_null(strstr(d.error, "unknown call"));
  /* garbage bytes */
  assert_int_equal(ferry_decode_args(&d, FERRY_CALL_mem_map, "\xc1\xc1\xc1", 3, &out), -1);
  /* a string without its NUL is refused (decoded strings must be C strings) */
  ferry_buf_free(&s);
  ferry_buf_append(&s, "\x96\xa2hi\x00\x00\x00\xc4\x00\xc4\x00", 11);
  struct ferry_hello_rets hr;
  assert_int_equal(ferry_decode_rets(&d, FERRY_CALL_hello, s.data, s.len, &hr), -1);
  ferry_buf_free(&s);
  ferry_buf_free(&b);
  ferry_decoder_destroy(&d);
}

static void every_call_has_a_name_and_one_mode(void **state) {
  (void)state;
  for (unsigned i = 0; i < FERRY_CALL_COUNT; i++) {
    assert_non_null(ferry_calls[i].name);
    unsigned mode = ferry_calls[i].flags & (SYNC | ASYNC);
    assert_true(mode == SYNC || mode == ASYNC);
    /* a reply can carry bulk data only if the caller waits for it */
    if (ferry_calls[i].flags & BULK_OUT) assert_true(ferry_calls[i].flags & SYNC);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(launch_round_trip),
      cmocka_unit_test(rets_with_strings_and_floats),
      cmocka_unit_test(rejects_bad_bodies),
      cmocka_unit_test(every_call_has_a_name_and_one_mode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
