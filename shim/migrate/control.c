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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/log.h"
#include "shim/migrate/migrate.h"
#include "shim/core/thread.h"

#define LINE_MAX_BYTES 256 /* a request line, without its \n or \r\n */
#define REPLY_MAX 65536    /* status of 16 vGPUs with long, escaped strings fits */
#define MAX_CONNECTIONS 16 /* each is a thread; more are told "busy" */
#define TOKEN_ECHO 32      /* how much of a bad token a reply quotes */

/* ---- the protocol ---- */

/* Version of the status object's layout (docs/control.md): raised when a
   field changes meaning or goes away; new fields alone do not raise it */
#define STATUS_SCHEMA 1
/* counts and bytes stop where JSON readers stop being exact (2^53) */
#define JSON_COUNT_MAX 9007199254740992ull

/* length of the valid UTF-8 sequence at s, or 0; as strict as Jansson's
   check (no overlongs, surrogates or code points past U+10FFFF) */
static int utf8_len(const unsigned char *s) {
  unsigned c = s[0], lo = 0x80, hi = 0xbf;
  int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (c == 0xe0) lo = 0xa0;
  else if (c == 0xed) hi = 0x9f;
  else if (c == 0xf0) lo = 0x90;
  else if (c == 0xf4) hi = 0x8f;
  for (int i = 1; i < n; i++, lo = 0x80, hi = 0xbf)
    if (s[i] < lo || s[i] > hi) return 0;
  return n;
}

/* a JSON string of s; bytes that are not UTF-8 become U+FFFD, as Jansson
   takes UTF-8 only (escaping is Jansson's) */
static json_t *jstr(const char *s) {
  char buf[4 * 512]; /* where and error are shorter than 512 bytes */
  size_t len = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p && len + 4 < sizeof buf;) {
    int n = p[0] < 0x80 ? 1 : utf8_len(p);
    if (n) memcpy(buf + len, p, (size_t)n), len += (size_t)n, p += n;
    else memcpy(buf + len, "\xef\xbf\xbd", 3), len += 3, p++;
  }
  return json_stringn(buf, len);
}

/* a count as JSON: an integer, at most 2^53 */
static json_t *jcount(uint64_t v) { return json_integer((json_int_t)(v > JSON_COUNT_MAX ? JSON_COUNT_MAX : v)); }

/* milliseconds as JSON, to the microsecond (rounded by hand: the shim does
   not link libm); NaN and infinities cannot be written */
static json_t *jms(double x) {
  if (!isfinite(x)) x = 0.0;
  if (x > -1e12 && x < 1e12) x = (double)(long long)(x * 1000 + (x < 0 ? -0.5 : 0.5)) / 1000;
  return json_real(x);
}

/* o[key] = v, v's reference taken; a failed allocation shows as -1 */
static int set(json_t *o, const char *key, json_t *v) { return json_object_set_new(o, key, v); }

static const char *state_name(enum ferry_migration_state s) {
  switch (s) {
  case FERRY_MIG_RUNNING: return "running";
  case FERRY_MIG_DONE: return "done";
  case FERRY_MIG_FAILED: return "failed";
  case FERRY_MIG_WAITING: return "waiting";
  default: return "none";
  }
}

static json_t *migration_json(const struct ferry_vgpu_status *s) {
  json_t *m = json_object(), *ms = json_object();
  int e = !m || !ms;
  e |= set(m, "state", json_string(state_name(s->state)));
  int named = s->state != FERRY_MIG_NONE && s->phase >= 0 && s->phase < FERRY_PHASE_COUNT;
  e |= set(m, "phase", named ? json_string(ferry_phase_names[s->phase]) : json_null());
  e |= set(m, "bytes_done", jcount(s->bytes_done));
  e |= set(m, "bytes_total", jcount(s->bytes_total));
  for (int i = 0; i < FERRY_PHASE_COUNT; i++) e |= set(ms, ferry_phase_names[i], jms(s->phase_ms[i]));
  e |= set(m, "phase_ms", json_incref(ms));
  e |= set(m, "total_ms", jms(s->total_ms));
  e |= set(m, "pause_ms", jms(s->pause_ms));
  e |= set(m, "launch_at_start", jcount(s->launch_at_start));
  e |= set(m, "records_replayed", jcount(s->records_replayed));
  e |= set(m, "modules_replayed", jcount(s->modules_replayed));
  e |= set(m, "replay_module_ms", jms(s->replay_module_ms));
  e |= set(m, "replay_other_ms", jms(s->replay_other_ms));
  e |= set(m, "bytes_copied", jcount(s->bytes_copied));
  e |= set(m, "ranges_copied", jcount(s->ranges_copied));
  e |= set(m, "requests", jcount(s->requests));
  e |= set(m, "records_ahead", jcount(s->records_ahead));
  e |= set(m, "ahead_ms", jms(s->ahead_ms));
  e |= set(m, "bytes_precopied", jcount(s->bytes_precopied));
  e |= set(m, "bytes_unchanged", jcount(s->bytes_unchanged));
  e |= set(m, "hash_ms", jms(s->hash_ms));
  e |= set(m, "error", jstr(s->error));
  json_decref(ms);
  if (e) json_decref(m);
  return e ? NULL : m;
}

