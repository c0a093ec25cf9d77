/*
 * The ferry command line. `ferry run -- prog args` starts a program with
 * ferry's libcudart.so.13 first on its library path, so the program's CUDA
 * runtime calls go to the remote GPUs named in FERRY_DEVICES. `ferry ls`,
 * `ferry status` and `ferry migrate` talk to running programs over their
 * control sockets (docs/control.md); the CLI never links the shim.
 */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/escape.h"
#include "protocol/wire.h"

#define SHIM_NAME "libcudart.so.13"
#define DRIVER_NAME "libcuda.so.1" /* the driver front end, beside it */
#define NVML_NAME "libnvidia-ml.so.1" /* NVML, counting the program's vGPUs */
#define CORE_NAME "libferry-client.so.0" /* the client, which the front ends need */
#ifndef FERRY_VERSION
#define FERRY_VERSION "0.1"
#endif

static void usage(FILE *out) {
  fprintf(out,
          "usage: ferry run [--devices URL[,URL...]] -- PROGRAM [ARGS...]\n"
          "       ferry ls [--json]\n"
          "       ferry status (--pid PID | --socket PATH) [--json]\n"
          "       ferry migrate (--pid PID | --socket PATH) VGPU (LOCAL_GPU | SERVER_URL)\n"
          "       ferry migrate --prepare (--pid PID | --socket PATH) VGPU (LOCAL_GPU | SERVER_URL)\n"
          "       ferry migrate --cancel (--pid PID | --socket PATH) VGPU\n"
          "       ferry version\n"
          "\n"
          "run      start PROGRAM (built with `nvcc -cudart shared`) on remote GPUs.\n"
          "         Devices come from --devices, FERRY_DEVICES=tcp://host:7420/0,...\n"
          "         or RCUDA_DEVICE_COUNT=N with RCUDA_DEVICE_<i>=host[@port]:gpu.\n"
          "         " SHIM_NAME " is looked for in BIN/../lib/ferry, then BIN/../lib\n"
          "         (BIN: the directory of this program); FERRY_LIBDIR overrides both.\n"
          "ls       list running ferry programs: pid, vGPUs, where each runs, socket.\n"
          "status   one program's vGPUs: backend, records, live memory, last migration.\n"
          "migrate  move vGPU VGPU of a running program onto its machine's GPU LOCAL_GPU, or\n"
          "         to another server's GPU (SERVER_URL, tcp://host:port/gpu), where it stays\n"
          "         remote; waits for the end and shows the memory copy's progress on stderr.\n"
          "         --prepare opens the target now (context, arena, helper or session) while the\n"
          "         program runs, so that a later migrate to it starts at the hold; --cancel\n"
          "         closes a prepared target, or stops a prepare still opening one.\n"
          "         Control sockets live in FERRY_CONTROL_DIR, else XDG_RUNTIME_DIR, else /tmp.\n"
          "         A socket is believed only if it is yours (not a link) and the process\n"
          "         behind it runs as you and is the pid its name says (root: any user's).\n");
}

/* where the shim is, relative to this binary's directory: lib/ferry in an
   installed tree (a private directory, so that the shim never shadows
   NVIDIA's runtime for other programs), lib in the build tree */
static const char *const libdirs[] = {"../lib/ferry", "../lib"};

/* FERRY_LIBDIR, else the first of libdirs that holds the shim: 0; -1 when
   this binary cannot be found; -2 when no libdirs holds the shim (out says
   where this binary is) */
static int find_libdir(char *out, size_t n) {
  const char *env = getenv("FERRY_LIBDIR");
  if (env && *env) {
    snprintf(out, n, "%s", env);
    return 0;
  }
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1); /* symlinks resolved */
  if (len <= 0) return -1;
  exe[len] = '\0';
  const char *bindir = dirname(exe);
  for (size_t i = 0; i < sizeof libdirs / sizeof libdirs[0]; i++) {
    char dir[PATH_MAX + 16], shim[PATH_MAX + 32], real[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", bindir, libdirs[i]);
    snprintf(shim, sizeof shim, "%s/" SHIM_NAME, dir);
    if (access(shim, R_OK) == 0) {
      snprintf(out, n, "%s", realpath(dir, real) ? real : dir);
      return 0;
    }
  }
  snprintf(out, n, "%s", bindir);
  return -2;
}

/* a program that names neither front end, and cannot load libraries at
   run time (no dlopen), never reaches ferry: say so. Interpreters (python3
   with PyTorch, JAX) name neither but dlopen the libraries that load them. */
