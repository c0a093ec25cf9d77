/*
 * ferry-server --metrics (metrics.h): a tiny single-threaded HTTP/1.x
 * responder run by the parent's poll loop. It never blocks: a request is
 * read without waiting, up to REQ_MAX bytes and within TIMEOUT_MS, and the
 * answer written as the socket takes it; a slow or hostile client costs
 * one of MAX_CONN slots, the oldest of which goes when a new one comes.
 */
#include "metrics.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "server.h"

#define MAX_CONN (METRICS_POLLFDS - 1) /* the listener takes one entry */
#define REQ_MAX 4096                   /* a request line and its headers */
#define TIMEOUT_MS 5000                /* for the whole exchange */
#define MAX_REASONS 16

struct http {
  int fd;
  long deadline;
  size_t got;
  char req[REQ_MAX];
  char *out; /* the answer, once the request is complete */
  size_t out_len, out_off;
};

static struct {
  int fd; /* the listener; -1: metrics off */
  struct session_stats *slots;
  int nslots, hwm; /* slots [0, hwm) have been used */
  int *free_idx, nfree;
  uint64_t sessions_total;
  uint64_t ended[4]; /* bytes in, bytes out, calls, errors of sessions that ended */
  const char *const *reasons;
  int nreasons;
  uint64_t refused[MAX_REASONS];
  struct http conn[MAX_CONN];
  int nconn;
} m = {.fd = -1};

/* "tcp://host:port", "host:port", "[v6]:port" -> host and port; 0 or -1 */
static int split_addr(const char *addr, char *host, size_t hn, char *port, size_t pn) {
  if (!strncmp(addr, "tcp://", 6)) addr += 6;
  const char *colon = strrchr(addr, ':'), *h = addr;
  size_t len = colon ? (size_t)(colon - addr) : 0;
  if (!colon || !colon[1] || strchr(colon, '/')) return -1;
  if (*h == '[') {
    if (len < 2 || addr[len - 1] != ']') return -1;
    h++, len -= 2;
  }
  if (len >= hn || strlen(colon + 1) >= pn) return -1;
  memcpy(host, h, len);
  host[len] = '\0';
  snprintf(port, pn, "%s", colon + 1);
  return 0;
}