static json_t *vgpu_json(const struct ferry_vgpu_status *s) {
  const char *backend = !s->local ? "remote" : s->helper_pid ? "helper" : "local";
  json_t *v = json_object();
  int e = !v;
  e |= set(v, "index", json_integer(s->index));
  e |= set(v, "backend", json_string(backend));
  e |= set(v, "local_gpu", json_integer(s->local_gpu));
  e |= set(v, "helper_pid", json_integer(s->helper_pid));
  e |= set(v, "where", jstr(s->where));
  e |= set(v, "records", jcount(s->records));
  e |= set(v, "regions", jcount(s->regions));
  e |= set(v, "live_bytes", jcount(s->live_bytes));
  e |= set(v, "launches", jcount(s->launches));
  e |= set(v, "prepared", jstr(s->prepared));
  e |= set(v, "migration", migration_json(s));
  if (e) json_decref(v);
  return e ? NULL : v;
}

/* the status object (docs/control.md, docs/ferry-status.schema.json); NULL out of memory */
static json_t *status_json(void) {
  json_t *st = json_object(), *vgpus = json_array();
  int e = !st || !vgpus;
  e |= set(st, "schema", json_integer(STATUS_SCHEMA));
  e |= set(st, "pid", json_integer(getpid()));
  int count = ferry_vgpu_count();
  for (int i = 0; i < count && !e; i++) {
    struct ferry_vgpu_status s;
    memset(&s, 0, sizeof s);
    if (ferry_vgpu_status(i, &s)) continue; /* gone since the count was read */
    s.where[sizeof s.where - 1] = s.error[sizeof s.error - 1] = '\0';
    e |= json_array_append_new(vgpus, vgpu_json(&s));
  }
  e |= set(st, "vgpus", json_incref(vgpus));
  json_decref(vgpus);
  if (e) json_decref(st);
  return e ? NULL : st;
}