static void warn_if_static_runtime(const char *program) {
  char path[PATH_MAX];
  if (strchr(program, '/')) {
    snprintf(path, sizeof path, "%s", program);
  } else {
    const char *p = getenv("PATH");
    int found = 0;
    char *dirs = strdup(p ? p : "");
    for (char *save, *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
      snprintf(path, sizeof path, "%s/%s", d, program);
      found = access(path, X_OK) == 0;
    }
    free(dirs);
    if (!found) return;
  }
  FILE *f = fopen(path, "rb");
  if (!f) return;
  char magic[4];
  int elf = fread(magic, 1, 4, f) == 4 && !memcmp(magic, "\177ELF", 4);
  int may_reach = 0;
  if (elf) {
    /* the NEEDED entries' and imports' strings live in .dynstr; a byte
       search finds them: either front end's name (NEEDED entries, or the
       driver's name that a static CUDA runtime passes to dlopen), or dlopen */
    static const char *const names[] = {SHIM_NAME, DRIVER_NAME, "dlopen"};
    static char buf[1 << 16];
    size_t keep = 0, got;
    while (!may_reach && (got = fread(buf + keep, 1, sizeof buf - keep, f)) > 0) {
      size_t total = keep + got;
      for (size_t k = 0; k < sizeof names / sizeof names[0] && !may_reach; k++)
        may_reach = memmem(buf, total, names[k], strlen(names[k])) != NULL;
      keep = strlen(SHIM_NAME);
      memmove(buf, buf + total - keep, keep);
    }
  }
  fclose(f);
  if (elf && !may_reach)
    fprintf(stderr,
            "ferry run: warning: %s loads neither " SHIM_NAME " nor " DRIVER_NAME
            " (is it a CUDA program?); its CUDA calls, if any, stay local\n",
            program);
}

static int cmd_run(int argc, char **argv) {
  int i = 0;
  for (; i < argc; i++) {
    if (!strcmp(argv[i], "--")) {
      i++;
      break;
    }
    if (!strcmp(argv[i], "--devices") && i + 1 < argc) {
      setenv("FERRY_DEVICES", argv[++i], 1);
    } else if (!strncmp(argv[i], "--devices=", 10)) {
      setenv("FERRY_DEVICES", argv[i] + 10, 1);
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "ferry run: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    } else {
      break; /* the program, without a -- before it */
    }
  }
  if (i >= argc) {
    fprintf(stderr, "ferry run: no program given\n");
    usage(stderr);
    return 2;
  }
  const char *devices = getenv("FERRY_DEVICES");
  const char *rcuda = getenv("RCUDA_DEVICE_COUNT");
  if ((!devices || !*devices) && (!rcuda || !*rcuda)) {
    fprintf(stderr, "ferry run: no remote GPU configured: set FERRY_DEVICES=tcp://host:7420/0 "
                    "(or pass --devices)\n");
    return 2;
  }
  char libdir[PATH_MAX], shim[PATH_MAX + 32];
  int found = find_libdir(libdir, sizeof libdir);
  if (found == -1) {
    fprintf(stderr, "ferry run: cannot locate ferry's lib directory; set FERRY_LIBDIR\n");
    return 2;
  }
  if (found == -2) {
    fprintf(stderr, "ferry run: " SHIM_NAME " is in neither %s/%s nor %s/%s (set FERRY_LIBDIR)\n",
            libdir, libdirs[0], libdir, libdirs[1]);
    return 2;
  }
  /* the front ends and the core they need: a missing one would only show
     as the loader's error, or as a program that stays on this machine (or,
     for NVML, that counts this machine's GPUs: docs/nvml.md) */
  static const char *const libs[] = {SHIM_NAME, DRIVER_NAME, NVML_NAME, CORE_NAME};
  for (size_t k = 0; k < sizeof libs / sizeof libs[0]; k++) {
    snprintf(shim, sizeof shim, "%s/%s", libdir, libs[k]);
    if (access(shim, R_OK)) {
      fprintf(stderr, "ferry run: %s: %s (set FERRY_LIBDIR)\n", shim, strerror(errno));
      return 2;
    }
  }
  const char *old = getenv("LD_LIBRARY_PATH");
  size_t n = strlen(libdir) + (old ? strlen(old) : 0) + 2;
  char *path = malloc(n);
  if (!path) return 2;
  snprintf(path, n, "%s%s%s", libdir, old && *old ? ":" : "", old && *old ? old : "");
  setenv("LD_LIBRARY_PATH", path, 1);
  free(path);
  warn_if_static_runtime(argv[i]);
  execvp(argv[i], &argv[i]);
  fprintf(stderr, "ferry run: cannot execute %s: %s\n", argv[i], strerror(errno));
  return errno == ENOENT ? 127 : 126;
}

/* ---- control sockets of running programs (ls, status, migrate) ---- */

