/*
 * The control socket: how a user or a scheduler steers a running program
 * from outside (`ferry migrate`, `ferry status`, `ferry ls`). A UNIX socket
 * at $FERRY_CONTROL_DIR/ferry-<pid>.sock, mode 0600, one text line per
 * request and one reply line. ferry_control_handle() is the whole protocol
 * (a pure line -> reply function); the rest only moves lines.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "migrate.h"
#include "thread.h"

#define LINE_MAX_BYTES 256 /* a request line, without its \n or \r\n */
#define REPLY_MAX 65536    /* status of 16 vGPUs with long, escaped strings fits */
#define MAX_CONNECTIONS 16 /* each is a thread; more are told "busy" */
#define TOKEN_ECHO 32      /* how much of a bad token a reply quotes */

/* ---- the protocol ---- */

/* a reply being built; once it overflows it is discarded for an error */
struct out {
  char *p;
  size_t len, cap;
  int overflow;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...) {
  if (o->overflow) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= o->cap - o->len) {
    o->overflow = 1;
    return;
  }
  o->len += (size_t)n;
}

/* length of the valid UTF-8 sequence at s, or 0 */
static int utf8_len(const unsigned char *s) {
  int n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  return n;
}

/* a JSON string: quotes, backslashes and control bytes escaped; bytes that
   are not UTF-8 become U+FFFD so the line stays valid JSON */
static void put_json_string(struct out *o, const char *s) {
  put(o, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    if (*p == '"' || *p == '\\') {
      put(o, "\\%c", *p++);
    } else if (*p == '\n') {
      put(o, "\\n"), p++;
    } else if (*p == '\t') {
      put(o, "\\t"), p++;
    } else if (*p < 0x20 || *p == 0x7f) {
      put(o, "\\u%04x", *p++);
    } else if (*p < 0x80) {
      put(o, "%c", *p++);
    } else {
      int n = utf8_len(p);
      if (n) put(o, "%.*s", n, (const char *)p), p += n;
      else put(o, "\\ufffd"), p++;
    }
  }
  put(o, "\"");
}

/* a number JSON can carry (NaN and infinities cannot be written) */
static double json_number(double x) { return isfinite(x) ? x : 0.0; }

static const char *state_name(enum ferry_migration_state s) {
  switch (s) {
  case FERRY_MIG_RUNNING: return "running";
  case FERRY_MIG_DONE: return "done";
  case FERRY_MIG_FAILED: return "failed";
  default: return "none";
  }
}

static void put_vgpu(struct out *o, const struct ferry_vgpu_status *s) {
  const char *backend = !s->local ? "remote" : s->helper_pid ? "helper" : "local";
  put(o, "{\"index\":%d,\"backend\":\"%s\",\"local_gpu\":%d,\"helper_pid\":%d,\"where\":",
      s->index, backend, s->local_gpu, s->helper_pid);
  put_json_string(o, s->where);
  put(o, ",\"records\":%llu,\"regions\":%llu,\"live_bytes\":%llu,\"launches\":%llu,"
      "\"migration\":{\"state\":\"%s\",",
      (unsigned long long)s->records, (unsigned long long)s->regions,
      (unsigned long long)s->live_bytes, (unsigned long long)s->launches, state_name(s->state));
  put(o, "\"phase\":");
  if (s->state != FERRY_MIG_NONE && s->phase >= 0 && s->phase < FERRY_PHASE_COUNT)
    put_json_string(o, ferry_phase_names[s->phase]);
  else
    put(o, "null");
  put(o, ",\"bytes_done\":%llu,\"bytes_total\":%llu,\"phase_ms\":{",
      (unsigned long long)s->bytes_done, (unsigned long long)s->bytes_total);
  for (int i = 0; i < FERRY_PHASE_COUNT; i++) {
    put(o, i ? "," : "");
    put_json_string(o, ferry_phase_names[i]);
    put(o, ":%.3f", json_number(s->phase_ms[i]));
  }
  put(o, "},\"total_ms\":%.3f,\"pause_ms\":%.3f,\"launch_at_start\":%llu,\"records_replayed\":%llu,"
      "\"modules_replayed\":%llu,\"replay_module_ms\":%.3f,\"replay_other_ms\":%.3f,"
      "\"bytes_copied\":%llu,\"ranges_copied\":%llu,\"requests\":%llu,\"error\":",
      json_number(s->total_ms), json_number(s->pause_ms), (unsigned long long)s->launch_at_start,
      (unsigned long long)s->records_replayed, (unsigned long long)s->modules_replayed,
      json_number(s->replay_module_ms), json_number(s->replay_other_ms),
      (unsigned long long)s->bytes_copied, (unsigned long long)s->ranges_copied,
      (unsigned long long)s->requests);
  put_json_string(o, s->error);
  put(o, "}}");
}

