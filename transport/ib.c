/*
 * The ib:// backend: InfiniBand or RoCE through rdma-core (rdma_cm to
 * connect, one RC queue pair per connection; the stream is ib_stream.c).
 *
 * ferry-server forks a process per session, and verbs state does not
 * survive fork, so the ib:// port is a tcp bootstrap port: the parent only
 * accepts tcp. The serving process, on first use, opens an rdma_cm
 * listener on an ephemeral port of the address the client reached, sends
 * that port (and a one-time token) over the tcp socket and accepts the
 * client's RDMA connection. The tcp socket stays open as a liveness signal:
 * a peer that dies closes it, and every wait watches it.
 */
#include "ib_conn.h"
#include "backends.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SETUP_TIMEOUT_MS 10000

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int left_ms(long deadline) {
  long l = deadline - now_ms();
  return l < 0 ? 0 : l > INT_MAX ? INT_MAX : (int)l;
}

static struct ib_conn *new_conn(struct ferry_conn *tcp) {
  struct ib_conn *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->base.ops = &ferry_ib_conn_ops;
  c->tcp = tcp;
  c->fd = ferry_tcp_fd(tcp);
  snprintf(c->base.peer, sizeof c->base.peer, "%s", tcp->peer);
  c->spin_ns = ib_spin_ns(getenv("FERRY_IB_SPIN_US"));
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->cond, NULL);
  return c;
}

/* ---- resources ---- */

static void *alloc_pages(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 4096, n)) return NULL;
  memset(p, 0, n);
  return p;
}

int ib_make_resources(struct ib_conn *c, char *err, size_t errlen) {
  const struct ferry_ib_api *a = c->api;
  struct ibv_context *ctx = c->id->verbs;
  const char *what = NULL;
  if (!(c->pd = a->alloc_pd(ctx))) what = "allocating a protection domain";
  else if (!(c->ch = a->create_comp_channel(ctx))) what = "creating a completion channel";
  else if (!(c->cq = a->create_cq(ctx, IB_SQ + IB_NRECV, NULL, c->ch, 0)))
    what = "creating a completion queue";
  if (what) goto fail;
  fcntl(c->ch->fd, F_SETFL, fcntl(c->ch->fd, F_GETFL) | O_NONBLOCK);
  c->ring = alloc_pages(IB_RING);
  c->stage = alloc_pages(IB_RING);
  c->rbufs = alloc_pages((size_t)IB_NRECV * IB_RBUF);
  c->hdrs = alloc_pages(IB_SQ * sizeof *c->hdrs);
  if (!c->ring || !c->stage || !c->rbufs || !c->hdrs) {
    what = "allocating buffers";
    errno = ENOMEM;
    goto fail;
  }
  int lw = IBV_ACCESS_LOCAL_WRITE;
  if (!(c->ring_mr = a->reg_mr(c->pd, c->ring, IB_RING, lw | IBV_ACCESS_REMOTE_WRITE)) ||
      !(c->stage_mr = a->reg_mr(c->pd, c->stage, IB_RING, lw)) ||
      !(c->rbufs_mr = a->reg_mr(c->pd, c->rbufs, (size_t)IB_NRECV * IB_RBUF, lw)) ||
      !(c->hdrs_mr = a->reg_mr(c->pd, c->hdrs, IB_SQ * sizeof *c->hdrs, lw))) {
    what = "registering memory (is the locked-memory limit, ulimit -l, too low?)";
    goto fail;
  }
  struct ibv_qp_init_attr qa = {.send_cq = c->cq,
                                .recv_cq = c->cq,
                                .qp_type = IBV_QPT_RC,
                                .sq_sig_all = 1,
                                .cap = {.max_send_wr = IB_SQ,
                                        .max_recv_wr = IB_NRECV,
                                        .max_send_sge = 2,
                                        .max_recv_sge = 1}};
  if (a->create_qp(c->id, c->pd, &qa)) {
    what = "creating the queue pair";
    goto fail;
  }
  for (unsigned i = 0; i < IB_NRECV; i++) {
    struct ibv_sge sge = {(uintptr_t)(c->rbufs + (size_t)i * IB_RBUF), IB_RBUF,
                          c->rbufs_mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = (1ull << 63) | i, .sg_list = &sge, .num_sge = 1}, *bad;
    int r = ibv_post_recv(c->id->qp, &wr, &bad);
    if (r) {
      errno = r;
      what = "posting receive buffers";
      goto fail;
    }
  }
  return 0;
fail:
  snprintf(err, errlen, "%s on %s failed: %s", what, ctx->device->name,
           strerror(errno ? errno : EIO));
  return -1;
}

