/*
 * The ib backend's byte stream over one RC queue pair (layout and credits:
 * ib_conn.h). Every wait ends on a completion, a CM event or the bootstrap
 * socket, so a peer that dies or a queue pair that fails turns into -1 with
 * ECONNRESET instead of a hang. Completions are polled under the
 * connection's lock; one thread at a time waits for the others, first
 * busy-polling the cq for a bounded time (FERRY_IB_SPIN_US), then asleep in
 * poll() (the shim sends from its flusher thread while another thread
 * reads: a spinner lets such a sender have the lock at once).
 */
#include "ib_conn.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/setting.h"

#define RECV_TAG (1ull << 63)

void ib_fail(struct ib_conn *c, int err, const char *fmt, ...) {
  if (c->broken) return;
  c->broken = err;
  if (!fmt) return;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ferry_log("ib connection with %s: %s", c->base.peer, msg);
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* ---- posting ---- */

static int post(struct ib_conn *c, struct ibv_send_wr *wr, unsigned n) {
  struct ibv_send_wr *bad;
  int r = ibv_post_send(c->id->qp, wr, &bad);
  if (r) {
    ib_fail(c, ECONNRESET, "posting a send failed: %s", strerror(r));
    return -1;
  }
  c->sq_used += n;
  return 0;
}

/* one SEND (with `inl` bytes of staged data after the header, or announcing
   `ring_len` bytes already written); returns credits to the peer */
static int post_msg(struct ib_conn *c, uint32_t inl, uint32_t ring_len, uint64_t off,
                    struct ibv_send_wr *before) {
  struct ib_msg *h = &c->hdrs[c->sends++ % IB_SQ];
  *h = (struct ib_msg){.inline_len = inl,
                       .ring_len = ring_len,
                       .ring_freed = c->owed_freed,
                       .credits = (uint16_t)c->owed_credits};
  c->owed_freed = 0;
  c->owed_credits = 0;
  struct ibv_sge sge[2] = {{(uintptr_t)h, sizeof *h, c->hdrs_mr->lkey},
                           {(uintptr_t)(c->stage + off), inl, c->stage_mr->lkey}};
  uint64_t end = c->tx_pos + inl + ring_len;
  struct ibv_send_wr send = {.wr_id = end,
                             .sg_list = sge,
                             .num_sge = inl ? 2 : 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED};
  unsigned n = 1;
  if (before) {
    before->next = &send;
    n = 2;
  }
  if (post(c, before ? before : &send, n)) return -1;
  c->credits--;
  c->tx_pos = end;
  return 0;
}

/* a credit-only message once enough is owed; it may use the last credit,
   which data never does, so credits always flow */
static void return_credits(struct ib_conn *c) {
  if (!c->ready || c->broken || c->credits < 1 || c->sq_used >= IB_SQ) return;
  if (c->owed_credits < IB_NRECV / 2 && c->owed_freed < IB_RING / 4) return;
  post_msg(c, 0, 0, 0, NULL);
}

/* ---- completions ---- */

static int on_recv(struct ib_conn *c, const struct ibv_wc *wc) {
  unsigned slot = (unsigned)(wc->wr_id & ~RECV_TAG);
  char *buf = c->rbufs + (size_t)slot * IB_RBUF;
  struct ib_msg m;
  if (slot >= IB_NRECV || wc->byte_len < sizeof m) {
    ib_fail(c, EPROTO, "malformed message from the peer (%u bytes)", wc->byte_len);
    return -1;
  }
  memcpy(&m, buf, sizeof m);
  uint64_t add = (uint64_t)m.inline_len + m.ring_len;
  if (m.inline_len > wc->byte_len - sizeof m || c->rx_landed + add - c->rx_read > IB_RING ||
      m.credits > IB_SQ || m.ring_freed > c->tx_pos - c->peer_freed) {
    ib_fail(c, EPROTO, "the peer broke the stream protocol (overran the ring or credits)");
    return -1;
  }
  if (m.inline_len) {
    size_t off = (size_t)(c->rx_landed % IB_RING), first = IB_RING - off;
    if (first > m.inline_len) first = m.inline_len;
    memcpy(c->ring + off, buf + sizeof m, first);
    memcpy(c->ring, buf + sizeof m + first, m.inline_len - first);
  }
  c->rx_landed += add;
  c->peer_freed += m.ring_freed;
  c->credits += m.credits;
  struct ibv_sge sge = {(uintptr_t)buf, IB_RBUF, c->rbufs_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = wc->wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
  int r = ibv_post_recv(c->id->qp, &wr, &bad);
  if (r) {
    ib_fail(c, ECONNRESET, "reposting a receive failed: %s", strerror(r));
    return -1;
  }
  c->owed_credits++;
  return 0;
}

/* handles what the cq holds; the number of completions, or -1 */
static int progress(struct ib_conn *c) {
  if (!c->ready) return 0;
  struct ibv_wc wc[32];
  int total = 0;
  for (;;) {
    int n = ibv_poll_cq(c->cq, 32, wc);
    if (n < 0) {
      ib_fail(c, ECONNRESET, "polling the completion queue failed");
      return -1;
    }
    for (int i = 0; i < n; i++) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        if (!(wc[i].wr_id & RECV_TAG)) c->sq_used--;
        if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
          c->peer_gone = 1; /* the queue pair was torn down: a disconnect */
        } else {
          enum ibv_wc_status st = wc[i].status;
          ib_fail(c, ECONNRESET, "%s completed with error '%s'%s; ending the connection",
                  wc[i].wr_id & RECV_TAG ? "a receive" : "a send", c->api->wc_status_str(st),
                  st == IBV_WC_RETRY_EXC_ERR || st == IBV_WC_RNR_RETRY_EXC_ERR
                      ? " (the peer stopped answering)"
                      : "");
        }
        continue;
      }
      if (wc[i].wr_id & RECV_TAG) {
        if (!c->broken) on_recv(c, &wc[i]);
      } else {
        c->sq_used--;
        if (wc[i].wr_id > c->stage_done) c->stage_done = wc[i].wr_id;
      }
    }
    total += n;
    if (n < 32) break;
  }
  c->progressed += (uint64_t)total;
  if (total) return_credits(c);
  return total;
}