#define REPLY_MAX (65536 + 2) /* a program's longest reply line and its \n */
#define STATUS_TIMEOUT_MS 5000 /* for a whole status reply: a program that takes longer is stuck */
#define POLL_MS 200            /* migrate's progress: how often status is asked */

/* the shim's rule (shim/migrate/control.c) */
static const char *control_dir(void) {
  const char *dir = getenv("FERRY_CONTROL_DIR");
  if (!dir || !*dir) dir = getenv("XDG_RUNTIME_DIR");
  return dir && *dir ? dir : "/tmp";
}

/* -1 with errno on failure */
static int ctl_connect(const char *path) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy(a.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

static long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* reads one reply line into r (without its \n) within timeout_ms for the
   whole line, not per read (a program that trickles bytes would hold the
   CLI for as long as it likes); < 0 waits for ever. 0, or -1 with a reason
   in r */
static int ctl_read(int fd, char *r, size_t n, int timeout_ms) {
  size_t have = 0;
  long deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    long left = deadline < 0 ? -1 : deadline - now_ms();
    /* past the deadline nothing more is read, even bytes that are there */
    int rc = deadline >= 0 && left <= 0 ? 0 : poll(&p, 1, (int)left);
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0 && have) {
      snprintf(r, n, "the program's reply was not complete within %d ms (%zu bytes, no end of "
               "line)", timeout_ms, have);
      return -1;
    }
    if (rc == 0) {
      snprintf(r, n, "the program did not answer within %d ms", timeout_ms);
      return -1;
    }
    ssize_t got = rc < 0 ? -1 : recv(fd, r + have, n - 1 - have, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      snprintf(r, n, "the program closed the connection without a reply%s",
               got < 0 ? "" : " (did it exit?)");
      return -1;
    }
    have += (size_t)got;
    char *nl = memchr(r, '\n', have);
    if (nl) {
      *nl = '\0';
      return 0;
    }
    if (have == n - 1) {
      snprintf(r, n, "the reply is longer than %zu bytes", n - 2);
      return -1;
    }
  }
}

/* sends one request line: 0, or -1 with a reason in r */
static int ctl_send(int fd, const char *req, char *r, size_t n) {
  char line[512];
  int len = snprintf(line, sizeof line, "%s\n", req);
  if (len < 0 || (size_t)len >= sizeof line) {
    snprintf(r, n, "the request is too long");
    return -1;
  }
  for (int off = 0; off < len;) {
    ssize_t w = send(fd, line + off, (size_t)(len - off), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      snprintf(r, n, "cannot send to the program: %s", strerror(errno));
      return -1;
    }
    off += (int)w;
  }
  return 0;
}

static int ctl_ask(int fd, const char *req, char *r, size_t n, int timeout_ms) {
  return ctl_send(fd, req, r, n) ? -1 : ctl_read(fd, r, n, timeout_ms);
}

/* Whether a reply can be believed. In a shared directory (/tmp) anyone may
   bind ferry-<pid>.sock first, for a pid still to come, and answer anything
   (a forged "ok"). So the socket file must be a socket, not a link, and
   ours; and the process listening on it (SO_PEERCRED, taken when it called
   listen()) must run as the file's owner and be the pid the caller named or
   the file's name says. Root may talk to any user's program, as the
   program's own check allows. */
enum ctl_refusal {
  CTL_GONE = 1, /* no such file, or nobody listens: errno says which */
  CTL_FOREIGN,  /* another user's socket: why says whose */
  CTL_REFUSED,  /* not to be believed: why says why */
};

/* connects to the program at path, which should be process `pid` (<= 0:
   unknown); the fd, or -1 with *refusal (and why, unless CTL_GONE) */
static int ctl_open(const char *path, long pid, enum ctl_refusal *refusal, char *why, size_t n) {
  uid_t me = geteuid();
  struct stat st;
  *refusal = CTL_REFUSED;
  if (lstat(path, &st)) {
    *refusal = CTL_GONE;
    return -1;
  }
  if (S_ISLNK(st.st_mode)) {
    snprintf(why, n, "it is a symbolic link, not a program's socket");
    return -1;
  }
  if (!S_ISSOCK(st.st_mode)) {
    snprintf(why, n, "it is not a socket");
    return -1;
  }
  if (me != 0 && st.st_uid != me) {
    *refusal = CTL_FOREIGN;
    snprintf(why, n, "it belongs to uid %u, not to you (uid %u)", (unsigned)st.st_uid,
             (unsigned)me);
    return -1;
  }
  int fd = ctl_connect(path);
  if (fd < 0) {
    *refusal = CTL_GONE;
    return -1;
  }
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
    snprintf(why, n, "cannot tell who listens on it: %s", strerror(errno));
  } else if (cred.uid != st.st_uid) {
    snprintf(why, n, "the process behind it runs as uid %u, not as uid %u (the socket's owner)",
             (unsigned)cred.uid, (unsigned)st.st_uid);
  } else if (pid > 0 && cred.pid != (pid_t)pid) {
    snprintf(why, n, "the process behind it is pid %ld, not pid %ld; another program took the name",
             (long)cred.pid, pid);
  } else {
    return fd;
  }
  close(fd);
  return -1;
}

