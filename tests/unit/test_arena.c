/* The client-side device allocator: placement, sharing of mappings, rollback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "common/arena.h"

#define BASE 0x200000000000ull
#define G (2ull << 20)

/* a fake GPU that records its mappings and can be told to fail */
struct fake_gpu {
  uint64_t addr[64], size[64];
  int n, maps, unmaps, fail_at;
};

static int fake_map(void *ctx, uint64_t addr, uint64_t size) {
  struct fake_gpu *g = ctx;
  g->maps++;
  if (g->fail_at && g->maps == g->fail_at) return 2;
  assert_true(addr % G == 0 && size % G == 0 && size > 0);
  for (int i = 0; i < g->n; i++) /* never map over a live mapping */
    assert_true(addr + size <= g->addr[i] || addr >= g->addr[i] + g->size[i]);
  g->addr[g->n] = addr;
  g->size[g->n++] = size;
  return 0;
}

static int fake_unmap(void *ctx, uint64_t addr, uint64_t size) {
  struct fake_gpu *g = ctx;
  g->unmaps++;
  for (int i = 0; i < g->n; i++) {
    if (g->addr[i] == addr) {
      assert_int_equal(g->size[i], size); /* unmaps match maps exactly */
      g->addr[i] = g->addr[--g->n];
      g->size[i] = g->size[g->n];
      return 0;
    }
  }
  fail_msg("unmap of 0x%llx that was never mapped", (unsigned long long)addr);
  return 1;
}

static void small_allocations_share_a_mapping(void **state) {
  (void)state;
  struct fake_gpu gpu = {0};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  assert_int_equal(ferry_arena_init(&a, BASE, 1ull << 40, G), 0);
  uint64_t p[100];
  for (int i = 0; i < 100; i++) {
    assert_int_equal(ferry_arena_alloc(&a, 1000, &be, &p[i]), 0);
    assert_true(p[i] % FERRY_ARENA_ALIGN == 0);
    assert_true(p[i] >= BASE && p[i] < BASE + (1ull << 40));
    if (i) assert_true(p[i] >= p[i - 1] + 1000);
  }
  assert_int_equal(gpu.maps, 1);
  assert_ptr_not_equal(ferry_arena_find(&a, p[5] + 999), NULL);
  assert_true(ferry_arena_find(&a, p[5] + 999)->addr == p[5]);
  assert_null(ferry_arena_find(&a, p[99] + 1024)); /* past the last allocation */
  for (int i = 0; i < 99; i++) assert_int_equal(ferry_arena_free(&a, p[i], &be), 0);
  assert_int_equal(gpu.unmaps, 0); /* p[99] still uses it */
  assert_int_equal(ferry_arena_free(&a, p[99], &be), 0);
  assert_int_equal(gpu.unmaps, 1);
  assert_int_equal(gpu.n, 0);
  assert_true(a.live_bytes == 0 && a.mapped_bytes == 0);
  ferry_arena_destroy(&a);
}

static void large_allocations_are_dedicated_and_returned(void **state) {
  (void)state;
  struct fake_gpu gpu = {0};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  ferry_arena_init(&a, BASE, 1ull << 40, G);
  uint64_t small, big, big2;
  assert_int_equal(ferry_arena_alloc(&a, 64, &be, &small), 0);
  assert_int_equal(ferry_arena_alloc(&a, 5 * G + 1, &be, &big), 0);
  assert_true(big % G == 0);
  assert_int_equal(ferry_arena_alloc(&a, 3 * G, &be, &big2), 0);
  assert_int_equal(gpu.maps, 3);
  assert_true(a.mapped_bytes == G + 6 * G + 3 * G);
  assert_int_equal(ferry_arena_free(&a, big, &be), 0);
  assert_int_equal(gpu.unmaps, 1);
  assert_true(a.mapped_bytes == 4 * G);
  /* the freed range is reused */
  uint64_t again;
  assert_int_equal(ferry_arena_alloc(&a, 6 * G, &be, &again), 0);
  assert_true(again == big);
  ferry_arena_destroy(&a);
}

static void failed_mapping_leaves_no_trace(void **state) {
  (void)state;
  struct fake_gpu gpu = {.fail_at = 2};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  ferry_arena_init(&a, BASE, 1ull << 40, G);
  uint64_t p, q;
  assert_int_equal(ferry_arena_alloc(&a, 100, &be, &p), 0);
  size_t nfree = a.nfree;
  assert_int_equal(ferry_arena_alloc(&a, 10 * G, &be, &q), 2);
  assert_int_equal(a.nregions, 1);
  assert_int_equal(a.nfree, nfree);
  assert_true(a.mapped_bytes == G);
  assert_int_equal(gpu.n, 1);
  gpu.fail_at = 0;
  assert_int_equal(ferry_arena_alloc(&a, 10 * G, &be, &q), 0);
  ferry_arena_destroy(&a);
}

static void bad_frees_and_exhaustion(void **state) {
  (void)state;
  struct fake_gpu gpu = {0};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  ferry_arena_init(&a, BASE, 8 * G, G);
  uint64_t p, q;
  assert_int_equal(ferry_arena_alloc(&a, 1000, &be, &p), 0);
  assert_int_equal(ferry_arena_free(&a, p + 8, &be), 1); /* not an allocation start */
  assert_int_equal(ferry_arena_free(&a, 0x1234, &be), 1);
  assert_int_equal(ferry_arena_alloc(&a, 8 * G, &be, &q), 2); /* does not fit any more */
  assert_int_equal(ferry_arena_alloc(&a, 0, &be, &q), 2);
  assert_int_equal(ferry_arena_free(&a, p, &be), 0);
  assert_int_equal(ferry_arena_free(&a, p, &be), 1); /* double free */
  assert_int_equal(ferry_arena_alloc(&a, 8 * G, &be, &q), 0); /* everything coalesced */
  ferry_arena_destroy(&a);
  assert_int_equal(ferry_arena_init(&a, BASE + 5, 8 * G, G), 1); /* unaligned base */
}

static void straddling_allocation_maps_only_the_gap(void **state) {
  (void)state;
  struct fake_gpu gpu = {0};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  ferry_arena_init(&a, BASE, 1ull << 40, G);
  uint64_t p, q;
  assert_int_equal(ferry_arena_alloc(&a, G - 4096, &be, &p), 0); /* small: < G */
  assert_int_equal(ferry_arena_alloc(&a, 512 * 1024, &be, &q), 0); /* crosses into granule 2 */
  assert_true(q < BASE + G && q + 512 * 1024 > BASE + G);
  assert_int_equal(gpu.maps, 2);
  assert_true(gpu.addr[1] == BASE + G && gpu.size[1] == G);
  assert_int_equal(ferry_arena_free(&a, p, &be), 0);
  assert_int_equal(gpu.unmaps, 0); /* q still spans granule 1 */
  assert_int_equal(ferry_arena_free(&a, q, &be), 0);
  assert_int_equal(gpu.unmaps, 2);
  ferry_arena_destroy(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(small_allocations_share_a_mapping),
      cmocka_unit_test(large_allocations_are_dedicated_and_returned),
      cmocka_unit_test(failed_mapping_leaves_no_trace),
      cmocka_unit_test(bad_frees_and_exhaustion),
      cmocka_unit_test(straddling_allocation_maps_only_the_gap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
