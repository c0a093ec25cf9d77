/*
 * The file descriptor cuMemExportToShareableHandle gives a program for a
 * program VMM handle (shim/driver/vmm.c), and cudaMemPoolExportToShareableHandle
 * for a memory pool (shim/runtime/mempool_ipc.c): a sealed memfd holding a ferry
 * IPC handle record (protocol/ipc.h), so that the program can pass a real
 * descriptor with SCM_RIGHTS as it would NVIDIA's, and
 * cuMemImportFromShareableHandle can tell ferry's descriptor from any
 * other. Its own file so that the record's checks are tested alone.
 */
#ifndef FERRY_COMMON_IPC_FD_H
#define FERRY_COMMON_IPC_FD_H

#include "protocol/ipc.h"

/* a new descriptor holding h, sealed against writes and resizes; -1 and
   errno when the system refused one */
int ferry_ipc_fd_make(const struct ferry_ipc_handle *h);

/* why a descriptor is not ferry's VMM record */
enum {
  FERRY_IPC_FD_OK = 0,
  FERRY_IPC_FD_UNREADABLE = 1, /* not a file ferry can read at offset 0 (a pipe, a socket, closed) */
  FERRY_IPC_FD_NOT_OURS = 2,   /* another size or magic: another driver's, or any file */
  FERRY_IPC_FD_UNSEALED = 3,   /* the record's bytes, but writable: not one ferry made */
};
/* reads fd's record into *h: FERRY_IPC_FD_OK or why not; a record is a VMM
   handle's or a memory pool's (the caller checks which by its magic) */
int ferry_ipc_fd_read(int fd, struct ferry_ipc_handle *h);
/* a phrase for a reason above */
const char *ferry_ipc_fd_why(int why);

#endif
