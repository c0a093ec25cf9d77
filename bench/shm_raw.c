/*
 * The shm channel (transport/shm.c) against the plain alternatives, between
 * two processes, in one run: ping-pong latency (median and p99) against a
 * pipe pair and against a bare futex ping-pong on shared memory (the lower
 * bound: the same copies and the same spin-then-sleep, nothing else), and
 * one-way bandwidth against a pipe and against one memcpy of the same bytes
 * (the ceiling). The channel is also timed with FERRY_SHM_SPIN_US=0, where
 * every wait sleeps. FERRY_SHM_SPIN_US is read once per process, so each
 * measurement runs in a fresh child of this program.
 * --pin puts the two processes on two different CPUs: where they share one
 * (a loaded machine), every spin burns the peer's time and a round trip
 * costs a spin plus a wake-up, for the channel and the bare futex alike.
 * usage: ferry-bench-shm [--quick] [--pin]     output: BENCH <name> <value> <unit>
 */
#include <errno.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/shm.h"

static size_t rounds = 100000, warmup = 10000, stream_total = (size_t)1 << 30;
static int pin_cpu[2] = {-1, -1}; /* --pin: the measuring process's CPU, its peer's */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void check(int ok, const char *what) {
  if (!ok) die(what);
}

/* after fork: role 0 measures, role 1 is the peer */
static void pin(int role) {
  if (pin_cpu[role] < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(pin_cpu[role], &set);
  check(sched_setaffinity(0, sizeof set, &set) == 0, "sched_setaffinity");
}

static void reap(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st)) {
    fprintf(stderr, "ferry-bench-shm: a peer process failed\n");
    exit(1);
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void report_latency(const char *impl, size_t size, double *t, size_t n) {
  qsort(t, n, sizeof *t, cmp_double);
  printf("BENCH pingpong_%s_%zuB_median %.3f us\n", impl, size, t[n / 2] * 1e6);
  printf("BENCH pingpong_%s_%zuB_p99 %.3f us\n", impl, size, t[(size_t)((double)n * 0.99)] * 1e6);
}

/* ---- the three ping-pongs: one exchange is `size` bytes each way ---- */

struct pingpong {
  void (*ping)(void *ctx, unsigned char *buf, size_t size); /* send, then wait for the echo */
  void (*echo)(void *ctx, unsigned char *buf, size_t size); /* wait, then send back */
  void (*child_setup)(void *ctx); /* in the echoing process, after fork */
  void (*parent_setup)(void *ctx);
  void *ctx;
};

static void run_pingpong(const char *impl, size_t size, struct pingpong *p) {
  unsigned char *buf = calloc(1, size);
  double *t = malloc(rounds * sizeof *t);
  check(buf && t, "malloc");
  fflush(stdout);
  pid_t pid = fork();
  check(pid >= 0, "fork");
  if (pid == 0) {
    pin(1);
    if (p->child_setup) p->child_setup(p->ctx);
    for (size_t i = 0; i < warmup + rounds; i++) p->echo(p->ctx, buf, size);
    _exit(0);
  }
  pin(0);
  if (p->parent_setup) p->parent_setup(p->ctx);
  for (size_t i = 0; i < warmup; i++) p->ping(p->ctx, buf, size);
  for (size_t i = 0; i < rounds; i++) {
    double t0 = now();
    p->ping(p->ctx, buf, size);
    t[i] = now() - t0;
  }
  reap(pid);
  report_latency(impl, size, t, rounds);
  free(buf);
  free(t);
}

/* (a) ferry's channel, through its ops table */
struct shm_ctx {
  struct ferry_conn *c;
  struct ferry_shm_peer peer;
};

static void shm_io(struct ferry_conn *c, unsigned char *buf, size_t size, int send_first) {
  struct iovec iov = {buf, size};
  if (send_first && c->ops->sendv(c, &iov, 1)) die("shm sendv");
  if (c->ops->recv_all(c, buf, size)) die("shm recv_all");
  if (!send_first && c->ops->sendv(c, &iov, 1)) die("shm sendv");
}
static void shm_ping(void *ctx, unsigned char *b, size_t n) {
  shm_io(((struct shm_ctx *)ctx)->c, b, n, 1);
}
static void shm_echo(void *ctx, unsigned char *b, size_t n) {
  shm_io(((struct shm_ctx *)ctx)->c, b, n, 0);
}
static void shm_child(void *ctx) {
  struct shm_ctx *s = ctx;
  char err[256];
  s->c->ops->detach(s->c); /* the creator's side belongs to the parent */
  s->c = ferry_shm_attach(s->peer.mem_fd, s->peer.sock_fd, err, sizeof err);
  if (!s->c) {
    fprintf(stderr, "attach: %s\n", err);
    _exit(1);
  }
}
static void shm_parent(void *ctx) { ferry_shm_peer_close(&((struct shm_ctx *)ctx)->peer); }

static struct ferry_conn *shm_new(struct ferry_shm_peer *peer) {
  char err[256];
  struct ferry_conn *c = ferry_shm_create(0, peer, err, sizeof err);
  if (!c) {
    fprintf(stderr, "create: %s\n", err);
    exit(1);
  }
  return c;
}

/* (b) a pipe each way */
struct pipe_ctx {
  int to_child[2], to_parent[2];
};

static void io_all(int fd, unsigned char *buf, size_t n, int writing) {
  while (n) {
    ssize_t k = writing ? write(fd, buf, n) : read(fd, buf, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) die(writing ? "write" : "read");
    buf += k;
    n -= (size_t)k;
  }
}
static void pipe_ping(void *ctx, unsigned char *b, size_t n) {
  struct pipe_ctx *p = ctx;
  io_all(p->to_child[1], b, n, 1);
  io_all(p->to_parent[0], b, n, 0);
}
static void pipe_echo(void *ctx, unsigned char *b, size_t n) {
  struct pipe_ctx *p = ctx;
  io_all(p->to_child[0], b, n, 0);
  io_all(p->to_parent[1], b, n, 1);
}

/* (c) a bare futex per direction on shared memory: the payload is copied
   into a shared slot and out again, as the channel copies through a ring */
struct fx_side {
  _Alignas(64) _Atomic uint32_t seq; /* messages posted */
  _Atomic uint32_t waiting;
  unsigned char slot[4096];
};
struct fx_ctx {
  struct fx_side *side; /* [0] parent to child, [1] back */
  uint32_t seen[2];
  uint64_t spin_ns;
};

static void fx_post(struct fx_side *s) {
  atomic_fetch_add_explicit(&s->seq, 1, memory_order_release);
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&s->waiting, memory_order_relaxed) && atomic_exchange(&s->waiting, 0))
    syscall(SYS_futex, &s->seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static void fx_wait(struct fx_side *s, uint32_t want, uint64_t spin_ns) {
  double end = now() + (double)spin_ns * 1e-9;
  for (unsigned i = 1; spin_ns; i++) {
    if (atomic_load_explicit(&s->seq, memory_order_acquire) == want) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (i % 64 == 0 && now() >= end) break;
  }
  for (;;) {
    uint32_t v = atomic_load(&s->seq);
    if (v == want) break;
    atomic_store(&s->waiting, 1);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&s->seq) != v) continue;
    syscall(SYS_futex, &s->seq, FUTEX_WAIT, v, NULL, NULL, 0);
  }
  atomic_store_explicit(&s->waiting, 0, memory_order_relaxed);
}

