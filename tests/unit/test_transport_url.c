/* Server addresses are typed by users, so both accepted forms and the
   rejection of typos are pinned down here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "transport/transport.h"

static void expect_ok(const char *text, const char *scheme, const char *host, int port, int gpu) {
  struct ferry_url u;
  char err[256] = "";
  int r = ferry_url_parse(text, &u, err, sizeof err);
  if (r) fail_msg("'%s' rejected: %s", text, err);
  assert_string_equal(u.scheme, scheme);
  assert_string_equal(u.host, host);
  assert_int_equal(u.port, port);
  assert_int_equal(u.gpu, gpu);
}

static void expect_bad(const char *text, const char *needle) {
  struct ferry_url u;
  char err[256] = "";
  if (ferry_url_parse(text, &u, err, sizeof err) == 0) fail_msg("'%s' was accepted", text);
  if (!strstr(err, needle)) fail_msg("error for '%s' is '%s', lacks '%s'", text, err, needle);
}

static void test_parse_good(void **state) {
  (void)state;
  expect_ok("tcp://host:7421/3", "tcp", "host", 7421, 3);
  expect_ok("tcp://host/1", "tcp", "host", FERRY_DEFAULT_PORT, 1);
  expect_ok("tcp://host", "tcp", "host", FERRY_DEFAULT_PORT, -1);
  expect_ok("tcp://host/", "tcp", "host", FERRY_DEFAULT_PORT, -1);
  expect_ok("tcp://10.0.0.5:9000", "tcp", "10.0.0.5", 9000, -1);
  expect_ok("tcp://[::1]:7420/0", "tcp", "::1", 7420, 0);
  expect_ok("tcp://[fe80::1%eth0]/2", "tcp", "fe80::1%eth0", FERRY_DEFAULT_PORT, 2);
  expect_ok("TCP://gpu-box.example.com:1/0", "tcp", "gpu-box.example.com", 1, 0);
  /* FERRY_STREAMS for one server */
  expect_ok("tcp://host:7421/3?streams=4", "tcp", "host", 7421, 3);
  expect_ok("tcp://host?streams=16", "tcp", "host", FERRY_DEFAULT_PORT, -1);
  struct ferry_url u;
  char err[256] = "";
  assert_int_equal(ferry_url_parse("tcp://[::1]:7420/0?streams=2", &u, err, sizeof err), 0);
  assert_int_equal(u.streams, 2);
  assert_int_equal(u.gpu, 0);
  assert_int_equal(ferry_url_parse("tcp://host/1", &u, err, sizeof err), 0);
  assert_int_equal(u.streams, 0);
  expect_ok("ib://node7:7420/0", "ib", "node7", 7420, 0);
  expect_ok("ib://node7/1", "ib", "node7", FERRY_DEFAULT_IB_PORT, 1); /* ib's own default */
  expect_ok("tcp://0.0.0.0:0", "tcp", "0.0.0.0", 0, -1);
}

static void test_parse_bad(void **state) {
  (void)state;
  expect_bad("tcp://host/0?streams=0", "streams must be a count from 1 to 16");
  expect_bad("tcp://host/0?streams=17", "streams must be a count from 1 to 16");
  expect_bad("tcp://host/0?streams=", "streams must be a count from 1 to 16");
  expect_bad("tcp://host/0?stream=4", "the only parameter after '?' is streams=N");
  expect_bad("ib://host/0?streams=4", "streams= applies to tcp:// only");
  expect_bad("tcp://host:x?streams=4", "port must be a number");
  expect_bad("", "empty");
  expect_bad("host:7420", "scheme");
  expect_bad("://host", "missing scheme");
  expect_bad("t c p://host", "scheme");
  expect_bad("tcp://", "missing host");
  expect_bad("tcp://:7420", "host");
  expect_bad("tcp://host:", "missing port");
  expect_bad("tcp://host:abc", "port");
  expect_bad("tcp://host:65536", "port");
  expect_bad("tcp://host:-1", "port");
  expect_bad("tcp://host:99999999999999999999", "port");
  expect_bad("tcp://host:7420/x", "GPU");
  expect_bad("tcp://host:7420/0/1", "GPU");
  expect_bad("tcp://host/-1", "GPU");
  expect_bad("tcp://host:7420 junk", "port");
  expect_bad("tcp://host junk", "unexpected");
  expect_bad("tcp://[::1", "']'");
  expect_bad("tcp://[]:1", "empty IPv6");
  expect_bad("tcp://[::1]x", "unexpected");
  expect_bad("verylongscheme://h", "scheme");
}

