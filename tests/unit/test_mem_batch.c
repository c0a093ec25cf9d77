/* protocol/mem_batch.c: requests larger than one mem_hash or gather may
   carry are cut within the bounds of protocol/wire.h, ranges split where
   they must be, and the answers come back in order as one call's would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "protocol/mem_batch.h"
#include "protocol/wire.h"

static struct {
  unsigned calls;
  int fail_at; /* the call (1-based) that fails, 0: none */
  uint64_t *reply;
  uint64_t bytes; /* gathered so far */
} fake;

/* mem_hash: each piece's "hash" is its address; gather: each byte's value
   is its address's low byte, written where the bulk says */
static int fake_call(void *ctx, unsigned call, const void *args, void *rets,
                     const struct ferry_bulk *bulk) {
  (void)ctx;
  fake.calls++;
  if (fake.fail_at && (int)fake.calls == fake.fail_at) return 719;
  if (call == FERRY_CALL_mem_hash) {
    const struct ferry_mem_hash_args *a = args;
    uint32_t n = a->ranges.len / 16;
    assert_true(n >= 1 && n <= FERRY_HASH_MAX_RANGES);
    const uint64_t *p = a->ranges.ptr;
    uint64_t k = 0;
    for (uint32_t i = 0; i < n; i++)
      for (uint64_t off = 0; off < p[2 * i + 1]; off += a->chunk) {
        assert_true(k < FERRY_HASH_MAX_PIECES);
        fake.reply[k++] = p[2 * i] + off;
      }
    struct ferry_mem_hash_rets *r = rets;
    r->hashes = (ferry_blob){fake.reply, (uint32_t)(k * 8)};
    return 0;
  }
  assert_int_equal(call, FERRY_CALL_memcpy_dtoh_gather);
  const struct ferry_memcpy_dtoh_gather_args *a = args;
  uint32_t n = a->ranges.len / 16;
  assert_true(n >= 1 && n <= FERRY_GATHER_MAX_RANGES);
  const uint64_t *p = a->ranges.ptr;
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; i++) total += p[2 * i + 1];
  assert_true(total <= FERRY_GATHER_MAX_BYTES);
  assert_int_equal(bulk->out_len, total);
  /* the first and last byte of each range, where the packing puts them */
  unsigned char *out = bulk->out;
  uint64_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (p[2 * i + 1]) {
      out[at] = (unsigned char)p[2 * i];
      out[at + p[2 * i + 1] - 1] = (unsigned char)(p[2 * i] + p[2 * i + 1] - 1);
    }
    at += p[2 * i + 1];
  }
  fake.bytes += total;
  return 0;
}

static int setup(void **state) {
  (void)state;
  memset(&fake, 0, sizeof fake);
  fake.reply = malloc(FERRY_HASH_MAX_PIECES * 8);
  return fake.reply ? 0 : -1;
}
static int teardown(void **state) {
  (void)state;
  free(fake.reply);
  return 0;
}

/* one range of 2.9 GB in 4 KiB pages (miniFE's registered buffer): 709,000
   pages, 11 calls, every hash in its place */
static void hash_splits_a_large_range(void **state) {
  (void)state;
  uint64_t pages = 709000, base = 0x1c0000000000ull;
  uint64_t pairs[2] = {base, pages * 4096};
  uint64_t *h = malloc(pages * 8);
  assert_non_null(h);
  assert_int_equal(ferry_mem_hash_batched(fake_call, NULL, pairs, 1, 4096, h), 0);
  assert_int_equal(fake.calls, (pages + FERRY_HASH_MAX_PIECES - 1) / FERRY_HASH_MAX_PIECES);
  for (uint64_t k = 0; k < pages; k++)
    if (h[k] != base + k * 4096) fail_msg("hash %llu is of the wrong piece", (unsigned long long)k);
  free(h);
}

/* many small ranges: cut by the range bound; a last piece shorter than a chunk */
static void hash_splits_many_ranges(void **state) {
  (void)state;
  size_t n = FERRY_HASH_MAX_RANGES * 2 + 7;
  uint64_t *pairs = malloc(n * 16), *h = malloc(n * 8);
  assert_non_null(pairs);
  assert_non_null(h);
  for (size_t i = 0; i < n; i++) pairs[2 * i] = 0x1000000ull + i * 0x10000, pairs[2 * i + 1] = 100;
  assert_int_equal(ferry_mem_hash_batched(fake_call, NULL, pairs, n, 4096, h), 0);
  assert_int_equal(fake.calls, 3);
  for (size_t i = 0; i < n; i++) assert_int_equal(h[i], pairs[2 * i]);
  free(pairs);
  free(h);
}

/* the first failed call's error comes back, and no call after it */
static void hash_stops_at_an_error(void **state) {
  (void)state;
  uint64_t pages = 3 * (uint64_t)FERRY_HASH_MAX_PIECES;
  uint64_t pairs[2] = {0x200000, pages * 4096};
  uint64_t *h = malloc(pages * 8);
  fake.fail_at = 2;
  assert_int_equal(ferry_mem_hash_batched(fake_call, NULL, pairs, 1, 4096, h), 719);
  assert_int_equal(fake.calls, 2);
  assert_int_equal(ferry_mem_hash_batched(fake_call, NULL, pairs, 1, 0, h), -1);
  free(h);
}

/* 2.5 GiB in two ranges: three gathers, the bytes packed in order */
static void gather_splits_by_bytes(void **state) {
  (void)state;
  uint64_t a = 1ull << 30, b = (3ull << 29);
  uint64_t pairs[4] = {0x100000000ull, a, 0x300000001ull, b};
  size_t total = a + b;
  unsigned char *out = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  assert_true(out != MAP_FAILED);
  assert_int_equal(ferry_gather_batched(fake_call, NULL, pairs, 2, out), 0);
  assert_int_equal(fake.calls, 3);
  assert_int_equal(fake.bytes, total);
  /* where each range's first and last bytes landed */
  assert_int_equal(out[0], (unsigned char)pairs[0]);
  assert_int_equal(out[a - 1], (unsigned char)(pairs[0] + a - 1));
  assert_int_equal(out[a], (unsigned char)pairs[2]);
  assert_int_equal(out[total - 1], (unsigned char)(pairs[2] + b - 1));
  munmap(out, total);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(hash_splits_a_large_range, setup, teardown),
      cmocka_unit_test_setup_teardown(hash_splits_many_ranges, setup, teardown),
      cmocka_unit_test_setup_teardown(hash_stops_at_an_error, setup, teardown),
      cmocka_unit_test_setup_teardown(gather_splits_by_bytes, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
