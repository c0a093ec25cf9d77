/*
 * The node blob of a CUDA graph (issue 21): the client describes each graph
 * it built (stream capture, cudaGraphAdd*) as one blob, which
 * graph_instantiate carries to the server and the recorder keeps for
 * replay. Self-contained: device addresses, ferry function and event ids.
 *
 * Layout, every integer little-endian, no padding:
 *   header  u32 magic FERRY_GRAPH_MAGIC, u32 version FERRY_GRAPH_VERSION,
 *           u32 nnodes
 *   node    u32 type, u32 ndeps, ndeps x u32 dep (each < this node's index),
 *           then by type:
 *     EMPTY         nothing
 *     KERNEL        u32 func gx gy gz bx by bz shmem, u32 params_len,
 *                   params bytes, u32 attrs_len, attrs bytes
 *     MEMSET        u64 dst pitch width height, u32 value elem
 *     MEMCPY        u64 dst dpitch src spitch width height
 *     EVENT_RECORD, EVENT_WAIT   u32 event
 * A zero-length blob is the empty graph (a ferry_gbuf nothing was put in).
 */
#ifndef FERRY_GRAPH_H
#define FERRY_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#define FERRY_GRAPH_MAGIC 0x48505247u /* "GRPH" */
#define FERRY_GRAPH_VERSION 1u
#define FERRY_GRAPH_HEADER 12u

enum ferry_gnode_type {
  FERRY_GNODE_EMPTY = 0,
  FERRY_GNODE_KERNEL = 1,
  FERRY_GNODE_MEMSET = 2,
  FERRY_GNODE_MEMCPY = 3,
  FERRY_GNODE_EVENT_RECORD = 4,
  FERRY_GNODE_EVENT_WAIT = 5,
};
#define FERRY_GNODE_TYPES 6u

/* named, so that the client's graph nodes hold the same values as they go out */
struct ferry_gnode_memset {
  uint64_t dst, pitch, width, height; /* width in elements, pitch in bytes */
  uint32_t value, elem;               /* elem 1, 2 or 4 */
};
struct ferry_gnode_memcpy {
  uint64_t dst, dpitch, src, spitch, width, height; /* device to device, width in bytes; 1D: height 1 */
};

struct ferry_gnode {
  uint32_t type;
  uint32_t ndeps;
  const uint32_t *deps; /* indexes of EARLIER nodes of the same blob (so the order is topological) */
  union {
    struct {
      uint32_t func, gx, gy, gz, bx, by, bz, shmem;
      const void *params; /* exactly as the `launch` call's params blob */
      uint32_t params_len;
      const void *attrs; /* as the `launch` call's attrs blob */
      uint32_t attrs_len;
    } kernel;
    struct ferry_gnode_memset memset;
    struct ferry_gnode_memcpy memcpy;
    struct {
      uint32_t event; /* the client's event id, as in event_record */
    } event;
  } u;
};

/* zero-initialize; put appends (the header comes with the first node) */
struct ferry_gbuf {
  unsigned char *data;
  size_t len, cap;
  uint32_t nnodes;
};

/* appends one node. 0; -1 out of memory, a dep not earlier, an unknown type
   or a length over 4 GiB (the buffer is then unchanged) */
int ferry_graph_put(struct ferry_gbuf *b, const struct ferry_gnode *n);
void ferry_gbuf_free(struct ferry_gbuf *b);

/* walks a blob, calling fn for each node in order (pointers into the blob or
   into the walk's scratch, valid during the call; fn may be NULL to only
   check); returns the node count, or -1 when the blob is malformed
   (truncated, bad magic or version, unknown type, a dep not earlier,
   lengths past the end, trailing bytes, a count that disagrees), or fn's
   first non-zero value. The whole blob is checked before fn sees a node,
   so fn never acts on part of a malformed blob. */
int ferry_graph_walk(const void *blob, size_t len,
                     int (*fn)(void *ctx, uint32_t index, const struct ferry_gnode *n), void *ctx);

#endif