static void fx_send(struct fx_ctx *f, int d, const unsigned char *b, size_t n) {
  memcpy(f->side[d].slot, b, n);
  fx_post(&f->side[d]);
}
static void fx_recv(struct fx_ctx *f, int d, unsigned char *b, size_t n) {
  fx_wait(&f->side[d], ++f->seen[d], f->spin_ns);
  memcpy(b, f->side[d].slot, n);
}
static void fx_ping(void *ctx, unsigned char *b, size_t n) {
  fx_send(ctx, 0, b, n);
  fx_recv(ctx, 1, b, n);
}
static void fx_echo(void *ctx, unsigned char *b, size_t n) {
  fx_recv(ctx, 0, b, n);
  fx_send(ctx, 1, b, n);
}

static void latency(const char *impl, size_t size) {
  struct pingpong p = {0};
  struct shm_ctx s;
  struct pipe_ctx pc;
  struct fx_ctx f = {0};
  if (!strncmp(impl, "shm", 3)) {
    s.c = shm_new(&s.peer);
    p = (struct pingpong){shm_ping, shm_echo, shm_child, shm_parent, &s};
  } else if (!strcmp(impl, "pipe")) {
    check(!pipe(pc.to_child) && !pipe(pc.to_parent), "pipe");
    p = (struct pingpong){pipe_ping, pipe_echo, NULL, NULL, &pc};
  } else {
    f.side = mmap(NULL, 2 * sizeof *f.side, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                  -1, 0);
    check(f.side != MAP_FAILED, "mmap");
    f.spin_ns = (uint64_t)ferry_shm_spin_us() * 1000u; /* the channel's spin */
    p = (struct pingpong){fx_ping, fx_echo, NULL, NULL, &f};
  }
  run_pingpong(impl, size, &p);
  if (p.ping == shm_ping) s.c->ops->close(s.c);
}

/* ---- one-way streams ---- */

static void report_bw(const char *impl, size_t size, size_t total, double secs) {
  printf("BENCH stream_%s_%zuK %.3f GB/s\n", impl, size >> 10, (double)total / secs / 1e9);
}