void ib_free_resources(struct ib_conn *c) {
  const struct ferry_ib_api *a = c->api;
  if (a) {
    if (c->id && c->id->qp) a->destroy_qp(c->id);
    if (c->ring_mr) a->dereg_mr(c->ring_mr);
    if (c->stage_mr) a->dereg_mr(c->stage_mr);
    if (c->rbufs_mr) a->dereg_mr(c->rbufs_mr);
    if (c->hdrs_mr) a->dereg_mr(c->hdrs_mr);
    if (c->cq) {
      a->ack_cq_events(c->cq, c->cq_events);
      a->destroy_cq(c->cq);
    }
    if (c->ch) a->destroy_comp_channel(c->ch);
    if (c->pd) a->dealloc_pd(c->pd);
    if (c->id) a->destroy_id(c->id);
    if (c->ech) a->destroy_event_channel(c->ech);
  }
  free(c->ring);
  free(c->stage);
  free(c->rbufs);
  free(c->hdrs);
  c->ring_mr = c->stage_mr = c->rbufs_mr = c->hdrs_mr = NULL;
  c->cq = NULL;
  c->ch = NULL;
  c->pd = NULL;
  c->id = NULL;
  c->ech = NULL;
  c->ring = c->stage = c->rbufs = NULL;
  c->hdrs = NULL;
  c->ready = 0;
}

/* ---- waiting for CM events (setup only) ---- */

/*
 * The next CM event on c->ech within the deadline, watching the bootstrap
 * socket too; NULL with a reason in err. The caller acks the event.
 */
static struct rdma_cm_event *next_event(struct ib_conn *c, long deadline, const char *waiting,
                                        char *err, size_t errlen) {
  for (;;) {
    struct rdma_cm_event *ev;
    if (c->api->get_cm_event(c->ech, &ev) == 0) return ev;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      snprintf(err, errlen, "%s: reading a CM event failed: %s", waiting, strerror(errno));
      return NULL;
    }
    int t = left_ms(deadline);
    if (!t) {
      snprintf(err, errlen, "%s: no answer within %d ms", waiting, SETUP_TIMEOUT_MS);
      errno = ETIMEDOUT;
      return NULL;
    }
    struct pollfd pfd[2] = {{.fd = c->ech->fd, .events = POLLIN}, {.fd = c->fd, .events = POLLIN}};
    if (poll(pfd, 2, t) < 0 && errno != EINTR) {
      snprintf(err, errlen, "%s: poll: %s", waiting, strerror(errno));
      return NULL;
    }
    if (pfd[1].revents) {
      char b;
      ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN)) {
        snprintf(err, errlen, "%s: the peer closed the connection", waiting);
        errno = ECONNRESET;
        return NULL;
      }
    }
  }
}

/* waits for one event of type `want`; 0 and (when hello) its private data */
static int expect_event(struct ib_conn *c, enum rdma_cm_event_type want, long deadline,
                        const char *waiting, struct ib_hello *hello, char *err, size_t errlen) {
  struct rdma_cm_event *ev = next_event(c, deadline, waiting, err, errlen);
  if (!ev) return -1;
  enum rdma_cm_event_type got = ev->event;
  int status = ev->status;
  if (got == want && hello) {
    const struct rdma_conn_param *p = &ev->param.conn;
    if (p->private_data_len < sizeof *hello || !p->private_data) got = RDMA_CM_EVENT_CONNECT_ERROR;
    else memcpy(hello, p->private_data, sizeof *hello);
  }
  c->api->ack_cm_event(ev);
  if (got == want) return 0;
  if (got == RDMA_CM_EVENT_REJECTED)
    snprintf(err, errlen, "%s: the server rejected the RDMA connection", waiting);
  else
    snprintf(err, errlen, "%s: got %s (status %d)", waiting, c->api->event_str(got), status);
  errno = ECONNREFUSED;
  return -1;
}

static int open_channel(struct ib_conn *c, char *err, size_t errlen) {
  if (!(c->ech = c->api->create_event_channel())) {
    snprintf(err, errlen, "cannot create an rdma_cm event channel: %s (is rdma_ucm loaded?)",
             strerror(errno));
    return -1;
  }
  fcntl(c->ech->fd, F_SETFL, fcntl(c->ech->fd, F_GETFL) | O_NONBLOCK);
  return 0;
}

