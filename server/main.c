/*
 * ferry-server: accepts client connections and forks one child per session.
 * CUDA state does not survive fork(), so this parent never initialises the
 * driver; each child loads it fresh. A child also gives each session a clean
 * address space for its arena, and a crash in one session cannot take the
 * others (or the server) down.
 */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define MAX_LISTENERS 16

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
          "                     the file must be readable by its owner only\n"
          "  --quiet            log only errors\n");
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

struct child {
  pid_t pid;
  char peer[160];
};
static struct child *children;
static size_t nchildren, children_cap;

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
      children[i] = children[--nchildren];
      break;
    }
    if (pid == want && want_done) {
      *want_done = 1;
      *want_st = st;
    }
  }
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

int main(int argc, char **argv) {
  ferry_log_set_prefix("ferry-server");
  struct server_opts o = {.backend = "cuda"};
  const char *listen_urls[MAX_LISTENERS];
  int nlisten = 0, once = 0, probe_only = 0;
  static const struct option longopts[] = {
      {"listen", required_argument, NULL, 'l'},  {"gpus", required_argument, NULL, 'g'},
      {"backend", required_argument, NULL, 'b'}, {"sim-kernels", required_argument, NULL, 'k'},
      {"once", no_argument, NULL, 'o'},          {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},          {"probe", no_argument, NULL, 'p'},
      {"token-file", required_argument, NULL, 't'}, {NULL, 0, NULL, 0}};
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

  struct ferry_listener *ls[MAX_LISTENERS];
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

  if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK)) {
    ferry_log("pipe: %s", strerror(errno));
    return 1;
  }
  install_signals();

  int listening = 1, stopping = 0;
  pid_t once_pid = 0;
  int once_done = 0, once_st = 0;
  while (!stopping && !(once && once_done)) {
    struct pollfd pfd[MAX_LISTENERS + 1];
    pfd[0] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
    int n = 1;
    if (listening)
      for (int i = 0; i < nlisten; i++) pfd[n++] = (struct pollfd){.fd = ls[i]->fd, .events = POLLIN};
    if (poll(pfd, (nfds_t)n, -1) < 0 && errno != EINTR) {
      ferry_log("poll: %s", strerror(errno));
      break;
    }
    if (pfd[0].revents) {
      unsigned char sigs[64];
      ssize_t r;
      while ((r = read(sig_pipe[0], sigs, sizeof sigs)) > 0)
        for (ssize_t i = 0; i < r; i++)
          if (sigs[i] == SIGTERM || sigs[i] == SIGINT) stopping = 1;
    }
    reap(&o, once_pid, &once_done, &once_st);
    if (stopping || !listening) continue;
    for (int i = 1; i < n; i++) {
      if (!pfd[i].revents) continue;
      struct ferry_listener *l = ls[i - 1];
      struct ferry_conn *c = l->ops->accept(l);
      if (!c) {
        if (errno != EINTR) ferry_log("accept on %s: %s", l->name, strerror(errno));
        continue;
      }
      if (nchildren == children_cap) {
        size_t cap = children_cap ? children_cap * 2 : 16;
        struct child *p = realloc(children, cap * sizeof *p);
        if (!p) {
          ferry_log("out of memory; refusing %s", c->peer);
          c->ops->close(c);
          continue;
        }
        children = p;
        children_cap = cap;
      }
      fflush(NULL);
      pid_t parent = getpid();
      pid_t pid = fork();
      if (pid < 0) {
        ferry_log("fork for %s: %s", c->peer, strerror(errno));
        c->ops->close(c);
        continue;
      }
      if (pid == 0) {
        reset_signals_in_child();
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a session never outlives its server */
        if (getppid() != parent) _exit(SESSION_SETUP); /* it died before prctl */
        for (int j = 0; j < nlisten; j++) ls[j]->ops->close(ls[j]);
        static char prefix[48];
        snprintf(prefix, sizeof prefix, "ferry-server[%d]", (int)getpid());
        ferry_log_set_prefix(prefix);
        int st = session_run(c, &o);
        _exit(st);
      }
      children[nchildren].pid = pid;
      snprintf(children[nchildren].peer, sizeof children[nchildren].peer, "%s", c->peer);
      nchildren++;
      c->ops->detach(c);
      if (once) {
        once_pid = pid;
        listening = 0;
        for (int j = 0; j < nlisten; j++) ls[j]->ops->close(ls[j]);
        break;
      }
    }
  }

  if (listening)
    for (int j = 0; j < nlisten; j++) ls[j]->ops->close(ls[j]);
  if (stopping) {
    if (!o.quiet) ferry_log("stopping: ending %zu session%s", nchildren, nchildren == 1 ? "" : "s");
    stop_sessions(&o);
    return 0;
  }
  if (once && once_done) {
    if (WIFEXITED(once_st)) return WEXITSTATUS(once_st);
    return 128 + (WIFSIGNALED(once_st) ? WTERMSIG(once_st) : 0);
  }
  return 1;
}
