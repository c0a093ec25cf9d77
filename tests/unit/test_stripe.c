/* Striped transfers (protocol/stripe.h): every byte of a transfer belongs
   to exactly one piece and lane, whatever parts it is moved in; over real
   tcp connections the pieces are reassembled byte for byte when the two
   sides cut the transfer into different parts; a piece of another transfer
   is refused; a lane that dies fails the move on both sides, never hangs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/crew.h"
#include "protocol/stripe.h"

#define P FERRY_STRIPE_PIECE

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* the parts [cuts[i], cuts[i+1]) of [0, total), random sizes */
static size_t random_cuts(uint64_t total, uint64_t *seed, uint64_t *cuts, size_t max) {
  size_t n = 0;
  cuts[n++] = 0;
  while (cuts[n - 1] < total && n < max - 1) {
    uint64_t step = 1 + rnd(seed) % (3 * P);
    cuts[n] = cuts[n - 1] + step < total ? cuts[n - 1] + step : total;
    n++;
  }
  cuts[n - 1] = total;
  return n;
}

static void test_next_covers_once(void **state) {
  (void)state;
  uint64_t seed = 88172645463325252ull;
  static unsigned char seen[9 * P + 123];
  uint64_t cuts[512];
  for (int round = 0; round < 200; round++) {
    uint64_t total = 1 + rnd(&seed) % sizeof seen;
    unsigned n = 1 + (unsigned)(rnd(&seed) % FERRY_STRIPE_MAX);
    memset(seen, 0, sizeof seen);
    size_t ncuts = random_cuts(total, &seed, cuts, 512);
    for (size_t c = 0; c + 1 < ncuts; c++)
      for (unsigned j = 0; j < n; j++) {
        uint64_t pos = cuts[c], at, len;
        while (ferry_stripe_next(total, n, j, pos, cuts[c + 1], &at, &len)) {
          assert_true(at >= pos && len > 0 && at + len <= cuts[c + 1]);
          assert_int_equal(at / P, (at + len - 1) / P); /* within one piece */
          assert_int_equal((at / P) % n, j);            /* on its lane */
          for (uint64_t b = at; b < at + len; b++) seen[b]++;
          pos = at + len;
        }
      }
    for (uint64_t b = 0; b < total; b++) assert_int_equal(seen[b], 1);
  }
  uint64_t at, len;
  assert_int_equal(ferry_stripe_next(10, 4, 4, 0, 10, &at, &len), 0); /* no such lane */
  assert_int_equal(ferry_stripe_next(10, 4, 0, 10, 10, &at, &len), 0);
  assert_int_equal(ferry_stripe_next(P, 4, 1, 0, P, &at, &len), 0); /* one piece: lane 0's */
}

static int add_index(void *ctx, unsigned i) {
  __atomic_fetch_add((unsigned *)ctx, i + 1, __ATOMIC_RELAXED);
  if (i == 2) {
    errno = EPIPE;
    return -1;
  }
  return 0;
}

static void test_crew(void **state) {
  (void)state;
  struct ferry_crew *c = ferry_crew_start(5);
  assert_non_null(c);
  for (int k = 0; k < 50; k++) {
    unsigned sum = 0;
    errno = 0;
    assert_int_equal(ferry_crew_run(c, add_index, &sum), -1);
    assert_int_equal(errno, EPIPE);
    assert_int_equal(sum, 15);
  }
  ferry_crew_stop(c);
}

/* n connected pairs over loopback, each side's set started */
struct sides {
  struct ferry_stripes *a, *b;
};

static void open_sides(struct sides *s, unsigned n) {
  char err[256];
  struct ferry_url u;
  assert_int_equal(ferry_url_parse("tcp://127.0.0.1:0", &u, err, sizeof err), 0);
  const struct ferry_transport *t = ferry_transport_find("tcp", err, sizeof err);
  struct ferry_listener *l = t->listen(&u, err, sizeof err);
  assert_non_null(l);
  u.port = ferry_listener_port(l);
  assert_true(u.port > 0);
  struct ferry_conn *ca[FERRY_STRIPE_MAX], *cb[FERRY_STRIPE_MAX];
  for (unsigned i = 0; i < n; i++) {
    ca[i] = t->connect(&u, 2000, err, sizeof err);
    assert_non_null(ca[i]);
    cb[i] = l->ops->accept_within(l, 2000);
    assert_non_null(cb[i]);
  }
  l->ops->close(l);
  s->a = ferry_stripes_start(ca, n, 20000);
  s->b = ferry_stripes_start(cb, n, 20000);
  assert_non_null(s->a);
  assert_non_null(s->b);
}

struct mover {
  struct ferry_stripes *s;
  int send;
  uint64_t seq, total;
  unsigned char *buf;
  const uint64_t *cuts;
  size_t ncuts;
  int rc, err;
};

