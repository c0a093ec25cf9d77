/*
 * The shm backend: the channel between a program and its ferry-mhelper
 * processes (see shm.h). Both processes map one memfd: a header page, then
 * one byte ring per direction. A ring is a byte stream like a pipe, so the
 * frame code above works unchanged; each direction has exactly one producer
 * and one consumer at a time (callers serialise), which makes the ring
 * lock-free with two counters: head (bytes ever written, the producer's)
 * and tail (bytes ever consumed, the consumer's).
 *
 * A side with nothing to do spins for FERRY_SHM_SPIN_US, then sleeps on a
 * futex in the header. The futex is a shared one (the memfd is mapped by
 * two processes, so FUTEX_PRIVATE_FLAG would never wake the peer). A
 * sleeper raises its waiter flag before its last look at the ring, and the
 * other side looks at the flag after publishing (a Dekker pair with
 * seq_cst fences), so no wake-up is lost and a wake-up costs a system call
 * only when the peer really sleeps. Sleeps are 100 ms at most: after each,
 * the liveness socket says whether the peer process still exists.
 */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC 0x4d48535952524546ull /* "FERRYSHM" in memory order */
#define SHM_VERSION 1u
#define SHM_HEADER_BYTES 4096u /* the rings start page-aligned */
#define SHM_MIN_RING 4096u
#define SHM_MAX_RING (1u << 30)
#define SHM_SLEEP_MS 100 /* the longest a dead peer can go unnoticed */
#define SHM_PUBLISH_MAX (256u << 10)

/* the two processes share these atomics, so they must be real hardware ones */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "shm rings need lock-free 32- and 64-bit atomics");

/* Each counter sits on its own cache line, so that the producer's stores
   and the consumer's stores do not fight over one line. */
struct ring_ctl {
  _Alignas(64) _Atomic uint64_t head; /* bytes ever written (producer) */
  _Alignas(64) _Atomic uint64_t tail; /* bytes ever consumed (consumer) */
  /* "data available": the consumer sleeps on data_seq, the producer bumps it */
  _Alignas(64) _Atomic uint32_t data_seq;
  _Atomic uint32_t data_waiting;
  /* "space available": the producer sleeps on space_seq, the consumer bumps it */
  _Alignas(64) _Atomic uint32_t space_seq;
  _Atomic uint32_t space_waiting;
};

/* side 0 is the creator, side 1 the attacher; side s sends on ring[s].
   The magic and the version lead at fixed offsets (0 and 8), so that a
   later layout is still recognised as a different version. */
struct shm_header {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;
  uint64_t ring_bytes;
  _Atomic int32_t pid[2];
  _Atomic uint32_t closed[2]; /* that side will never touch the rings again */
  struct ring_ctl ring[2];
};
_Static_assert(sizeof(struct shm_header) <= SHM_HEADER_BYTES, "shm header outgrew its page");

struct shm_conn {
  struct ferry_conn base;
  struct shm_header *h;
  size_t map_bytes;
  int sock; /* our end of the liveness socketpair */
  int side;
  uint64_t ring;       /* bytes per ring, a power of two */
  uint64_t step;       /* sendv publishes at least this often */
  uint64_t spin_ns;
  struct ring_ctl *tx, *rx;
  unsigned char *txd, *rxd;
  /* the last tail the producer saw and the last head the consumer saw:
     re-read only when they say full or empty, so that a message does not
     pull the other side's cache line over every time */
  uint64_t tx_tail, rx_head;
  uint64_t timeout_ns; /* set_timeout: a wait longer than this fails; 0 never */
};

unsigned ferry_shm_spin_us(void) {
  static _Atomic long cached = -1; /* racing first callers compute the same value */
  long v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v >= 0) return (unsigned)v;
  v = 50;
  const char *e = getenv("FERRY_SHM_SPIN_US");
  if (e && *e) {
    char *end;
    errno = 0;
    unsigned long x = strtoul(e, &end, 10);
    if (*e >= '0' && *e <= '9' && !*end && !errno && x <= 1000000)
      v = (long)x;
    else
      fprintf(stderr, "ferry: FERRY_SHM_SPIN_US=%s is not 0..1000000 microseconds; using 50\n", e);
  }
  atomic_store(&cached, v);
  return (unsigned)v;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts) {
  return syscall(SYS_futex, (void *)word, op, val, ts, NULL, 0);
}