/* a tcp hangup or CM disconnect; the cq is drained once more so that data
   which arrived before the goodbye is still delivered */
static void peer_left(struct ib_conn *c) {
  c->peer_gone = 1;
  for (int i = 0; i < 20; i++) {
    if (progress(c) <= 0 && i) break;
    usleep(1000);
  }
}

static void handle_cm_events(struct ib_conn *c) {
  struct rdma_cm_event *ev;
  while (c->ech && c->api->get_cm_event(c->ech, &ev) == 0) {
    enum rdma_cm_event_type t = ev->event;
    c->api->ack_cm_event(ev);
    if (t == RDMA_CM_EVENT_DISCONNECTED || t == RDMA_CM_EVENT_DEVICE_REMOVAL ||
        t == RDMA_CM_EVENT_TIMEWAIT_EXIT)
      peer_left(c);
  }
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* a hint to the core that this is a busy-wait loop */
static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

uint64_t ib_spin_ns(const char *text) {
  if (!text || !*text) return IB_SPIN_US_DEFAULT * 1000ull;
  uint64_t us;
  if (ferry_parse_uint(text, 0, UINT64_MAX, &us)) {
    ferry_log("FERRY_IB_SPIN_US=%s is not a number of microseconds; using %u", text,
              IB_SPIN_US_DEFAULT);
    return IB_SPIN_US_DEFAULT * 1000ull;
  }
  if (us > IB_SPIN_US_MAX) us = IB_SPIN_US_MAX;
  return us * 1000ull;
}

/* the lock, announcing the wait to a spinning holder so that it lets us in */
static void conn_lock(struct ib_conn *c) {
  if (pthread_mutex_trylock(&c->lock) == 0) return;
  __atomic_add_fetch(&c->wanted, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_lock(&c->lock);
  __atomic_sub_fetch(&c->wanted, 1, __ATOMIC_SEQ_CST);
}

/* the end of a spin or a poll(): whoever waits on the cond re-checks. The
   woken need the lock back, so they count as wanting it until they have it. */
static void wake_others(struct ib_conn *c) {
  c->polling = 0;
  int n = c->sleepers - c->woken;
  if (n <= 0) return;
  c->woken += n;
  __atomic_add_fetch(&c->wanted, n, __ATOMIC_SEQ_CST);
  pthread_cond_broadcast(&c->cond);
}

/* another thread spins or polls for us: wait for its word (or a second) */
static void sleep_on_poller(struct ib_conn *c) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 1;
  c->sleepers++;
  pthread_cond_timedwait(&c->cond, &c->lock, &ts);
  c->sleepers--;
  if (c->woken) {
    c->woken--;
    __atomic_sub_fetch(&c->wanted, 1, __ATOMIC_SEQ_CST);
  }
}

/*
 * Busy-polls the cq for at most c->spin_ns; 1 once anything happened (a
 * completion handled here or by another thread, a failure). Called with
 * the lock held and c->polling set; drops the lock while another thread
 * queues for it (the shim sends from one thread while another waits for a
 * reply), so a spin delays nobody's send.
 */
static int spin(struct ib_conn *c) {
  if (!c->spin_ns || !c->ready) return 0;
  uint64_t seen = c->progressed, t0 = mono_ns();
  for (;;) {
    if (progress(c) || c->progressed != seen || c->broken || c->peer_gone) return 1;
    if (mono_ns() - t0 >= c->spin_ns) return 0;
    if (__atomic_load_n(&c->wanted, __ATOMIC_SEQ_CST)) {
      pthread_mutex_unlock(&c->lock);
      do relax();
      while (__atomic_load_n(&c->wanted, __ATOMIC_SEQ_CST) && mono_ns() - t0 < c->spin_ns);
      pthread_mutex_lock(&c->lock);
    } else {
      relax();
    }
  }
}

/* arms the completion channel; 1 when it is safe to sleep on it, 0 when a
   completion slipped in meanwhile (handled) or arming failed */
static int arm(struct ib_conn *c) {
  if (c->armed) return 1; /* any completion since the arming raises an event */
  if (ibv_req_notify_cq(c->cq, 0)) {
    ib_fail(c, ECONNRESET, "arming the completion queue failed");
    return 0;
  }
  c->armed = 1;
  /* one that arrived just before the arming raises none: look once more */
  return progress(c) == 0;
}

/*
 * Waits until something may have changed: a completion, a CM event, the
 * bootstrap socket, another thread's progress, or `timeout_ms`. One thread
 * at a time spins (bounded), then sleeps in poll(), for everyone; the
 * others wait on the cond. Called and returns with the lock held.
 */
static void block(struct ib_conn *c, int timeout_ms) {
  if (c->polling) {
    sleep_on_poller(c);
    return;
  }
  c->polling = 1;
  if (spin(c) || c->broken || !arm(c)) {
    wake_others(c);
    return;
  }
  pthread_mutex_unlock(&c->lock);
  struct pollfd pfd[3] = {{.fd = c->ch->fd, .events = POLLIN},
                          {.fd = c->fd, .events = POLLIN},
                          {.fd = c->ech->fd, .events = POLLIN}};
  int r = poll(pfd, 3, timeout_ms);
  pthread_mutex_lock(&c->lock);
  wake_others(c);
  if (r <= 0) return;
  if (pfd[0].revents) {
    struct ibv_cq *cq;
    void *ctx;
    if (c->api->get_cq_event(c->ch, &cq, &ctx) == 0) {
      c->cq_events++;
      c->armed = 0;
    }
  }
  if (pfd[2].revents) handle_cm_events(c);
  if (pfd[1].revents) {
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) peer_left(c);
    /* nothing travels on the bootstrap socket after the handshake */
    if (n > 0) ib_fail(c, EPROTO, "unexpected data on the bootstrap connection");
  }
  progress(c);
}