/* which program a verb talks to: --pid P or --socket PATH */
struct target {
  char path[PATH_MAX];
  long pid;    /* -1 with --socket */
  long expect; /* the pid behind the socket: pid, or the one in a ferry-<pid>.sock name, or -1 */
};

static long socket_pid(const char *name);

/* why a program's socket cannot be reached, for people */
static void explain_connect(const char *verb, const struct target *t, int e) {
  if (t->pid < 0) {
    fprintf(stderr, "ferry %s: %s: %s\n", verb, t->path, strerror(e));
  } else if (e == ENOENT) {
    fprintf(stderr, "ferry %s: no ferry program with pid %ld: %s does not exist%s\n", verb,
            t->pid, t->path,
            kill((pid_t)t->pid, 0) == 0 || errno == EPERM
                ? " (the process runs: not under ferry, FERRY_CONTROL=off, another "
                  "FERRY_CONTROL_DIR, or no CUDA call yet)"
                : "");
  } else if (e == ECONNREFUSED) {
    fprintf(stderr, "ferry %s: pid %ld is gone (%s is a stale socket)\n", verb, t->pid, t->path);
  } else {
    fprintf(stderr, "ferry %s: %s: %s\n", verb, t->path, strerror(e));
  }
}

/* ctl_open for a verb's target: the fd, or -1 after saying why */
static int open_target(const char *verb, const struct target *t) {
  enum ctl_refusal refusal;
  char why[200];
  int fd = ctl_open(t->path, t->expect, &refusal, why, sizeof why);
  if (fd >= 0) return fd;
  if (refusal == CTL_GONE) explain_connect(verb, t, errno);
  else fprintf(stderr, "ferry %s: refusing %s: %s\n", verb, t->path, why);
  return -1;
}

static int parse_pid(const char *s, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (!*s || *end || errno || v <= 0 || v > INT_MAX) return -1;
  *out = v;
  return 0;
}

/* parses --pid/--socket/--json, in any order, and up to `npos` positional
   arguments. 0, or 2 (usage) after saying why */
static int parse_target(const char *verb, int argc, char **argv, struct target *t, int *json,
                        char **pos, int npos) {
  int have_target = 0, got = 0;
  t->pid = -1;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *val = NULL;
    if (!strcmp(a, "--pid") || !strcmp(a, "--socket")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "ferry %s: %s needs a value\n", verb, a);
        return 2;
      }
      val = argv[++i];
    } else if (!strncmp(a, "--pid=", 6) || !strncmp(a, "--socket=", 9)) {
      val = strchr(a, '=') + 1;
    }
    if (val) {
      if (have_target++) {
        fprintf(stderr, "ferry %s: give one --pid or --socket\n", verb);
        return 2;
      }
      if (a[2] == 'p') {
        if (parse_pid(val, &t->pid)) {
          fprintf(stderr, "ferry %s: --pid '%s' is not a process id\n", verb, val);
          return 2;
        }
        snprintf(t->path, sizeof t->path, "%s/ferry-%ld.sock", control_dir(), t->pid);
      } else {
        snprintf(t->path, sizeof t->path, "%s", val);
      }
    } else if (json && !strcmp(a, "--json")) {
      *json = 1;
    } else if (a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9')) {
      fprintf(stderr, "ferry %s: unknown option '%s'\n", verb, a);
      return 2;
    } else if (got < npos) {
      pos[got++] = argv[i];
    } else {
      fprintf(stderr, "ferry %s: unexpected argument '%s'\n", verb, a);
      return 2;
    }
  }
  if (!have_target) {
    fprintf(stderr, "ferry %s: which program? give --pid PID or --socket PATH (see ferry ls)\n",
            verb);
    return 2;
  }
  if (got < npos) {
    fprintf(stderr, "ferry %s: missing arguments\n", verb);
    return 2;
  }
  const char *base = strrchr(t->path, '/');
  t->expect = t->pid > 0 ? t->pid : socket_pid(base ? base + 1 : t->path);
  return 0;
}

/* Numbers in a reply come from another process, which may be broken or
   hostile (1e300, -1, NaN, infinities): each is clamped to what it can mean
   before it is printed, divided or converted (a double beyond INT_MAX cast
   to int is undefined). Counts and bytes stop at 2^53, where doubles stop
   being exact; times at 1e12 ms (30 years). */
#define COUNT_MAX 9007199254740992.0 /* 2^53 */
#define MS_MAX 1e12