/* wake a sleeper of `seq` if its flag says there is one (after a publish) */
static void wake_if_waiting(_Atomic uint32_t *seq, _Atomic uint32_t *waiting) {
  atomic_thread_fence(memory_order_seq_cst); /* the publish, then the flag: see the top */
  if (atomic_load_explicit(waiting, memory_order_relaxed) &&
      atomic_exchange(waiting, 0)) {
    atomic_fetch_add(seq, 1);
    futex(seq, FUTEX_WAKE, 1, NULL);
  }
}

static void wake_all(_Atomic uint32_t *seq) {
  atomic_fetch_add(seq, 1);
  futex(seq, FUTEX_WAKE, INT_MAX, NULL);
}

/* data to read (space == 0) or room to write (space == 1) */
static int ring_ready(const struct shm_conn *s, struct ring_ctl *r, int space) {
  if (space)
    return atomic_load_explicit(&r->head, memory_order_relaxed) -
               atomic_load_explicit(&r->tail, memory_order_acquire) < s->ring;
  return atomic_load_explicit(&r->head, memory_order_acquire) !=
         atomic_load_explicit(&r->tail, memory_order_relaxed);
}

/* The peer closed, or its process is gone: every copy of its socket end is
   closed, which the kernel reports as a hang-up. A death is written into
   the header as a close, so that later calls see it without a poll(). */
