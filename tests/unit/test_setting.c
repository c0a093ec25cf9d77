/* Checks the strict parser of numeric settings (common/setting.c): what
 * strtod/atof let through (nan, inf, hex, blanks, trailing letters,
 * overflow) is refused, sub-millisecond timeouts are 1 ms rather than 0
 * (wait for ever), and a refused variable is said in one line. */
#include <fcntl.h>
#include <locale.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/setting.h"

static void test_real(void **state) {
  (void)state;
  static const struct {
    const char *text;
    double value;
  } good[] = {{"0", 0},   {"60", 60},     {"1.5", 1.5},     {".5", 0.5},   {"5.", 5},
              {"1e3", 1000}, {"1E-3", 0.001}, {"2.5e+1", 25}, {"007", 7},   {"0.0001", 0.0001},
              {"86400", 86400}, {"000000000000000000000000001", 1},
              {"123456789012345678901234", 123456789012345678901234.0}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    double v = -1;
    if (ferry_parse_real(good[i].text, 0, 1e30, &v)) fail_msg("'%s' refused", good[i].text);
    double d = v > good[i].value ? v - good[i].value : good[i].value - v;
    if (d > good[i].value * 1e-12)
      fail_msg("'%s' read as %.17g", good[i].text, v);
  }
  static const char *const bad[] = {"",     "nan",  "NAN",   "inf",   "-inf", "infinity", "-1",
                                    "+1",   " 1",   "1 ",    "1s",    "0x10", "0x1p3",    ".",
                                    "e3",   "1e",   "1e+",   "1.2.3", "1,5",  "1e999",    "1\n",
                                    "--1",  "1e-3x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    double v = 42;
    if (!ferry_parse_real(bad[i], 0, 1e30, &v)) fail_msg("'%s' accepted as %g", bad[i], v);
    assert_true(v == 42); /* untouched */
  }
  double v;
  assert_int_equal(ferry_parse_real(NULL, 0, 1, &v), -1);
  assert_int_equal(ferry_parse_real("86400.1", 0, 86400, &v), -1); /* the range */
  assert_int_equal(ferry_parse_real("0.5", 1, 2, &v), -1);
  assert_int_equal(ferry_parse_real("1e-999", 0, 1, &v), 0); /* underflows to 0: in range */
  assert_true(v == 0);
  /* '.' is the decimal point whatever the program's locale says */
  if (setlocale(LC_NUMERIC, "de_DE.UTF-8") || setlocale(LC_NUMERIC, "fr_FR.UTF-8")) {
    assert_int_equal(ferry_parse_real("0.25", 0, 1, &v), 0);
    assert_true(v == 0.25);
    assert_int_equal(ferry_parse_real("0,25", 0, 1, &v), -1);
    setlocale(LC_NUMERIC, "C");
  }
}

static void test_uint(void **state) {
  (void)state;
  uint64_t v = 0;
  assert_int_equal(ferry_parse_uint("0", 0, 10, &v), 0);
  assert_int_equal(v, 0);
  assert_int_equal(ferry_parse_uint("010", 0, 100, &v), 0);
  assert_int_equal(v, 10); /* decimal, not octal */
  assert_int_equal(ferry_parse_uint("0x10", 0, 100, &v), 0);
  assert_int_equal(v, 16);
  assert_int_equal(ferry_parse_uint("0XfF", 0, 1000, &v), 0);
  assert_int_equal(v, 255);
  assert_int_equal(ferry_parse_uint("18446744073709551615", 0, UINT64_MAX, &v), 0);
  assert_true(v == UINT64_MAX);
  assert_int_equal(ferry_parse_uint("0xffffffffffffffff", 0, UINT64_MAX, &v), 0);
  static const char *const bad[] = {"",  "-1", "+1", " 1", "1 ",  "1k", "0x", "x10", "1.0",
                                    "1e3", "18446744073709551616", "0x10000000000000000", "nan"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = 42;
    if (!ferry_parse_uint(bad[i], 0, UINT64_MAX, &v)) fail_msg("'%s' accepted as %llu", bad[i],
                                                               (unsigned long long)v);
    assert_int_equal(v, 42);
  }
  assert_int_equal(ferry_parse_uint(NULL, 0, 1, &v), -1);
  assert_int_equal(ferry_parse_uint("4", 5, 10, &v), -1);
  assert_int_equal(ferry_parse_uint("11", 5, 10, &v), -1);
  assert_int_equal(ferry_parse_uint("5", 5, 10, &v), 0);
  assert_int_equal(ferry_parse_uint("10", 5, 10, &v), 0);
}