/* the server sets RDMA up on first use, in the process that serves */
static int ensure_ready(struct ib_conn *c) {
  if (c->ready || c->broken) return c->broken ? -1 : 0;
  char err[320];
  if (ib_server_setup(c, err, sizeof err)) {
    ib_fail(c, errno ? errno : ECONNRESET, "%s", err);
    return -1;
  }
  return 0;
}

/* ---- the ops ---- */

static int ib_sendv(struct ferry_conn *fc, const struct iovec *iov, int iovcnt) {
  struct ib_conn *c = (struct ib_conn *)fc;
  conn_lock(c);
  int rc = -1, err = 0;
  if (ensure_ready(c)) goto out;
  int i = 0;
  size_t off = 0;
  for (;;) {
    while (i < iovcnt && off == iov[i].iov_len) {
      i++;
      off = 0;
    }
    if (i == iovcnt) break;
    /* wait for ring space, a data credit and send-queue room */
    uint64_t space;
    for (;;) {
      if (c->broken || c->peer_gone) {
        ib_fail(c, ECONNRESET, NULL);
        goto out;
      }
      space = IB_RING - (c->tx_pos - min_u64(c->peer_freed, c->stage_done));
      if (space && c->credits >= 2 && c->sq_used + 2 <= IB_SQ) break;
      block(c, 1000);
    }
    /* the piece: what is left of the iovecs, bounded by space, chunk and ring end */
    size_t ring_off = (size_t)(c->tx_pos % IB_RING);
    uint64_t cap = min_u64(min_u64(space, IB_CHUNK), IB_RING - ring_off);
    size_t len = 0;
    while (i < iovcnt && len < cap) {
      size_t take = iov[i].iov_len - off;
      if (take > cap - len) take = cap - len;
      memcpy(c->stage + ring_off + len, (const char *)iov[i].iov_base + off, take);
      len += take;
      off += take;
      while (i < iovcnt && off == iov[i].iov_len) {
        i++;
        off = 0;
      }
    }
    if (len <= IB_INLINE) {
      if (post_msg(c, (uint32_t)len, 0, ring_off, NULL)) goto out;
    } else {
      struct ibv_sge sge = {(uintptr_t)(c->stage + ring_off), (uint32_t)len, c->stage_mr->lkey};
      struct ibv_send_wr w = {.wr_id = c->tx_pos + len,
                              .sg_list = &sge,
                              .num_sge = 1,
                              .opcode = IBV_WR_RDMA_WRITE,
                              .send_flags = IBV_SEND_SIGNALED};
      w.wr.rdma.remote_addr = c->peer_ring + ring_off;
      w.wr.rdma.rkey = c->peer_rkey;
      if (post_msg(c, 0, (uint32_t)len, ring_off, &w)) goto out;
    }
    progress(c);
  }
  rc = 0;
out:
  if (rc) err = c->broken ? c->broken : ECONNRESET;
  pthread_mutex_unlock(&c->lock);
  if (rc) errno = err;
  return rc;
}

