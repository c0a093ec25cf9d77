/* The client-side device allocator: placement, sharing of mappings, rollback, the floor. */
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

/* every byte of [addr, addr + len) lies in a live mapping of the fake GPU */
static int is_mapped(const struct fake_gpu *g, uint64_t addr, uint64_t len) {
  uint64_t cur = addr, end = addr + len;
  for (int pass = 0; pass < g->n && cur < end; pass++)
    for (int i = 0; i < g->n; i++)
      if (g->addr[i] <= cur && cur < g->addr[i] + g->size[i]) cur = g->addr[i] + g->size[i];
  return cur >= end;
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
    assert_true(p[i] >= BASE + G && p[i] < BASE + (1ull << 40)); /* above the floor */
    if (i) assert_true(p[i] >= p[i - 1] + 1000);
  }
  assert_int_equal(gpu.maps, 1);
  assert_true(gpu.addr[0] == BASE && gpu.size[0] == 2 * G); /* the floor and the shared granule */
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
  assert_true(a.mapped_bytes == 2 * G /* floor and small */ + 6 * G + 3 * G);
  assert_int_equal(ferry_arena_free(&a, big, &be), 0);
  assert_int_equal(gpu.unmaps, 1);
  assert_true(a.mapped_bytes == 5 * G);
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
  assert_true(a.mapped_bytes == 2 * G);
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
  assert_int_equal(ferry_arena_alloc(&a, 7 * G, &be, &q), 2); /* does not fit any more */
  assert_int_equal(ferry_arena_alloc(&a, 0, &be, &q), 2);
  assert_int_equal(ferry_arena_free(&a, p, &be), 0);
  assert_int_equal(ferry_arena_free(&a, p, &be), 1); /* double free */
  assert_int_equal(ferry_arena_alloc(&a, 8 * G, &be, &q), 2); /* the floor is not for allocations */
  assert_int_equal(ferry_arena_alloc(&a, 7 * G, &be, &q), 0); /* everything else coalesced */
  assert_true(q == BASE + G && gpu.addr[0] == BASE && gpu.size[0] == 8 * G);
  ferry_arena_destroy(&a);
  assert_int_equal(ferry_arena_init(&a, BASE + 5, 8 * G, G), 1); /* unaligned base */
  assert_int_equal(ferry_arena_init(&a, BASE, G, G), 1);         /* the floor alone */
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
  assert_true(q < BASE + 2 * G && q + 512 * 1024 > BASE + 2 * G);
  assert_int_equal(gpu.maps, 2);
  assert_true(gpu.addr[1] == BASE + 2 * G && gpu.size[1] == G);
  assert_int_equal(ferry_arena_free(&a, p, &be), 0);
  assert_int_equal(gpu.unmaps, 0); /* q still spans granule 1 */
  assert_int_equal(ferry_arena_free(&a, q, &be), 0);
  assert_int_equal(gpu.unmaps, 2);
  ferry_arena_destroy(&a);
}

/* Rodinia srad_v2 (2048 x 2048 floats, six cudaMalloc of 16 MiB): its
   kernels read 8 KiB before the first allocation and 8 KiB past the ends
   of the first two; all of that must be mapped, as it is natively */
static void reads_around_srad_allocations_stay_mapped(void **state) {
  (void)state;
  struct fake_gpu gpu = {0};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  ferry_arena_init(&a, BASE, 1ull << 40, G);
  const uint64_t size = 2048ull * 2048 * sizeof(float), row = 2048 * sizeof(float);
  uint64_t p[6];
  for (int i = 0; i < 6; i++) assert_int_equal(ferry_arena_alloc(&a, size, &be, &p[i]), 0);
  assert_int_equal(gpu.maps, 6); /* the floor costs no call of its own */
  assert_true(p[0] == BASE + G);
  assert_true(is_mapped(&gpu, p[0] - row, row)); /* srad_kernel.cu:45, J_cuda[index_n], by == 0 */
  assert_true(is_mapped(&gpu, p[0] - 4, 4));     /* :55, J_cuda[index_w], block (0, 0) */
  for (int i = 0; i < 5; i++) assert_true(is_mapped(&gpu, p[i] + size, row)); /* :46, :200 */
  assert_null(ferry_arena_find(&a, p[0] - 4)); /* not an allocation: no copies, no mem-sync */
  assert_true(a.live_bytes == 6 * size && a.mapped_bytes == G + 6 * size);
  for (int i = 0; i < 6; i++) assert_int_equal(ferry_arena_free(&a, p[i], &be), 0);
  assert_true(gpu.n == 0 && a.mapped_bytes == 0); /* the floor went with J_cuda */
  ferry_arena_destroy(&a);
}