static int listen_on(const char *addr) {
  char host[256], port[32];
  if (split_addr(addr, host, sizeof host, port, sizeof port)) {
    ferry_log("--metrics %s: expected HOST:PORT, like 127.0.0.1:9420", addr);
    return -1;
  }
  struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM},
                  *res;
  int rc = getaddrinfo(*host ? host : NULL, port, &hints, &res);
  if (rc) {
    ferry_log("--metrics %s: %s", addr, gai_strerror(rc));
    return -1;
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
      bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 16)) {
    ferry_log("--metrics %s: %s", addr, strerror(errno));
    if (fd >= 0) close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

/* says where the endpoint is: port 0 picks a free one, which tests read */
static void log_endpoint(int fd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char host[128], port[32];
  if (getsockname(fd, (struct sockaddr *)&ss, &len) ||
      getnameinfo((struct sockaddr *)&ss, len, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV))
    return;
  int v6 = ss.ss_family == AF_INET6;
  ferry_log("metrics on http://%s%s%s:%s/metrics", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

int metrics_open(const char *addr, int max_sessions, const char *const *reasons, int nreasons) {
  /* shared before any session is forked, so that each child writes into it */
  size_t bytes = (size_t)max_sessions * sizeof *m.slots;
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  m.free_idx = malloc((size_t)max_sessions * sizeof *m.free_idx);
  if (p == MAP_FAILED || !m.free_idx) {
    ferry_log("--metrics: no memory for %d session slots", max_sessions);
    return -1;
  }
  m.slots = p;
  m.nslots = max_sessions;
  for (int i = 0; i < max_sessions; i++) m.free_idx[i] = max_sessions - 1 - i; /* lowest first */
  m.nfree = max_sessions;
  m.reasons = reasons;
  m.nreasons = nreasons < MAX_REASONS ? nreasons : MAX_REASONS;
  if ((m.fd = listen_on(addr)) < 0) return -1;
  log_endpoint(m.fd);
  return 0;
}

/* ---- slots ---- */

struct session_stats *metrics_take(const char *client) {
  if (m.fd < 0 || !m.nfree) return NULL;
  int i = m.free_idx[--m.nfree];
  if (i >= m.hwm) m.hwm = i + 1;
  struct session_stats *s = &m.slots[i];
  memset(s, 0, sizeof *s);
  snprintf(s->client, sizeof s->client, "%s", client);
  return s;
}

void metrics_started(struct session_stats *s, pid_t pid) {
  if (!s) return;
  s->pid = (int32_t)pid;
  __atomic_store_n(&s->used, 1, __ATOMIC_RELAXED);
  m.sessions_total++;
}

static uint64_t get(const uint64_t *v) { return __atomic_load_n(v, __ATOMIC_RELAXED); }

void metrics_release(struct session_stats *s) {
  if (!s) return;
  if (s->used) {
    m.ended[0] += get(&s->bytes_in);
    m.ended[1] += get(&s->bytes_out);
    m.ended[2] += get(&s->calls);
    m.ended[3] += get(&s->errors);
  }
  s->used = 0;
  m.free_idx[m.nfree++] = (int)(s - m.slots);
}

void metrics_refused(int reason) {
  if (reason >= 0 && reason < m.nreasons) m.refused[reason]++;
}

void metrics_close_in_child(void) {
  if (m.fd < 0) return;
  close(m.fd);
  for (int i = 0; i < m.nconn; i++) close(m.conn[i].fd);
}

/* ---- the text ---- */

struct text {
  char *p;
  size_t len, cap;
  int failed;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...) {
  for (int tries = 0; !t->failed && tries < 2; tries++) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) t->failed = 1;
    if (n < 0 || (t->p && (size_t)n < t->cap - t->len)) {
      if (n >= 0) t->len += (size_t)n;
      return;
    }
    size_t cap = (t->cap ? t->cap * 2 : 8192) + (size_t)n;
    char *q = realloc(t->p, cap);
    if (!q) t->failed = 1;
    else t->p = q, t->cap = cap;
  }
}

static void family(struct text *t, const char *name, const char *type, const char *help) {
  put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* a label value as the format wants it: \\, \" and \n escaped */
static void label_value(const char *s, char *out, size_t n) {
  size_t k = 0;
  for (; *s && k + 2 < n; s++) {
    if (*s == '\\' || *s == '"' || *s == '\n') out[k++] = '\\';
    out[k++] = *s == '\n' ? 'n' : *s;
  }
  out[k] = '\0';
}

/* one family over the live sessions: field is an offset into the slot */
static void per_session(struct text *t, const char *name, const char *type, const char *help,
                        size_t field) {
  family(t, name, type, help);
  for (int i = 0; i < m.hwm; i++) {
    struct session_stats *s = &m.slots[i];
    if (!__atomic_load_n(&s->used, __ATOMIC_RELAXED)) continue;
    char client[2 * sizeof s->client];
    label_value(s->client, client, sizeof client);
    put(t, "%s{pid=\"%d\",client=\"%s\"} %llu\n", name, (int)s->pid, client,
        (unsigned long long)get((const uint64_t *)((const char *)s + field)));
  }
}

/* the sum of field over the live sessions */
static uint64_t live_sum(size_t field, int *active) {
  uint64_t sum = 0;
  *active = 0;
  for (int i = 0; i < m.hwm; i++) {
    struct session_stats *s = &m.slots[i];
    if (!__atomic_load_n(&s->used, __ATOMIC_RELAXED)) continue;
    (*active)++;
    sum += get((const uint64_t *)((const char *)s + field));
  }
  return sum;
}

static void render(struct text *t) {
  int active;
  live_sum(0, &active);
  family(t, "ferry_sessions_active", "gauge", "Sessions being served now.");
  put(t, "ferry_sessions_active %d\n", active);
  family(t, "ferry_sessions_total", "counter", "Sessions started since the server started.");
  put(t, "ferry_sessions_total %llu\n", (unsigned long long)m.sessions_total);
  family(t, "ferry_sessions_refused_total", "counter",
         "Connections refused or dropped before a session started, by reason.");
  for (int r = 0; r < m.nreasons; r++)
    put(t, "ferry_sessions_refused_total{reason=\"%s\"} %llu\n", m.reasons[r],
        (unsigned long long)m.refused[r]);
  static const struct {
    const char *name, *type, *help, *total;
    size_t field;
  } f[] = {
      {"ferry_session_bytes_in_total", "counter", "Bytes received from the session's client.",
       "ferry_bytes_in_total", offsetof(struct session_stats, bytes_in)},
      {"ferry_session_bytes_out_total", "counter", "Bytes sent to the session's client.",
       "ferry_bytes_out_total", offsetof(struct session_stats, bytes_out)},
      {"ferry_session_calls_total", "counter", "Calls the session served (after its hello).",
       "ferry_calls_total", offsetof(struct session_stats, calls)},
      {"ferry_session_errors_total", "counter", "Calls of the session that returned a CUDA error.",
       "ferry_errors_total", offsetof(struct session_stats, errors)},
      {"ferry_session_mapped_bytes", "gauge", "Device memory the session has mapped.",
       "ferry_mapped_bytes", offsetof(struct session_stats, mapped)},
  };
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    per_session(t, f[i].name, f[i].type, f[i].help, f[i].field);
  /* server-wide: counters include sessions that ended; mapped is live only */
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    uint64_t v = live_sum(f[i].field, &active) + (i < 4 ? m.ended[i] : 0);
    family(t, f[i].total, f[i].type, "The same, summed over all sessions of this server.");
    put(t, "%s %llu\n", f[i].total, (unsigned long long)v);
  }
}

/* ---- HTTP ---- */

static void drop(int i) {
  close(m.conn[i].fd);
  free(m.conn[i].out);
  m.conn[i] = m.conn[--m.nconn];
}

static void respond(struct http *h, const char *status, const char *body, size_t len) {
  struct text t = {0};
  put(&t, "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
      status, strncmp(status, "200", 3) ? "text/plain; charset=utf-8"
                                        : "text/plain; version=0.0.4; charset=utf-8", len);
  if (len && !t.failed) {
    put(&t, "%.*s", (int)len, body);
  }
  h->out = t.p;
  h->out_len = t.failed ? 0 : t.len;
  h->out_off = 0;
}

/* the request is complete: GET /metrics is answered, other paths are 404,
   a request line that is not METHOD TARGET HTTP/x.y is 400 */
static void answer(struct http *h) {
  char method[16], target[256], version[16];
  h->req[h->got < REQ_MAX ? h->got : REQ_MAX - 1] = '\0';
  int ok = sscanf(h->req, "%15[A-Z] %255[^ \r\n] %15[^\r\n]", method, target, version) == 3 &&
           !strncmp(version, "HTTP/1.", 7) && target[0] == '/';
  if (!ok) {
    respond(h, "400 Bad Request", "bad request\n", 12);
    return;
  }
  size_t plen = strcspn(target, "?");
  if (strcmp(method, "GET") || plen != 8 || strncmp(target, "/metrics", 8)) {
    respond(h, "404 Not Found", "not found: try GET /metrics\n", 28);
    return;
  }
  struct text body = {0};
  render(&body);
  if (body.failed) respond(h, "500 Internal Server Error", "out of memory\n", 14);
  else respond(h, "200 OK", body.p, body.len);
  free(body.p);
}

/* reads what is there; answers once the headers are complete */
static int read_step(struct http *h) {
  for (;;) {
    ssize_t r = recv(h->fd, h->req + h->got, REQ_MAX - 1 - h->got, MSG_DONTWAIT);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (r <= 0) return -1; /* gone before its request was complete */
    /* a NUL hides the rest from the string functions below (the end of the
       headers too, which left the client waiting for the deadline) */
    if (memchr(h->req + h->got, '\0', (size_t)r)) {
      static const char why[] = "bad request: a NUL byte\n";
      respond(h, "400 Bad Request", why, sizeof why - 1);
      return 0;
    }
    h->got += (size_t)r;
    h->req[h->got] = '\0';
    if (strstr(h->req, "\r\n\r\n") || strstr(h->req, "\n\n")) break;
    if (h->got == REQ_MAX - 1) {
      respond(h, "400 Bad Request", "request too large\n", 18);
      return 0;
    }
  }
  answer(h);
  return 0;
}

/* writes what the socket takes; 1 when all is sent */
static int write_step(struct http *h) {
  while (h->out_off < h->out_len) {
    ssize_t w = send(h->fd, h->out + h->out_off, h->out_len - h->out_off,
                     MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (w <= 0) return 1; /* the client left: nothing more to do */
    h->out_off += (size_t)w;
  }
  shutdown(h->fd, SHUT_WR);
  return 1;
}

static void accept_all(long now) {
  for (;;) {
    int fd = accept4(m.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return; /* EAGAIN, or a table full: the backlog keeps them */
    if (m.nconn == MAX_CONN) { /* the oldest goes: a slow client cannot hold the endpoint */
      int old = 0;
      for (int i = 1; i < m.nconn; i++)
        if (m.conn[i].deadline < m.conn[old].deadline) old = i;
      drop(old);
    }
    m.conn[m.nconn++] = (struct http){.fd = fd, .deadline = now + TIMEOUT_MS};
  }
}

int metrics_pollfds(struct pollfd *p, long now, int *wait) {
  if (m.fd < 0) return 0;
  int n = 0;
  p[n++] = (struct pollfd){.fd = m.fd, .events = POLLIN};
  for (int i = 0; i < m.nconn; i++) {
    p[n++] = (struct pollfd){.fd = m.conn[i].fd, .events = m.conn[i].out ? POLLOUT : POLLIN};
    long left = m.conn[i].deadline - now;
    if (left < 0) left = 0;
    if (*wait < 0 || left < *wait) *wait = (int)left;
  }
  return n;
}

void metrics_step(const struct pollfd *p, int n, long now) {
  if (m.fd < 0 || n < 1) return;
  /* connections first, last first (removal moves the last into i): the
     entries after p[0] are theirs, in order, as metrics_pollfds made them */
  for (int i = (n - 1 < m.nconn ? n - 1 : m.nconn) - 1; i >= 0; i--) {
    struct http *h = &m.conn[i];
    int done = now >= h->deadline;
    if (!done && p[1 + i].revents && !h->out) done = read_step(h) < 0;
    if (!done && h->out && (p[1 + i].revents || !h->out_off)) done = write_step(h);
    if (done) drop(i);
  }
  if (p[0].revents) accept_all(now);
}