static long ib_recv_some(struct ferry_conn *fc, void *buf, size_t min, size_t cap) {
  struct ib_conn *c = (struct ib_conn *)fc;
  conn_lock(c);
  long rc = -1;
  int err = 0;
  if (ensure_ready(c)) goto out;
  char *p = buf;
  size_t got = 0, want = min ? min : (cap ? 1 : 0);
  for (;;) {
    uint64_t avail = c->rx_landed - c->rx_read;
    if (avail && got < cap) {
      size_t take = (size_t)min_u64(avail, cap - got);
      size_t roff = (size_t)(c->rx_read % IB_RING), first = IB_RING - roff;
      if (first > take) first = take;
      memcpy(p + got, c->ring + roff, first);
      memcpy(p + got + first, c->ring, take - first);
      got += take;
      c->rx_read += take;
      c->owed_freed += (uint32_t)take;
      return_credits(c);
      continue;
    }
    if (got >= want) break;
    if (c->broken || c->peer_gone) {
      ib_fail(c, ECONNRESET, NULL);
      goto out;
    }
    if (!progress(c)) block(c, 1000);
  }
  rc = (long)got;
out:
  if (rc < 0) err = c->broken ? c->broken : ECONNRESET;
  pthread_mutex_unlock(&c->lock);
  if (rc < 0) errno = err;
  return rc;
}

static int ib_recv_all(struct ferry_conn *c, void *buf, size_t n) {
  return ib_recv_some(c, buf, n, n) < 0 ? -1 : 0;
}

static void destroy(struct ib_conn *c, int detach) {
  if (c->ready && !detach) {
    /* let posted sends finish (a reply sent just before close must arrive) */
    conn_lock(c);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (c->sq_used && !c->broken && !c->peer_gone) {
      block(c, 100);
      clock_gettime(CLOCK_MONOTONIC, &t);
      if (t.tv_sec - t0.tv_sec > 2) break;
    }
    pthread_mutex_unlock(&c->lock);
    c->api->disconnect(c->id);
  }
  ib_free_resources(c);
  if (c->tcp) {
    if (detach) c->tcp->ops->detach(c->tcp);
    else c->tcp->ops->close(c->tcp);
  }
  pthread_mutex_destroy(&c->lock);
  pthread_cond_destroy(&c->cond);
  free(c);
}

/* RDMA state is never shared across fork, so only the tcp half can be
   "forgotten"; RDMA resources made in this process go away with it */
static void ib_detach(struct ferry_conn *fc) { destroy((struct ib_conn *)fc, 1); }
static void ib_close(struct ferry_conn *fc) { destroy((struct ib_conn *)fc, 0); }

const struct ferry_conn_ops ferry_ib_conn_ops = {.sendv = ib_sendv,
                                                 .recv_all = ib_recv_all,
                                                 .recv_some = ib_recv_some,
                                                 .detach = ib_detach,
                                                 .close = ib_close};