static void reply_status(char *reply, size_t len) {
  struct out o = {reply, 0, len, 0};
  put(&o, "ok {\"pid\":%d,\"vgpus\":[", (int)getpid());
  int count = ferry_vgpu_count(), first = 1;
  for (int i = 0; i < count; i++) {
    struct ferry_vgpu_status s;
    memset(&s, 0, sizeof s);
    if (ferry_vgpu_status(i, &s)) continue; /* gone since the count was read */
    s.where[sizeof s.where - 1] = s.error[sizeof s.error - 1] = '\0';
    put(&o, first ? "" : ",");
    first = 0;
    put_vgpu(&o, &s);
  }
  put(&o, "]}");
  if (o.overflow) snprintf(reply, len, "error status does not fit in %zu bytes", len);
}

/* a token as a reply may quote it: printable, cut short */
static const char *echo(const char *tok, char *buf, size_t n) {
  size_t i = 0, len = strlen(tok);
  for (; tok[i] && i < TOKEN_ECHO && i + 1 < n; i++)
    buf[i] = (unsigned char)tok[i] < 0x20 || (unsigned char)tok[i] >= 0x7f ? '?' : tok[i];
  buf[i] = '\0';
  if (len > i && n > i + 3) strcpy(buf + i, "...");
  return buf;
}

/* a non-negative decimal that fits an int, or an error reply */
static int parse_index(const char *what, const char *tok, int *out, char *reply, size_t len) {
  char e[TOKEN_ECHO + 4];
  const char *p = tok;
  if (*p == '-' && p[1]) p++;
  for (const char *q = p; *q; q++) {
    if (*q < '0' || *q > '9') {
      snprintf(reply, len, "error %s '%s' is not a number", what, echo(tok, e, sizeof e));
      return -1;
    }
  }
  if (*tok == '-') {
    snprintf(reply, len, "error %s '%s' must not be negative", what, echo(tok, e, sizeof e));
    return -1;
  }
  errno = 0;
  long v = strtol(tok, NULL, 10);
  if (errno || v > INT_MAX) {
    snprintf(reply, len, "error %s '%s' is too large", what, echo(tok, e, sizeof e));
    return -1;
  }
  *out = (int)v;
  return 0;
}

/* one line for a reply: the migration engine's reason may hold newlines */
static void one_line(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = ' ';
}

static void reply_migrate(char **tok, int ntok, char *reply, size_t len) {
  if (ntok != 3) {
    snprintf(reply, len, "error migrate takes 2 arguments, <vgpu> <local-gpu> (got %d)", ntok - 1);
    return;
  }
  int vgpu, gpu;
  if (parse_index("vgpu", tok[1], &vgpu, reply, len)) return;
  if (parse_index("local GPU", tok[2], &gpu, reply, len)) return;
  int count = ferry_vgpu_count();
  if (vgpu >= count) {
    if (count <= 0)
      snprintf(reply, len, "error no vgpu %d: this program has no vGPU yet", vgpu);
    else
      snprintf(reply, len, "error no vgpu %d: this program has %d (0..%d)", vgpu, count, count - 1);
    return;
  }
  char err[256] = "";
  if (ferry_migrate(vgpu, gpu, err, sizeof err)) {
    err[sizeof err - 1] = '\0';
    one_line(err);
    snprintf(reply, len, "error %s", *err ? err : "migration failed");
    return;
  }
  struct ferry_vgpu_status s;
  memset(&s, 0, sizeof s);
  double ms = ferry_vgpu_status(vgpu, &s) ? 0.0 : json_number(s.total_ms);
  if (s.helper_pid)
    snprintf(reply, len, "ok vgpu %d now on local GPU %d in ferry-mhelper pid %d (%.1f ms)", vgpu,
             gpu, s.helper_pid, ms);
  else
    snprintf(reply, len, "ok vgpu %d now on local GPU %d (%.1f ms)", vgpu, gpu, ms);
}

