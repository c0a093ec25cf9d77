/*
 * CUDA IPC's broker. Sessions of one ferry-server are sibling processes
 * with no channel between them, so the parent, which never loads CUDA,
 * keeps what they export: each session gets a SOCK_SEQPACKET socketpair at
 * its fork; an export (the description and the file descriptors of the
 * driver's memory handles, passed with SCM_RIGHTS) is kept under a random
 * 128-bit key; a session presenting the key gets copies of the
 * descriptors. A session's exports end when it drops them or is reaped.
 *
 * The table and the messages are plain code (tests/unit/test_broker.c);
 * the parent's side is broker_serve, the session's broker_client.c.
 */
#ifndef FERRY_SERVER_BROKER_H
#define FERRY_SERVER_BROKER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol/ipc.h"

#define BROKER_MAGIC 0x4b524246u /* "FBRK" */
#define BROKER_MAX_FDS 32         /* descriptors one export holds */
#define BROKER_META_MAX 2048      /* bytes of description one export holds */

enum { BROKER_PUT = 1, BROKER_GET = 2, BROKER_DROP = 3, BROKER_REPLY = 4 };

/* every message: this header, then meta_len bytes; descriptors beside it */
struct broker_hdr {
  uint32_t magic;
  uint16_t op;
  uint16_t nfds;   /* descriptors that come with it */
  uint32_t status; /* a reply's: 0, a FERRY_IPC_* refusal */
  uint32_t meta_len;
  uint8_t key[FERRY_IPC_KEY_LEN]; /* GET and DROP: the key; a reply to PUT: the new key */
};

/* Checks a message of len bytes that came with nfds descriptors (ctrunc:
   the kernel dropped some). want_reply: a session reads replies, the
   parent requests. 0 and *h, *meta, or -1 with why. */
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

struct broker_table {
  struct broker_entry *e;
  size_t n, cap;
  size_t max_entries; /* 0: 4096 */
  unsigned fds, max_fds; /* held now; at most (0: 1024) */
};

/* keeps the export (its fds are the table's from now on, even when it is
   refused, which closes them): 0, FERRY_IPC_TOO_MANY, or -1 out of memory */
int broker_table_put(struct broker_table *t, pid_t owner, const uint8_t *key, const void *meta,
                     uint32_t meta_len, const int *fds, unsigned nfds);
const struct broker_entry *broker_table_find(const struct broker_table *t, const uint8_t *key);
/* the owner's entry for key goes (its fds closed): 0, or -1 when it has none */
int broker_table_drop(struct broker_table *t, pid_t owner, const uint8_t *key);
/* every entry of owner goes (a session ended); how many */
size_t broker_table_drop_owner(struct broker_table *t, pid_t owner);
void broker_table_free(struct broker_table *t);

/* The parent's side: reads one message from the session `owner` on sock
   and answers it. 0; 1 when the session hung up (sock is closed by the
   caller); -1 for a malformed message (why says how: logged, answered
   with nothing, the channel stays). */
int broker_serve(struct broker_table *t, int sock, pid_t owner, char *why, size_t n);

/* sends h, its meta_len bytes of meta and its nfds descriptors as one
   message (flags: sendmsg's, MSG_NOSIGNAL added); sendmsg's answer */
ssize_t broker_send(int sock, const struct broker_hdr *h, const void *meta, const int *fds,
                    int flags);

/* 128 random bits (getrandom); 0 or -1 */
int broker_random(void *buf, size_t n);

#endif
