/*
 * ferry-server: accepts client connections and forks one child per session.
 * CUDA state does not survive fork(), so this parent never initialises the
 * driver; each child loads it fresh. A child also gives each session a clean
 * address space for its arena, and a crash in one session cannot take the
 * others (or the server) down.
 *
 * A process per connection is costly, so the parent forks only for a
 * client that has proven itself: it reads the hello of every tcp
 * connection itself, without blocking (a poll loop holding a bounded set of
 * pending handshakes, each with a deadline), checks the frame, the token
 * and the protocol version, and hands the hello it read to the child.
 * Sessions are bounded in all and per client address; whatever is refused
 * gets a GOODBYE saying why, and the log says so at a bounded rate.
 *
 * FERRY_STREAMS' data connections come to the same port: their hello is a
 * stripe hello (protocol/stripe.h), whose key a session registered on its
 * broker channel (broker.h); the parent forks nothing for them and passes
 * the socket to that session. A key nobody registered is refused, closed
 * without a word.
 */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "broker_client.h"
#include "common/log.h"
#include "metrics.h"
#include "protocol/stripe.h"
#include "transport/backends.h" /* ferry_tcp_fd: the socket to read a hello from */

#define MAX_LISTENERS 16

/* Defaults of the limits (README, "ferry-server options"). 64 sessions is
   a node's worth of jobs (eight processes on each of eight GPUs); each is a
   process with its own CUDA context, which costs device memory, so far more
   would exhaust the GPUs anyway. 16 per client address keeps one node (or
   one runaway program) from taking them all. */
#define DEFAULT_MAX_SESSIONS 64
#define DEFAULT_MAX_PER_PEER 16
#define DEFAULT_MAX_PENDING 128   /* handshakes being read at once */
#define DEFAULT_HANDSHAKE_MS 5000 /* for the whole hello, header to last byte */
/* an ib:// session reads its own hello after its RDMA setup, which allows
   itself 10 s (transport/ib.c); the handshake deadline comes on top */
#define IB_BOOTSTRAP_MS 10000
#define DEFAULT_MAX_DEFERRED (256ull << 20)
/* a hello is a few hundred bytes (its token at most 256); the parent holds
   no more than this for one */
#define HELLO_MAX_BODY 16384u
/* refused connections are held this long (at most LINGER_MAX of them) so
   that the client reads the GOODBYE before the close: closing with its
   hello unread would reset the connection */
#define LINGER_MAX 64
#define LINGER_MS 1000

static void usage(FILE *f) {
  fprintf(f,
          "usage: ferry-server [--listen tcp://0.0.0.0:7420]... [--gpus 0,1]\n"
          "                    [--backend cuda|sim] [--sim-kernels twins.so] [--once] [--quiet]\n"
          "                    [--probe] [--token-file FILE]\n"
          "  --listen URL       address to accept clients on (repeatable; port 0 picks a free one)\n"
          "  --gpus LIST        offer only these physical GPUs; client GPU i runs on the i-th\n"
          "  --backend NAME     cuda (default) runs on real GPUs; sim simulates one on the CPU\n"
          "  --sim-kernels SO   shared object with CPU twins of the kernels (sim backend)\n"
          "  --once             serve one session, then exit with its status\n"
          "  --probe            check that the backend loads and has GPUs, then exit\n"
          "  --token-file FILE  serve only clients presenting this secret (FERRY_TOKEN_FILE);\n"
          "                     the file must be readable by its owner only and hold\n"
          "                     text: 16 to 256 bytes, no NUL byte\n"
          "  --max-sessions N   sessions at once (default %d); more are refused, server busy\n"
          "  --max-per-peer N   sessions and handshakes per client address (default %d)\n"
          "  --max-session-mem BYTES  device memory one session may allocate (K/M/G/T\n"
          "                     suffixes; default 0: no quota)\n"
          "  --max-deferred BYTES  pinned memory one session may hold for asynchronous\n"
          "                     device-to-host copies until it synchronizes (default 256M)\n"
          "  --metrics ADDR     serve Prometheus metrics at http://ADDR/metrics\n"
          "                     (HOST:PORT, like 127.0.0.1:9420; port 0 picks a free one)\n"
          "  --quiet            log only errors\n"
          "  for tests: --handshake-timeout-ms MS (default %d), --max-pending N (default %d)\n",
          DEFAULT_MAX_SESSIONS, DEFAULT_MAX_PER_PEER, DEFAULT_HANDSHAKE_MS, DEFAULT_MAX_PENDING);
}

/* a whole number in [min, max] for option `name` */
static int parse_count(const char *name, const char *text, long min, long max, int *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end || errno || v < min || v > max) {
    ferry_log("--%s %s: expected a whole number from %ld to %ld", name, text, min, max);
    return -1;
  }
  *out = (int)v;
  return 0;
}

/* bytes, with an optional K, M, G or T (powers of 1024; "MiB" and "MB" too) */
static int parse_size(const char *name, const char *text, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  int shift = 0;
  if (end != text && *end) {
    switch (*end) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    default: shift = -1; break;
    }
    if (shift > 0) {
      end++;
      if (*end == 'i') end++;
      if (*end == 'B') end++;
    }
  }
  if (end == text || *end || errno || text[0] == '-' || shift < 0 ||
      (shift && v > (UINT64_MAX >> shift))) {
    ferry_log("--%s %s: expected a size in bytes, like 512M or 8G (K, M, G, T: powers of 1024)",
              name, text);
    return -1;
  }
  *out = (uint64_t)v << shift;
  return 0;
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* ---- refusals, logged at a bounded rate ---- */

