/* A VMM or memory pool shareable handle as a sealed memfd (common/ipc_fd.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#endif
#include "common/ipc_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>

#define SEALS (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)

int ferry_ipc_fd_make(const struct ferry_ipc_handle *h) {
  /* no MFD_CLOEXEC: whether the descriptor crosses exec is the program's choice */
  int fd = memfd_create("ferry-ipc-handle", MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  ssize_t n = pwrite(fd, h, sizeof *h, 0);
  if (n != (ssize_t)sizeof *h || fcntl(fd, F_ADD_SEALS, SEALS) < 0) {
    int e = n < 0 || n == (ssize_t)sizeof *h ? errno : EIO;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int ferry_ipc_fd_read(int fd, struct ferry_ipc_handle *h) {
  /* one byte more than a record: a longer file is not one */
  unsigned char buf[sizeof *h + 1];
  ssize_t n = pread(fd, buf, sizeof buf, 0);
  if (n < 0) return FERRY_IPC_FD_UNREADABLE;
  if (n != (ssize_t)sizeof *h) return FERRY_IPC_FD_NOT_OURS;
  struct ferry_ipc_handle r;
  memcpy(&r, buf, sizeof r);
  int vmm = r.magic == FERRY_IPC_VMM_MAGIC && !r.vgpu_unused && r.size && r.range == r.size && !r.offset;
  int pool = r.magic == FERRY_IPC_POOL_MAGIC && !r.vgpu_unused && r.spare && !r.size && !r.range && !r.offset;
  if (!vmm && !pool)
    return FERRY_IPC_FD_NOT_OURS;
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & SEALS) != SEALS) return FERRY_IPC_FD_UNSEALED;
  *h = r;
  return FERRY_IPC_FD_OK;
}

const char *ferry_ipc_fd_why(int why) {
  switch (why) {
  case FERRY_IPC_FD_OK: return "ferry's record";
  case FERRY_IPC_FD_UNREADABLE: return "a descriptor that cannot be read as a file (a pipe, a socket, or closed)";
  case FERRY_IPC_FD_UNSEALED: return "a file with a record's bytes that ferry did not make (not sealed)";
  default: return "a file that is not a handle ferry exported (another driver's, or any file)";
  }
}