static double clamp(double v, double lo, double hi) {
  if (isnan(v)) return lo;
  return v < lo ? lo : v > hi ? hi : v + 0.0; /* + 0.0: no "-0" printed */
}

/* member `key` of obj, clamped to [lo, hi]; lo when it is missing or not a number */
static double num_in(const json_t *obj, const char *key, double lo, double hi) {
  const json_t *v = json_object_get(obj, key);
  return clamp(json_is_number(v) ? json_number_value(v) : lo, lo, hi);
}

static double amount(const json_t *obj, const char *key) { return num_in(obj, key, 0, COUNT_MAX); }
static double millis(const json_t *obj, const char *key) { return num_in(obj, key, 0, MS_MAX); }
static double ident(const json_t *obj, const char *key) { return num_in(obj, key, 0, INT_MAX); }

/* "1.2/4.0 GiB": both in the unit of the total; done < 0: the total alone */
static void format_bytes(char *out, size_t n, double done, double total) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double scale = 1;
  total = clamp(total, 0, COUNT_MAX);
  while (u < 5 && total >= scale * 1024) scale *= 1024, u++;
  if (done < 0) snprintf(out, n, "%.*f %s", u ? 1 : 0, total / scale, units[u]);
  else snprintf(out, n, "%.*f/%.*f %s", u ? 1 : 0, clamp(done, 0, total) / scale, u ? 1 : 0,
                total / scale, units[u]);
}

/* member `key` of obj as a string, escaped (cli_escape) and cut to n
   bytes; "-" when it is not one */
static void str(const json_t *obj, const char *key, char *out, size_t n) {
  const char *v = json_string_value(json_object_get(obj, key));
  cli_escape(out, n, v ? v : "-");
}

/* a reply line of the program, escaped for printing */
static const char *safe(const char *reply) {
  static char buf[4 * REPLY_MAX];
  return cli_escape(buf, sizeof buf, reply);
}

/* how the CLI prints JSON: one line, the program's order, times to the
   microsecond; all ASCII (control characters and everything past U+007F as
   \uXXXX), so that even a terminal shown the JSON gets no control */
#define DUMP_FLAGS \
  (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15) | JSON_ENSURE_ASCII)

/* The status object of an `ok {json}` reply; NULL with why. Jansson refuses
   what is not JSON (NaN, 1e999, bad UTF-8, trailing bytes) and duplicate
   keys, which readers would take differently. */
static json_t *parse_status(const char *reply, char *why, size_t n) {
  if (strncmp(reply, "ok {", 4)) {
    snprintf(why, n, "the program answered: %s", safe(reply));
    return NULL;
  }
  json_error_t err;
  json_t *st = json_loads(reply + 3, JSON_REJECT_DUPLICATES, &err);
  char text[4 * sizeof err.text]; /* Jansson quotes the bytes it stopped at */
  if (!st) snprintf(why, n, "the program's status is not valid JSON (%s at byte %d)",
                    cli_escape(text, sizeof text, err.text), err.position);
  return st;
}

/* asks the program behind fd for its status; NULL with why */
static json_t *ask_status(int fd, char *reply, size_t n, char *why, size_t whyn) {
  if (!ctl_ask(fd, "status", reply, n, STATUS_TIMEOUT_MS)) return parse_status(reply, why, whyn);
  snprintf(why, whyn, "%s", reply);
  return NULL;
}

/* the status of the program behind fd; NULL after saying why */
static json_t *get_status(const char *verb, int fd, char *reply, size_t n) {
  char why[300];
  json_t *st = ask_status(fd, reply, n, why, sizeof why);
  if (!st) fprintf(stderr, "ferry %s: %s\n", verb, why);
  return st;
}

/* "memsync 1.2/4.0 GiB (30%)", or "" when no copy is under way */
static int memsync_progress(const json_t *mig, char *out, size_t n) {
  char phase[32], state[32], b[64];
  str(mig, "state", state, sizeof state);
  str(mig, "phase", phase, sizeof phase);
  double total = amount(mig, "bytes_total"), done = clamp(amount(mig, "bytes_done"), 0, total);
  out[0] = '\0';
  if (strcmp(state, "running") || strcmp(phase, "memsync") || total <= 0) return -1;
  format_bytes(b, sizeof b, done, total);
  int pct = (int)(100 * done / total); /* 0..100: done <= total */
  snprintf(out, n, "memsync %s (%d%%)", b, pct);
  return pct;
}

