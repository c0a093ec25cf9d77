/* Stream-ordered pools' bookkeeping (common/pool.c): reuse by stream order
   and after synchronizations, events, the release threshold, trimming,
   attributes and their high-water marks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <string.h>

#include "common/pool.h"

/* a fake arena: counts the blocks it made and released */
struct fake {
  uint64_t next;
  int allocs, releases, fail;
  uint64_t live_bytes;
};
static int fake_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  struct fake *f = ctx;
  if (f->fail) return 2; /* cudaErrorMemoryAllocation */
  f->allocs++;
  *addr = f->next;
  f->next += size + 4096;
  f->live_bytes += size;
  return 0;
}
static int fake_release(void *ctx, uint64_t addr) {
  struct fake *f = ctx;
  (void)addr;
  f->releases++;
  return 0;
}

struct env {
  struct fake f;
  struct ferry_pool_backend be;
  struct ferry_pool_clock c;
  struct ferry_pool p;
};
static int setup(void **state) {
  static struct env e;
  memset(&e, 0, sizeof e);
  e.f.next = 0x200000000000ull;
  e.be = (struct ferry_pool_backend){fake_alloc, fake_release, &e.f};
  ferry_pool_clock_init(&e.c);
  ferry_pool_init(&e.p);
  *state = &e;
  return 0;
}
static int teardown(void **state) {
  struct env *e = *state;
  ferry_pool_destroy(&e->p);
  ferry_pool_clock_destroy(&e->c);
  return 0;
}

#define S1 16u
#define S2 17u

static uint64_t alloc(struct env *e, uint64_t size, uint32_t stream) {
  uint64_t a = 0;
  assert_int_equal(ferry_pool_alloc(&e->p, &e->c, size, stream, &e->be, &a), 0);
  return a;
}
static uint64_t attr(struct env *e, int which) {
  uint64_t v = 0;
  assert_int_equal(ferry_pool_get_attr(&e->p, which, &v), 0);
  return v;
}

static void same_stream_reuses_without_a_new_block(void **state) {
  struct env *e = *state;
  uint64_t a = alloc(e, 4000, S1);
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S1), 0);
  for (int i = 0; i < 100; i++) { /* a warm loop: no new block at all */
    uint64_t b = alloc(e, 4000, S1);
    assert_int_equal(b, a);
    assert_int_equal(ferry_pool_free(&e->p, &e->c, b, S1), 0);
  }
  assert_int_equal(e->f.allocs, 1);
  assert_int_equal(e->f.releases, 0);
  /* a smaller request fits the same block; one far smaller does not */
  assert_int_equal(alloc(e, 3000, S1), a);
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S1), 0);
  assert_int_not_equal(alloc(e, 1000, S1), a);
  assert_int_equal(e->f.allocs, 2);
}

static void other_stream_reuses_only_after_a_sync(void **state) {
  struct env *e = *state;
  uint64_t a = alloc(e, 4096, S1);
  uint64_t before = ferry_pool_clock_now(&e->c); /* a sync that began before the free */
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S1), 0);
  uint64_t b = alloc(e, 4096, S2);
  assert_int_not_equal(b, a); /* its free may still be pending */
  assert_int_equal(ferry_pool_free(&e->p, &e->c, b, S2), 0);
  ferry_pool_stream_synced(&e->c, S1, before);
  assert_int_not_equal(alloc(e, 4096, S2), a); /* S2's own block, or a new one: never a */
  /* now a synchronization of S1 that began after the free */
  ferry_pool_stream_synced(&e->c, S1, ferry_pool_clock_now(&e->c));
  assert_int_equal(alloc(e, 4096, S2), a);
}

static void device_sync_completes_every_stream(void **state) {
  struct env *e = *state;
  uint64_t a = alloc(e, 4096, S1);
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S1), 0);
  assert_false(ferry_pool_complete(&e->c, S1, 1));
  ferry_pool_device_synced(&e->c, ferry_pool_clock_now(&e->c));
  assert_true(ferry_pool_complete(&e->c, S1, 1));
  assert_int_equal(alloc(e, 4096, S2), a);
}