enum { R_SESSIONS, R_PEER, R_PENDING, R_TIMEOUT, R_HELLO, R_PROTOCOL, R_GONE, R_STRIPE, R_COUNT };
static const char *const refusal_kind[R_COUNT] = {
    "--max-sessions", "--max-per-peer", "handshakes pending", "handshake timeout",
    "hello refused", "malformed handshake", "closed before hello", "data connection"};
/* the same, as ferry_sessions_refused_total's reason label */
static const char *const refusal_label[R_COUNT] = {
    "max_sessions", "max_per_peer", "pending", "handshake_timeout",
    "hello_refused", "protocol", "closed_before_hello", "data_connection"};

/* a bucket per kind: a burst of RL_BURST lines, then one a second; what is
   left out is counted and said later */
#define RL_BURST 5
static struct {
  long credit_ms; /* 1000 per line */
  long last_ms;   /* when credit was last topped up */
  long logged_ms; /* when a line was last written */
  unsigned long dropped;
  int used;
} rl[R_COUNT];

static void log_refusal(int kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_refusal(int kind, const char *fmt, ...) {
  metrics_refused(kind);
  long now = now_ms();
  if (!rl[kind].used) {
    rl[kind].used = 1;
    rl[kind].credit_ms = RL_BURST * 1000L;
  } else {
    rl[kind].credit_ms += now - rl[kind].last_ms;
    if (rl[kind].credit_ms > RL_BURST * 1000L) rl[kind].credit_ms = RL_BURST * 1000L;
  }
  rl[kind].last_ms = now;
  if (rl[kind].credit_ms < 1000) {
    rl[kind].dropped++;
    return;
  }
  rl[kind].credit_ms -= 1000;
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (rl[kind].dropped)
    ferry_log("%s (and %lu more like it not logged)", msg, rl[kind].dropped);
  else
    ferry_log("%s", msg);
  rl[kind].dropped = 0;
  rl[kind].logged_ms = now;
}

/* says how many were left out once a second has passed; returns the ms
   until it should be called again (-1: nothing waits) */
static int log_dropped(void) {
  long now = now_ms(), wait = -1;
  for (int k = 0; k < R_COUNT; k++) {
    if (!rl[k].dropped) continue;
    long due = rl[k].logged_ms + 1000;
    if (now >= due) {
      ferry_log("%lu more refusals (%s) not logged", rl[k].dropped, refusal_kind[k]);
      rl[k].dropped = 0;
      rl[k].logged_ms = now;
    } else if (wait < 0 || due - now < wait) {
      wait = due - now;
    }
  }
  return (int)wait;
}


static int parse_gpus(const char *text, struct server_opts *o) {
  const char *p = text;
  o->ngpus = 0;
  while (*p) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < 0 || v > 4095 || (*end && *end != ',')) {
      ferry_log("--gpus %s: expected a comma-separated list of GPU indexes, like 0,1", text);
      return -1;
    }
    if (o->ngpus == FERRY_SERVER_MAX_GPUS) {
      ferry_log("--gpus %s: at most %d GPUs", text, FERRY_SERVER_MAX_GPUS);
      return -1;
    }
    for (int i = 0; i < o->ngpus; i++)
      if (o->gpus[i] == v) {
        ferry_log("--gpus %s: GPU %ld is listed twice", text, v);
        return -1;
      }
    o->gpus[o->ngpus++] = (int)v;
    p = *end ? end + 1 : end;
    if (*end == ',' && !*p) {
      ferry_log("--gpus %s: trailing comma", text);
      return -1;
    }
  }
  if (!o->ngpus) {
    ferry_log("--gpus needs at least one GPU index");
    return -1;
  }
  return 0;
}

/*
 * Checks in a throwaway child that the backend loads and the --gpus exist,
 * so that a broken setup fails at start with a clear message rather than at
 * each client's hello, while the parent itself stays free of CUDA state.
 */
static int probe_backend(const struct server_opts *o, int *count) {
  int fds[2];
  if (pipe(fds)) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    ferry_log("fork: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    close(fds[0]);
    char msg[512] = "";
    int n = 0;
    const struct ferry_driver *drv = server_load_driver(o, msg + 1, sizeof msg - 1);
    if (!drv) {
      msg[0] = 'L'; /* load failure */
    } else if (drv->Init(0) != CUDA_SUCCESS || drv->DeviceGetCount(&n) != CUDA_SUCCESS) {
      snprintf(msg, sizeof msg, "Ithe %s driver loaded but failed to initialise", drv->name);
    } else {
      snprintf(msg, sizeof msg, "K%d", n);
    }
    ssize_t w = write(fds[1], msg, strlen(msg));
    (void)w;
    _exit(0);
  }
  close(fds[1]);
  char msg[512];
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fds[0], msg + len, sizeof msg - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
    if (len == sizeof msg - 1) break;
  }
  msg[len] = '\0';
  close(fds[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  int is_cuda = strcmp(o->backend, "cuda") == 0;
  if (msg[0] == 'K') {
    *count = atoi(msg + 1);
    if (*count <= 0) {
      ferry_log("the %s backend sees no GPU%s", o->backend,
                is_cuda ? "; on a machine without a GPU, use --backend sim" : "");
      return -1;
    }
    return 0;
  }
  if (msg[0] == 'L' && is_cuda)
    ferry_log("%s; on a machine without a GPU, use --backend sim",
              msg + 1);
  else if (msg[0] == 'L')
    ferry_log("cannot load the %s backend: %s", o->backend, msg + 1);
  else if (msg[0] == 'I')
    ferry_log("%s%s", msg + 1, is_cuda ? "; on a machine without a GPU, use --backend sim" : "");
  else
    ferry_log("the %s backend crashed while loading (status 0x%x)", o->backend, st);
  return -1;
}

/* ---- signals: a self-pipe turns them into poll events ---- */

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  ssize_t w = write(sig_pipe[1], &b, 1);
  (void)w;
  errno = saved;
}

