/*
 * Mem-sync's plan (which regions merge into one range) and its pipelined
 * copy into the CPU simulation, from a source that serves a known pattern
 * and can fail a transfer: every byte must land at its own address, and a
 * failure must still read every answer the source owes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "replay/memsync.h"

#define MiB (1ull << 20)
#define ARENA 0x200000000000ull
#define ARENA_SIZE (1ull << 40)

static unsigned char pattern(uint64_t addr) { return (unsigned char)(addr * 2654435761u >> 13); }

/* ---- the plan ---- */

static void adjacent_regions_merge(void **state) {
  (void)state;
  struct ferry_mapping maps[] = {{ARENA, 2 * MiB, 3}};
  struct ferry_region regs[] = {{ARENA, 4096}, {ARENA + 4096, 4096}, {ARENA + 8192 + 512, 100}};
  uint64_t *p;
  long n = ferry_memsync_plan(regs, 3, maps, 1, 64 << 10, &p);
  assert_int_equal(n, 1);
  assert_int_equal(p[0], ARENA);
  assert_int_equal(p[1], 8192 + 512 + 100);
  free(p);
}

static void gaps_that_are_unmapped_or_wide_do_not_merge(void **state) {
  (void)state;
  /* two mappings with a hole between them */
  struct ferry_mapping maps[] = {{ARENA, 2 * MiB, 1}, {ARENA + 4 * MiB, 2 * MiB, 1}};
  struct ferry_region regs[] = {{ARENA + 2 * MiB - 4096, 4096}, /* ends where the hole starts */
                                {ARENA + 4 * MiB, 4096},        /* after the hole */
                                {ARENA + 4 * MiB + 1 * MiB, 10}};  /* 1 MiB away: too far */
  uint64_t *p;
  long n = ferry_memsync_plan(regs, 3, maps, 2, 64 << 10, &p);
  assert_int_equal(n, 3);
  assert_int_equal(p[2], ARENA + 4 * MiB);
  free(p);
  /* with a merge gap wider than the hole, the hole still keeps them apart */
  n = ferry_memsync_plan(regs, 2, maps, 2, 8 * MiB, &p);
  assert_int_equal(n, 2);
  free(p);
}

static void empty_regions_are_skipped(void **state) {
  (void)state;
  struct ferry_mapping maps[] = {{ARENA, 2 * MiB, 1}};
  struct ferry_region regs[] = {{ARENA, 0}};
  uint64_t *p;
  assert_int_equal(ferry_memsync_plan(regs, 1, maps, 1, 0, &p), 0);
  free(p);
}

/* ---- the copy ---- */

struct fake_src {
  uint64_t pending[64][2]; /* per request: first pair index into pairs, count */
  const uint64_t *reqs[64];
  uint32_t nreq[64];
  unsigned sent, received, fail_at; /* fail_at: 1-based receive that fails, 0 none */
  unsigned max_in_flight;
};

static int fake_request(void *ctx, const uint64_t *pairs, uint32_t n) {
  struct fake_src *s = ctx;
  if (s->sent == 64) return -1;
  s->reqs[s->sent] = pairs;
  s->nreq[s->sent] = n;
  s->sent++;
  if (s->sent - s->received > s->max_in_flight) s->max_in_flight = s->sent - s->received;
  return 0;
}

static int fake_receive(void *ctx, void *dst, uint64_t len) {
  struct fake_src *s = ctx;
  assert_true(s->received < s->sent); /* never reads an answer it did not ask for */
  const uint64_t *pairs = s->reqs[s->received];
  uint32_t n = s->nreq[s->received];
  s->received++;
  unsigned char *out = dst;
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    for (uint64_t k = 0; k < pairs[2 * i + 1]; k++) out[total + k] = pattern(pairs[2 * i] + k);
    total += pairs[2 * i + 1];
  }
  assert_int_equal(total, len);
  return s->fail_at && s->received == s->fail_at ? 1 : 0;
}