static int peer_gone(struct shm_conn *s, int ask_socket) {
  _Atomic uint32_t *closed = &s->h->closed[!s->side];
  if (atomic_load_explicit(closed, memory_order_acquire)) return 1;
  if (!ask_socket) return 0;
  struct pollfd p = {.fd = s->sock, .events = POLLIN};
  if (poll(&p, 1, 0) <= 0) return 0; /* EINTR: the next timeout asks again */
  int dead = (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
  char b;
  if (!dead && (p.revents & POLLIN)) dead = recv(s->sock, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  if (dead) atomic_store(closed, 1);
  return dead;
}

/* Wait until the ring has data (space == 0) or room (space == 1): spin,
   then sleep. 0, or -1 with ECONNRESET once the peer is gone; a reader
   still gets whatever the peer wrote before it went. */
static int ring_wait(struct shm_conn *s, struct ring_ctl *r, int space) {
  uint64_t give_up = s->timeout_ns ? now_ns() + s->timeout_ns : 0;
  if (s->spin_ns) {
    uint64_t end = now_ns() + s->spin_ns;
    for (unsigned i = 1;; i++) {
      if (ring_ready(s, r, space)) return 0;
      cpu_relax();
      if (i % 64) continue;
      if (now_ns() >= end) break;
      /* where both sides share a CPU (a loaded node), spinning would only
         keep the peer from running: give it the CPU now and then */
      sched_yield();
    }
  }
  _Atomic uint32_t *seq = space ? &r->space_seq : &r->data_seq;
  _Atomic uint32_t *waiting = space ? &r->space_waiting : &r->data_waiting;
  for (;;) {
    uint32_t v = atomic_load(seq); /* before the flag: a bump after it fails the wait */
    atomic_store(waiting, 1);
    atomic_thread_fence(memory_order_seq_cst);
    if (ring_ready(s, r, space)) break;
    if (peer_gone(s, 0)) goto gone;
    struct timespec ts = {0, SHM_SLEEP_MS * 1000000L};
    /* EAGAIN and 0 mean the word moved (a wake-up); anything else is a
       timeout or a signal, the time to ask whether the peer still lives */
    if (futex(seq, FUTEX_WAIT, v, &ts) < 0 && errno != EAGAIN && peer_gone(s, 1)) goto gone;
    if (give_up && now_ns() >= give_up && !ring_ready(s, r, space)) {
      atomic_store_explicit(waiting, 0, memory_order_relaxed);
      errno = ETIMEDOUT; /* the peer lives but says nothing: set_timeout's */
      return -1;
    }
  }
  atomic_store_explicit(waiting, 0, memory_order_relaxed);
  return 0;
gone:
  atomic_store_explicit(waiting, 0, memory_order_relaxed);
  if (!space && ring_ready(s, r, 0)) return 0; /* its last bytes first */
  errno = ECONNRESET;
  return -1;
}

static void publish_head(struct ring_ctl *r, uint64_t head) {
  atomic_store_explicit(&r->head, head, memory_order_release);
  wake_if_waiting(&r->data_seq, &r->data_waiting);
}

static int shm_sendv(struct ferry_conn *c, const struct iovec *iov, int iovcnt) {
  struct shm_conn *s = (struct shm_conn *)c;
  struct ring_ctl *r = s->tx;
  if (peer_gone(s, 0)) {
    errno = ECONNRESET;
    return -1;
  }
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t tail = s->tx_tail, published = head;
  for (int i = 0; i < iovcnt; i++) {
    const unsigned char *p = iov[i].iov_base;
    size_t left = iov[i].iov_len;
    while (left) {
      uint64_t room = s->ring - (head - tail);
      if (!room) {
        s->tx_tail = tail = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (head - tail < s->ring) continue;
        /* full: let the reader have what is there, then wait for room */
        if (head != published) publish_head(r, published = head);
        if (ring_wait(s, r, 1)) return -1;
        continue;
      }
      size_t n = left < room ? left : (size_t)room;
      if (n > s->step) n = s->step;
      size_t at = (size_t)(head & (s->ring - 1)), first = s->ring - at < n ? s->ring - at : n;
      memcpy(s->txd + at, p, first);
      memcpy(s->txd, p + first, n - first); /* the wrap-around */
      p += n;
      left -= n;
      head += n;
      /* a message larger than a step streams: the reader starts early */
      if (head - published >= s->step) publish_head(r, published = head);
    }
  }
  if (head != published) publish_head(r, head);
  return 0;
}

static long shm_recv_some(struct ferry_conn *c, void *buf, size_t min, size_t cap) {
  struct shm_conn *s = (struct shm_conn *)c;
  struct ring_ctl *r = s->rx;
  unsigned char *out = buf;
  size_t need = min ? min : cap ? 1 : 0, got = 0; /* as tcp: min 0 still waits for a byte */
  if (need > cap) need = cap;
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  while (got < need) {
    uint64_t avail = s->rx_head - tail;
    if (!avail) {
      s->rx_head = atomic_load_explicit(&r->head, memory_order_acquire);
      if (s->rx_head != tail) continue;
      if (ring_wait(s, r, 0)) return -1;
      continue;
    }
    size_t n = cap - got < avail ? cap - got : (size_t)avail;
    size_t at = (size_t)(tail & (s->ring - 1)), first = s->ring - at < n ? s->ring - at : n;
    memcpy(out + got, s->rxd + at, first);
    memcpy(out + got + first, s->rxd, n - first);
    got += n;
    tail += n;
    /* the copy is done before the room is handed back */
    atomic_store_explicit(&r->tail, tail, memory_order_release);
    wake_if_waiting(&r->space_seq, &r->space_waiting);
  }
  return (long)got;
}

static int shm_recv_all(struct ferry_conn *c, void *buf, size_t n) {
  return shm_recv_some(c, buf, n, n) < 0 ? -1 : 0;
}

static void shm_free(struct shm_conn *s) {
  munmap(s->h, s->map_bytes);
  close(s->sock);
  free(s);
}

/* a fork() child drops its copy without a word to the peer: the parent's
   channel goes on */
static void shm_detach(struct ferry_conn *c) { shm_free((struct shm_conn *)c); }

static void shm_close(struct ferry_conn *c) {
  struct shm_conn *s = (struct shm_conn *)c;
  atomic_store(&s->h->closed[s->side], 1);
  /* a peer asleep as reader or as writer wakes and finds the flag */
  wake_all(&s->tx->data_seq);
  wake_all(&s->rx->space_seq);
  shm_free(s);
}

static int shm_set_timeout(struct ferry_conn *c, int ms) {
  ((struct shm_conn *)c)->timeout_ns = ms > 0 ? (uint64_t)ms * 1000000u : 0;
  return 0;
}

/* both sides marked closed: the helper sees this end go, and a wait of
   ours finds its peer gone (reads keep what had arrived, as on a close) */
static void shm_interrupt(struct ferry_conn *c) {
  struct shm_conn *s = (struct shm_conn *)c;
  atomic_store(&s->h->closed[s->side], 1);
  atomic_store(&s->h->closed[!s->side], 1);
  wake_all(&s->tx->data_seq);
  wake_all(&s->tx->space_seq);
  wake_all(&s->rx->data_seq);
  wake_all(&s->rx->space_seq);
}

static const struct ferry_conn_ops shm_conn_ops = {
    .sendv = shm_sendv, .recv_all = shm_recv_all, .recv_some = shm_recv_some,
    .detach = shm_detach, .close = shm_close, .set_timeout = shm_set_timeout,
    .interrupt = shm_interrupt};

static struct ferry_conn *wrap(struct shm_header *h, size_t map_bytes, int sock, int side) {
  struct shm_conn *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->base.ops = &shm_conn_ops;
  s->h = h;
  s->map_bytes = map_bytes;
  s->sock = sock;
  s->side = side;
  s->ring = h->ring_bytes;
  s->step = s->ring / 4 < SHM_PUBLISH_MAX ? s->ring / 4 : SHM_PUBLISH_MAX;
  s->spin_ns = (uint64_t)ferry_shm_spin_us() * 1000u;
  unsigned char *base = (unsigned char *)h + h->header_bytes;
  s->tx = &h->ring[side];
  s->rx = &h->ring[!side];
  s->txd = base + (size_t)side * s->ring;
  s->rxd = base + (size_t)!side * s->ring;
  pid_t peer = atomic_load(&h->pid[!side]);
  if (peer)
    snprintf(s->base.peer, sizeof s->base.peer, "shm (pid %d)", (int)peer);
  else
    snprintf(s->base.peer, sizeof s->base.peer, "shm");
  return &s->base;
}

struct ferry_conn *ferry_shm_create(size_t ring_bytes, struct ferry_shm_peer *peer, char *err,
                                    size_t errlen) {
  peer->mem_fd = peer->sock_fd = -1;
  size_t ring = ring_bytes ? ring_bytes : FERRY_SHM_DEFAULT_RING;
  if (ring > SHM_MAX_RING) {
    snprintf(err, errlen, "cannot create a shm channel: %zu bytes per ring is over the %u allowed",
             ring, SHM_MAX_RING);
    errno = EINVAL;
    return NULL;
  }
  size_t p2 = SHM_MIN_RING;
  while (p2 < ring) p2 <<= 1;
  ring = p2;
  size_t total = SHM_HEADER_BYTES + 2 * ring;
  const char *what = "memfd_create";
  int sv[2] = {-1, -1};
  void *map = MAP_FAILED;
  int mfd = memfd_create("ferry-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (mfd < 0) goto fail;
  what = "sizing the memfd";
  if (ftruncate(mfd, (off_t)total)) goto fail;
  /* neither side can shrink the file under the other (SIGBUS) */
  fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  what = "mmap";
  map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, mfd, 0);
  if (map == MAP_FAILED) goto fail;
  what = "socketpair";
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) goto fail;
  struct shm_header *h = map; /* a new memfd is zeros: every counter starts at 0 */
  h->version = SHM_VERSION;
  h->header_bytes = SHM_HEADER_BYTES;
  h->ring_bytes = ring;
  atomic_store(&h->pid[0], (int32_t)getpid());
  h->magic = SHM_MAGIC;
  what = "allocating";
  errno = ENOMEM;
  struct ferry_conn *c = wrap(h, total, sv[0], 0);
  if (!c) goto fail;
  peer->mem_fd = mfd;
  peer->sock_fd = sv[1];
  return c;
fail:;
  int e = errno;
  snprintf(err, errlen, "cannot create a shm channel: %s: %s", what, strerror(e));
  if (map != MAP_FAILED) munmap(map, total);
  if (mfd >= 0) close(mfd);
  if (sv[0] >= 0) close(sv[0]), close(sv[1]);
  errno = e;
  return NULL;
}

void ferry_shm_peer_close(struct ferry_shm_peer *peer) {
  if (peer->mem_fd >= 0) close(peer->mem_fd);
  if (peer->sock_fd >= 0) close(peer->sock_fd);
  peer->mem_fd = peer->sock_fd = -1;
}

struct ferry_conn *ferry_shm_attach(int mem_fd, int sock_fd, char *err, size_t errlen) {
  struct stat st;
  void *map = MAP_FAILED;
  size_t size = 0;
  int e = EINVAL;
  if (fstat(mem_fd, &st)) {
    e = errno;
    snprintf(err, errlen, "cannot attach to the shm channel on fd %d: %s", mem_fd, strerror(e));
    goto fail;
  }
  if (!S_ISREG(st.st_mode) || st.st_size < (off_t)SHM_HEADER_BYTES) {
    snprintf(err, errlen,
             "fd %d is not a ferry shm channel (%lld bytes, less than its %u-byte header)", mem_fd,
             (long long)st.st_size, SHM_HEADER_BYTES);
    goto fail;
  }
  size = (size_t)st.st_size;
  map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, mem_fd, 0);
  if (map == MAP_FAILED) {
    e = errno;
    snprintf(err, errlen, "cannot map the shm channel on fd %d: %s", mem_fd, strerror(e));
    goto fail;
  }
  struct shm_header *h = map;
  uint64_t ring = h->ring_bytes;
  if (h->magic != SHM_MAGIC) {
    snprintf(err, errlen, "fd %d is not a ferry shm channel (no ferry header)", mem_fd);
    goto fail;
  }
  if (h->version != SHM_VERSION) {
    snprintf(err, errlen,
             "the shm channel on fd %d is version %u and this ferry speaks version %u: the program "
             "and ferry-mhelper come from different ferry builds",
             mem_fd, h->version, SHM_VERSION);
    goto fail;
  }
  if (h->header_bytes != SHM_HEADER_BYTES || ring < SHM_MIN_RING || ring > SHM_MAX_RING ||
      (ring & (ring - 1)) || SHM_HEADER_BYTES + 2 * ring != size) {
    snprintf(err, errlen,
             "the shm channel on fd %d is damaged: its header says %u + 2 x %llu bytes, the memfd "
             "holds %zu",
             mem_fd, h->header_bytes, (unsigned long long)ring, size);
    goto fail;
  }
  int32_t none = 0;
  if (!atomic_compare_exchange_strong(&h->pid[1], &none, (int32_t)getpid())) {
    snprintf(err, errlen, "the shm channel on fd %d is already attached by pid %d", mem_fd,
             (int)none);
    e = EBUSY;
    goto fail;
  }
  struct ferry_conn *c = wrap(h, size, sock_fd, 1);
  if (!c) {
    atomic_store(&h->pid[1], 0);
    e = ENOMEM;
    snprintf(err, errlen, "cannot attach to the shm channel: out of memory");
    goto fail;
  }
  close(mem_fd); /* the mapping keeps the memory */
  return c;
fail:
  if (map != MAP_FAILED) munmap(map, size);
  close(mem_fd);
  close(sock_fd);
  errno = e;
  return NULL;
}

pid_t ferry_shm_peer_pid(struct ferry_conn *c) {
  if (!c || c->ops != &shm_conn_ops) return 0;
  struct shm_conn *s = (struct shm_conn *)c;
  return atomic_load(&s->h->pid[!s->side]);
}