static void install_signals(void) {
  struct sigaction sa = {0};
  sa.sa_handler = on_signal; /* no SA_RESTART: a blocking accept returns EINTR */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCHLD, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}

static void reset_signals_in_child(void) {
  signal(SIGCHLD, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  close(sig_pipe[0]);
  close(sig_pipe[1]);
}

/* ---- sessions ---- */

/* "10.0.0.7" of "10.0.0.7:51234", "::1" of "[::1]:51234": what --max-per-peer counts */
static void peer_ip(const char *peer, char *out, size_t n) {
  const char *from = peer, *end = NULL;
  if (peer[0] == '[') {
    from = peer + 1;
    end = strchr(from, ']');
  } else {
    end = strrchr(peer, ':');
  }
  size_t len = end ? (size_t)(end - from) : strlen(from);
  if (len >= n) len = n - 1;
  memcpy(out, from, len);
  out[len] = '\0';
}

struct child {
  pid_t pid;
  char peer[160];
  char ip[160];
  struct session_stats *stats; /* its --metrics slot, or NULL */
  int broker_fd;               /* CUDA IPC: its channel to the broker, or -1 */
};
static struct child *children;
static size_t nchildren, children_cap;

/* CUDA IPC (broker.h): what sessions exported, and this server's random
   id, which every handle carries so that another server refuses it */
static struct broker_table brokers;
static uint64_t instance;

/* a tcp connection whose hello the parent is reading */
struct pending {
  struct ferry_conn *c;
  int fd;
  long deadline;
  char ip[160];
  size_t got; /* bytes read: the header, then the body */
  int judged; /* the header is complete and was found fine */
  struct ferry_frame h;
  char *body;
  /* a data connection (FERRY_STREAMS): its hello began with the stripe
     magic, and goes into sh instead */
  int stripe;
  struct ferry_stripe_hello sh;
  /* let in past --max-sessions/--max-per-peer/--once because a session
     waited for data connections: judged again if it is a session's hello */
  int lenient;
};
static struct pending *pend;
static int npend;

/* refused connections waiting for their client to read the reason */
struct lingering {
  struct ferry_conn *c;
  int fd;
  long deadline;
};
static struct lingering lingers[LINGER_MAX];
static int nlinger;

struct limits {
  int max_sessions, max_per_peer, max_pending, handshake_ms;
};

static void describe_status(int st, char *out, size_t n) {
  if (WIFEXITED(st)) {
    static const char *const what[] = {"ok", "setup failed", "protocol error", "internal error"};
    int code = WEXITSTATUS(st);
    snprintf(out, n, "exit status %d (%s)", code,
             code < (int)(sizeof what / sizeof what[0]) ? what[code] : "?");
  } else if (WIFSIGNALED(st)) {
    snprintf(out, n, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  } else {
    snprintf(out, n, "status 0x%x", st);
  }
}

/* reaps finished sessions; returns the status of `want` in *want_st if it ended */
static void reap(const struct server_opts *o, pid_t want, int *want_done, int *want_st) {
  for (;;) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid <= 0) return;
    for (size_t i = 0; i < nchildren; i++) {
      if (children[i].pid != pid) continue;
      int normal = WIFEXITED(st) && WEXITSTATUS(st) == 0;
      if (!o->quiet || !normal) {
        char why[96];
        describe_status(st, why, sizeof why);
        ferry_log("session from %s (pid %d) finished: %s", children[i].peer, (int)pid, why);
      }
      metrics_release(children[i].stats);
      broker_table_drop_owner(&brokers, pid); /* its exports end with it */
      if (children[i].broker_fd >= 0) close(children[i].broker_fd);
      children[i] = children[--nchildren];
      break;
    }
    if (pid == want && want_done) {
      *want_done = 1;
      *want_st = st;
    }
  }
}

/* sessions and handshakes of one client address (not data connections) */
static int peer_count(const char *ip) {
  int n = 0;
  for (size_t i = 0; i < nchildren; i++) n += !strcmp(children[i].ip, ip);
  for (int i = 0; i < npend; i++) n += !pend[i].stripe && !strcmp(pend[i].ip, ip);
  return n;
}

static struct child *child_of(pid_t pid) {
  for (size_t i = 0; i < nchildren; i++)
    if (children[i].pid == pid) return &children[i];
  return NULL;
}

/* a session waits for data connections: of a client at ip (NULL: any) */
static int stripes_awaited(const char *ip) {
  for (size_t i = 0; i < brokers.nsk; i++) {
    const struct child *ch = child_of(brokers.sk[i].owner);
    if (ch && (!ip || !strcmp(ch->ip, ip))) return 1;
  }
  return 0;
}

/* tests: FERRY_FAULT=stripe_handoff refuses every data connection, as if
   no session had its key (the session goes on with one connection) */
static int handoff_fault(void) {
  const char *f = getenv("FERRY_FAULT");
  return f && !strcmp(f, "stripe_handoff");
}

/* A data connection's hello is complete: the session that registered its
   key gets the socket; a stranger's is closed, counted and logged. */
