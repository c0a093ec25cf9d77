/*
 * The tcp backend. Every CUDA call is a small request/response, so latency
 * matters more than anything: TCP_NODELAY is always on and a frame header,
 * body and bulk go out in one sendmsg. Sends never raise SIGPIPE (a broken
 * connection must become an error the caller reports, not a dead process),
 * and keepalive lets a server notice clients that vanished without a FIN.
 */
#include "transport.h"
#include "backends.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct tcp_conn {
  struct ferry_conn base;
  int fd;
  long deadline; /* set_deadline: CLOCK_MONOTONIC ms; 0 none */
};

struct tcp_listener {
  struct ferry_listener base;
};

/* ---- connections ---- */

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* under a deadline, waits until fd is ready for events or the deadline
   passes (ETIMEDOUT); the kernel's per-call timers cannot bound a whole
   exchange with a peer that sends a byte now and then */
static int before_deadline(const struct tcp_conn *t, short events) {
  if (!t->deadline) return 0;
  for (;;) {
    long left = t->deadline - now_ms();
    if (left <= 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    struct pollfd p = {.fd = t->fd, .events = events};
    int r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
    if (r > 0) return 0;
    if (r < 0 && errno != EINTR) return -1;
  }
}

static int tcp_sendv(struct ferry_conn *c, const struct iovec *iov, int iovcnt) {
  const struct tcp_conn *t = (const struct tcp_conn *)c;
  int fd = t->fd;
  /* walk the caller's (const) vector; `off` is how much of iov[i] already went */
  int i = 0;
  size_t off = 0;
  while (i < iovcnt && iov[i].iov_len == 0) i++;
  while (i < iovcnt) {
    struct iovec batch[64];
    int n = 0;
    for (int j = i; j < iovcnt && n < (int)(sizeof batch / sizeof batch[0]); j++) {
      size_t skip = j == i ? off : 0;
      if (iov[j].iov_len == skip) continue;
      batch[n].iov_base = (char *)iov[j].iov_base + skip;
      batch[n].iov_len = iov[j].iov_len - skip;
      n++;
    }
    struct msghdr msg = {.msg_iov = batch, .msg_iovlen = (size_t)n};
    if (before_deadline(t, POLLOUT)) return -1;
    ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) errno = ETIMEDOUT; /* set_timeout's */
      return -1;
    }
    /* advance past what went out */
    size_t left = (size_t)w;
    while (i < iovcnt && left >= iov[i].iov_len - off) {
      left -= iov[i].iov_len - off;
      off = 0;
      i++;
    }
    off += left;
    while (i < iovcnt && iov[i].iov_len == off) {
      off = 0;
      i++;
    }
  }
  return 0;
}

static long tcp_recv_some(struct ferry_conn *c, void *buf, size_t min, size_t cap) {
  const struct tcp_conn *t = (const struct tcp_conn *)c;
  int fd = t->fd;
  char *p = buf;
  size_t got = 0;
  while (got < min || (got == 0 && cap > 0)) {
    if (before_deadline(t, POLLIN)) return -1;
    ssize_t r = recv(fd, p + got, cap - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) errno = ETIMEDOUT; /* set_timeout's */
      return -1;
    }
    if (r == 0) {
      errno = ECONNRESET; /* the peer closed: callers treat both alike */
      return -1;
    }
    got += (size_t)r;
  }
  return (long)got;
}

static int tcp_recv_all(struct ferry_conn *c, void *buf, size_t n) {
  return tcp_recv_some(c, buf, n, n) < 0 ? -1 : 0;
}

/* after fork the parent drops its copy; shutdown() would cut the child's too */
static void tcp_detach(struct ferry_conn *c) {
  close(((struct tcp_conn *)c)->fd);
  free(c);
}

static void tcp_close(struct ferry_conn *c) {
  struct tcp_conn *t = (struct tcp_conn *)c;
  shutdown(t->fd, SHUT_RDWR);
  close(t->fd);
  free(t);
}

/* the kernel's own timers: a blocked recv or send returns EAGAIN, which the
   loops above report as ETIMEDOUT */
static int tcp_set_timeout(struct ferry_conn *c, int ms) {
  int fd = ((struct tcp_conn *)c)->fd;
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv))
    return -1;
  return 0;
}

static int tcp_set_deadline(struct ferry_conn *c, int ms) {
  ((struct tcp_conn *)c)->deadline = ms > 0 ? now_ms() + ms : 0;
  return 0;
}