static void *move_main(void *arg) {
  struct mover *m = arg;
  for (size_t c = 0; c + 1 < m->ncuts && !m->rc; c++) {
    m->rc = ferry_stripes_move(m->s, m->send, m->seq, m->total, m->cuts[c], m->buf + m->cuts[c],
                               m->cuts[c + 1] - m->cuts[c]);
    m->err = errno;
  }
  return NULL;
}

/* a sends total bytes in parts cut one way, b receives them cut another */
static void transfer(struct sides *s, uint64_t total, uint64_t *seed, uint64_t seq_a,
                     uint64_t seq_b, int *rc_a, int *rc_b, int *err_b) {
  unsigned char *src = malloc(total), *dst = calloc(1, total);
  for (uint64_t i = 0; i < total; i++) src[i] = (unsigned char)rnd(seed);
  static uint64_t cut_a[4096], cut_b[4096];
  struct mover ma = {s->a, 1, seq_a, total, src, cut_a, random_cuts(total, seed, cut_a, 4096), 0, 0};
  struct mover mb = {s->b, 0, seq_b, total, dst, cut_b, random_cuts(total, seed, cut_b, 4096), 0, 0};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, move_main, &ma);
  pthread_create(&tb, NULL, move_main, &mb);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  *rc_a = ma.rc;
  *rc_b = mb.rc;
  *err_b = mb.err;
  if (!ma.rc && !mb.rc) assert_memory_equal(src, dst, total);
  free(src);
  free(dst);
}

static void test_reassembly(void **state) {
  (void)state;
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  unsigned lanes[] = {1, 2, 4, 7, 16};
  for (size_t k = 0; k < sizeof lanes / sizeof lanes[0]; k++) {
    struct sides s;
    open_sides(&s, lanes[k]);
    for (int round = 0; round < 4; round++) {
      uint64_t total = 1 + rnd(&seed) % (13 * P + 999);
      int ra, rb, eb;
      transfer(&s, total, &seed, ferry_stripes_begin(s.a, 1), ferry_stripes_begin(s.b, 0), &ra,
               &rb, &eb);
      assert_int_equal(ra, 0);
      assert_int_equal(rb, 0);
    }
    assert_true(s.a->bytes[0] > 0 && s.b->bytes[1] == s.a->bytes[0]);
    ferry_stripes_close(s.a);
    ferry_stripes_close(s.b);
  }
}

static void test_wrong_transfer_refused(void **state) {
  (void)state;
  uint64_t seed = 12345;
  struct sides s;
  open_sides(&s, 4);
  int ra, rb, eb;
  /* the receiver expects transfer 2, the pieces say 1 */
  ferry_stripes_begin(s.b, 0);
  transfer(&s, 3 * P, &seed, ferry_stripes_begin(s.a, 1), ferry_stripes_begin(s.b, 0), &ra, &rb,
           &eb);
  assert_int_equal(rb, -1);
  assert_int_equal(eb, EPROTO);
  assert_true(s.b->broken);
  ferry_stripes_close(s.a);
  ferry_stripes_close(s.b);
}

static void test_lane_dies(void **state) {
  (void)state;
  uint64_t seed = 777;
  for (int send = 0; send < 2; send++) {
    struct sides s;
    open_sides(&s, 4);
    struct ferry_stripes *dying = send ? s.a : s.b;
    dying->fault_lane = 3;
    dying->fault_at = 1;
    int ra, rb, eb;
    transfer(&s, 20 * P + 5, &seed, ferry_stripes_begin(s.a, 1), ferry_stripes_begin(s.b, 0), &ra,
             &rb, &eb);
    /* the side with the dead lane fails and moves nothing more; its peer
       fails too, at once when it waits for the pieces, else at its next
       sends (the bytes it sent may all have fit in the sockets' buffers) */
    assert_int_equal(send ? ra : rb, -1);
    assert_int_equal(rb, -1);
    char b;
    assert_int_equal(ferry_stripes_move(dying, send, 2, 1, 0, &b, 1), -1);
    size_t big = 16u << 20;
    char *junk = calloc(1, big);
    for (int k = 0; k < 8 && !ra; k++) ra = ferry_stripes_move(s.a, 1, k + 2, big, 0, junk, big);
    free(junk);
    assert_int_equal(ra, -1);
    assert_true(s.a->broken && s.b->broken);
    ferry_stripes_close(s.a);
    ferry_stripes_close(s.b);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_next_covers_once),
      cmocka_unit_test(test_crew),
      cmocka_unit_test(test_reassembly),
      cmocka_unit_test(test_wrong_transfer_refused),
      cmocka_unit_test(test_lane_dies),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