static void hand_over(struct pending *p) {
  pid_t owner = handoff_fault() ? 0 : broker_stripe_claim(&brokers, p->sh.key, now_ms());
  struct child *ch = owner > 0 ? child_of(owner) : NULL;
  if (!ch || ch->broker_fd < 0) {
    /* no GOODBYE: a data connection reads no frames */
    log_refusal(R_STRIPE, "refused a data connection from %s: no valid key", p->c->peer);
    p->c->ops->close(p->c);
    return;
  }
  if (broker_hand_conn(ch->broker_fd, p->sh.key, p->sh.lane, p->fd)) {
    ferry_log("session from %s (pid %d): cannot hand it the data connection from %s: %s",
              ch->peer, (int)ch->pid, p->c->peer, strerror(errno));
    p->c->ops->close(p->c); /* it goes on with one connection */
    return;
  }
  p->c->ops->detach(p->c); /* the session has the socket now */
}

/* Refuses a connection: for tcp, the hello's REPLY with status (if any)
   and a GOODBYE with the reason, sent without blocking, then a short
   linger; other transports (ib://, whose client waits for its RDMA
   bootstrap) are just closed, the log having the reason. */
static void refuse(struct ferry_conn *c, int fd, int32_t status, const char *reason) {
  if (fd < 0) {
    c->ops->close(c);
    return;
  }
  struct ferry_buf out = {0};
  if (session_refusal(&out, status, reason) == 0) {
    /* a few hundred bytes into a fresh socket's buffer: they fit; if a
       peer stalls them anyway, it does without its reason */
    ssize_t w = send(fd, out.data, out.len, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w;
  }
  ferry_buf_free(&out);
  shutdown(fd, SHUT_WR);
  if (nlinger == LINGER_MAX) {
    c->ops->close(c);
    return;
  }
  lingers[nlinger++] = (struct lingering){c, fd, now_ms() + LINGER_MS};
}

/* drains what a lingering client still sends; closes it at EOF or its deadline */
static void linger_step(int i, int readable, long now) {
  struct lingering *l = &lingers[i];
  int done = now >= l->deadline;
  /* a bounded bite per round: a client streaming bytes cannot hold the loop */
  for (int bites = 0; readable && !done && bites < 16; bites++) {
    char sink[4096];
    ssize_t r = recv(l->fd, sink, sizeof sink, MSG_DONTWAIT);
    if (r > 0) continue;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    done = 1; /* EOF or error */
  }
  if (!done) return;
  l->c->ops->close(l->c);
  lingers[i] = lingers[--nlinger];
}

static void drop_pending(int i) {
  free(pend[i].body);
  pend[i] = pend[--npend];
}

static void stop_sessions(const struct server_opts *o) {
  for (size_t i = 0; i < nchildren; i++) kill(children[i].pid, SIGTERM);
  /* give sessions a moment to release their GPUs, then insist */
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (nchildren) {
    reap(o, 0, NULL, NULL);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec - t0.tv_sec >= 3) {
      for (size_t i = 0; i < nchildren; i++) kill(children[i].pid, SIGKILL);
      while (nchildren && waitpid(-1, NULL, 0) > 0) reap(o, 0, NULL, NULL);
      nchildren = 0;
      break;
    }
    usleep(20000);
  }
}

/* a message on a session's broker channel (broker.h) */
static void serve_broker(int fd) {
  for (size_t i = 0; i < nchildren; i++) {
    if (children[i].broker_fd != fd) continue;
    char why[200];
    int r = broker_serve(&brokers, fd, children[i].pid, why, sizeof why);
    if (r < 0)
      ferry_log("CUDA IPC: session from %s (pid %d) sent a malformed broker message: %s",
                children[i].peer, (int)children[i].pid, why);
    if (r > 0) { /* it hung up: it is ending; reap drops its exports and key */
      close(fd);
      children[i].broker_fd = -1;
    }
    return;
  }
}

/* room for the broker's descriptors: the soft limit up to the hard one,
   and a share of it (the rest is sessions, listeners and handshakes) */
static void broker_limits(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max && rl.rlim_max != RLIM_INFINITY) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
      getrlimit(RLIMIT_NOFILE, &rl);
    }
    rlim_t cur = rl.rlim_cur == RLIM_INFINITY ? 65536 : rl.rlim_cur;
    brokers.max_fds = (unsigned)(cur > 1024 ? (cur - 512 > 65536 ? 65536 : cur - 512) : cur / 2);
  }
  if (broker_random(&instance, sizeof instance)) {
    /* not secret, only distinct: the time and pid still tell servers apart */
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    instance = (uint64_t)t.tv_sec * 1000000007u ^ (uint64_t)t.tv_nsec ^ (uint64_t)getpid() << 32;
  }
}

/* state the accept loop shares with the fork */
static struct ferry_listener *ls[MAX_LISTENERS];
static int nlisten;

static void close_listeners(void) {
  for (int j = 0; j < nlisten; j++) {
    if (ls[j]) ls[j]->ops->close(ls[j]);
    ls[j] = NULL;
  }
}

/* before exiting: lets refused clients read their reason (LINGER_MS at most) */
static void finish_lingers(void) {
  while (nlinger) {
    struct pollfd p[LINGER_MAX];
    long now = now_ms(), wait = 0;
    for (int i = 0; i < nlinger; i++) {
      p[i] = (struct pollfd){.fd = lingers[i].fd, .events = POLLIN};
      if (lingers[i].deadline - now > wait) wait = lingers[i].deadline - now;
    }
    if (poll(p, (nfds_t)nlinger, (int)wait) < 0 && errno != EINTR) wait = -1;
    now = now_ms();
    for (int i = nlinger - 1; i >= 0; i--) {
      if (wait < 0) lingers[i].deadline = now;
      linger_step(i, p[i].revents != 0, now);
    }
  }
}