/* the floor lives and dies with the mapping of the granule above it */
static void the_floor_goes_with_the_granule_above(void **state) {
  (void)state;
  struct fake_gpu gpu = {0};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  ferry_arena_init(&a, BASE, 1ull << 40, G);
  uint64_t s1, s2, big, s3;
  assert_int_equal(ferry_arena_alloc(&a, 4096, &be, &s1), 0);
  assert_int_equal(ferry_arena_alloc(&a, 4096, &be, &s2), 0);
  assert_int_equal(ferry_arena_alloc(&a, 3 * G, &be, &big), 0);
  assert_true(s1 == BASE + G && big == BASE + 2 * G && is_mapped(&gpu, BASE, 5 * G));
  assert_int_equal(ferry_arena_free(&a, s1, &be), 0);
  assert_true(is_mapped(&gpu, BASE, G)); /* s2 still holds the granule, and so the floor */
  assert_int_equal(ferry_arena_free(&a, s2, &be), 0);
  assert_false(is_mapped(&gpu, BASE, 1)); /* unmapped in the same call as the granule */
  assert_true(a.mapped_bytes == 3 * G && gpu.unmaps == 1);
  assert_int_equal(ferry_arena_alloc(&a, 100, &be, &s3), 0); /* first fit: right above the floor */
  assert_true(s3 == BASE + G && is_mapped(&gpu, BASE, 2 * G) && gpu.maps == 3);
  ferry_arena_destroy(&a);
}

static void failed_first_allocation_maps_nothing(void **state) {
  (void)state;
  struct fake_gpu gpu = {.fail_at = 1};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  ferry_arena_init(&a, BASE, 1ull << 40, G);
  uint64_t p;
  assert_int_equal(ferry_arena_alloc(&a, 100, &be, &p), 2);
  assert_true(gpu.n == 0 && a.nmaps == 0 && a.mapped_bytes == 0 && a.nregions == 0);
  gpu.fail_at = 0;
  assert_int_equal(ferry_arena_alloc(&a, 100, &be, &p), 0);
  assert_true(p == BASE + G && is_mapped(&gpu, BASE, 2 * G));
  ferry_arena_reset(&a); /* the device was reset: its mappings are gone */
  memset(&gpu, 0, sizeof gpu);
  assert_int_equal(ferry_arena_alloc(&a, 100, &be, &p), 0);
  assert_true(p == BASE + G && gpu.maps == 1 && is_mapped(&gpu, BASE, 2 * G));
  ferry_arena_destroy(&a);
}


/* ---- reservations and the program's own mappings (program VMM) ---- */

#define ARENA (1ull << 40)

