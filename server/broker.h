/*
 * CUDA IPC's broker. Sessions of one ferry-server are sibling processes
 * with no channel between them, so the parent, which never loads CUDA,
 * keeps what they export: each session gets a SOCK_SEQPACKET socketpair at
 * its fork; an export (the description and the file descriptors of the
 * driver's memory handles, passed with SCM_RIGHTS) is kept under a random
 * 128-bit key; a session presenting the key gets copies of the
 * descriptors. A session's exports end when it drops them or is reaped.
 *
 * The same channel carries FERRY_STREAMS' data connections (server/
 * stripe.c): they reach the server's own port, whose parent reads their
 * hello; a session registers its key (BROKER_STRIPE_KEY) and the parent
 * hands it each connection that presents the key (BROKER_STRIPE_CONN, the
 * socket passed with SCM_RIGHTS). A key ends when its connections all came,
 * when the session says so, after BROKER_STRIPE_MS, or with the session.
 *
 * The table and the messages are plain code (tests/unit/test_broker.c);
 * the parent's side is broker_serve and broker_hand_conn, the session's
 * broker_client.c.
 */
#ifndef FERRY_SERVER_BROKER_H
#define FERRY_SERVER_BROKER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "protocol/ipc.h"
#include "protocol/stripe.h"

#define BROKER_MAGIC 0x4b524246u /* "FBRK" */
#define BROKER_MAX_FDS 32         /* descriptors one export holds */
#define BROKER_META_MAX 2048      /* bytes of description one export holds */

enum { BROKER_PUT = 1, BROKER_GET = 2, BROKER_DROP = 3, BROKER_REPLY = 4,
       BROKER_STRIPE_KEY = 5,  /* session: a key and its lanes; a reply says it is kept */
       BROKER_STRIPE_END = 6,  /* session: the key is done (no reply) */
       BROKER_STRIPE_CONN = 7  /* parent: one data connection beside it (its hello read) */
};
/* a key that has not had all its connections after this long ends: the
   client connects right after stripe_open's reply; this only bounds a
   session whose client never came */
#define BROKER_STRIPE_MS 10000

/* every message: this header, then meta_len bytes; descriptors beside it */
struct broker_hdr {
  uint32_t magic;
  uint16_t op;
  uint16_t nfds;   /* descriptors that come with it */
  uint32_t status; /* a reply's: 0, a FERRY_IPC_* refusal */
  uint32_t meta_len;
  uint8_t key[FERRY_IPC_KEY_LEN]; /* GET and DROP: the key; a reply to PUT: the new key */
};

/* the description of the BROKER_STRIPE_* messages */
struct broker_stripe {
  uint32_t lane; /* KEY: the count of data connections to come; CONN: this one's lane */
  uint8_t key[FERRY_STRIPE_KEY_LEN];
};

/* Checks a message of len bytes that came with nfds descriptors (ctrunc:
   the kernel dropped some). want_reply: a message to a session (a reply,
   a data connection), else to the parent (a request). 0 and *h, *meta, or
   -1 with why. */
int broker_parse(const void *buf, size_t len, unsigned nfds, int ctrunc, int want_reply,
                 struct broker_hdr *h, const void **meta, char *why, size_t n);

struct broker_entry {
  uint8_t key[FERRY_IPC_KEY_LEN];
  pid_t owner; /* the session that exported it */
  unsigned nfds;
  int fds[BROKER_MAX_FDS];
  uint32_t meta_len;
  void *meta;
};

/* a session's key for its data connections (one per session at most) */
struct broker_stripe_key {
  uint8_t key[FERRY_STRIPE_KEY_LEN];
  pid_t owner;
  unsigned lanes, handed; /* connections it waits for; handed over so far */
  long deadline_ms;       /* CLOCK_MONOTONIC */
};

struct broker_table {
  struct broker_entry *e;
  size_t n, cap;
  size_t max_entries; /* 0: 4096 */
  unsigned fds, max_fds; /* held now; at most (0: 1024) */
  struct broker_stripe_key *sk; /* FERRY_STREAMS' keys */
  size_t nsk, capsk;
};

/* keeps the export (its fds are the table's from now on, even when it is
   refused, which closes them): 0, FERRY_IPC_TOO_MANY, or -1 out of memory */
int broker_table_put(struct broker_table *t, pid_t owner, const uint8_t *key, const void *meta,
                     uint32_t meta_len, const int *fds, unsigned nfds);
const struct broker_entry *broker_table_find(const struct broker_table *t, const uint8_t *key);
/* the owner's entry for key goes (its fds closed): 0, or -1 when it has none */
int broker_table_drop(struct broker_table *t, pid_t owner, const uint8_t *key);
/* every entry of owner goes (a session ended), its stripe key too; how
   many exports went */
size_t broker_table_drop_owner(struct broker_table *t, pid_t owner);

/* owner's key for lanes data connections until deadline_ms (it replaces
   any key owner had): 0, or -1 out of memory */
int broker_stripe_put(struct broker_table *t, pid_t owner, const uint8_t *key, unsigned lanes,
                      long deadline_ms);
/* the session whose live key this is, counting one connection handed to
   it (the key ends with its last), or 0: a stranger. Compared in constant
   time with every key. */
pid_t broker_stripe_claim(struct broker_table *t, const uint8_t *key, long now_ms);
/* owner's key ends (a key of another session is left alone) */
void broker_stripe_end(struct broker_table *t, pid_t owner, const uint8_t *key);
/* keys past their deadline end; how many are left */
size_t broker_stripe_expire(struct broker_table *t, long now_ms);
void broker_table_free(struct broker_table *t);

/* The parent's side: reads one message from the session `owner` on sock
   and answers it. 0; 1 when the session hung up (sock is closed by the
   caller); -1 for a malformed message (why says how: logged, answered
   with nothing, the channel stays). */
int broker_serve(struct broker_table *t, int sock, pid_t owner, char *why, size_t n);

/* The parent hands a data connection's socket fd (lane: its hello's) to
   the session on sock, without blocking: 0, or -1 with errno (the caller
   still owns fd either way). */
int broker_hand_conn(int sock, const uint8_t *key, uint32_t lane, int fd);

/* sends h, its meta_len bytes of meta and its nfds descriptors as one
   message (flags: sendmsg's, MSG_NOSIGNAL added); sendmsg's answer */
ssize_t broker_send(int sock, const struct broker_hdr *h, const void *meta, const int *fds,
                    int flags);

/* The descriptors that came with a received message m, at most max of
   them into fds (any beyond are closed, and *extra set): the count. */
unsigned broker_take_fds(struct msghdr *m, int *fds, unsigned max, int *extra);
/* receives one message into buf (cap bytes) and its descriptors into fds
   (BROKER_MAX_FDS of room) with recvmsg's flags (MSG_CMSG_CLOEXEC added);
   recvmsg's answer, *nfds, and *trunc when something did not fit (EINTR
   retried) */
ssize_t broker_recv(int sock, void *buf, size_t cap, int flags, int *fds, unsigned *nfds,
                    int *trunc);

/* 128 random bits (getrandom); 0 or -1 */
int broker_random(void *buf, size_t n);

#endif