/* Forks the session of c (its hello already read when hello is set; that
   pending entry, index self, stays with the child). The pid, or -1. */
static pid_t fork_session(struct ferry_conn *c, const char *ip, const struct server_opts *o,
                          const struct session_hello *hello, int self) {
  if (nchildren == children_cap) {
    size_t cap = children_cap ? children_cap * 2 : 16;
    struct child *p = realloc(children, cap * sizeof *p);
    if (!p) {
      ferry_log("out of memory; refusing %s", c->peer);
      return -1;
    }
    children = p;
    children_cap = cap;
  }
  fflush(NULL);
  pid_t parent = getpid();
  struct session_stats *stats = metrics_take(c->peer);
  int bsv[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, bsv))
    ferry_log("socketpair for %s: %s; its session serves no CUDA IPC and no data connections",
              c->peer, strerror(errno));
  pid_t pid = fork();
  if (pid < 0) {
    ferry_log("fork for %s: %s", c->peer, strerror(errno));
    metrics_release(stats);
    if (bsv[0] >= 0) close(bsv[0]), close(bsv[1]);
    return -1;
  }
  if (pid == 0) {
    reset_signals_in_child();
    metrics_close_in_child();
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* a session never outlives its server */
    if (getppid() != parent) _exit(SESSION_SETUP); /* it died before prctl */
    close_listeners();
    /* other clients' sockets are the parent's to close: a copy held here
       would keep them open */
    for (int j = 0; j < npend; j++)
      if (j != self) pend[j].c->ops->detach(pend[j].c);
    for (int j = 0; j < nlinger; j++) lingers[j].c->ops->detach(lingers[j].c);
    /* other sessions' broker channels: speaking on one would be speaking as it */
    for (size_t j = 0; j < nchildren; j++)
      if (children[j].broker_fd >= 0) close(children[j].broker_fd);
    static char prefix[48];
    snprintf(prefix, sizeof prefix, "ferry-server[%d]", (int)getpid());
    ferry_log_set_prefix(prefix);
    struct server_opts mine = *o;
    mine.stats = stats;
    static struct server_broker broker;
    if (bsv[0] >= 0) {
      close(bsv[0]);
      server_broker_init(&broker, bsv[1], instance);
      mine.broker = &broker.ops;
      mine.parent = &broker;
    }
    _exit(session_run_hello(c, &mine, hello));
  }
  metrics_started(stats, pid);
  struct child *ch = &children[nchildren++];
  ch->pid = pid;
  ch->stats = stats;
  ch->broker_fd = bsv[0];
  if (bsv[1] >= 0) close(bsv[1]);
  snprintf(ch->peer, sizeof ch->peer, "%s", c->peer);
  snprintf(ch->ip, sizeof ch->ip, "%s", ip);
  c->ops->detach(c);
  return pid;
}

/* A step of reading pending[i]'s hello: 0 while it is incomplete, 1 when
   it is all there, 2 when a data connection's is, -1 when the client went
   away, -2 when it broke the protocol (why says how). */