/* a thread blocked in recv or send wakes (the peer seems to have closed);
   the descriptor stays until close, so no other file can take its number */
static void tcp_interrupt(struct ferry_conn *c) { shutdown(((struct tcp_conn *)c)->fd, SHUT_RDWR); }

static int sockaddr_port(const struct sockaddr_storage *ss) {
  if (ss->ss_family == AF_INET) return ntohs(((const struct sockaddr_in *)ss)->sin_port);
  if (ss->ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
  return -1;
}

static int tcp_addr(struct ferry_conn *c, int local, char *host, size_t n, int *port) {
  int fd = ((struct tcp_conn *)c)->fd;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if ((local ? getsockname(fd, (struct sockaddr *)&ss, &sl) : getpeername(fd, (struct sockaddr *)&ss, &sl)) ||
      getnameinfo((struct sockaddr *)&ss, sl, host, (socklen_t)n, NULL, 0, NI_NUMERICHOST))
    return -1;
  if (port) *port = sockaddr_port(&ss);
  return 0;
}

static const struct ferry_conn_ops tcp_conn_ops = {
    .sendv = tcp_sendv, .recv_all = tcp_recv_all, .recv_some = tcp_recv_some,
    .detach = tcp_detach, .close = tcp_close, .set_timeout = tcp_set_timeout,
    .set_deadline = tcp_set_deadline, .interrupt = tcp_interrupt, .addr = tcp_addr};

/* latency and dead-peer detection settings shared by both ends */
static void tune_socket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  /* notice a vanished peer within about two minutes, not the default two hours */
  int idle = 60, intvl = 10, cnt = 6;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

static struct ferry_conn *wrap_fd(int fd, const char *peer) {
  struct tcp_conn *t = calloc(1, sizeof *t);
  if (!t) {
    close(fd);
    errno = ENOMEM;
    return NULL;
  }
  t->base.ops = &tcp_conn_ops;
  t->fd = fd;
  snprintf(t->base.peer, sizeof t->base.peer, "%s", peer);
  return &t->base;
}

static void format_sockaddr(const struct sockaddr *sa, socklen_t len, char *out, size_t n) {
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV)) {
    snprintf(out, n, "?");
    return;
  }
  if (strchr(host, ':'))
    snprintf(out, n, "[%s]:%s", host, serv);
  else
    snprintf(out, n, "%s:%s", host, serv);
}

/* one non-blocking connect attempt; 0, or -1 with errno (ETIMEDOUT when out of time) */
static int connect_one(int fd, const struct addrinfo *ai, long deadline) {
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return 0;
  if (errno != EINPROGRESS && errno != EINTR) return -1;
  for (;;) {
    int wait = -1;
    if (deadline >= 0) {
      long left = deadline - now_ms();
      if (left <= 0) {
        errno = ETIMEDOUT;
        return -1;
      }
      wait = left > INT_MAX ? INT_MAX : (int)left;
    }
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    int r = poll(&pfd, 1, wait);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) continue; /* re-check the deadline */
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl)) return -1;
    if (soerr) {
      errno = soerr;
      return -1;
    }
    return 0;
  }
}

static void where(const struct ferry_url *url, char *out, size_t n) {
  struct ferry_url u = *url;
  u.gpu = -1;
  ferry_url_format(&u, out, n);
}


/* timeout_ms <= 0 leaves the timing to the kernel */
static struct ferry_conn *tcp_connect(const struct ferry_url *url, int timeout_ms, char *err,
                                      size_t errlen) {
  char addr[300], shown[FERRY_ECHO_MAX + 4];
  where(url, addr, sizeof addr);
  ferry_echo_url(addr, shown, sizeof shown); /* for errors; the peer's name keeps it whole */
  if (url->port <= 0) {
    snprintf(err, errlen, "cannot reach %s: port %d is not a valid port to connect to", shown,
             url->port);
    errno = EINVAL;
    return NULL;
  }
  char port[16];
  snprintf(port, sizeof port, "%d", url->port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  int g = getaddrinfo(url->host, port, &hints, &res);
  if (g) {
    snprintf(err, errlen, "cannot reach %s: cannot resolve its host name: %s", shown,
             g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
    errno = EHOSTUNREACH;
    return NULL;
  }
  long deadline = timeout_ms > 0 ? now_ms() + timeout_ms : -1;
  int last = ECONNREFUSED;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = errno;
      continue;
    }
    if (connect_one(fd, ai, deadline)) {
      last = errno;
      close(fd);
      if (last == ETIMEDOUT) break;
      continue;
    }
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    tune_socket(fd);
    freeaddrinfo(res);
    struct ferry_conn *c = wrap_fd(fd, addr);
    if (!c) snprintf(err, errlen, "cannot reach %s: out of memory", shown);
    return c;
  }
  freeaddrinfo(res);
  if (last == ETIMEDOUT && timeout_ms > 0)
    snprintf(err, errlen, "cannot reach %s: no answer within %d ms", shown, timeout_ms);
  else
    snprintf(err, errlen, "cannot reach %s: %s", shown, strerror(last));
  errno = last;
  return NULL;
}

