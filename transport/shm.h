/*
 * The shared-memory channel between a program and its ferry-mhelper
 * processes: two byte rings (one per direction) in a memfd both processes
 * map, behind the same connection ops as tcp and ib. A message costs two
 * memcpys and no system call while the peer is awake; a side that finds
 * nothing to do spins briefly and then sleeps on a futex in the shared
 * header, and is woken only when it sleeps. A socketpair beside the rings
 * carries no data: its hang-up tells each side that the other process
 * died, so a wait never outlives the peer.
 */
#ifndef FERRY_SHM_H
#define FERRY_SHM_H

#include <stddef.h>
#include <sys/types.h>

#include "transport.h"

#define FERRY_SHM_DEFAULT_RING (4u << 20) /* bytes per direction */

/* what the other process needs: both fds are close-on-exec in the creator;
   the spawner dup2()s them into the child and then closes its copies.
   Liveness rests on the socketpair: a side is seen as dead once every copy
   of its socket end is closed. So a fork() child that does not exec must
   detach the creator's connection (ops->detach), or the peer cannot notice
   the creator's death while that child lives. */
struct ferry_shm_peer {
  int mem_fd;  /* the memfd holding the header and both rings */
  int sock_fd; /* the peer's end of the liveness socketpair */
};

/* The creating side (the program). ring_bytes per direction, 0 for the
   default; rounded up to a power of two. NULL with a reason in err. */
struct ferry_conn *ferry_shm_create(size_t ring_bytes, struct ferry_shm_peer *peer, char *err,
                                    size_t errlen);
/* closes the creator's copies of the peer's fds (after the spawn) */
void ferry_shm_peer_close(struct ferry_shm_peer *peer);

/* The other side (ferry-mhelper), from inherited fds; takes ownership of
   both (closed on failure too). NULL with a reason in err (not a ferry
   channel, wrong version, already attached). A channel has one attacher. */
struct ferry_conn *ferry_shm_attach(int mem_fd, int sock_fd, char *err, size_t errlen);

/* the pid the other side wrote into the shared header when it attached
   (creator) or created the channel (attacher); 0 while unknown. The
   creator's conn->peer reads "shm" (nobody has attached when it is made),
   the attacher's "shm (pid N)". */
pid_t ferry_shm_peer_pid(struct ferry_conn *c);

/* spin time before sleeping: FERRY_SHM_SPIN_US, default 50 us, 0 never spins */
unsigned ferry_shm_spin_us(void);

#endif