static struct ferry_exec *open_sim(void) {
  char err[256];
  const struct ferry_driver *d = ferry_driver_sim(NULL, err, sizeof err);
  assert_non_null(d);
  struct ferry_exec *ex = ferry_exec_open(d, 0, ARENA, ARENA_SIZE, err, sizeof err);
  assert_non_null(ex);
  ferry_exec_allow_host(ex, 0, UINT64_MAX); /* as inside the program */
  return ex;
}

/* the buffers mem-sync fills and copies from (the caller's, as in the shim) */
static void *bufs[8];
static void give_buffers(struct ferry_memsync_opts *o) {
  for (unsigned i = 0; i < 8; i++) {
    free(bufs[i]);
    bufs[i] = malloc(o->batch_bytes);
  }
  o->bufs = bufs;
}

static int run(struct ferry_exec *ex, const uint64_t *pairs, size_t n,
               const struct ferry_memsync_source *src, const struct ferry_memsync_opts *o,
               struct ferry_memsync_stats *st, char *err, size_t errlen) {
  struct ferry_target t = ferry_exec_target(ex);
  return ferry_memsync_run(&t, pairs, n, src, o, st, err, errlen);
}

static void map(struct ferry_exec *ex, uint64_t addr, uint64_t size) {
  struct ferry_mem_map_args a = {addr, size};
  assert_int_equal(ferry_exec_call(ex, FERRY_CALL_mem_map, &a, NULL, NULL), 0);
}

static void check(struct ferry_exec *ex, uint64_t addr, uint64_t len) {
  unsigned char *buf = malloc(len);
  const struct ferry_driver *d = ferry_exec_driver(ex);
  assert_int_equal(d->MemcpyDtoHAsync(buf, addr, len, NULL), 0);
  assert_int_equal(d->CtxSynchronize(), 0);
  for (uint64_t k = 0; k < len; k++)
    if (buf[k] != pattern(addr + k)) fail_msg("byte at 0x%llx differs", (unsigned long long)(addr + k));
  free(buf);
}

static void copies_every_byte_in_pipelined_batches(void **state) {
  (void)state;
  struct ferry_exec *ex = open_sim();
  map(ex, ARENA, 2 * MiB);
  map(ex, ARENA + 4 * MiB, 8 * MiB);
  struct ferry_region regs[1100];
  size_t n = 0;
  for (int i = 0; i < 1024; i++) regs[n++] = (struct ferry_region){ARENA + i * 1024ull, 1000};
  regs[n++] = (struct ferry_region){ARENA + 4 * MiB, 7 * MiB + 3};
  struct ferry_mapping maps[] = {{ARENA, 2 * MiB, 1024}, {ARENA + 4 * MiB, 8 * MiB, 1}};
  uint64_t *pairs;
  long np = ferry_memsync_plan(regs, n, maps, 2, 64 << 10, &pairs);
  assert_int_equal(np, 2); /* 1024 small regions became one range */
  struct ferry_memsync_opts o;
  ferry_memsync_defaults(&o);
  o.batch_bytes = 1 * MiB; /* many batches, to exercise the pipeline */
  o.buffers = 3;
  give_buffers(&o);
  struct fake_src s = {0};
  struct ferry_memsync_source src = {fake_request, fake_receive, &s};
  struct ferry_memsync_stats st;
  char err[256] = "";
  assert_int_equal(run(ex, pairs, (size_t)np, &src, &o, &st, err, sizeof err), 0);
  assert_int_equal(s.received, s.sent);
  assert_int_equal(s.max_in_flight, 3);
  assert_int_equal(st.bytes, 1023 * 1024ull + 1000 + 7 * MiB + 3);
  check(ex, ARENA, 1023 * 1024ull + 1000);
  check(ex, ARENA + 4 * MiB, 7 * MiB + 3);
  free(pairs);
  ferry_exec_close(ex);
}

