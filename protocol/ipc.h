/*
 * CUDA IPC through one ferry-server: what the client puts in the 64 bytes
 * of a cudaIpcMemHandle_t / cudaIpcEventHandle_t, and why a server refuses
 * an export or import (the ipc_* calls' refusal field). A handle names an
 * entry of the server's broker (server/broker.c) by a random key, and the
 * server instance that holds it, so that a handle taken to another server
 * (or kept across a restart) is refused by name, not by a lookup miss.
 */
#ifndef FERRY_PROTOCOL_IPC_H
#define FERRY_PROTOCOL_IPC_H

#include <stdint.h>

#define FERRY_IPC_KEY_LEN 16
#define FERRY_IPC_MEM_MAGIC 0x4d435049u /* "IPCM" */
#define FERRY_IPC_EVENT_MAGIC 0x45435049u /* "IPCE" */
/* a program VMM handle's record, in the memfd cuMemExportToShareableHandle
   gives (common/ipc_fd.h): a whole server mapping, offset 0, range = size */
#define FERRY_IPC_VMM_MAGIC 0x56435049u /* "IPCV" */
/* a shareable memory pool's record, in the memfd
   cudaMemPoolExportToShareableHandle gives: spare is the pool's token, the
   rest 0; its pointers' handles (cudaMemPoolExportPointer) are memory
   handles with the token in spare */
#define FERRY_IPC_POOL_MAGIC 0x50435049u /* "IPCP" */

/* the handle's bytes, little-endian as the host's; 64 bytes like CUDA's */
struct ferry_ipc_handle {
  uint32_t magic;
  uint32_t vgpu_unused; /* reserved, 0 */
  uint64_t instance;    /* the server's random id (ferry-server's start) */
  uint8_t key[FERRY_IPC_KEY_LEN];
  uint64_t offset; /* memory: the allocation's start in the exported range */
  uint64_t range;  /* memory: the exported range's bytes (granule multiple) */
  uint64_t size;   /* memory: the allocation's bytes */
  uint64_t spare;  /* a memory pool's token (FERRY_IPC_POOL_MAGIC), else 0 */
};
_Static_assert(sizeof(struct ferry_ipc_handle) == 64, "a CUDA IPC handle is 64 bytes");

/* refusals: the call was understood and ferry says no */
enum {
  FERRY_IPC_OK = 0,
  FERRY_IPC_OTHER_SERVER = 1, /* the handle's instance is not this server's */
  FERRY_IPC_NO_EXPORT = 2,    /* no such key: never made, freed, or its exporter ended */
  FERRY_IPC_OWN = 3,          /* the key is this session's own export */
  FERRY_IPC_NO_BROKER = 4,    /* this process serves no IPC (ferry-mhelper, in-process) */
  FERRY_IPC_TOO_MANY = 5,     /* the broker's bounds (exports, descriptors) are reached */
  FERRY_IPC_UNSHAREABLE = 6,  /* the device cannot export its memory as file descriptors */
};

#endif