static void events_order_streams(void **state) {
  struct env *e = *state;
  uint64_t a = alloc(e, 4096, S1);
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S1), 0);
  /* event 40 recorded on S1 after the free; S2 waits for it */
  assert_int_equal(ferry_pool_event_recorded(&e->c, 40, S1), 0);
  assert_int_equal(ferry_pool_event_waited(&e->c, S2, 40), 0);
  assert_int_equal(alloc(e, 4096, S2), a); /* cudaMemPoolReuseFollowEventDependencies */
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S2), 0);
  /* without following events, only a synchronization of the event does */
  int off = 0;
  assert_int_equal(ferry_pool_set_attr(&e->p, 1, &off), 0);
  assert_int_equal(ferry_pool_event_recorded(&e->c, 41, S2), 0);
  assert_int_equal(ferry_pool_event_waited(&e->c, S1, 41), 0);
  assert_int_not_equal(alloc(e, 4096, S1), a);
  ferry_pool_event_synced(&e->c, 41);
  assert_int_equal(alloc(e, 4096, S1), a);
}

static void opportunistic_off_needs_a_dependency(void **state) {
  struct env *e = *state;
  int off = 0;
  assert_int_equal(ferry_pool_set_attr(&e->p, 2, &off), 0);
  uint64_t a = alloc(e, 4096, S1);
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S1), 0);
  ferry_pool_device_synced(&e->c, ferry_pool_clock_now(&e->c));
  assert_int_not_equal(alloc(e, 4096, S2), a); /* complete, but no dependency */
  assert_int_equal(alloc(e, 4096, S1), a);     /* its own stream still may */
}

static void destroyed_stream_waits_for_the_device(void **state) {
  struct env *e = *state;
  uint64_t a = alloc(e, 4096, S1);
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S1), 0);
  ferry_pool_orphan(&e->p, &e->c, S1);
  ferry_pool_stream_forget(&e->c, S1);
  /* a new stream with the same id neither reuses it nor completes it */
  assert_int_not_equal(alloc(e, 4096, S1), a);
  ferry_pool_stream_synced(&e->c, S1, ferry_pool_clock_now(&e->c));
  assert_int_not_equal(alloc(e, 4096, S2), a);
  ferry_pool_device_synced(&e->c, ferry_pool_clock_now(&e->c));
  assert_int_equal(alloc(e, 4096, S2), a);
  /* a free known complete before its stream went stays complete */
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S2), 0);
  ferry_pool_stream_synced(&e->c, S2, ferry_pool_clock_now(&e->c));
  ferry_pool_orphan(&e->p, &e->c, S2);
  ferry_pool_stream_forget(&e->c, S2);
  assert_int_equal(alloc(e, 4096, S1), a);
}