static void test_parse_rcuda(void **state) {
  (void)state;
  struct ferry_url u;
  char err[256] = "";
  assert_int_equal(ferry_url_parse_rcuda("gpu-box@7500:2", "tcp", &u, err, sizeof err), 0);
  assert_string_equal(u.scheme, "tcp");
  assert_string_equal(u.host, "gpu-box");
  assert_int_equal(u.port, 7500);
  assert_int_equal(u.gpu, 2);
  assert_int_equal(ferry_url_parse_rcuda("gpu-box:1", "ib", &u, err, sizeof err), 0);
  assert_string_equal(u.scheme, "ib");
  assert_int_equal(u.port, FERRY_DEFAULT_IB_PORT);
  assert_int_equal(u.gpu, 1);
  assert_int_equal(ferry_url_parse_rcuda("[::1]@9:0", "tcp", &u, err, sizeof err), 0);
  assert_string_equal(u.host, "::1");
  assert_int_equal(u.port, 9);
  assert_int_equal(ferry_url_parse_rcuda("box", "tcp", &u, err, sizeof err), 0);
  assert_int_equal(u.gpu, -1);

  assert_int_equal(ferry_url_parse_rcuda("box:", "tcp", &u, err, sizeof err), -1);
  assert_non_null(strstr(err, "GPU"));
  assert_int_equal(ferry_url_parse_rcuda("box@:1", "tcp", &u, err, sizeof err), -1);
  assert_non_null(strstr(err, "port"));
  assert_int_equal(ferry_url_parse_rcuda("box@70000:1", "tcp", &u, err, sizeof err), -1);
  assert_int_equal(ferry_url_parse_rcuda("box:1x", "tcp", &u, err, sizeof err), -1);
  assert_int_equal(ferry_url_parse_rcuda("box/1", "tcp", &u, err, sizeof err), -1);
  assert_non_null(strstr(err, "unexpected"));
  assert_int_equal(ferry_url_parse_rcuda("", "tcp", &u, err, sizeof err), -1);
}

static void test_format_roundtrip(void **state) {
  (void)state;
  const char *cases[][2] = {
      {"tcp://host:7421/3", "tcp://host:7421/3"},
      {"tcp://host", "tcp://host:7420"},
      {"tcp://[::1]/0", "tcp://[::1]:7420/0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct ferry_url u, v;
    char err[256], out[300];
    assert_int_equal(ferry_url_parse(cases[i][0], &u, err, sizeof err), 0);
    ferry_url_format(&u, out, sizeof out);
    assert_string_equal(out, cases[i][1]);
    assert_int_equal(ferry_url_parse(out, &v, err, sizeof err), 0);
    assert_memory_equal(&u, &v, sizeof u);
  }
}

static void test_registry(void **state) {
  (void)state;
  char err[256] = "";
  const struct ferry_transport *t = ferry_transport_find("tcp", err, sizeof err);
  assert_non_null(t);
  assert_string_equal(t->scheme, "tcp");
  /* ib:// is there exactly when rdma-core's headers were found at build time */
  t = ferry_transport_find("ib", err, sizeof err);
  if (t)
    assert_string_equal(t->scheme, "ib");
  else
    assert_string_equal(err,
                        "ib:// transport is not built into this ferry (rdma-core was not found at "
                        "build time); use tcp://");
  assert_null(ferry_transport_find("udp", err, sizeof err));
  assert_non_null(strstr(err, "udp"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_good),
      cmocka_unit_test(test_parse_bad),
      cmocka_unit_test(test_parse_rcuda),
      cmocka_unit_test(test_format_roundtrip),
      cmocka_unit_test(test_registry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