static void my_hello(struct ib_conn *c, struct ib_hello *h) {
  *h = (struct ib_hello){.magic = IB_MAGIC,
                         .nrecv = IB_NRECV,
                         .token = c->token,
                         .ring_addr = (uintptr_t)c->ring,
                         .rkey = c->ring_mr->rkey,
                         .ring_size = IB_RING};
}

/* the connection parameters both sides offer: our hello rides in them */
static struct rdma_conn_param conn_param(const struct ib_hello *mine) {
  return (struct rdma_conn_param){.private_data = mine,
                                  .private_data_len = sizeof *mine,
                                  .responder_resources = 1,
                                  .initiator_depth = 1,
                                  .retry_count = 7,
                                  .rnr_retry_count = 7};
}

static int take_hello(struct ib_conn *c, const struct ib_hello *h, char *err, size_t errlen) {
  if (h->magic != IB_MAGIC || h->token != c->token || h->ring_size != IB_RING ||
      h->nrecv < 2) {
    snprintf(err, errlen, "the peer's RDMA connection data does not match (another ferry "
                          "version?)");
    errno = EPROTO;
    return -1;
  }
  c->peer_ring = h->ring_addr;
  c->peer_rkey = h->rkey;
  c->credits = (int)h->nrecv;
  return 0;
}

/* ---- server side ---- */

static int send_boot(int fd, const struct ib_boot *b) {
  const char *p = (const char *)b;
  size_t done = 0;
  while (done < sizeof *b) {
    ssize_t w = send(fd, p + done, sizeof *b - done, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    done += (size_t)w;
  }
  return 0;
}

int ib_server_setup(struct ib_conn *c, char *err, size_t errlen) {
  long deadline = now_ms() + SETUP_TIMEOUT_MS;
  if (!(c->api = ferry_ib_api(err, errlen))) return -1;
  if (getrandom(&c->token, sizeof c->token, 0) != sizeof c->token) c->token = (uint64_t)now_ms();
  if (open_channel(c, err, errlen)) return -1;
  /* listen where the client reached us: that address picks the RDMA device */
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getsockname(c->fd, (struct sockaddr *)&ss, &sl)) {
    snprintf(err, errlen, "getsockname: %s", strerror(errno));
    return -1;
  }
  if (ss.ss_family == AF_INET) ((struct sockaddr_in *)&ss)->sin_port = 0;
  else ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
  struct rdma_cm_id *lid = NULL;
  if (c->api->create_id(c->ech, &lid, NULL, RDMA_PS_TCP)) {
    snprintf(err, errlen, "cannot create an rdma_cm id: %s", strerror(errno));
    return -1;
  }
  int rc = -1;
  if (c->api->bind_addr(lid, (struct sockaddr *)&ss) || c->api->listen(lid, 1)) {
    snprintf(err, errlen,
             "cannot listen for RDMA on the address the client reached: %s (is that address on "
             "an RDMA device?)",
             strerror(errno));
    goto out;
  }
  struct ib_boot boot = {.magic = IB_MAGIC,
                         .version = IB_VERSION,
                         .port = ntohs(c->api->get_src_port(lid)),
                         .token = c->token};
  if (send_boot(c->fd, &boot)) {
    snprintf(err, errlen, "sending the RDMA port to the client: %s", strerror(errno));
    goto out;
  }
  for (;;) {
    struct rdma_cm_event *ev =
        next_event(c, deadline, "waiting for the client's RDMA connection", err, errlen);
    if (!ev) goto out;
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      c->api->ack_cm_event(ev);
      continue;
    }
    struct ib_hello h = {0};
    const struct rdma_conn_param *p = &ev->param.conn;
    if (p->private_data && p->private_data_len >= sizeof h) memcpy(&h, p->private_data, sizeof h);
    struct rdma_cm_id *id = ev->id;
    c->api->ack_cm_event(ev);
    if (h.magic != IB_MAGIC || h.token != c->token) {
      c->api->reject(id, NULL, 0); /* not our client */
      c->api->destroy_id(id);
      continue;
    }
    c->id = id;
    if (take_hello(c, &h, err, errlen) || ib_make_resources(c, err, errlen)) {
      c->api->reject(id, NULL, 0);
      goto out;
    }
    struct ib_hello mine;
    my_hello(c, &mine);
    struct rdma_conn_param cp = conn_param(&mine);
    if (c->api->accept(id, &cp)) {
      snprintf(err, errlen, "accepting the RDMA connection: %s", strerror(errno));
      goto out;
    }
    if (expect_event(c, RDMA_CM_EVENT_ESTABLISHED, deadline,
                     "waiting for the RDMA connection to be established", NULL, err, errlen))
      goto out;
    break;
  }
  c->ready = 1;
  rc = 0;