static void release_threshold_at_sync(void **state) {
  struct env *e = *state;
  uint64_t a = alloc(e, 1 << 20, S1), b = alloc(e, 1 << 20, S1);
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S1), 0);
  assert_int_equal(ferry_pool_free(&e->p, &e->c, b, S1), 0);
  uint64_t keep = 1 << 20;
  assert_int_equal(ferry_pool_set_attr(&e->p, 4, &keep), 0);
  /* no synchronization yet: nothing is known complete, nothing goes */
  assert_int_equal(ferry_pool_settle(&e->p, &e->c, &e->be), 0);
  assert_int_equal(e->f.releases, 0);
  ferry_pool_stream_synced(&e->c, S1, ferry_pool_clock_now(&e->c));
  assert_int_equal(ferry_pool_settle(&e->p, &e->c, &e->be), 0);
  assert_int_equal(e->f.releases, 1);
  assert_int_equal(attr(e, 5), 1 << 20); /* reserved current */
  /* CUDA's default threshold, 0: everything unused goes at a sync */
  keep = 0;
  assert_int_equal(ferry_pool_set_attr(&e->p, 4, &keep), 0);
  assert_int_equal(ferry_pool_settle(&e->p, &e->c, &e->be), 0);
  assert_int_equal(e->f.releases, 2);
  assert_int_equal(attr(e, 5), 0);
  /* UINT64_MAX (PyTorch's): nothing goes */
  uint64_t c = alloc(e, 1 << 20, S1);
  assert_int_equal(ferry_pool_free(&e->p, &e->c, c, S1), 0);
  keep = UINT64_MAX;
  assert_int_equal(ferry_pool_set_attr(&e->p, 4, &keep), 0);
  ferry_pool_device_synced(&e->c, ferry_pool_clock_now(&e->c));
  assert_int_equal(ferry_pool_settle(&e->p, &e->c, &e->be), 0);
  assert_int_equal(e->f.releases, 2);
  assert_int_equal(attr(e, 4), UINT64_MAX);
}

static void trim_keeps_pending_and_live_blocks(void **state) {
  struct env *e = *state;
  uint64_t live = alloc(e, 8192, S1), done = alloc(e, 4096, S1), pending = alloc(e, 2048, S2);
  (void)live;
  assert_int_equal(ferry_pool_free(&e->p, &e->c, done, S1), 0);
  ferry_pool_stream_synced(&e->c, S1, ferry_pool_clock_now(&e->c));
  assert_int_equal(ferry_pool_free(&e->p, &e->c, pending, S2), 0);
  assert_int_equal(attr(e, 5), 8192 + 4096 + 2048);
  assert_int_equal(ferry_pool_trim(&e->p, &e->c, 0, &e->be), 0);
  assert_int_equal(e->f.releases, 1); /* only the completed one */
  assert_int_equal(attr(e, 5), 8192 + 2048);
  ferry_pool_stream_synced(&e->c, S2, ferry_pool_clock_now(&e->c));
  assert_int_equal(ferry_pool_trim(&e->p, &e->c, 9000, &e->be), 0); /* 10240 > 9000: it goes */
  assert_int_equal(e->f.releases, 2);
  assert_int_equal(attr(e, 5), 8192);
  assert_int_equal(attr(e, 7), 8192); /* used current */
}

static void attributes_and_high_water_reset(void **state) {
  struct env *e = *state;
  int flag;
  for (int a = 1; a <= 3; a++) {
    assert_int_equal(ferry_pool_get_attr(&e->p, a, &flag), 0);
    assert_int_equal(flag, 1); /* CUDA's defaults: every reuse allowed */
  }
  assert_int_equal(attr(e, 4), 0);
  uint64_t a = alloc(e, 3000, S1), b = alloc(e, 5000, S1);
  assert_int_equal(attr(e, 7), 3072 + 5120); /* rounded to 512 */
  assert_int_equal(attr(e, 8), 3072 + 5120);
  assert_int_equal(ferry_pool_free(&e->p, &e->c, b, S1), 0);
  assert_int_equal(attr(e, 7), 3072);
  assert_int_equal(attr(e, 8), 3072 + 5120);
  assert_int_equal(attr(e, 5), 3072 + 5120);
  uint64_t zero = 0, one = 1;
  assert_int_equal(ferry_pool_set_attr(&e->p, 8, &one), 1); /* only a reset is allowed */
  assert_int_equal(ferry_pool_set_attr(&e->p, 8, &zero), 0);
  assert_int_equal(attr(e, 8), 3072);
  ferry_pool_device_synced(&e->c, ferry_pool_clock_now(&e->c));
  assert_int_equal(ferry_pool_trim(&e->p, &e->c, 0, &e->be), 0);
  assert_int_equal(attr(e, 6), 3072 + 5120);
  assert_int_equal(ferry_pool_set_attr(&e->p, 6, &zero), 0);
  assert_int_equal(attr(e, 6), 3072);
  /* read-only and unknown attributes */
  assert_int_equal(ferry_pool_set_attr(&e->p, 5, &zero), 1);
  assert_int_equal(ferry_pool_set_attr(&e->p, 7, &zero), 1);
  assert_int_equal(ferry_pool_get_attr(&e->p, 9, &zero), 1);
  assert_int_equal(ferry_pool_get_attr(&e->p, 0, &zero), 1);
  assert_int_equal(ferry_pool_get_attr(&e->p, 4, NULL), 1);
  (void)a;
}