static void failed_transfer_still_reads_every_answer(void **state) {
  (void)state;
  struct ferry_exec *ex = open_sim();
  map(ex, ARENA, 8 * MiB);
  uint64_t pairs[] = {ARENA, 8 * MiB};
  struct ferry_memsync_opts o;
  ferry_memsync_defaults(&o);
  o.batch_bytes = 1 * MiB;
  give_buffers(&o);
  struct fake_src s = {.fail_at = 2};
  struct ferry_memsync_source src = {fake_request, fake_receive, &s};
  struct ferry_memsync_stats st;
  char err[256] = "";
  assert_int_not_equal(run(ex, pairs, 1, &src, &o, &st, err, sizeof err), 0);
  assert_non_null(strstr(err, "transfer 2 of 8 failed"));
  assert_int_equal(s.received, s.sent); /* the connection stays in step */
  ferry_exec_close(ex);
}

/* bulk: a target whose copies carry their bytes (another server), slowed
   down so that a buffer reused before its bytes left would show */
static int sending_now, overlap_seen;
static int slow_bulk_call(void *ctx, unsigned call, const void *args, void *rets,
                          const struct ferry_bulk *bulk) {
  const struct ferry_target *inner = ctx;
  if (call != FERRY_CALL_memcpy_htod_async) return inner->call(inner->ctx, call, args, rets, bulk);
  __atomic_store_n(&sending_now, 1, __ATOMIC_SEQ_CST);
  nanosleep(&(struct timespec){0, 30000000}, NULL);
  int rc = inner->call(inner->ctx, call, args, rets, bulk);
  __atomic_store_n(&sending_now, 0, __ATOMIC_SEQ_CST);
  return rc;
}
/* a send in flight while the source is read: looked for during up to
   200 ms (the sender thread may not run at once on a loaded machine;
   without one, no send is ever in flight here) */