static void reservations_are_avoided_and_hints_honoured(void **state) {
  (void)state;
  struct fake_gpu gpu = {0};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  assert_int_equal(ferry_arena_init(&a, BASE, ARENA, G), 0);
  uint64_t r1, r2, r3, p;
  /* no hint: from the top down, rounded up to the granularity */
  assert_int_equal(ferry_arena_reserve(&a, 100 * G + 4096, 0, 0, &r1), 0);
  assert_true(r1 == BASE + ARENA - 101 * G);
  assert_ptr_equal(ferry_arena_reservation(&a, r1 + 101 * G - 1), &a.resv[0]);
  assert_null(ferry_arena_reservation(&a, r1 - 1));
  /* a free, aligned hint inside the arena is honoured */
  uint64_t hint = BASE + 64 * G;
  assert_int_equal(ferry_arena_reserve(&a, 8 * G, 0, hint, &r2), 0);
  assert_true(r2 == hint);
  /* a busy, misaligned or outside hint is only a hint */
  assert_int_equal(ferry_arena_reserve(&a, 8 * G, 0, hint + 4 * G, &r3), 0);
  assert_true(r3 != hint + 4 * G && (r3 + 8 * G <= hint || r3 >= hint + 8 * G));
  assert_int_equal(ferry_arena_unreserve(&a, r3), 0);
  assert_int_equal(ferry_arena_reserve(&a, 8 * G, 0, hint + 8 * G + 4096, &r3), 0);
  assert_true(r3 != hint + 8 * G + 4096 && r3 % G == 0);
  assert_int_equal(ferry_arena_unreserve(&a, r3), 0);
  assert_int_equal(ferry_arena_reserve(&a, 8 * G, 0, BASE - 16 * G, &r3), 0);
  assert_true(r3 >= BASE + G && r3 + 8 * G <= BASE + ARENA);
  assert_int_equal(ferry_arena_unreserve(&a, r3), 0);
  /* alignment */
  assert_int_equal(ferry_arena_reserve(&a, G, 64 * G, 0, &r3), 0);
  assert_true(r3 % (64 * G) == 0);
  assert_int_equal(ferry_arena_unreserve(&a, r3), 0);
  /* ordinary allocations never land in a reservation, even when they must
     go around one */
  for (int i = 0; i < 40; i++) {
    assert_int_equal(ferry_arena_alloc(&a, 3 * G, &be, &p), 0);
    assert_true(p + 3 * G <= r2 || p >= r2 + 8 * G);
    assert_true(p + 3 * G <= r1);
  }
  assert_int_equal(gpu.maps, 40); /* a reservation maps nothing */
  /* too large, or only the exact start frees one */
  assert_int_equal(ferry_arena_reserve(&a, ARENA, 0, 0, &r3), 2);
  assert_int_equal(ferry_arena_unreserve(&a, r2 + G), 1);
  assert_int_equal(ferry_arena_unreserve(&a, r2), 0);
  assert_int_equal(ferry_arena_unreserve(&a, r2), 1);
  assert_int_equal(ferry_arena_unreserve(&a, r1), 0);
  assert_int_equal(a.nresv, 0);
  ferry_arena_destroy(&a);
}

static void the_arena_holds_many_device_sized_reservations(void **state) {
  (void)state;
  /* PyTorch's expandable segments reserve about the device's memory per
     segment: a 4 TiB arena takes 16 of 192 GiB (and a few cudaMallocs) */
  struct ferry_arena a;
  assert_int_equal(ferry_arena_init(&a, BASE, 4ull << 40, G), 0);
  uint64_t r;
  for (int i = 0; i < 16; i++) assert_int_equal(ferry_arena_reserve(&a, 192ull << 30, 0, 0, &r), 0);
  assert_int_equal(ferry_arena_alloc(&a, 64ull << 30, NULL, &r), 0);
  ferry_arena_destroy(&a);
}

static void mappings_in_a_reservation(void **state) {
  (void)state;
  struct fake_gpu gpu = {0};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  assert_int_equal(ferry_arena_init(&a, BASE, ARENA, G), 0);
  uint64_t r, p;
  assert_int_equal(ferry_arena_reserve(&a, 16 * G, 0, 0, &r), 0);
  /* outside a reservation, misaligned, past its end, handle 0: refused */
  assert_int_equal(ferry_arena_map_at(&a, BASE + 4 * G, G, 7, &be), 1);
  assert_int_equal(ferry_arena_map_at(&a, r + 4096, G, 7, &be), 1);
  assert_int_equal(ferry_arena_map_at(&a, r, G + 4096, 7, &be), 1);
  assert_int_equal(ferry_arena_map_at(&a, r + 15 * G, 2 * G, 7, &be), 1);
  assert_int_equal(ferry_arena_map_at(&a, r, G, 0, &be), 1);
  assert_int_equal(gpu.maps, 0);
  /* three chunks back to back, as an expandable segment grows */
  for (uint64_t i = 0; i < 3; i++) assert_int_equal(ferry_arena_map_at(&a, r + i * G, G, 10 + i, &be), 0);
  assert_int_equal(gpu.maps, 3);
  assert_true(a.live_bytes == 3 * G && a.mapped_bytes == 3 * G);
  assert_int_equal(ferry_arena_map_at(&a, r + G, G, 20, &be), 1); /* over a mapping */
  assert_true(ferry_arena_find(&a, r + G + 5)->handle == 11);
  assert_true(ferry_arena_covers(&a, r + G / 2, 2 * G)); /* across chunk boundaries */
  assert_false(ferry_arena_covers(&a, r + G / 2, 3 * G)); /* past the last chunk */
  assert_int_equal(ferry_arena_free(&a, r, &be), 1);      /* not cudaFree's */
  /* an ordinary allocation never counts as the next chunk */
  assert_int_equal(ferry_arena_alloc(&a, G, &be, &p), 0);
  assert_false(ferry_arena_covers(&a, p + G - 8, 16));
  /* parked: mapped on the GPU, not the program's */
  assert_int_equal(ferry_arena_park(&a, r + G, 1), 0);
  assert_null(ferry_arena_find(&a, r + G));
  assert_true(ferry_arena_find_any(&a, r + G)->parked);
  assert_false(ferry_arena_covers(&a, r + G / 2, G));
  assert_int_equal(ferry_arena_unreserve(&a, r), 1); /* regions inside */
  assert_int_equal(ferry_arena_park(&a, r + G, 0), 0);
  assert_true(ferry_arena_covers(&a, r, 3 * G));
  assert_int_equal(ferry_arena_park(&a, r + G / 2, 1), 1);
  /* a failed unmap keeps the region; then each goes */
  assert_int_equal(ferry_arena_unmap_at(&a, r + G / 2, &be), 1);
  for (uint64_t i = 0; i < 3; i++) assert_int_equal(ferry_arena_unmap_at(&a, r + i * G, &be), 0);
  assert_int_equal(gpu.unmaps, 3);
  assert_int_equal(ferry_arena_unreserve(&a, r), 0);
  assert_int_equal(ferry_arena_free(&a, p, &be), 0);
  assert_true(a.live_bytes == 0 && a.mapped_bytes == 0 && gpu.n == 0);
  ferry_arena_destroy(&a);
}