static void print_migration(const json_t *mig) {
  char state[32], phase[32], error[300], times[512], progress[96];
  str(mig, "state", state, sizeof state);
  str(mig, "phase", phase, sizeof phase);
  str(mig, "error", error, sizeof error);
  size_t len = 0;
  const json_t *ms = json_object_get(mig, "phase_ms"), *v;
  const char *name;
  int i = 0;
  times[0] = '\0';
  json_object_foreach((json_t *)ms, name, v) {
    if (len >= sizeof times) break;
    double t = json_is_number(v) ? json_number_value(v) : 0;
    char shown_name[32];
    len += (size_t)snprintf(times + len, sizeof times - len, "%s%s %.1f", i++ ? ", " : "",
                            cli_escape(shown_name, sizeof shown_name, name), clamp(t, 0, MS_MAX));
  }
  if (!strcmp(state, "running")) {
    if (memsync_progress(mig, progress, sizeof progress) < 0)
      snprintf(progress, sizeof progress, "%s", phase);
    printf("  migration: running, %s\n", progress);
  } else if (!strcmp(state, "done")) {
    char copied[64];
    format_bytes(copied, sizeof copied, -1, amount(mig, "bytes_copied"));
    printf("  migration: done in %.1f ms, the program held %.1f ms (%s ms)\n",
           millis(mig, "total_ms"), millis(mig, "pause_ms"), times);
    printf("             at launch %.0f; replayed %.0f records, %.0f modules (%.1f ms, rest %.1f "
           "ms); copied %s in %.0f ranges, %.0f requests\n",
           amount(mig, "launch_at_start"), amount(mig, "records_replayed"),
           amount(mig, "modules_replayed"), millis(mig, "replay_module_ms"),
           millis(mig, "replay_other_ms"), copied, amount(mig, "ranges_copied"),
           amount(mig, "requests"));
    if (amount(mig, "bytes_precopied") > 0) {
      char pre[64], same[64];
      format_bytes(pre, sizeof pre, -1, amount(mig, "bytes_precopied"));
      format_bytes(same, sizeof same, -1, amount(mig, "bytes_unchanged"));
      printf("             before the hold: replayed %.0f records, copied %s (%.1f ms); in the "
             "pause %s unchanged by hash (%.1f ms hashing)\n",
             amount(mig, "records_ahead"), pre, millis(mig, "ahead_ms"), same,
             millis(mig, "hash_ms"));
    }
  } else if (!strcmp(state, "waiting")) {
    printf("  migration: %s\n", error);
  } else if (!strcmp(state, "failed")) {
    printf("  migration: failed in %s after %.1f ms: %s\n", phase, millis(mig, "total_ms"), error);
    printf("             phases: %s ms\n", times);
  } else {
    printf("  migration: none\n");
  }
}

static void print_status(const json_t *st, const char *path) {
  printf("pid %.0f  socket %s\n", ident(st, "pid"), path);
  const json_t *vgpus = json_object_get(st, "vgpus"), *v;
  size_t i = 0;
  for (; (v = json_array_get(vgpus, i)); i++) {
    char backend[32], where[400], bytes[64];
    str(v, "backend", backend, sizeof backend);
    str(v, "where", where, sizeof where);
    format_bytes(bytes, sizeof bytes, -1, amount(v, "live_bytes"));
    printf("vGPU %.0f  %s  %s\n", ident(v, "index"), backend, where);
    printf("  records %.0f, live regions %.0f (%s), launches %.0f\n", amount(v, "records"),
           amount(v, "regions"), bytes, amount(v, "launches"));
    char prepared[400];
    str(v, "prepared", prepared, sizeof prepared);
    if (prepared[0] && strcmp(prepared, "-")) /* "-": a program that does not say */
      printf("  prepared: %s\n", prepared);
    print_migration(json_object_get(v, "migration"));
  }
  if (!i) printf("no vGPU yet (the program has made no CUDA call that needs one)\n");
}

static char reply_buf[REPLY_MAX], poll_buf[REPLY_MAX];

static int cmd_status(int argc, char **argv) {
  struct target t;
  int json = 0, rc = parse_target("status", argc, argv, &t, &json, NULL, 0);
  if (rc) return rc;
  int fd = open_target("status", &t);
  if (fd < 0) return 1;
  json_t *st = get_status("status", fd, reply_buf, sizeof reply_buf);
  close(fd);
  if (!st) return 1;
  if (json) json_dumpf(st, stdout, DUMP_FLAGS), putchar('\n');
  else print_status(st, t.path);
  json_decref(st);
  return 0;
}

/* pid from "ferry-<pid>.sock", or -1 */
static long socket_pid(const char *name) {
  long pid;
  char digits[32];
  size_t n = strlen(name);
  if (n < 11 || n - 10 >= sizeof digits || strncmp(name, "ferry-", 6) || strcmp(name + n - 5, ".sock"))
    return -1;
  memcpy(digits, name + 6, n - 11);
  digits[n - 11] = '\0';
  return parse_pid(digits, &pid) ? -1 : pid;
}