/* "ok " and the status object on one line (Jansson escapes control bytes) */
static void reply_status(char *reply, size_t len) {
  json_t *st = status_json();
  size_t n = 0;
  if (st && len > 3)
    n = json_dumpb(st, reply + 3, len - 4, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
  json_decref(st);
  if (!st) snprintf(reply, len, "error out of memory");
  else if (!n || n > len - 4) snprintf(reply, len, "error status does not fit in %zu bytes", len);
  else memcpy(reply, "ok ", 3), reply[3 + n] = '\0';
}

/* a number a reply can carry */
static double json_number(double x) { return isfinite(x) ? x : 0.0; }

/* a token as a reply may quote it: printable, cut short (a URL keeps its
   end, ferry_echo_url) */
_Static_assert(TOKEN_ECHO == FERRY_ECHO_MAX, "replies and messages quote alike");
static const char *echo(const char *tok, char *buf, size_t n) {
  if (strstr(tok, "://")) return ferry_echo_url(tok, buf, n);
  return ferry_echo(tok, strlen(tok), buf, n);
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

/* a vGPU the program has; else the reply says which it has */
static int vgpu_in_range(int vgpu, char *reply, size_t len) {
  int count = ferry_vgpu_count();
  if (vgpu < count) return 0;
  if (count <= 0)
    snprintf(reply, len, "error no vgpu %d: this program has no vGPU yet", vgpu);
  else
    snprintf(reply, len, "error no vgpu %d: this program has %d (0..%d)", vgpu, count, count - 1);
  return -1;
}

static void reply_migrate(char **tok, int ntok, char *reply, size_t len) {
  if (ntok != 3) {
    snprintf(reply, len, "error migrate takes 2 arguments, <vgpu> <local-gpu or server URL> (got %d)",
             ntok - 1);
    return;
  }
  int vgpu, gpu = -1;
  if (parse_index("vgpu", tok[1], &vgpu, reply, len)) return;
  /* a server URL: to another server, still remote */
  int remote = strstr(tok[2], "://") != NULL;
  if (!remote && parse_index("local GPU", tok[2], &gpu, reply, len)) return;
  if (vgpu_in_range(vgpu, reply, len)) return;
  char err[256] = "";
  int rc = remote ? ferry_migrate_to(vgpu, tok[2], err, sizeof err) : ferry_migrate(vgpu, gpu, err, sizeof err);
  if (rc) {
    err[sizeof err - 1] = '\0';
    one_line(err);
    if (rc == FERRY_MIGRATE_WAITS) snprintf(reply, len, "ok %s", err);
    else snprintf(reply, len, "error %s", *err ? err : "migration failed");
    return;
  }
  struct ferry_vgpu_status s;
  memset(&s, 0, sizeof s);
  double ms = ferry_vgpu_status(vgpu, &s) ? 0.0 : json_number(s.total_ms);
  char where[sizeof s.where];
  if (remote)
    snprintf(reply, len, "ok vgpu %d now on %s (%.1f ms)", vgpu,
             ferry_echo_where(s.where, where, sizeof where), ms);
  else if (s.helper_pid)
    snprintf(reply, len, "ok vgpu %d now on local GPU %d in ferry-mhelper pid %d (%.1f ms)", vgpu,
             gpu, s.helper_pid, ms);
  else
    snprintf(reply, len, "ok vgpu %d now on local GPU %d (%.1f ms)", vgpu, gpu, ms);
}

/* prepare <vgpu> <target>: the target opened now, for a later migrate;
   cancel <vgpu>: closed again */
static int vgpu_arg(const char *tok, int *vgpu, char *reply, size_t len) {
  return parse_index("vgpu", tok, vgpu, reply, len) || vgpu_in_range(*vgpu, reply, len) ? -1 : 0;
}

static void reply_prepare(char **tok, int ntok, char *reply, size_t len) {
  int vgpu;
  if (ntok != 3) {
    snprintf(reply, len, "error prepare takes 2 arguments, <vgpu> <local-gpu or server URL> (got %d)",
             ntok - 1);
    return;
  }
  if (vgpu_arg(tok[1], &vgpu, reply, len)) return;
  char err[256] = "";
  if (ferry_prepare(vgpu, tok[2], err, sizeof err)) {
    err[sizeof err - 1] = '\0';
    one_line(err);
    snprintf(reply, len, "error %s", *err ? err : "prepare failed");
    return;
  }
  char shown[TOKEN_ECHO + 4];
  snprintf(reply, len, "ok vgpu %d prepared on %s (%.1f ms)", vgpu, echo(tok[2], shown, sizeof shown),
           json_number(ferry_prepared_ms(vgpu)));
}

static void reply_cancel(char **tok, int ntok, char *reply, size_t len) {
  int vgpu;
  if (ntok != 2) {
    snprintf(reply, len, "error cancel takes 1 argument, <vgpu> (got %d)", ntok - 1);
    return;
  }
  if (vgpu_arg(tok[1], &vgpu, reply, len)) return;
  char err[256] = "";
  int rc = ferry_prepare_cancel(vgpu, err, sizeof err);
  if (rc < 0) {
    one_line(err);
    snprintf(reply, len, "error %s", err);
    return;
  }
  if (rc == 2) snprintf(reply, len, "ok vgpu %d: its waiting migration is dropped", vgpu);
  else if (rc) snprintf(reply, len, "ok vgpu %d: its prepare is stopped", vgpu);
  else snprintf(reply, len, "ok vgpu %d: its prepared target is closed", vgpu);
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
  } else if (!strcmp(tok[0], "prepare")) {
    reply_prepare(tok, ntok, reply, len);
  } else if (!strcmp(tok[0], "cancel")) {
    reply_cancel(tok, ntok, reply, len);
  } else if ((!strcmp(tok[0], "status") || !strcmp(tok[0], "help")) && ntok > 1) {
    snprintf(reply, len, "error %s takes no arguments (got '%s')", tok[0], echo(tok[1], e, sizeof e));
  } else if (!strcmp(tok[0], "status")) {
    reply_status(reply, len);
  } else if (!strcmp(tok[0], "help")) {
    snprintf(reply, len, "ok verbs: migrate <vgpu> <local-gpu or server URL> | prepare <vgpu> "
                         "<local-gpu or server URL> | cancel <vgpu> | status | help");
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