static int noting_receive(void *ctx, void *dst, uint64_t len) {
  for (int i = 0; i < 200 && !overlap_seen; i++) {
    if (__atomic_load_n(&sending_now, __ATOMIC_SEQ_CST)) overlap_seen = 1;
    else nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  return fake_receive(ctx, dst, len);
}

static void bulk_copies_overlap_reading_and_sending(void **state) {
  (void)state;
  struct ferry_exec *ex = open_sim();
  map(ex, ARENA, 8 * MiB);
  uint64_t pairs[] = {ARENA, 8 * MiB - 5};
  struct ferry_memsync_opts o;
  ferry_memsync_defaults(&o);
  o.batch_bytes = 1 * MiB;
  o.bulk = 1;
  give_buffers(&o);
  struct fake_src s = {0};
  struct ferry_memsync_source src = {fake_request, noting_receive, &s};
  struct ferry_memsync_stats st;
  char err[256] = "";
  struct ferry_target inner = ferry_exec_target(ex);
  struct ferry_target slow = {slow_bulk_call, &inner};
  overlap_seen = 0;
  assert_int_equal(ferry_memsync_run(&slow, pairs, 1, &src, &o, &st, err, sizeof err), 0);
  assert_int_equal(st.bytes, 8 * MiB - 5);
  assert_int_equal(s.received, s.sent);
  check(ex, ARENA, 8 * MiB - 5); /* no buffer was refilled while its bytes were sent */
  assert_true(overlap_seen);     /* the next batch was read while one was sent */
  ferry_exec_close(ex);
}

/* a copy the target refuses: reported, and every answer of the source read
   (its connection stays in step); bulk: through the sender thread */
static void target_copy_failure_is_reported(void **state) {
  (void)state;
  for (int bulk = 0; bulk < 2; bulk++) {
    struct ferry_exec *ex = open_sim();
    uint64_t pairs[] = {ARENA + 64 * MiB, 4 * MiB}; /* never mapped on the target */
    struct ferry_memsync_opts o;
    ferry_memsync_defaults(&o);
    o.batch_bytes = 1 * MiB;
    o.bulk = bulk;
    give_buffers(&o);
    struct fake_src s = {0};
    struct ferry_memsync_source src = {fake_request, fake_receive, &s};
    struct ferry_memsync_stats st;
    char err[256] = "";
    assert_int_not_equal(run(ex, pairs, 1, &src, &o, &st, err, sizeof err), 0);
    assert_non_null(strstr(err, "target GPU"));
    assert_int_equal(s.received, s.sent);
    ferry_exec_close(ex);
  }
}

static void buffers_are_required(void **state) {
  (void)state;
  struct ferry_exec *ex = open_sim();
  map(ex, ARENA, 2 * MiB);
  uint64_t pairs[] = {ARENA, 1 * MiB};
  struct ferry_memsync_opts o;
  ferry_memsync_defaults(&o);
  struct fake_src s = {0};
  struct ferry_memsync_source src = {fake_request, fake_receive, &s};
  struct ferry_memsync_stats st;
  char err[256] = "";
  assert_int_not_equal(run(ex, pairs, 1, &src, &o, &st, err, sizeof err), 0);
  assert_non_null(strstr(err, "buffer"));
  assert_int_equal(s.sent, 0); /* nothing was asked of the source */
  ferry_exec_close(ex);
}

/* the executor of a server shares no host memory: a copy naming a host
   address is refused as a violation, never followed */
static void host_copies_need_shared_memory(void **state) {
  (void)state;
  char err[256];
  const struct ferry_driver *d = ferry_driver_sim(NULL, err, sizeof err);
  struct ferry_exec *ex = ferry_exec_open(d, 0, ARENA, ARENA_SIZE, err, sizeof err);
  assert_non_null(ex);
  map(ex, ARENA, 2 * MiB);
  static char host[4096];
  struct ferry_memcpy_htod_host_args a = {ARENA, (uint64_t)(uintptr_t)host, sizeof host, 0};
  assert_int_not_equal(ferry_exec_call(ex, FERRY_CALL_memcpy_htod_host, &a, NULL, NULL), 0);
  assert_non_null(ferry_exec_violation(ex));
  ferry_exec_take_async_error(ex);
  /* once shared, the same range works; one byte past it does not */
  ferry_exec_allow_host(ex, (uint64_t)(uintptr_t)host, sizeof host);
  memset(host, 0x5a, sizeof host);
  assert_int_equal(ferry_exec_call(ex, FERRY_CALL_memcpy_htod_host, &a, NULL, NULL), 0);
  assert_null(ferry_exec_violation(ex));
  struct ferry_memcpy_dtoh_host_args b = {ARENA, (uint64_t)(uintptr_t)host + 1, sizeof host, 0};
  assert_int_not_equal(ferry_exec_call(ex, FERRY_CALL_memcpy_dtoh_host, &b, NULL, NULL), 0);
  assert_non_null(ferry_exec_violation(ex));
  unsigned char back[16];
  const struct ferry_driver *dd = ferry_exec_driver(ex);
  assert_int_equal(dd->MemcpyDtoHAsync(back, ARENA + 100, sizeof back, NULL), 0);
  for (size_t i = 0; i < sizeof back; i++) assert_int_equal(back[i], 0x5a);
  ferry_exec_close(ex);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(buffers_are_required),
      cmocka_unit_test(host_copies_need_shared_memory),
      cmocka_unit_test(adjacent_regions_merge),
      cmocka_unit_test(gaps_that_are_unmapped_or_wide_do_not_merge),
      cmocka_unit_test(empty_regions_are_skipped),
      cmocka_unit_test(copies_every_byte_in_pipelined_batches),
      cmocka_unit_test(failed_transfer_still_reads_every_answer),
      cmocka_unit_test(target_copy_failure_is_reported),
      cmocka_unit_test(bulk_copies_overlap_reading_and_sending),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