void ferry_control_handle(const char *line, char *reply, size_t len) {
  if (!reply || !len) return;
  size_t n = strlen(line);
  if (n > LINE_MAX_BYTES) {
    snprintf(reply, len, "error line too long (max %d bytes)", LINE_MAX_BYTES);
    return;
  }
  char copy[LINE_MAX_BYTES + 1], *tok[4], *save = NULL;
  memcpy(copy, line, n + 1);
  int ntok = 0;
  for (char *t = strtok_r(copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
    if (ntok < 4) tok[ntok] = t;
    ntok++;
  }
  char e[TOKEN_ECHO + 4];
  if (ntok == 0) {
    snprintf(reply, len, "error empty request (try help)");
  } else if (!strcmp(tok[0], "migrate")) {
    reply_migrate(tok, ntok, reply, len);
  } else if ((!strcmp(tok[0], "status") || !strcmp(tok[0], "help")) && ntok > 1) {
    snprintf(reply, len, "error %s takes no arguments (got '%s')", tok[0], echo(tok[1], e, sizeof e));
  } else if (!strcmp(tok[0], "status")) {
    reply_status(reply, len);
  } else if (!strcmp(tok[0], "help")) {
    snprintf(reply, len, "ok verbs: migrate <vgpu> <local-gpu> | status | help");
  } else {
    snprintf(reply, len, "error unknown command '%s' (try help)", echo(tok[0], e, sizeof e));
  }
}

/* ---- the socket ---- */

static struct {
  int fd;
  pid_t owner; /* the process that created the file; a fork() child must not remove it */
  dev_t dev;
  ino_t ino;
  int active; /* connections being served */
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
} ctl = {.fd = -1};

static int send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w, n -= (size_t)w;
  }
  return 0;
}

/* answer and hang up; unread input is dropped first so the peer reads the
   reply rather than a reset */
static void refuse(int fd, const char *line) {
  send_all(fd, line, strlen(line));
  shutdown(fd, SHUT_WR);
  char sink[512];
  while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
  }
}

static void *conn_main(void *arg) {
  int fd = (int)(intptr_t)arg;
  char in[LINE_MAX_BYTES + 2]; /* a line of the most bytes and its \r\n */
  size_t have = 0;
  char *reply = malloc(REPLY_MAX + 1);
  if (!reply) {
    refuse(fd, "error out of memory\n");
    goto out;
  }
  for (;;) {
    char *nl;
    while ((nl = memchr(in, '\n', have))) {
      size_t n = (size_t)(nl - in), used = n + 1;
      if (n && in[n - 1] == '\r') n--;
      if (n > LINE_MAX_BYTES) goto too_long;
      in[n] = '\0';
      if (memchr(in, '\0', n))
        snprintf(reply, REPLY_MAX, "error request holds a NUL byte");
      else
        ferry_control_handle(in, reply, REPLY_MAX);
      size_t rlen = strlen(reply);
      reply[rlen++] = '\n';
      if (send_all(fd, reply, rlen)) goto out;
      memmove(in, in + used, have - used);
      have -= used;
    }
    if (have == sizeof in) goto too_long;
    ssize_t r = recv(fd, in + have, sizeof in - have, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) goto out; /* a partial line is dropped, never run */
    have += (size_t)r;
  }
too_long:
  snprintf(reply, REPLY_MAX, "error line too long (max %d bytes)\n", LINE_MAX_BYTES);
  refuse(fd, reply);
out:
  close(fd);
  free(reply);
  __atomic_sub_fetch(&ctl.active, 1, __ATOMIC_ACQ_REL);
  return NULL;
}

/* the file is 0600 already; this also holds if someone loosened it */
static int peer_is_owner(int fd) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) return 0;
  return cred.uid == geteuid() || cred.uid == 0;
}

static void *accept_main(void *arg) {
  (void)arg;
  int warned = 0;
  for (;;) {
    int c = accept4(ctl.fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        if (!warned++) ferry_log("control socket: accept: %s; retrying", strerror(errno));
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL); /* the table frees up; do not spin meanwhile */
        continue;
      }
      ferry_log("control socket: accept: %s; the control socket stops", strerror(errno));
      return NULL;
    }
    if (!peer_is_owner(c)) {
      refuse(c, "error permission denied\n");
      close(c);
      continue;
    }
    if (__atomic_add_fetch(&ctl.active, 1, __ATOMIC_ACQ_REL) > MAX_CONNECTIONS) {
      __atomic_sub_fetch(&ctl.active, 1, __ATOMIC_ACQ_REL);
      refuse(c, "error busy (too many control connections)\n");
      close(c);
      continue;
    }
    /* threads made here inherit this one's mask: every signal blocked */
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, conn_main, (void *)(intptr_t)c)) {
      __atomic_sub_fetch(&ctl.active, 1, __ATOMIC_ACQ_REL);
      refuse(c, "error busy (cannot start a thread)\n");
      close(c);
    }
    pthread_attr_destroy(&attr);
  }
}

