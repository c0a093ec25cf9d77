/*
 * The transport interface: one small ops table per backend (tcp.c; ib*.c,
 * InfiniBand verbs; shm.c, shared memory to a ferry-mhelper). Nothing above
 * transport/ knows which backend a connection runs on; a new backend is one
 * more file that fills the table (docs/architecture.md).
 */
#ifndef FERRY_TRANSPORT_H
#define FERRY_TRANSPORT_H

#include <stddef.h>
#include <sys/uio.h>

#define FERRY_DEFAULT_PORT 7420    /* tcp:// */
#define FERRY_DEFAULT_IB_PORT 7421 /* ib:// (its TCP bootstrap port) */

/* tcp://host:port/gpu?streams=N ; port, gpu and the query are optional */
struct ferry_url {
  char scheme[8];
  char host[256];
  int port;
  int gpu; /* -1 when the URL names none */
  int streams; /* ?streams=N (tcp:// only, 1 to 16): FERRY_STREAMS for it; 0 unset */
};
/* returns 0, or -1 with a reason in err */
int ferry_url_parse(const char *text, struct ferry_url *url, char *err, size_t errlen);
/* rCUDA form: host[@port]:gpu */
int ferry_url_parse_rcuda(const char *text, const char *scheme, struct ferry_url *url, char *err,
                          size_t errlen);
void ferry_url_format(const struct ferry_url *url, char *out, size_t n);

struct ferry_conn;
struct ferry_conn_ops {
  /* send every byte of every iovec; 0, or -1 with errno set */
  int (*sendv)(struct ferry_conn *c, const struct iovec *iov, int iovcnt);
  /* receive exactly n bytes; 0, or -1 with errno set (ECONNRESET on a closed peer) */
  int (*recv_all)(struct ferry_conn *c, void *buf, size_t n);
  /* receive at least min and at most cap bytes (whatever already arrived);
     the count, or -1 with errno set */
  long (*recv_some)(struct ferry_conn *c, void *buf, size_t min, size_t cap);
  /* forget the connection in this process only (the server's parent after fork) */
  void (*detach)(struct ferry_conn *c);
  /* a receive or send that makes no progress for ms milliseconds fails with
     ETIMEDOUT (0: wait for ever); NULL where the backend cannot tell */
  int (*set_timeout)(struct ferry_conn *c, int ms);
  /* every receive and send fails with ETIMEDOUT once ms milliseconds from
     now have passed, however the peer dribbles its bytes (a handshake's
     deadline); 0 lifts it. NULL where the backend cannot tell */
  int (*set_deadline)(struct ferry_conn *c, int ms);
  /* from another thread: a receive or send blocked on c returns with an
     error now, and so does every later one; c must still be closed.
     Never blocks. NULL where the backend cannot */
  void (*interrupt)(struct ferry_conn *c);
  void (*close)(struct ferry_conn *c);
  /* the numeric IP address of this end (local) or of the peer, so that
     more connections can be opened beside this one; 0, or -1. NULL where
     the backend has no IP address of its own (shm) */
  int (*addr)(struct ferry_conn *c, int local, char *host, size_t n, int *port);
};
struct ferry_conn {
  const struct ferry_conn_ops *ops;
  char peer[160]; /* for messages */
};

struct ferry_listener;
struct ferry_listener_ops {
  /* blocks; returns NULL with errno set (EINTR lets the caller reap children) */
  struct ferry_conn *(*accept)(struct ferry_listener *l);
  void (*close)(struct ferry_listener *l);
  /* accept, waiting at most ms milliseconds: NULL with ETIMEDOUT when none
     came (NULL op: the backend cannot) */
  struct ferry_conn *(*accept_within)(struct ferry_listener *l, int ms);
};
struct ferry_listener {
  const struct ferry_listener_ops *ops;
  int fd; /* pollable: readable when a connection waits */
  char name[160];
};

struct ferry_transport {
  const char *scheme;
  struct ferry_conn *(*connect)(const struct ferry_url *url, int timeout_ms, char *err,
                                size_t errlen);
  struct ferry_listener *(*listen)(const struct ferry_url *url, char *err, size_t errlen);
};
/* the port a listener bound (port 0 asks for any); -1 where it has none */
int ferry_listener_port(const struct ferry_listener *l);

/* NULL with a reason in err when the scheme is unknown or not built in */
const struct ferry_transport *ferry_transport_find(const char *scheme, char *err, size_t errlen);

static inline int ferry_sendv(struct ferry_conn *c, const struct iovec *iov, int n) {
  return c->ops->sendv(c, iov, n);
}
static inline int ferry_recv_all(struct ferry_conn *c, void *buf, size_t n) {
  return c->ops->recv_all(c, buf, n);
}

#endif