/* ls --json's entry: the status object with its socket in front; a
   "socket" the program sent itself is not believed */
static json_t *with_socket(json_t *st, const char *path) {
  json_t *e = json_object();
  if (!e || json_object_set_new(e, "socket", json_string(path)) ||
      json_object_update_missing(e, st)) {
    json_decref(e);
    return NULL;
  }
  return e;
}

/* ls's table rows of one program */
static void print_rows(const json_t *st, long pid, const char *path) {
  const json_t *v;
  size_t i = 0;
  for (; (v = json_array_get(json_object_get(st, "vgpus"), i)); i++) {
    char backend[32], where[400];
    str(v, "backend", backend, sizeof backend);
    str(v, "where", where, sizeof where);
    printf("%-8ld %-5.0f %-8s %-40s %s\n", pid, ident(v, "index"), backend, where, path);
  }
  if (!i) printf("%-8ld %-5s %-8s %-40s %s\n", pid, "-", "-", "(no vGPU yet)", path);
}

static int by_pid(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

static int cmd_ls(int argc, char **argv) {
  int json = 0;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else {
      fprintf(stderr, "ferry ls: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  const char *dir = control_dir();
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "ferry ls: %s: %s\n", dir, strerror(errno));
    return 1;
  }
  long pids[4096];
  size_t count = 0;
  for (struct dirent *e; (e = readdir(d)) && count < sizeof pids / sizeof pids[0];) {
    long pid = socket_pid(e->d_name);
    if (pid > 0) pids[count++] = pid;
  }
  closedir(d);
  qsort(pids, count, sizeof pids[0], by_pid);
  int shown = 0;
  json_t *all = json ? json_array() : NULL;
  if (json && !all) return 1;
  if (!json) printf("%-8s %-5s %-8s %-40s %s\n", "PID", "vGPU", "BACKEND", "WHERE", "SOCKET");
  for (size_t k = 0; k < count; k++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/ferry-%ld.sock", dir, pids[k]);
    enum ctl_refusal refusal;
    char why[300];
    int fd = ctl_open(path, pids[k], &refusal, why, sizeof why);
    if (fd < 0) {
      /* a program that died without removing its socket, or another user's
         (in a shared /tmp): nothing to say; a forgery: say so */
      if (refusal == CTL_REFUSED) fprintf(stderr, "ferry ls: refusing %s: %s\n", path, why);
      continue;
    }
    json_t *st = ask_status(fd, reply_buf, sizeof reply_buf, why, sizeof why);
    close(fd);
    if (!st) {
      fprintf(stderr, "ferry ls: %s: %s\n", path, why);
      continue;
    }
    if (json) json_array_append_new(all, with_socket(st, path));
    else print_rows(st, pids[k], path);
    json_decref(st);
    shown++;
  }
  if (json) {
    json_dumpf(all, stdout, DUMP_FLAGS);
    putchar('\n');
    json_decref(all);
  } else if (!shown) fprintf(stderr, "ferry ls: no running ferry program has a socket in %s\n", dir);
  return 0;
}

/* the migration of vGPU `vgpu`, from the program's status */
static const json_t *find_migration(const json_t *st, long vgpu) {
  const json_t *v;
  for (size_t i = 0; (v = json_array_get(json_object_get(st, "vgpus"), i)); i++)
    if (ident(v, "index") == (double)vgpu) return json_object_get(v, "migration");
  return NULL;
}

/* --prepare: open the target now, for a later migrate; --cancel VGPU: close it */
static int cmd_prepare_cancel(int argc, char **argv, int cancel) {
  struct target t;
  char *pos[2];
  int rc = parse_target("migrate", argc, argv, &t, NULL, pos, cancel ? 1 : 2);
  if (rc) return rc;
  char *end;
  errno = 0;
  long vg = strtol(pos[0], &end, 10);
  if (!*pos[0] || *end || errno || vg < 0 || vg > INT_MAX) {
    fprintf(stderr, "ferry migrate: VGPU '%s' must be a number from 0\n", pos[0]);
    return 2;
  }
  if (!cancel && (strlen(pos[1]) > 300 || strpbrk(pos[1], " \t\r\n"))) {
    fprintf(stderr, "ferry migrate: TARGET '%s' is neither a local GPU nor a server URL\n", pos[1]);
    return 2;
  }
  int fd = open_target("migrate", &t);
  if (fd < 0) return 1;
  char req[400];
  if (cancel) snprintf(req, sizeof req, "cancel %ld", vg);
  else snprintf(req, sizeof req, "prepare %ld %s", vg, pos[1]);
  rc = ctl_send(fd, req, reply_buf, sizeof reply_buf);
  if (!rc) rc = ctl_read(fd, reply_buf, sizeof reply_buf, -1);
  close(fd);
  if (!rc && !strncmp(reply_buf, "ok ", 3)) {
    printf("%s\n", safe(reply_buf + 3));
    return 0;
  }
  fprintf(stderr, "ferry migrate: %s\n",
          safe(!strncmp(reply_buf, "error ", 6) ? reply_buf + 6 : reply_buf));
  return 1;
}

static int cmd_migrate(int argc, char **argv) {
  struct target t;
  char *pos[2];
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--prepare") || !strcmp(argv[i], "--cancel")) {
      int cancel = argv[i][2] == 'c';
      for (int j = i; j + 1 < argc; j++) argv[j] = argv[j + 1];
      return cmd_prepare_cancel(argc - 1, argv, cancel);
    }
  int rc = parse_target("migrate", argc, argv, &t, NULL, pos, 2);
  if (rc) return rc;
  long idx[2];
  /* TARGET: a local GPU, or a server URL (the vGPU stays remote, on another server) */
  int url = strstr(pos[1], "://") != NULL;
  for (int i = 0; i < 2 - url; i++) {
    char *end;
    errno = 0;
    idx[i] = strtol(pos[i], &end, 10);
    if (!*pos[i] || *end || errno || idx[i] < 0 || idx[i] > INT_MAX) {
      fprintf(stderr, "ferry migrate: %s '%s' must be a number from 0%s\n",
              i ? "TARGET" : "VGPU", pos[i], i ? ", or a server URL (tcp://host:port/gpu)" : "");
      return 2;
    }
  }
  if (url && (strlen(pos[1]) > 300 || strpbrk(pos[1], " \t\r\n"))) {
    fprintf(stderr, "ferry migrate: TARGET '%s' is not a server URL\n", pos[1]);
    return 2;
  }
  int fd = open_target("migrate", &t);
  if (fd < 0) return 1;
  char req[400];
  if (url) snprintf(req, sizeof req, "migrate %ld %s", idx[0], pos[1]);
  else snprintf(req, sizeof req, "migrate %ld %ld", idx[0], idx[1]);
  if (ctl_send(fd, req, reply_buf, sizeof reply_buf)) {
    fprintf(stderr, "ferry migrate: %s\n", reply_buf);
    close(fd);
    return 1;
  }
  /* a second connection asks status while the first waits for the end */
  int tty = isatty(2), shown = -1, pfd = -1, polling = 1;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, polling ? POLL_MS : -1);
    if (r < 0 && errno == EINTR) continue;
    if (r != 0) break;
    enum ctl_refusal refusal;
    char why[200];
    if (pfd < 0) pfd = ctl_open(t.path, t.expect, &refusal, why, sizeof why);
    char line[128];
    json_t *st = NULL;
    const json_t *mig = NULL;
    if (pfd >= 0 && !ctl_ask(pfd, "status", poll_buf, sizeof poll_buf, STATUS_TIMEOUT_MS))
      st = parse_status(poll_buf, line, sizeof line);
    if (!(mig = find_migration(st, idx[0]))) {
      json_decref(st);
      polling = 0; /* progress is a nicety: the migration goes on without it */
      continue;
    }
    int pct = memsync_progress(mig, line, sizeof line);
    json_decref(st);
    if (pct < 0) continue;
    if (tty) fprintf(stderr, "\rferry: vgpu %ld %s\033[K", idx[0], line);
    else if (pct != shown) fprintf(stderr, "ferry: vgpu %ld %s\n", idx[0], line);
    shown = pct;
  }
  if (pfd >= 0) close(pfd);
  if (tty && shown >= 0) fprintf(stderr, "\n");
  rc = ctl_read(fd, reply_buf, sizeof reply_buf, -1);
  close(fd);
  if (rc) {
    fprintf(stderr, "ferry migrate: %s\n", reply_buf);
    return 1;
  }
  if (!strncmp(reply_buf, "ok ", 3)) {
    printf("%s\n", safe(reply_buf + 3));
    return 0;
  }
  fprintf(stderr, "ferry migrate: %s\n",
          safe(!strncmp(reply_buf, "error ", 6) ? reply_buf + 6 : reply_buf));
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2);
  if (!strcmp(argv[1], "ls")) return cmd_ls(argc - 2, argv + 2);
  if (!strcmp(argv[1], "status")) return cmd_status(argc - 2, argv + 2);
  if (!strcmp(argv[1], "migrate")) return cmd_migrate(argc - 2, argv + 2);
  if (!strcmp(argv[1], "version")) {
    printf("ferry " FERRY_VERSION " (protocol %u)\n", FERRY_PROTOCOL_VERSION);
    return 0;
  }
  fprintf(stderr, "ferry: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
