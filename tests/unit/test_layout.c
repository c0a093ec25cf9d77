/* Parameter layouts: parsing the wire form and packing launch arguments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "protocol/layout.h"

static size_t put(unsigned char *b, size_t off, uint32_t v) {
  memcpy(b + off, &v, 4);
  return off + 4;
}

/* kern(int*, float, struct{char; double; int}, char, double), as measured on an H100 */
static void packs_mixed_parameters(void **state) {
  (void)state;
  unsigned char wire[64] = {0};
  size_t o = put(wire, 0, 5);
  uint32_t pairs[][2] = {{0, 8}, {8, 4}, {16, 24}, {40, 1}, {48, 8}};
  for (int i = 0; i < 5; i++) o = put(wire, put(wire, o, pairs[i][0]), pairs[i][1]);
  const unsigned char *p = wire;
  struct ferry_layout l;
  assert_int_equal(ferry_layout_read(&p, wire + o, &l), 0);
  assert_ptr_equal(p, wire + o);
  assert_int_equal(l.nparams, 5);
  assert_int_equal(l.bytes, 56);

  int *ptr = (int *)0x200000001000;
  float f = 1.5f;
  struct { char a; double b; int c; } s = {'x', 2.25, -7};
  char c = 'q';
  double d = -3.5;
  void *args[] = {&ptr, &f, &s, &c, &d};
  unsigned char buf[56];
  memset(buf, 0xee, sizeof buf);
  ferry_layout_pack(&l, args, buf);
  assert_memory_equal(buf + 0, &ptr, 8);
  assert_memory_equal(buf + 8, &f, 4);
  assert_memory_equal(buf + 16, &s, 24);
  assert_int_equal(buf[40], 'q');
  assert_memory_equal(buf + 48, &d, 8);
  assert_int_equal(buf[12], 0); /* padding is zeroed, not left over */
  ferry_layout_free(&l);
}

static void large_grid_constant_parameter(void **state) {
  (void)state;
  unsigned char wire[32] = {0};
  size_t o = put(wire, 0, 2);
  o = put(wire, put(wire, o, 0), 32000);
  o = put(wire, put(wire, o, 32000), 8);
  const unsigned char *p = wire;
  struct ferry_layout l;
  assert_int_equal(ferry_layout_read(&p, wire + o, &l), 0);
  assert_int_equal(l.bytes, 32008);
  static int big[8000];
  for (int i = 0; i < 8000; i++) big[i] = i;
  void *out = (void *)0x1234;
  void *args[] = {big, &out};
  static unsigned char buf[32008];
  ferry_layout_pack(&l, args, buf);
  assert_memory_equal(buf, big, 32000);
  assert_memory_equal(buf + 32000, &out, 8);
  ferry_layout_free(&l);
}

static void absent_and_malformed(void **state) {
  (void)state;
  unsigned char wire[32] = {0};
  size_t o = put(wire, 0, FERRY_LAYOUT_ABSENT);
  const unsigned char *p = wire;
  struct ferry_layout l;
  assert_int_equal(ferry_layout_read(&p, wire + o, &l), 1);
  /* count larger than the bytes present */
  o = put(wire, 0, 3);
  o = put(wire, put(wire, o, 0), 8);
  p = wire;
  assert_int_equal(ferry_layout_read(&p, wire + o, &l), -1);
  /* a parameter beyond the 32 KiB limit */
  o = put(wire, 0, 1);
  o = put(wire, put(wire, o, 32760), 16);
  p = wire;
  assert_int_equal(ferry_layout_read(&p, wire + o, &l), -1);
  /* empty input */
  p = wire;
  assert_int_equal(ferry_layout_read(&p, wire, &l), -1);
}

static void equality(void **state) {
  (void)state;
  uint32_t off1[] = {0, 8}, sz1[] = {8, 4}, off2[] = {0, 8}, sz2[] = {8, 8};
  struct ferry_layout a = {2, 12, off1, sz1}, b = {2, 16, off2, sz2}, c = {2, 12, off2, sz1};
  assert_true(ferry_layout_equal(&a, &c));
  assert_false(ferry_layout_equal(&a, &b));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(packs_mixed_parameters),
      cmocka_unit_test(large_grid_constant_parameter),
      cmocka_unit_test(absent_and_malformed),
      cmocka_unit_test(equality),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