static void remove_at_exit(void) {
  if (getpid() != ctl.owner) return; /* a fork() child: the socket is its parent's */
  struct stat st;
  /* only the file this process made, not one put there since */
  if (!lstat(ctl.path, &st) && st.st_dev == ctl.dev && st.st_ino == ctl.ino) unlink(ctl.path);
}

/* a socket file left by a dead program is removed; a live one, or anything
   that is not a socket, is left alone and this program goes without */
static int clear_stale(const struct sockaddr_un *a) {
  struct stat st;
  if (lstat(a->sun_path, &st)) {
    if (errno == ENOENT) return 0;
    ferry_log("control socket %s: %s; not started", a->sun_path, strerror(errno));
    return -1;
  }
  if (!S_ISSOCK(st.st_mode)) {
    ferry_log("control socket %s: a file that is not a socket is in the way; not started",
              a->sun_path);
    return -1;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ferry_log("control socket: socket: %s; not started", strerror(errno));
    return -1;
  }
  int rc = connect(fd, (const struct sockaddr *)a, sizeof *a), e = errno;
  close(fd);
  if (!rc) {
    ferry_log("control socket %s: a live program answers there; not started", a->sun_path);
    return -1;
  }
  if (e != ECONNREFUSED) {
    ferry_log("control socket %s: %s; not started", a->sun_path, strerror(e));
    return -1;
  }
  if (unlink(a->sun_path) && errno != ENOENT) {
    ferry_log("control socket: cannot remove the stale %s: %s; not started", a->sun_path,
              strerror(errno));
    return -1;
  }
  return 0;
}

static int open_socket(void) {
  const char *dir = getenv("FERRY_CONTROL_DIR");
  if (!dir || !*dir) dir = getenv("XDG_RUNTIME_DIR");
  if (!dir || !*dir) dir = "/tmp";
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  int n = snprintf(a.sun_path, sizeof a.sun_path, "%s/ferry-%d.sock", dir, (int)getpid());
  if (n < 0 || (size_t)n >= sizeof a.sun_path) {
    ferry_log("control socket: the path %s/ferry-%d.sock is longer than %zu bytes; not started "
              "(set FERRY_CONTROL_DIR)", dir, (int)getpid(), sizeof a.sun_path - 1);
    return -1;
  }
  if (clear_stale(&a)) return -1;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ferry_log("control socket: socket: %s; not started", strerror(errno));
    return -1;
  }
  /* bind gives the file this inode's mode (less the umask): 0600 from its
     first instant, with no process-wide umask change */
  struct stat st;
  if (fchmod(fd, 0600) || bind(fd, (struct sockaddr *)&a, sizeof a)) {
    ferry_log("control socket %s: %s; not started", a.sun_path, strerror(errno));
    close(fd);
    return -1;
  }
  errno = 0;
  if (lstat(a.sun_path, &st) || !S_ISSOCK(st.st_mode) || (st.st_mode & 077) ||
      ((st.st_mode & 0777) != 0600 && chmod(a.sun_path, 0600)) || listen(fd, MAX_CONNECTIONS)) {
    ferry_log("control socket %s: %s; not started", a.sun_path,
              errno ? strerror(errno) : "others could open it");
    unlink(a.sun_path);
    close(fd);
    return -1;
  }
  ctl.fd = fd;
  ctl.owner = getpid();
  ctl.dev = st.st_dev;
  ctl.ino = st.st_ino;
  memcpy(ctl.path, a.sun_path, sizeof ctl.path);
  return 0;
}

void ferry_control_start(void) {
  static int started;
  if (__atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL)) return;
  const char *mode = getenv("FERRY_CONTROL");
  if (mode && (!strcmp(mode, "off") || !strcmp(mode, "0"))) return;
  if (open_socket()) return;
  int rc = ferry_start_thread(accept_main, NULL);
  if (rc) {
    ferry_log("control socket: cannot start its thread: %s; not started", strerror(rc));
    unlink(ctl.path);
    close(ctl.fd);
    ctl.fd = -1;
    return;
  }
  atexit(remove_at_exit);
  ferry_debug("control socket %s", ctl.path);
}