out:
  c->api->destroy_id(lid);
  if (rc) {
    int e = errno;
    ib_free_resources(c);
    errno = e;
  }
  return rc;
}

/* ---- client side ---- */

static int read_boot(int fd, struct ib_boot *b, long deadline) {
  char *p = (char *)b;
  size_t got = 0;
  while (got < sizeof *b) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int t = left_ms(deadline);
    if (!t) {
      errno = ETIMEDOUT;
      return -1;
    }
    int r = poll(&pfd, 1, t);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (!r) continue;
    ssize_t n = recv(fd, p + got, sizeof *b - got, MSG_DONTWAIT);
    if (n == 0) {
      errno = ECONNRESET;
      return -1;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return -1;
    }
    got += (size_t)n;
  }
  return 0;
}

static struct ferry_conn *ib_connect(const struct ferry_url *url, int timeout_ms, char *err,
                                     size_t errlen) {
  char where[300];
  struct ferry_url u = *url;
  u.gpu = -1;
  ferry_url_format(&u, where, sizeof where);
  char shown[FERRY_ECHO_MAX + 4]; /* for errors; the peer's name keeps it whole */
  ferry_echo_url(where, shown, sizeof shown);
  char why[300];
  /* no device, no library: say so at once, before any network traffic */
  if (ferry_ib_have_device(why, sizeof why)) {
    snprintf(err, errlen, "cannot reach %s: %s", shown, why);
    errno = ENODEV;
    return NULL;
  }
  const struct ferry_ib_api *api = ferry_ib_api(why, sizeof why);
  if (!api) {
    snprintf(err, errlen, "cannot reach %s: %s", shown, why);
    errno = ENOSYS;
    return NULL;
  }
  long deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : SETUP_TIMEOUT_MS);
  snprintf(u.scheme, sizeof u.scheme, "tcp");
  char terr[300];
  struct ferry_conn *tcp = ferry_tcp_transport.connect(&u, left_ms(deadline), terr, sizeof terr);
  if (!tcp) {
    int e = errno;
    /* tcp's message names tcp://; the user asked for ib:// */
    const char *colon = strstr(terr, ": ");
    snprintf(err, errlen, "cannot reach %s%s", shown, colon ? colon : "");
    errno = e;
    return NULL;
  }
  struct ib_conn *c = new_conn(tcp);
  if (!c) {
    tcp->ops->close(tcp);
    snprintf(err, errlen, "cannot reach %s: out of memory", shown);
    errno = ENOMEM;
    return NULL;
  }
  snprintf(c->base.peer, sizeof c->base.peer, "%s", where);
  c->api = api;
  struct ib_boot boot;
  if (read_boot(c->fd, &boot, deadline)) {
    snprintf(why, sizeof why,
             errno == ETIMEDOUT ? "the server did not start the RDMA handshake in time (is it an "
                                  "ib:// port of ferry-server?)"
                                : "the server closed the connection during the RDMA handshake "
                                  "(see the server's log)");
    goto fail;
  }
  if (boot.magic != IB_MAGIC || boot.version != IB_VERSION) {
    snprintf(why, sizeof why, "the server did not answer as an ib:// port of this ferry version");
    errno = EPROTO;
    goto fail;
  }
  c->token = boot.token;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getpeername(c->fd, (struct sockaddr *)&ss, &sl)) {
    snprintf(why, sizeof why, "getpeername: %s", strerror(errno));
    goto fail;
  }
  if (ss.ss_family == AF_INET) ((struct sockaddr_in *)&ss)->sin_port = htons(boot.port);
  else ((struct sockaddr_in6 *)&ss)->sin6_port = htons(boot.port);
  if (open_channel(c, why, sizeof why)) goto fail;
  if (api->create_id(c->ech, &c->id, NULL, RDMA_PS_TCP)) {
    snprintf(why, sizeof why, "cannot create an rdma_cm id: %s", strerror(errno));
    goto fail;
  }
  int step = left_ms(deadline) < 5000 ? left_ms(deadline) : 5000;
  if (api->resolve_addr(c->id, NULL, (struct sockaddr *)&ss, step ? step : 1) ||
      expect_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, deadline,
                   "resolving the server's RDMA address", NULL, why, sizeof why)) {
    if (errno != ECONNREFUSED && errno != ETIMEDOUT)
      snprintf(why, sizeof why, "cannot resolve the server's RDMA address: %s", strerror(errno));
    goto fail;
  }
  step = left_ms(deadline) < 5000 ? left_ms(deadline) : 5000;
  if (api->resolve_route(c->id, step ? step : 1) ||
      expect_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, "resolving the RDMA route", NULL,
                   why, sizeof why)) {
    if (errno != ECONNREFUSED && errno != ETIMEDOUT)
      snprintf(why, sizeof why, "cannot resolve the RDMA route: %s", strerror(errno));
    goto fail;
  }
  if (ib_make_resources(c, why, sizeof why)) goto fail;
  struct ib_hello mine, theirs;
  my_hello(c, &mine);
  struct rdma_conn_param cp = conn_param(&mine);
  if (api->connect(c->id, &cp)) {
    snprintf(why, sizeof why, "rdma_connect: %s", strerror(errno));
    goto fail;
  }
  if (expect_event(c, RDMA_CM_EVENT_ESTABLISHED, deadline, "connecting over RDMA", &theirs, why,
                   sizeof why) ||
      take_hello(c, &theirs, why, sizeof why))
    goto fail;
  c->ready = 1;
  return &c->base;