static void stream(const char *impl, size_t size) {
  size_t count = stream_total / size, total = count * size;
  unsigned char *buf = calloc(1, size);
  check(buf != NULL, "malloc");
  memset(buf, 0x5a, size);
  if (!strcmp(impl, "memcpy")) { /* the ceiling: the same bytes, copied once, one process */
    pin(0);
    unsigned char *dst = calloc(1, size);
    check(dst != NULL, "malloc");
    memcpy(dst, buf, size); /* fault the pages in first */
    double t0 = now();
    for (size_t i = 0; i < count; i++) {
      memcpy(dst, buf, size);
      __asm__ __volatile__("" : : "r"(dst) : "memory"); /* keep every copy */
    }
    report_bw(impl, size, total, now() - t0);
    free(dst);
    free(buf);
    return;
  }
  struct ferry_shm_peer peer;
  struct ferry_conn *c = NULL;
  int data[2], ack[2];
  if (!strcmp(impl, "shm"))
    c = shm_new(&peer);
  else
    check(!pipe(data) && !pipe(ack), "pipe");
  fflush(stdout);
  pid_t pid = fork();
  check(pid >= 0, "fork");
  if (pid == 0) { /* drain, then one byte back */
    pin(1);
    if (c) {
      struct shm_ctx s = {c, peer};
      shm_child(&s);
      for (size_t i = 0; i < count; i++)
        if (s.c->ops->recv_all(s.c, buf, size)) die("shm recv_all");
      struct iovec iov = {buf, 1};
      if (s.c->ops->sendv(s.c, &iov, 1)) die("shm sendv");
      s.c->ops->close(s.c);
    } else {
      for (size_t i = 0; i < count; i++) io_all(data[0], buf, size, 0);
      io_all(ack[1], buf, 1, 1);
    }
    _exit(0);
  }
  pin(0);
  if (c) ferry_shm_peer_close(&peer);
  double t0 = now();
  if (c) {
    struct iovec iov = {buf, size};
    for (size_t i = 0; i < count; i++)
      if (c->ops->sendv(c, &iov, 1)) die("shm sendv");
    if (c->ops->recv_all(c, buf, 1)) die("shm recv_all");
  } else {
    for (size_t i = 0; i < count; i++) io_all(data[1], buf, size, 1);
    io_all(ack[0], buf, 1, 0);
  }
  double secs = now() - t0;
  reap(pid);
  report_bw(impl, size, total, secs);
  if (c) c->ops->close(c);
  free(buf);
}

/* each measurement in a fresh process: FERRY_SHM_SPIN_US is parsed once */
static void in_child(void (*fn)(const char *, size_t), const char *impl, size_t size, int spin0) {
  fflush(stdout);
  pid_t pid = fork();
  check(pid >= 0, "fork");
  if (pid == 0) {
    if (spin0) setenv("FERRY_SHM_SPIN_US", "0", 1);
    fn(impl, size);
    fflush(stdout);
    _exit(0);
  }
  reap(pid);
}

int main(int argc, char **argv) {
  int quick = 0, pinned = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) {
      quick = 1;
    } else if (!strcmp(argv[i], "--pin")) {
      pinned = 1;
    } else {
      fprintf(stderr, "usage: %s [--quick] [--pin]\n", argv[0]);
      return 2;
    }
  }
  if (quick) rounds = 5000, warmup = 500, stream_total = (size_t)64 << 20;
  if (pinned) { /* the first two CPUs this process may use */
    cpu_set_t set;
    check(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity");
    for (int cpu = 0, k = 0; cpu < CPU_SETSIZE && k < 2; cpu++)
      if (CPU_ISSET(cpu, &set)) pin_cpu[k++] = cpu;
    if (pin_cpu[1] < 0) {
      fprintf(stderr, "ferry-bench-shm: --pin needs two CPUs\n");
      return 2;
    }
  }
  struct utsname u;
  uname(&u);
  const char *spin = getenv("FERRY_SHM_SPIN_US"); /* not ferry_shm_spin_us(): see the top */
  printf("# ferry-bench-shm on %s, %ld CPUs, FERRY_SHM_SPIN_US=%s, %s run: %zu rounds after %zu "
         "warm-up, %zu MiB per stream\n",
         u.nodename, sysconf(_SC_NPROCESSORS_ONLN), spin ? spin : "(unset: 50)",
         quick ? "quick" : "full", rounds, warmup, stream_total >> 20);
  if (pinned)
    printf("# pinned: measuring process on CPU %d, its peer on CPU %d\n", pin_cpu[0], pin_cpu[1]);
  else
    printf("# not pinned: the scheduler places both processes\n");
  static const size_t lat_sizes[] = {8, 64, 4096};
  static const char *lat_impls[] = {"shm", "shm_spin0", "pipe", "futex"};
  for (size_t i = 0; i < sizeof lat_sizes / sizeof *lat_sizes; i++)
    for (size_t j = 0; j < sizeof lat_impls / sizeof *lat_impls; j++)
      in_child(latency, lat_impls[j], lat_sizes[i], j == 1);
  static const size_t bw_sizes[] = {4u << 10, 64u << 10, 1u << 20, 4u << 20};
  static const char *bw_impls[] = {"shm", "pipe", "memcpy"};
  for (size_t i = 0; i < sizeof bw_sizes / sizeof *bw_sizes; i++)
    for (size_t j = 0; j < sizeof bw_impls / sizeof *bw_impls; j++)
      in_child(stream, bw_impls[j], bw_sizes[i], 0);
  return 0;
}
