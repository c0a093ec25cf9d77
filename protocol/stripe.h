/*
 * Striped bulk bytes (FERRY_STREAMS): one TCP stream caps a large copy well
 * below what the host can move, so a session may have N data connections
 * beside its control connection, and the bulk bytes of a large copy travel
 * over them in pieces. This is what both ends agree on: how a transfer is
 * cut (piece k of FERRY_STRIPE_PIECE bytes goes on connection k mod N), the
 * header before each piece, the hello a data connection opens with, and the
 * engine that moves a part of a transfer over all connections at once.
 * Which copies are striped and how the connections are opened are each
 * side's business (server/stripe.c, shim/core/stripe.c).
 */
#ifndef FERRY_STRIPE_H
#define FERRY_STRIPE_H

#include <stdint.h>
#include <stddef.h>

#include "transport/transport.h"

#define FERRY_STRIPE_MAX 16 /* data connections of one session at most */
/* copies from this size on are striped; below it the few milliseconds a
   copy takes on one stream leave nothing to win against the wake-ups */
#define FERRY_STRIPE_MIN_BULK (4u << 20)
/* that size, or FERRY_STRIPE_MIN (bytes) where set: both ends read it,
   the client for what it sends, the server for what it sends back */
uint64_t ferry_stripe_min(void);
/* small enough that the server's staging chunks (1-4 MiB) span several
   connections, large enough that a piece's header and system calls cost
   nothing next to its bytes */
#define FERRY_STRIPE_PIECE (256u << 10)
#define FERRY_STRIPE_KEY_LEN 32

#define FERRY_STRIPE_MAGIC 0x53595246u /* "FRYS" */

/* what a data connection sends first: the session's key and its lane */
struct ferry_stripe_hello {
  uint32_t magic;
  uint32_t lane;
  uint8_t key[FERRY_STRIPE_KEY_LEN];
};
_Static_assert(sizeof(struct ferry_stripe_hello) == 40, "stripe hello is 40 bytes");

/* before each piece: the transfer it belongs to (each direction counts its
   transfers from 1), where it goes and how long it is; a receiver refuses
   any other, so bytes never land in the wrong place */
struct ferry_piece {
  uint32_t magic;
  uint32_t lane;
  uint64_t seq;
  uint64_t offset;
  uint64_t len;
};
_Static_assert(sizeof(struct ferry_piece) == 32, "piece header is 32 bytes");

/* The next bytes that lane j of n carries in [pos, end) of a transfer of
   total bytes: 1 with their offset and length (within one piece), or 0 */
int ferry_stripe_next(uint64_t total, unsigned n, unsigned j, uint64_t pos, uint64_t end,
                      uint64_t *at, uint64_t *len);

/* moves [pos, end) of transfer seq (total bytes) over one lane's
   connection: byte pos is buf[0]. A transfer may be moved in several
   parts, in order; a piece cut by a part's end goes on in the next. 0, or
   -1 with errno (EPROTO: a header that is not the expected one). */
struct ferry_lane_job {
  struct ferry_conn *c;
  unsigned lane, lanes;
  int send;
  uint64_t seq, total, pos, end;
  char *buf;
};
int ferry_stripe_lane(const struct ferry_lane_job *j);

/* A session's data connections and a thread per connection and direction
   (a client may receive one copy while it sends another). */
struct ferry_crew;
struct ferry_stripes {
  unsigned n;
  struct ferry_conn *conn[FERRY_STRIPE_MAX];
  struct ferry_crew *crew[2]; /* 0 sends, 1 receives */
  uint64_t seq[2];            /* the last transfer of each direction */
  int broken;                 /* atomic: a connection failed, nothing moves any more */
  uint64_t bytes[2], transfers[2]; /* moved so far (statistics, tests) */
  int fault_lane;             /* tests: this lane fails mid-transfer (-1: none) */
  uint64_t fault_at;          /* ... at this transfer (both directions counted) */
};

/* takes the n connections (each opened and checked by its side); starts the
   threads; NULL (the connections closed) when they cannot start */
struct ferry_stripes *ferry_stripes_start(struct ferry_conn **conns, unsigned n, int timeout_ms);
/* a new transfer in direction send (1) or receive (0): its sequence number */
uint64_t ferry_stripes_begin(struct ferry_stripes *s, int send);
/* moves [pos, pos + len) of transfer seq over every connection at once,
   returns when all of it went (or came); 0, or -1 with errno set, after
   which every connection is shut down (peers blocked on them wake) */
int ferry_stripes_move(struct ferry_stripes *s, int send, uint64_t seq, uint64_t total,
                       uint64_t pos, void *buf, uint64_t len);
/* stops the threads and closes the connections */
void ferry_stripes_close(struct ferry_stripes *s);
/* a forked child: forgets them without touching the parent's sockets */
void ferry_stripes_forget(struct ferry_stripes *s);

#endif