/* ---- listening ---- */

static struct ferry_conn *tcp_accept_within(struct ferry_listener *l, int ms) {
  long deadline = ms >= 0 ? now_ms() + ms : -1;
  for (;;) {
    /* the fd is non-blocking so that a connection aborted between poll and
       accept cannot hang the caller; wait here instead */
    struct pollfd pfd = {.fd = l->fd, .events = POLLIN};
    long left = deadline < 0 ? -1 : deadline - now_ms();
    if (deadline >= 0 && left <= 0) {
      errno = ETIMEDOUT;
      return NULL;
    }
    int r = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
    if (r < 0) return NULL; /* EINTR goes to the caller */
    if (r == 0) continue;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) continue;
      return NULL;
    }
    tune_socket(fd);
    char peer[160];
    format_sockaddr((struct sockaddr *)&ss, sl, peer, sizeof peer);
    return wrap_fd(fd, peer);
  }
}

static struct ferry_conn *tcp_accept(struct ferry_listener *l) { return tcp_accept_within(l, -1); }

static void tcp_listener_close(struct ferry_listener *l) {
  close(l->fd);
  free(l);
}

static const struct ferry_listener_ops tcp_listener_ops = {
    .accept = tcp_accept, .close = tcp_listener_close, .accept_within = tcp_accept_within};

int ferry_listener_port(const struct ferry_listener *l) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (l->fd < 0 || getsockname(l->fd, (struct sockaddr *)&ss, &sl)) return -1;
  return sockaddr_port(&ss);
}

static struct ferry_listener *tcp_listen(const struct ferry_url *url, char *err, size_t errlen) {
  char addr[300];
  where(url, addr, sizeof addr);
  char port[16];
  snprintf(port, sizeof port, "%d", url->port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
  struct addrinfo *res = NULL;
  const char *host = url->host[0] && strcmp(url->host, "*") ? url->host : NULL;
  int g = getaddrinfo(host, port, &hints, &res);
  if (g) {
    snprintf(err, errlen, "cannot listen on %s: cannot resolve host '%s': %s", addr, url->host,
             g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
    return NULL;
  }
  int last = EADDRNOTAVAIL;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 128)) {
      last = errno;
      close(fd);
      continue;
    }
    struct tcp_listener *l = calloc(1, sizeof *l);
    if (!l) {
      close(fd);
      last = ENOMEM;
      break;
    }
    l->base.ops = &tcp_listener_ops;
    l->base.fd = fd;
    /* name the port actually bound, which differs when port 0 was asked for */
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    struct ferry_url bound = *url;
    bound.gpu = -1;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) bound.port = sockaddr_port(&ss);
    ferry_url_format(&bound, l->base.name, sizeof l->base.name);
    freeaddrinfo(res);
    return &l->base;
  }
  freeaddrinfo(res);
  snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(last));
  errno = last;
  return NULL;
}

const struct ferry_transport ferry_tcp_transport = {
    .scheme = "tcp", .connect = tcp_connect, .listen = tcp_listen};

/* the socket under a tcp connection: the ib backend bootstraps over tcp and
   keeps that socket as its liveness signal */
int ferry_tcp_fd(struct ferry_conn *c) {
  return c && c->ops == &tcp_conn_ops ? ((struct tcp_conn *)c)->fd : -1;
}

/* a connection another process accepted (ferry-server's parent hands a
   session its data connections): it was tuned there; its peer for messages */
struct ferry_conn *ferry_tcp_adopt(int fd) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  char peer[160] = "?";
  if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
    format_sockaddr((struct sockaddr *)&ss, sl, peer, sizeof peer);
  return wrap_fd(fd, peer);
}
