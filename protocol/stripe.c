/*
 * Striped transfers (stripe.h): the piece arithmetic, one lane's part of a
 * transfer on its connection, and the set of lanes that move together.
 */
#include "protocol/stripe.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/crew.h"
#include "common/setting.h"

static uint64_t stripe_min = FERRY_STRIPE_MIN_BULK;
static pthread_once_t stripe_min_once = PTHREAD_ONCE_INIT;
static void read_stripe_min(void) {
  uint64_t n;
  if (ferry_env_uint("FERRY_STRIPE_MIN", FERRY_STRIPE_PIECE, 1ull << 30, &n,
                     "bytes from 262144 to 1073741824", "the default"))
    stripe_min = n;
}

uint64_t ferry_stripe_min(void) {
  pthread_once(&stripe_min_once, read_stripe_min);
  return stripe_min;
}

int ferry_stripe_next(uint64_t total, unsigned n, unsigned j, uint64_t pos, uint64_t end,
                      uint64_t *at, uint64_t *len) {
  if (end > total) end = total;
  if (!n || j >= n || pos >= end) return 0;
  uint64_t k = pos / FERRY_STRIPE_PIECE;
  uint64_t start = pos;
  if (k % n != j) { /* the lane's next piece after pos */
    k += (j + n - (unsigned)(k % n)) % n;
    start = k * FERRY_STRIPE_PIECE;
  }
  if (start >= end) return 0;
  uint64_t piece_end = (k + 1) * FERRY_STRIPE_PIECE;
  *at = start;
  *len = (piece_end < end ? piece_end : end) - start;
  return 1;
}

static uint64_t piece_len(uint64_t total, uint64_t start) {
  return total - start < FERRY_STRIPE_PIECE ? total - start : FERRY_STRIPE_PIECE;
}

int ferry_stripe_lane(const struct ferry_lane_job *j) {
  uint64_t pos = j->pos, at, len;
  while (ferry_stripe_next(j->total, j->lanes, j->lane, pos, j->end, &at, &len)) {
    char *p = j->buf + (at - j->pos);
    int first = at % FERRY_STRIPE_PIECE == 0; /* a piece starts: its header goes first */
    struct ferry_piece h = {FERRY_STRIPE_MAGIC, j->lane, j->seq, at, piece_len(j->total, at)};
    if (j->send) {
      struct iovec iov[2] = {{&h, sizeof h}, {p, (size_t)len}};
      if (ferry_sendv(j->c, first ? iov : iov + 1, first ? 2 : 1)) return -1;
    } else {
      if (first) {
        struct ferry_piece got;
        if (ferry_recv_all(j->c, &got, sizeof got)) return -1;
        if (memcmp(&got, &h, sizeof h)) {
          errno = EPROTO;
          return -1;
        }
      }
      if (ferry_recv_all(j->c, p, (size_t)len)) return -1;
    }
    pos = at + len;
  }
  return 0;
}

struct ferry_stripes *ferry_stripes_start(struct ferry_conn **conns, unsigned n, int timeout_ms) {
  struct ferry_stripes *s = n && n <= FERRY_STRIPE_MAX ? calloc(1, sizeof *s) : NULL;
  if (s) {
    s->n = n;
    s->fault_lane = -1;
    memcpy(s->conn, conns, n * sizeof *conns);
    for (unsigned i = 0; i < n; i++)
      if (timeout_ms > 0 && conns[i]->ops->set_timeout) conns[i]->ops->set_timeout(conns[i], timeout_ms);
    s->crew[0] = ferry_crew_start(n);
    s->crew[1] = s->crew[0] ? ferry_crew_start(n) : NULL;
    if (s->crew[1]) return s;
    ferry_crew_stop(s->crew[0]);
    free(s);
  }
  for (unsigned i = 0; i < n; i++) conns[i]->ops->close(conns[i]);
  return NULL;
}

uint64_t ferry_stripes_begin(struct ferry_stripes *s, int send) {
  s->transfers[!send]++;
  return ++s->seq[!send];
}

struct move {
  struct ferry_stripes *s;
  struct ferry_lane_job job;
  int fault; /* tests: fail this lane half-way */
};

static int lane_main(void *ctx, unsigned i) {
  const struct move *m = ctx;
  struct ferry_lane_job j = m->job;
  j.c = m->s->conn[i];
  j.lane = i;
  if (m->fault && (int)i == m->s->fault_lane) {
    j.end = j.pos + (j.end - j.pos) / 2; /* half of it goes, then the lane dies */
    if (!ferry_stripe_lane(&j)) errno = ECONNRESET;
    return -1;
  }
  return ferry_stripe_lane(&j);
}

int ferry_stripes_move(struct ferry_stripes *s, int send, uint64_t seq, uint64_t total,
                       uint64_t pos, void *buf, uint64_t len) {
  if (__atomic_load_n(&s->broken, __ATOMIC_ACQUIRE)) {
    errno = ECONNRESET;
    return -1;
  }
  struct move m = {s, {NULL, 0, s->n, send, seq, total, pos, pos + len, buf}, 0};
  m.fault = s->fault_lane >= 0 && s->fault_at &&
            s->transfers[0] + s->transfers[1] == s->fault_at;
  if (!ferry_crew_run(s->crew[!send], lane_main, &m)) {
    s->bytes[!send] += len;
    return 0;
  }
  /* one lane failed: the others' peers may wait for pieces that will never
     come, so every connection is cut; the session is over */
  int e = errno;
  __atomic_store_n(&s->broken, 1, __ATOMIC_RELEASE);
  for (unsigned i = 0; i < s->n; i++)
    if (s->conn[i]->ops->interrupt) s->conn[i]->ops->interrupt(s->conn[i]);
  errno = e;
  return -1;
}

void ferry_stripes_close(struct ferry_stripes *s) {
  if (!s) return;
  for (unsigned i = 0; i < s->n; i++)
    if (s->conn[i]->ops->interrupt) s->conn[i]->ops->interrupt(s->conn[i]);
  ferry_crew_stop(s->crew[0]);
  ferry_crew_stop(s->crew[1]);
  for (unsigned i = 0; i < s->n; i++) s->conn[i]->ops->close(s->conn[i]);
  free(s);
}

void ferry_stripes_forget(struct ferry_stripes *s) {
  if (!s) return;
  ferry_crew_forget(s->crew[0]);
  ferry_crew_forget(s->crew[1]);
  for (unsigned i = 0; i < s->n; i++) s->conn[i]->ops->detach(s->conn[i]);
  free(s);
}
