/*
 * Internals shared by the ib backend's connection setup (ib.c) and its
 * byte stream (ib_stream.c).
 *
 * The stream, per direction: the receiver owns a registered ring of
 * IB_RING bytes and IB_NRECV pre-posted receive buffers. A piece of at
 * most IB_INLINE bytes travels inside a SEND (the receiver copies it into
 * its ring); a larger piece is copied into the sender's registered staging
 * buffer, RDMA-written into the ring at the same offset, and announced by a
 * SEND. Every SEND carries a small header that also returns credits: ring
 * bytes the application consumed and receive buffers reposted. Receive
 * buffers are reposted as soon as their header is processed (their data
 * already sits in the ring), so credits never wait on the application to
 * read, only on it to call in.
 */
#ifndef FERRY_IB_CONN_H
#define FERRY_IB_CONN_H

#include <pthread.h>
#include <stdint.h>

#include "ib_api.h"
#include "transport.h"

#define IB_RING (8u << 20)  /* receive ring (and send staging) per direction */
#define IB_CHUNK (256u << 10) /* largest single RDMA WRITE: several stay in flight */
#define IB_NRECV 128        /* pre-posted receive buffers */
#define IB_RBUF 4096u       /* bytes per receive buffer */
#define IB_SQ 512           /* send queue depth */
#define IB_MAGIC 0x42495246u /* "FRIB" */
#define IB_VERSION 1

/*
 * Waiting is spin-then-block: a thread that must wait busy-polls the cq
 * for up to FERRY_IB_SPIN_US microseconds (a round trip on an HCA is a few
 * µs, and a sleep on the completion channel costs an interrupt and a
 * wake-up per message), then arms the channel and sleeps in poll(). Each
 * wait spins at most once before it sleeps, so an idle connection costs
 * next to no CPU (a spin per second of poll() timeout). The
 * spin must outlast the peer's turnaround to catch the answer: 300 µs is
 * ample on hardware, and in the emulated soft-RoCE VM of tests/ib (where a
 * cudaStreamQuery round trip takes about 100 µs) it measured a 68 µs
 * median round trip against 97 µs with a 100 µs spin.
 */
#define IB_SPIN_US_DEFAULT 300
#define IB_SPIN_US_MAX 1000000 /* a spin is never longer than a second */

/* the header at the start of every SEND */
struct ib_msg {
  uint32_t inline_len; /* data bytes following this header */
  uint32_t ring_len;   /* bytes RDMA-written into the ring before this SEND */
  uint32_t ring_freed; /* ring bytes of the sender's own ring now free again */
  uint16_t credits;    /* receive buffers reposted by the sender */
  uint16_t flags;
};
#define IB_INLINE (IB_RBUF - (unsigned)sizeof(struct ib_msg))

/* the bootstrap message the server sends over tcp */
struct ib_boot {
  uint32_t magic;
  uint16_t version;
  uint16_t port; /* rdma_cm port to connect to, host order */
  uint64_t token;
};

/* rdma_cm private data, both ways (at most 56 bytes on a connect) */
struct ib_hello {
  uint32_t magic;
  uint32_t nrecv;
  uint64_t token;
  uint64_t ring_addr;
  uint32_t rkey;
  uint32_t ring_size;
};

struct ib_conn {
  struct ferry_conn base;
  const struct ferry_ib_api *api;
  struct ferry_conn *tcp; /* the bootstrap connection, kept as a liveness signal */
  int fd;                 /* its socket */
  int server;             /* accepted side: RDMA is set up on first use, after fork */
  int ready;              /* RDMA connection established */
  int broken;             /* errno for operations once buffered data runs out */
  int peer_gone;          /* tcp hangup, CM disconnect or flushed queue seen */
  uint64_t token;

  pthread_mutex_t lock;
  pthread_cond_t cond;
  int polling;         /* a thread spins or sleeps in poll() for everyone */
  int sleepers;        /* threads in the cond wait */
  int woken;           /* of those, woken by a broadcast and not yet back */
  int wanted;          /* threads queued for the lock (atomic): a spinner lets them in */
  uint64_t spin_ns;    /* the spin bound, 0: block at once */
  uint64_t progressed; /* counts completions handled, by whichever thread */

  struct rdma_event_channel *ech;
  struct rdma_cm_id *id;
  struct ibv_pd *pd;
  struct ibv_comp_channel *ch;
  struct ibv_cq *cq;
  unsigned cq_events; /* to acknowledge before destroying the cq */
  int armed;
  char *ring, *stage, *rbufs;
  struct ib_msg *hdrs;
  struct ibv_mr *ring_mr, *stage_mr, *rbufs_mr, *hdrs_mr;
  uint64_t peer_ring;
  uint32_t peer_rkey;

  /* sending */
  uint64_t tx_pos;     /* stream bytes posted */
  uint64_t peer_freed; /* of those, consumed by the peer */
  uint64_t stage_done; /* of those, whose send completed (staging reusable) */
  int credits;         /* peer receive buffers we may still fill */
  unsigned sq_used;
  uint64_t sends;
  /* receiving */
  uint64_t rx_landed, rx_read;
  uint32_t owed_freed;
  int owed_credits;
};

extern const struct ferry_conn_ops ferry_ib_conn_ops;

/* registers buffers, creates the cq and the qp on c->id, posts receives */
int ib_make_resources(struct ib_conn *c, char *err, size_t errlen);
/* the server half of the setup, in the process that serves (after fork) */
int ib_server_setup(struct ib_conn *c, char *err, size_t errlen);
/* frees every RDMA resource (no-op for the parts never made) */
void ib_free_resources(struct ib_conn *c);
/* the spin bound from FERRY_IB_SPIN_US (text, may be NULL): microseconds,
   0 for none; unset or unreadable gives the default, capped at the maximum */
uint64_t ib_spin_ns(const char *text);
/* a lasting connection failure: reported once, then errno for every call */
void ib_fail(struct ib_conn *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