static void frees_and_forgets(void **state) {
  struct env *e = *state;
  uint64_t a = alloc(e, 4096, S1);
  assert_non_null(ferry_pool_live(&e->p, a));
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a + 512, S1), -1); /* not a block's start */
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S1), 0);
  assert_null(ferry_pool_live(&e->p, a));
  assert_true(ferry_pool_pooled(&e->p, a));
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S1), -1); /* twice */
  uint64_t b = alloc(e, 4096, S2);
  assert_int_equal(ferry_pool_forget(&e->p, b), 0); /* cudaFree of a pool's block */
  assert_int_equal(attr(e, 7), 0);
  assert_int_equal(attr(e, 5), 4096);
  /* a cudaMalloc block freed in stream order: released once complete */
  assert_int_equal(ferry_pool_adopt(&e->p, &e->c, 0x300000000000ull, 1 << 20, S2), 0);
  assert_int_equal(attr(e, 5), 4096 + (1 << 20));
  ferry_pool_stream_synced(&e->c, S2, ferry_pool_clock_now(&e->c));
  assert_int_equal(ferry_pool_trim(&e->p, &e->c, 4096, &e->be), 0);
  assert_int_equal(e->f.releases, 1);
  assert_false(ferry_pool_pooled(&e->p, 0x300000000000ull));
}

static void out_of_memory_gives_back_first(void **state) {
  struct env *e = *state;
  uint64_t a = alloc(e, 1 << 20, S1);
  assert_int_equal(ferry_pool_free(&e->p, &e->c, a, S1), 0);
  ferry_pool_device_synced(&e->c, ferry_pool_clock_now(&e->c));
  e->f.fail = 1;
  uint64_t b;
  /* too small for the pooled block, and the backend is full: the pool
     gives its completed block back and asks again (still full here) */
  assert_int_equal(ferry_pool_alloc(&e->p, &e->c, 1000, S1, &e->be, &b), 2);
  assert_int_equal(e->f.releases, 1);
  assert_int_equal(attr(e, 5), 0);
  assert_int_equal(attr(e, 7), 0);
  assert_int_equal(ferry_pool_alloc(&e->p, &e->c, 0, S1, &e->be, &b), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(same_stream_reuses_without_a_new_block, setup, teardown),
      cmocka_unit_test_setup_teardown(other_stream_reuses_only_after_a_sync, setup, teardown),
      cmocka_unit_test_setup_teardown(device_sync_completes_every_stream, setup, teardown),
      cmocka_unit_test_setup_teardown(events_order_streams, setup, teardown),
      cmocka_unit_test_setup_teardown(opportunistic_off_needs_a_dependency, setup, teardown),
      cmocka_unit_test_setup_teardown(destroyed_stream_waits_for_the_device, setup, teardown),
      cmocka_unit_test_setup_teardown(release_threshold_at_sync, setup, teardown),
      cmocka_unit_test_setup_teardown(trim_keeps_pending_and_live_blocks, setup, teardown),
      cmocka_unit_test_setup_teardown(attributes_and_high_water_reset, setup, teardown),
      cmocka_unit_test_setup_teardown(frees_and_forgets, setup, teardown),
      cmocka_unit_test_setup_teardown(out_of_memory_gives_back_first, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