fail: {
  int e = errno ? errno : ECONNREFUSED;
  snprintf(err, errlen, "cannot reach %s: %s", shown, why);
  ferry_ib_conn_ops.close(&c->base);
  errno = e;
  return NULL;
}
}

/* ---- listening: plain tcp in the (forking) parent ---- */

struct ib_listener {
  struct ferry_listener base;
  struct ferry_listener *tcp;
};

static struct ferry_conn *ib_accept(struct ferry_listener *l) {
  struct ferry_listener *t = ((struct ib_listener *)l)->tcp;
  struct ferry_conn *tcp = t->ops->accept(t);
  if (!tcp) return NULL;
  struct ib_conn *c = new_conn(tcp);
  if (!c) {
    tcp->ops->close(tcp);
    errno = ENOMEM;
    return NULL;
  }
  c->server = 1;
  return &c->base;
}

static void ib_listener_close(struct ferry_listener *l) {
  struct ferry_listener *t = ((struct ib_listener *)l)->tcp;
  t->ops->close(t);
  free(l);
}

static const struct ferry_listener_ops ib_listener_ops = {.accept = ib_accept,
                                                          .close = ib_listener_close};

static struct ferry_listener *ib_listen(const struct ferry_url *url, char *err, size_t errlen) {
  char why[300];
  struct ferry_url u = *url;
  u.gpu = -1;
  char where[300];
  ferry_url_format(&u, where, sizeof where);
  /* checked without loading verbs: this process forks sessions */
  if (ferry_ib_have_device(why, sizeof why)) {
    snprintf(err, errlen, "cannot listen on %s: %s", where, why);
    errno = ENODEV;
    return NULL;
  }
  struct ib_listener *l = calloc(1, sizeof *l);
  if (!l) {
    snprintf(err, errlen, "cannot listen on %s: out of memory", where);
    errno = ENOMEM;
    return NULL;
  }
  snprintf(u.scheme, sizeof u.scheme, "tcp");
  if (!(l->tcp = ferry_tcp_transport.listen(&u, err, errlen))) {
    free(l);
    return NULL;
  }
  l->base.ops = &ib_listener_ops;
  l->base.fd = l->tcp->fd;
  struct ferry_url bound;
  if (ferry_url_parse(l->tcp->name, &bound, why, sizeof why) == 0) {
    snprintf(bound.scheme, sizeof bound.scheme, "ib");
    ferry_url_format(&bound, l->base.name, sizeof l->base.name);
  } else {
    snprintf(l->base.name, sizeof l->base.name, "%s", where);
  }
  return &l->base;
}

const struct ferry_transport ferry_ib_transport = {
    .scheme = "ib", .connect = ib_connect, .listen = ib_listen};