static int hello_step(struct pending *p, char *why, size_t n) {
  for (;;) {
    size_t need = p->stripe ? sizeof p->sh : sizeof p->h + (p->judged ? p->h.body_len : 0);
    if (p->got == need && p->stripe) return 2;
    if (p->got == need && p->judged) return 1;
    if (p->got == need) {
      /* the header is complete: judge it before reading on */
      if (session_check_header(&p->h, why, n)) return -2;
      if (p->h.kind != FERRY_CALL_hello) {
        snprintf(why, n, "protocol violation: first frame is %s, not hello",
                 ferry_calls[p->h.kind].name);
        return -2;
      }
      if (p->h.body_len > HELLO_MAX_BODY) {
        snprintf(why, n, "malformed frame: a hello of %" PRIu32 " bytes exceeds %u",
                 p->h.body_len, HELLO_MAX_BODY);
        return -2;
      }
      if (p->h.body_len && !(p->body = malloc(p->h.body_len))) {
        snprintf(why, n, "out of memory for a hello");
        return -2;
      }
      p->judged = 1;
      continue;
    }
    char *dst = p->stripe ? (char *)&p->sh + p->got
                : p->got < sizeof p->h ? (char *)&p->h + p->got
                                       : p->body + (p->got - sizeof p->h);
    ssize_t r = recv(p->fd, dst, need - p->got, MSG_DONTWAIT);
    if (r > 0) {
      p->got += (size_t)r;
      /* a data connection's hello opens with a magic of its own; the
         header read so far (never more than 32 bytes) is the start of it */
      if (!p->stripe && !p->judged && p->got >= sizeof p->h.magic &&
          p->h.magic == FERRY_STRIPE_MAGIC) {
        _Static_assert(sizeof p->h < sizeof p->sh, "a stripe hello is longer than a header");
        p->stripe = 1;
        memcpy(&p->sh, &p->h, p->got);
      }
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (r == 0 || errno == ECONNRESET)
      snprintf(why, n, "client disconnected");
    else
      snprintf(why, n, "connection error: %s", strerror(errno));
    return -1;
  }
}

int main(int argc, char **argv) {
  ferry_log_set_prefix("ferry-server");
  struct server_opts o = {.backend = "cuda", .max_deferred = DEFAULT_MAX_DEFERRED};
  struct limits lim = {DEFAULT_MAX_SESSIONS, DEFAULT_MAX_PER_PEER, DEFAULT_MAX_PENDING,
                       DEFAULT_HANDSHAKE_MS};
  const char *listen_urls[MAX_LISTENERS], *metrics_addr = NULL;
  int once = 0, probe_only = 0;
  enum { O_MAX_SESSIONS = 256, O_MAX_PER_PEER, O_MAX_SESSION_MEM, O_MAX_DEFERRED,
         O_HANDSHAKE_MS, O_MAX_PENDING, O_METRICS };
  static const struct option longopts[] = {
      {"listen", required_argument, NULL, 'l'},  {"gpus", required_argument, NULL, 'g'},
      {"backend", required_argument, NULL, 'b'}, {"sim-kernels", required_argument, NULL, 'k'},
      {"once", no_argument, NULL, 'o'},          {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},          {"probe", no_argument, NULL, 'p'},
      {"token-file", required_argument, NULL, 't'},
      {"max-sessions", required_argument, NULL, O_MAX_SESSIONS},
      {"max-per-peer", required_argument, NULL, O_MAX_PER_PEER},
      {"max-session-mem", required_argument, NULL, O_MAX_SESSION_MEM},
      {"max-deferred", required_argument, NULL, O_MAX_DEFERRED},
      {"handshake-timeout-ms", required_argument, NULL, O_HANDSHAKE_MS},
      {"max-pending", required_argument, NULL, O_MAX_PENDING},
      {"metrics", required_argument, NULL, O_METRICS},
      {NULL, 0, NULL, 0}};
  int opt;
  while ((opt = getopt_long(argc, argv, "l:g:b:k:oqhpt:", longopts, NULL)) != -1) {
    switch (opt) {
    case 'l':
      if (nlisten == MAX_LISTENERS) {
        ferry_log("at most %d --listen addresses", MAX_LISTENERS);
        return 2;
      }
      listen_urls[nlisten++] = optarg;
      break;
    case 'g':
      if (parse_gpus(optarg, &o)) return 2;
      break;
    case 'b':
      if (strcmp(optarg, "cuda") && strcmp(optarg, "sim")) {
        ferry_log("--backend %s: expected cuda or sim", optarg);
        return 2;
      }
      o.backend = optarg;
      break;
    case 'k': o.sim_kernels = optarg; break;
    case 'o': once = 1; break;
    case 'q': o.quiet = 1; break;
    case 'h': usage(stdout); return 0;
    case 'p': probe_only = 1; break;
    case 't':
      if (!(o.token = server_read_token(optarg))) return 2;
      break;
    case O_MAX_SESSIONS:
      if (parse_count("max-sessions", optarg, 1, 1000000, &lim.max_sessions)) return 2;
      break;
    case O_MAX_PER_PEER:
      if (parse_count("max-per-peer", optarg, 1, 1000000, &lim.max_per_peer)) return 2;
      break;
    case O_MAX_SESSION_MEM:
      if (parse_size("max-session-mem", optarg, &o.max_session_mem)) return 2;
      break;
    case O_MAX_DEFERRED:
      if (parse_size("max-deferred", optarg, &o.max_deferred)) return 2;
      break;
    case O_HANDSHAKE_MS:
      if (parse_count("handshake-timeout-ms", optarg, 1, 3600000, &lim.handshake_ms)) return 2;
      break;
    case O_MAX_PENDING:
      if (parse_count("max-pending", optarg, 1, 65536, &lim.max_pending)) return 2;
      break;
    case O_METRICS: metrics_addr = optarg; break;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    ferry_log("unexpected argument '%s'", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (o.sim_kernels && strcmp(o.backend, "sim")) {
    ferry_log("--sim-kernels needs --backend sim");
    return 2;
  }
  if (!nlisten) listen_urls[nlisten++] = "tcp://0.0.0.0:7420";
  o.handshake_ms = lim.handshake_ms + IB_BOOTSTRAP_MS;

  int count = 0;
  if (probe_backend(&o, &count)) return 1;
  if (probe_only) {
    printf("backend %s: %d GPU%s\n", o.backend, count, count == 1 ? "" : "s");
    return 0;
  }
  for (int i = 0; i < o.ngpus; i++)
    if (o.gpus[i] >= count) {
      ferry_log("--gpus names GPU %d, but the %s backend has %d GPU%s (0..%d)", o.gpus[i],
                o.backend, count, count == 1 ? "" : "s", count - 1);
      return 1;
    }

  for (int i = 0; i < nlisten; i++) {
    struct ferry_url u;
    char err[320];
    const struct ferry_transport *t;
    if (ferry_url_parse(listen_urls[i], &u, err, sizeof err) ||
        !(t = ferry_transport_find(u.scheme, err, sizeof err)) ||
        !(ls[i] = t->listen(&u, err, sizeof err))) {
      ferry_log("%s", err);
      return 1;
    }
    if (u.gpu >= 0)
      ferry_log("note: the /%d in --listen %s is ignored; clients choose their GPU", u.gpu,
                listen_urls[i]);
    ferry_log("listening on %s (backend %s)", ls[i]->name, o.backend);
    int loopback = !strcmp(u.host, "127.0.0.1") || !strcmp(u.host, "localhost") ||
                   !strcmp(u.host, "::1");
    if (!o.token && !loopback && !o.quiet)
      ferry_log("warning: no --token-file: anyone who can reach %s can use these GPUs",
                ls[i]->name);
  }

  /* after the probe's fork: the slots are shared with sessions only */
  if (metrics_addr && metrics_open(metrics_addr, lim.max_sessions, refusal_label, R_COUNT))
    return 1;

  broker_limits();
  if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK)) {
    ferry_log("pipe: %s", strerror(errno));
    return 1;
  }
  install_signals();
  pend = calloc((size_t)lim.max_pending, sizeof *pend);
  struct pollfd *pfd = calloc(1 + MAX_LISTENERS + (size_t)lim.max_pending + LINGER_MAX +
                                  METRICS_POLLFDS + (size_t)lim.max_sessions, sizeof *pfd);
  if (!pend || !pfd) {
    ferry_log("out of memory");
    return 1;
  }

  int stopping = 0;
  pid_t once_pid = 0;
  int once_done = 0, once_st = 0;
  int once_exit = -1; /* --once: the status, when its one session ended before a fork */
  int once_shut = 0;   /* --once: the others were sent away */
  while (!stopping && !(once && (once_done || once_exit >= 0))) {
    /* poll: signals, listeners, pending hellos, lingering refusals */
    long now = now_ms();
    int wait = log_dropped();
    broker_stripe_expire(&brokers, now); /* keys whose connections never all came */
    for (int i = 0; i < npend; i++) {
      long left = pend[i].deadline - now;
      if (left < 0) left = 0;
      if (wait < 0 || left < wait) wait = (int)left;
    }
    for (int i = 0; i < nlinger; i++) {
      long left = lingers[i].deadline - now;
      if (left < 0) left = 0;
      if (wait < 0 || left < wait) wait = (int)left;
    }
    int n = 0;
    pfd[n++] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
    int lbase = n;
    for (int i = 0; i < nlisten; i++) pfd[n++] = (struct pollfd){.fd = ls[i]->fd, .events = POLLIN};
    int pbase = n;
    for (int i = 0; i < npend; i++) pfd[n++] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
    int gbase = n;
    for (int i = 0; i < nlinger; i++) pfd[n++] = (struct pollfd){.fd = lingers[i].fd, .events = POLLIN};
    int mbase = n, nm = metrics_pollfds(pfd + n, now, &wait);
    n += nm;
    int bbase = n; /* sessions' broker channels */
    for (size_t i = 0; i < nchildren && i < (size_t)lim.max_sessions; i++)
      if (children[i].broker_fd >= 0)
        pfd[n++] = (struct pollfd){.fd = children[i].broker_fd, .events = POLLIN};
    int bend = n;
    if (poll(pfd, (nfds_t)n, wait) < 0) {
      if (errno != EINTR) {
        ferry_log("poll: %s", strerror(errno));
        break;
      }
      for (int i = 0; i < n; i++) pfd[i].revents = 0;
    }
    if (pfd[0].revents) {
      unsigned char sigs[64];
      ssize_t r;
      while ((r = read(sig_pipe[0], sigs, sizeof sigs)) > 0)
        for (ssize_t i = 0; i < r; i++)
          if (sigs[i] == SIGTERM || sigs[i] == SIGINT) stopping = 1;
    }
    /* before reap, which may close a channel: found by its fd */
    for (int i = bbase; i < bend; i++)
      if (pfd[i].revents) serve_broker(pfd[i].fd);
    reap(&o, once_pid, &once_done, &once_st);
    if (stopping) continue;
    now = now_ms();
    metrics_step(pfd + mbase, nm, now);

    /* lingering refusals, last first: removal moves the last into i */
    for (int i = nlinger - 1; i >= 0; i--) linger_step(i, pfd[gbase + i].revents != 0, now);

    /* pending hellos, last first for the same reason */
    for (int i = npend - 1; i >= 0; i--) {
      struct pending *p = &pend[i];
      char why[320];
      int r = 0;
      if (pfd[pbase + i].revents) r = hello_step(p, why, sizeof why);
      if (r == 0 && now < p->deadline) continue;
      if (r == 2) { /* a data connection: no session of its own */
        hand_over(p);
        drop_pending(i);
        continue;
      }
      int32_t status = 0;
      int kind = R_PROTOCOL, code = SESSION_PROTOCOL;
      const char *what = ""; /* before why in the log, not in the GOODBYE */
      if (r == 0) {
        kind = R_TIMEOUT;
        snprintf(why, sizeof why, "handshake timeout: no complete hello within %d ms",
                 lim.handshake_ms);
      } else if (r == -1) {
        kind = R_GONE;
        code = SESSION_OK;
      } else if (r == 1) {
        struct ferry_decoder dec;
        ferry_decoder_init(&dec);
        struct ferry_hello_args a;
        static const char empty[1];
        if (ferry_decode_args(&dec, FERRY_CALL_hello, p->body ? p->body : empty, p->h.body_len,
                              &a)) {
          snprintf(why, sizeof why, "malformed frame: %s", dec.error);
        } else if ((status = session_check_hello(&o, &a, why, sizeof why))) {
          what = "hello refused: ";
          kind = R_HELLO;
          code = SESSION_SETUP;
        } else {
          kind = -1; /* welcome */
        }
        ferry_decoder_destroy(&dec);
      }
      if (kind < 0 && once_pid) { /* let in only in case it was a data connection */
        refuse(p->c, p->fd, 0, "server busy: it serves one session (--once)");
        drop_pending(i);
        continue;
      }
      if (kind < 0 && (size_t)nchildren >= (size_t)lim.max_sessions) {
        /* others got in while this one was saying hello */
        snprintf(why, sizeof why, "server busy: %d session%s (--max-sessions)", lim.max_sessions,
                 lim.max_sessions == 1 ? "" : "s");
        log_refusal(R_SESSIONS, "refused %s: %s", p->c->peer, why);
        refuse(p->c, p->fd, 0, why);
        drop_pending(i);
        continue;
      }
      int others = peer_count(p->ip) - 1; /* this one is pending too */
      if (kind < 0 && p->lenient && others >= lim.max_per_peer) {
        snprintf(why, sizeof why, "too many connections from %s: %d sessions and handshakes "
                 "(--max-per-peer)", p->ip, others);
        log_refusal(R_PEER, "refused %s: %s", p->c->peer, why);
        refuse(p->c, p->fd, 0, why);
        drop_pending(i);
        continue;
      }
      if (kind < 0) {
        struct session_hello hello = {p->h, p->body};
        pid_t pid = fork_session(p->c, p->ip, &o, &hello, i);
        if (pid < 0) p->c->ops->close(p->c);
        drop_pending(i);
        if (pid > 0 && once) {
          once_pid = pid;
          break;
        }
        continue;
      }
      if (kind != R_GONE || !o.quiet)
        log_refusal(kind, "session from %s ended: %s%s", p->c->peer, what, why);
      else
        metrics_refused(kind); /* not logged, still counted */
      int data = p->stripe; /* a data connection reads no GOODBYE */
      if (kind == R_GONE || data)
        p->c->ops->close(p->c);
      else
        refuse(p->c, p->fd, status, why);
      drop_pending(i);
      if (once && !once_pid && !data) {
        once_exit = code; /* the one connection --once serves */
        break;
      }
    }
    if (once && (once_exit >= 0 || (once_pid && !once_shut))) {
      /* --once serves one session: nobody else is let in; the listeners
         stay open for its data connections only (the loop ends when its
         one connection ended before a fork) */
      for (int i = npend - 1; i >= 0; i--) {
        if (pend[i].stripe) continue;
        refuse(pend[i].c, pend[i].fd, 0, "server busy: it serves one session (--once)");
        drop_pending(i);
      }
      once_shut = 1;
      if (once_exit >= 0) continue;
    }

    for (int i = 0; i < nlisten; i++) {
      if (!pfd[lbase + i].revents) continue;
      struct ferry_listener *l = ls[i];
      struct ferry_conn *c = l->ops->accept(l);
      if (!c) {
        if (errno != EINTR) ferry_log("accept on %s: %s", l->name, strerror(errno));
        continue;
      }
      int fd = ferry_tcp_fd(c);
      char ip[160], why[256];
      peer_ip(c->peer, ip, sizeof ip);
      int per_peer = peer_count(ip);
      /* while a session waits for its data connections, a tcp connection
         is let in past the bounds below until its hello says what it is;
         a session's hello is held to them then */
      int awaited = fd >= 0 && stripes_awaited(NULL);
      int lenient = 0;
      if (once_pid) {
        if (!awaited) {
          refuse(c, fd, 0, "server busy: it serves one session (--once)");
          continue;
        }
        lenient = 1;
      }
      if ((size_t)nchildren >= (size_t)lim.max_sessions && awaited) {
        lenient = 1;
      } else if ((size_t)nchildren >= (size_t)lim.max_sessions) {
        snprintf(why, sizeof why, "server busy: %d session%s (--max-sessions)", lim.max_sessions,
                 lim.max_sessions == 1 ? "" : "s");
        log_refusal(R_SESSIONS, "refused %s: %s", c->peer, why);
        refuse(c, fd, 0, why);
        continue;
      }
      if (per_peer >= lim.max_per_peer && fd >= 0 && stripes_awaited(ip)) {
        lenient = 1;
      } else if (per_peer >= lim.max_per_peer) {
        snprintf(why, sizeof why, "too many connections from %s: %d sessions and handshakes "
                 "(--max-per-peer)", ip, per_peer);
        log_refusal(R_PEER, "refused %s: %s", c->peer, why);
        refuse(c, fd, 0, why);
        continue;
      }
      if (fd < 0) {
        /* not plain tcp (ib://): the hello comes over a channel only the
           session process can set up; it keeps the handshake deadline */
        pid_t pid = fork_session(c, ip, &o, NULL, -1);
        if (pid < 0) c->ops->close(c);
        if (pid > 0 && once) {
          once_pid = pid;
          break; /* the --once block above sends the others away on the next round */
        }
        continue;
      }
      if (npend == lim.max_pending) {
        /* the oldest goes: a flood of silent connections then costs its
           sender more than one that only has to outwait the deadline */
        int old = 0;
        for (int j = 1; j < npend; j++)
          if (pend[j].deadline < pend[old].deadline) old = j;
        snprintf(why, sizeof why, "server busy: %d handshakes pending; the oldest was dropped",
                 lim.max_pending);
        log_refusal(R_PENDING, "refused %s: %s", pend[old].c->peer, why);
        refuse(pend[old].c, pend[old].fd, 0, why);
        drop_pending(old);
      }
      struct pending *p = &pend[npend++];
      *p = (struct pending){.c = c, .fd = fd, .deadline = now_ms() + lim.handshake_ms,
                            .lenient = lenient};
      snprintf(p->ip, sizeof p->ip, "%s", ip);
    }
  }

  close_listeners();
  for (int i = npend - 1; i >= 0; i--) {
    pend[i].c->ops->close(pend[i].c);
    drop_pending(i);
  }
  if (stopping) {
    while (nlinger) {
      lingers[nlinger - 1].c->ops->close(lingers[nlinger - 1].c);
      nlinger--;
    }
    if (!o.quiet) ferry_log("stopping: ending %zu session%s", nchildren, nchildren == 1 ? "" : "s");
    stop_sessions(&o);
    free(pfd);
    return 0;
  }
  finish_lingers();
  free(pfd);
  if (once && once_exit >= 0) return once_exit;
  if (once && once_done) {
    if (WIFEXITED(once_st)) return WEXITSTATUS(once_st);
    return 128 + (WIFSIGNALED(once_st) ? WTERMSIG(once_st) : 0);
  }
  return 1;
}