static void test_ms(void **state) {
  (void)state;
  static const struct {
    const char *text;
    int ms;
  } good[] = {{"0", 0},         {"60", 60000},  {"0.0001", 1}, {"0.0004999", 1},  {"0.0005", 1},
              {"0.0015", 2},    {"1e-9", 1},    {"0.7", 700},  {"2.5", 2500},     {"86400", 86400000},
              {"0.001", 1},     {"1e-300", 1},  {"1e-999", 1}, {"0e5", 0},      {"0.000", 0}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    int ms = -7;
    if (ferry_parse_ms(good[i].text, 86400, 1, &ms)) fail_msg("'%s' refused", good[i].text);
    if (ms != good[i].ms) fail_msg("'%s' is %d ms, expected %d", good[i].text, ms, good[i].ms);
  }
  int ms = -7;
  static const char *const bad[] = {"nan", "inf", "-1", "86400.5", "1e999", "", "5s", " 1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (!ferry_parse_ms(bad[i], 86400, 1, &ms)) fail_msg("'%s' accepted as %d ms", bad[i], ms);
  assert_int_equal(ms, -7);
  assert_int_equal(ferry_parse_ms("0", 86400, 0, &ms), -1); /* zero not allowed */
  assert_int_equal(ferry_parse_ms("0.0001", 86400, 0, &ms), 0);
  assert_int_equal(ms, 1);
  /* a maximum beyond what an int of milliseconds holds is cut to it */
  assert_int_equal(ferry_parse_ms("1e300", 1e300, 1, &ms), -1);
  assert_int_equal(ferry_parse_ms("2000000", 1e300, 1, &ms), 0);
  assert_int_equal(ms, 2000000000);
}

/* what fn writes on stderr while it runs */
static char said[4096];
static int captured(int (*fn)(void)) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  int saved = dup(2);
  dup2(p[1], 2);
  close(p[1]);
  int r = fn();
  dup2(saved, 2);
  close(saved);
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  ssize_t n = read(p[0], said, sizeof said - 1);
  said[n > 0 ? n : 0] = '\0';
  close(p[0]);
  return r;
}

static int got_ms;
static int call_env_ms(void) {
  return ferry_env_ms("FERRY_TEST_TIMEOUT", 86400, 1, &got_ms,
                      "seconds from 0 (wait for ever) to 86400", "60");
}
static uint64_t got_uint;
static int call_env_uint(void) {
  return ferry_env_uint("FERRY_TEST_COUNT", 1, 8, &got_uint, "1 to 8", "1");
}

static void test_env(void **state) {
  (void)state;
  unsetenv("FERRY_TEST_TIMEOUT");
  got_ms = -7;
  assert_int_equal(captured(call_env_ms), 0); /* unset: nothing said */
  assert_string_equal(said, "");
  assert_int_equal(got_ms, -7);
  setenv("FERRY_TEST_TIMEOUT", "", 1);
  assert_int_equal(captured(call_env_ms), 0); /* empty is unset */
  assert_string_equal(said, "");
  setenv("FERRY_TEST_TIMEOUT", "0.25", 1);
  assert_int_equal(captured(call_env_ms), 1);
  assert_string_equal(said, "");
  assert_int_equal(got_ms, 250);
  setenv("FERRY_TEST_TIMEOUT", "nan", 1);
  got_ms = -7;
  assert_int_equal(captured(call_env_ms), 0);
  assert_string_equal(said, "ferry: FERRY_TEST_TIMEOUT=nan ignored: expected seconds from 0 "
                            "(wait for ever) to 86400; using 60\n");
  assert_int_equal(got_ms, -7);
  unsetenv("FERRY_TEST_TIMEOUT");

  setenv("FERRY_TEST_COUNT", "9", 1);
  assert_int_equal(captured(call_env_uint), 0);
  assert_string_equal(said, "ferry: FERRY_TEST_COUNT=9 ignored: expected 1 to 8; using 1\n");
  setenv("FERRY_TEST_COUNT", "8", 1);
  assert_int_equal(captured(call_env_uint), 1);
  assert_int_equal(got_uint, 8);
  assert_string_equal(said, "");
  unsetenv("FERRY_TEST_COUNT");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_real),
      cmocka_unit_test(test_uint),
      cmocka_unit_test(test_ms),
      cmocka_unit_test(test_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
