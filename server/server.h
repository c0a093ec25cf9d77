/*
 * Pieces of ferry-server shared between its files: the parsed command line,
 * the per-connection session (run in a forked child) and the capture of the
 * child's stdout, where device printf output lands.
 */
#ifndef FERRY_SERVER_H
#define FERRY_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "executor/driver.h"
#include "protocol/codec.h"
#include "transport/transport.h"

#define FERRY_SERVER_MAX_GPUS 64

/* What a session counts for ferry-server --metrics, in a page shared with
   the parent: the session adds with relaxed atomics, the parent reads. */
struct session_stats {
  uint64_t bytes_in, bytes_out; /* of the connection: frames, bodies, bulk */
  uint64_t calls, errors;       /* calls served after the hello; those that failed */
  uint64_t mapped;              /* device memory the session has mapped now */
  int32_t pid, used;            /* the parent's: the session process; a live session */
  char client[64];              /* the parent's: the client's address */
};

struct server_broker; /* broker_client.h */
struct server_opts {
  const char *backend;     /* "cuda" or "sim" */
  const char *sim_kernels; /* twins .so for the sim backend, may be NULL */
  int gpus[FERRY_SERVER_MAX_GPUS]; /* --gpus: client GPU i runs on gpus[i] */
  int ngpus;                       /* 0: no --gpus, client indexes are physical */
  int quiet;
  const char *token; /* --token-file: clients must present it; NULL serves anyone */
  /* ferry-mhelper: it serves the program on this machine, whose shared host
     arena it maps at [host_base, host_base + host_size) */
  int helper;
  uint64_t host_base, host_size;
  const char *setup_error; /* a reason to refuse the hello with, or NULL */
  /* per-session limits, 0 meaning none (ferry-mhelper sets none) */
  uint64_t max_deferred;    /* --max-deferred: pinned bytes of deferred copies */
  uint64_t max_session_mem; /* --max-session-mem: device memory mem_map may map */
  /* a session that reads its own hello (ib://, whose hello comes over
     RDMA, which the parent cannot set up) ends unless the hello is complete
     within this many ms; 0: no limit */
  int handshake_ms;
  struct session_stats *stats; /* --metrics: this session's slot; NULL for none */
  /* CUDA IPC: the broker in ferry-server's parent (broker.h); NULL: none
     (ferry-mhelper), and the ipc_* calls are refused */
  const struct ferry_ipc_broker *broker;
  /* the same channel, which also hands over FERRY_STREAMS' data
     connections (broker_client.h); NULL: none, and stripe_open is refused */
  struct server_broker *parent;
};

/* a hello the server's parent read and checked before it forked */
struct session_hello {
  struct ferry_frame h;
  const char *body; /* h.body_len bytes */
};

/* the token in path: refused unless only its owner can read it */
const char *server_read_token(const char *path);

/* exit statuses of a session child */
enum {
  SESSION_OK = 0,        /* the client left or said goodbye */
  SESSION_SETUP = 1,     /* the driver or the executor could not be opened */
  SESSION_PROTOCOL = 2,  /* the client broke the protocol */
  SESSION_INTERNAL = 3,  /* out of memory and the like */
};

/* loads the driver of opts->backend; NULL with a reason */
const struct ferry_driver *server_load_driver(const struct server_opts *opts, char *err,
                                              size_t errlen);

/* serves one connection until it ends; returns a SESSION_* exit status */
int session_run(struct ferry_conn *c, const struct server_opts *opts);
/* the same for a connection whose hello was already read (NULL: read it) */
int session_run_hello(struct ferry_conn *c, const struct server_opts *opts,
                      const struct session_hello *hello);

/* Checks of a client's frame header (magic, flags, sizes, kind); 0, or -1
   with the reason in why, worded as the session logs it. */
int session_check_header(const struct ferry_frame *h, char *why, size_t n);
/* The checks of a decoded hello that need no driver: the setup error, the
   token, the protocol version. 0, or the cudaError_t to refuse it with and
   the reason in why. */
int session_check_hello(const struct server_opts *opts, const struct ferry_hello_args *a,
                        char *why, size_t n);
/* Appends to out what refuses a connection: the hello's REPLY with status
   (none when status is 0), then a GOODBYE with reason. 0, or -1 out of memory. */
int session_refusal(struct ferry_buf *out, int32_t status, const char *reason);

/* FERRY_STREAMS, the session's side (stripe.c): stripe_open makes a key
   and gives it to ferry-server's parent, which hands the session the data
   connections that present it on the server's own port; stripe_attach
   takes them. */
struct ferry_stripes;
struct server_stripe {
  struct server_broker *parent; /* between open and attach: the key is the parent's */
  unsigned want;
  uint8_t key[32];
  struct ferry_stripes *set; /* attached: the data connections */
};
/* a cudaError_t; the port (the one control reached) and key for the reply
   (key: 32 bytes in st). parent: the channel to ferry-server's parent, NULL
   where there is none (ferry-mhelper), which refuses */
int server_stripe_open(struct server_stripe *st, struct ferry_conn *control,
                       struct server_broker *parent, uint32_t streams, uint32_t *port,
                       const char **why);
/* takes `streams` data connections (the client's count) from the parent
   within a short deadline; the count taken (0 or the count asked for).
   timeout_ms: the data connections' FERRY_CALL_TIMEOUT */
unsigned server_stripe_attach(struct server_stripe *st, uint32_t streams, int timeout_ms,
                              const char *peer, int quiet);
void server_stripe_close(struct server_stripe *st);

/* device output: stdout (printf) and stderr (a failed device assert) */
#define CAPTURE_STREAMS 2
struct capture_out {
  char *buf; /* the caller frees it */
  size_t len; /* 0 when nothing was written */
  int fd;     /* where the program writes it: 1 or 2 */
};
/* redirects fd 1 and fd 2 into pipes drained by a thread, ferry's log to a
   copy of the old fd 2; 0 or -1 */
int capture_start(void);
/* flushes stdio and moves what was captured so far into out, one per
   stream. With look == 0 the pipes themselves are not read (no system
   call): only right for a caller who knows no device code ran since they
   were last read with look == 1. */
void capture_take(struct capture_out out[CAPTURE_STREAMS], int look);

#endif