static void failed_map_at_leaves_no_trace(void **state) {
  (void)state;
  struct fake_gpu gpu = {.fail_at = 1};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  assert_int_equal(ferry_arena_init(&a, BASE, ARENA, G), 0);
  uint64_t r;
  assert_int_equal(ferry_arena_reserve(&a, 4 * G, 0, 0, &r), 0);
  assert_int_equal(ferry_arena_map_at(&a, r, G, 5, &be), 2);
  assert_true(a.nregions == 0 && a.nmaps == 0 && a.live_bytes == 0);
  assert_int_equal(ferry_arena_map_at(&a, r, G, 5, &be), 0);
  ferry_arena_destroy(&a);
}

static void a_reset_keeps_reservations(void **state) {
  (void)state;
  struct fake_gpu gpu = {0};
  struct ferry_arena_backend be = {fake_map, fake_unmap, &gpu};
  struct ferry_arena a;
  assert_int_equal(ferry_arena_init(&a, BASE, 64 * G, G), 0);
  uint64_t r, p;
  assert_int_equal(ferry_arena_reserve(&a, 8 * G, 0, BASE + 8 * G, &r), 0);
  assert_true(r == BASE + 8 * G);
  assert_int_equal(ferry_arena_map_at(&a, r, G, 3, &be), 0);
  ferry_arena_reset(&a);
  assert_true(a.nregions == 0 && a.nmaps == 0 && a.nresv == 1);
  assert_null(ferry_arena_find_any(&a, r));
  for (int i = 0; i < 5; i++) {
    assert_int_equal(ferry_arena_alloc(&a, 2 * G, NULL, &p), 0);
    assert_true(p + 2 * G <= r || p >= r + 8 * G);
  }
  assert_int_equal(ferry_arena_map_at(&a, r, G, 3, NULL), 0);
  ferry_arena_destroy(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(small_allocations_share_a_mapping),
      cmocka_unit_test(large_allocations_are_dedicated_and_returned),
      cmocka_unit_test(failed_mapping_leaves_no_trace),
      cmocka_unit_test(bad_frees_and_exhaustion),
      cmocka_unit_test(straddling_allocation_maps_only_the_gap),
      cmocka_unit_test(reads_around_srad_allocations_stay_mapped),
      cmocka_unit_test(the_floor_goes_with_the_granule_above),
      cmocka_unit_test(failed_first_allocation_maps_nothing),
      cmocka_unit_test(reservations_are_avoided_and_hints_honoured),
      cmocka_unit_test(the_arena_holds_many_device_sized_reservations),
      cmocka_unit_test(mappings_in_a_reservation),
      cmocka_unit_test(failed_map_at_leaves_no_trace),
      cmocka_unit_test(a_reset_keeps_reservations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
