/*
 * Wire format shared by the shim, the server and the tests.
 *
 * Every message is a fixed 32-byte frame header, then `body_len` bytes of
 * msgpack (the call's ARGS or RETS array), then `bulk_len` raw bytes. Bulk
 * bytes are never copied into the msgpack body, so large copies go straight
 * from the user's buffer to the socket. A reply that carries bulk bytes ends
 * with a 4-byte final status (the copy may fail after the header was sent).
 * A frame's kind is a call's wire id (calls.def's first column) or one of
 * FERRY_KIND_*; a peer of another FERRY_PROTOCOL_VERSION is refused at hello.
 */
#ifndef FERRY_WIRE_H
#define FERRY_WIRE_H

#include <stdint.h>
#include <stddef.h>

#define FERRY_MAGIC 0x31595246u /* "FRY1" little endian */
#define FERRY_PROTOCOL_VERSION 12u
#define FERRY_MAX_BODY (1u << 20)          /* msgpack body; params are <= 32 KiB */
#define FERRY_MAX_BULK (1ull << 40)        /* sanity bound for a single transfer */
#define FERRY_MAX_LAUNCH_ATTRS 16u         /* launch attributes in one launch's attrs blob */
/* one mem_hash: pieces (its reply's hashes stay within FERRY_MAX_BODY) and
   ranges; one memcpy_dtoh_gather: ranges and bytes. Callers split larger
   requests (protocol/mem_batch.c) */
#define FERRY_HASH_MAX_PIECES 65536u
#define FERRY_HASH_MAX_RANGES 32768u
#define FERRY_GATHER_MAX_RANGES 65536u
#define FERRY_GATHER_MAX_BYTES (1ull << 30)

/* stream and event ids below the program's (common/handles.h starts them at
   16) that ferry itself uses on the wire; 0-2 are the default streams */
#define FERRY_WIRE_MEMSYNC_STREAM 3u  /* mem-sync's copies */
#define FERRY_WIRE_MEMSYNC_EVENT0 3u  /* ..+7: one per mem-sync buffer */
#define FERRY_WIRE_STAGING_EVENT0 11u /* ..+1: pageable copies through shared staging */

/* frame kinds above the call ids */
enum {
  FERRY_KIND_REPLY = 0xff00,    /* answer to the oldest SYNC request */
  FERRY_KIND_DEFERRED = 0xff01, /* data of a finished memcpy_dtoh_async; body: [token], or
                                   [token, why] for one refused over --max-deferred (no data) */
  FERRY_KIND_OUTPUT = 0xff02,   /* device output (bulk) for the app's fd `status`: 1 printf, 2 assert */
  FERRY_KIND_GOODBYE = 0xff03,  /* server ends the session; body: [reason] */
  FERRY_KIND_KEEPALIVE = 0xff04, /* a call still runs (hello's keepalive_ms); no body */
};

struct ferry_frame {
  uint32_t magic;
  uint16_t kind;         /* call id or FERRY_KIND_* */
  uint16_t flags;        /* 0, or FERRY_FRAME_STRIPED */
  int32_t status;        /* reply: cudaError_t of the call */
  int32_t async_status;  /* reply: first error latched by earlier ASYNC calls */
  uint32_t body_len;
  uint32_t reserved;
  uint64_t bulk_len;
};
_Static_assert(sizeof(struct ferry_frame) == 32, "frame header is 32 bytes");

/* the frame's bulk_len bytes travel as pieces over the session's data
   connections (protocol/stripe.h), not after the body; a striped reply
   still ends with its 4-byte final status on this connection */
#define FERRY_FRAME_STRIPED 0x1u

/* field types used by calls.def */
typedef uint32_t ferry_u32;
typedef int32_t ferry_i32;
typedef uint64_t ferry_u64;
typedef float ferry_f32;
typedef const char *ferry_str; /* decoded: points into the frame, NUL-terminated */
typedef struct { const void *ptr; uint32_t len; } ferry_blob;

/* call flags (calls.def says what each means) */
#define SYNC 0x1u
#define ASYNC 0x2u
#define RECORD 0x4u
#define BULK_IN 0x8u
#define BULK_OUT 0x10u
#define CACHED 0x20u
#define INVALIDATES 0x40u
#define FLUSHES_OUTPUT 0x80u
#define WAITS 0x100u
#define LAUNCHES 0x200u
#define DRAINS 0x400u

/* every wire id is below this: the size of tables indexed by call. Raising
   it changes nothing on the wire (ids stay below FERRY_KIND_REPLY). */
#define FERRY_CALL_LIMIT 128u
/* the program's shared host arena (shim/core/hostmem.c): its pinned memory
   lives here, and a server maps device shadows of the part kernels use at
   the same addresses (shadow_map) */
#define FERRY_HOST_WINDOW_BASE 0x180000000000ull
#define FERRY_HOST_WINDOW_SIZE 0x40000000000ull
/* device shadows of memory the program registered (cudaHostRegister) live
   here, not at the program's own addresses, which a server's or helper's
   driver need not grant (the H200's refused them): the client translates
   the addresses its calls carry (shim/core/shadow_alias.c) */
#define FERRY_ALIAS_WINDOW_BASE (FERRY_HOST_WINDOW_BASE + FERRY_HOST_WINDOW_SIZE)
#define FERRY_ALIAS_WINDOW_SIZE 0x10000000000ull
/* the vGPUs' device arenas: a program's vGPU i allocates in the 4 TiB at
   FERRY_ARENA_BASE + i * FERRY_ARENA_STRIDE (shim/core/vgpu.h). For peer
   access a session maps another vGPU's memory at its own addresses there
   (ipc_mem_import outside the session's arena). */
#define FERRY_ARENA_BASE 0x200000000000ull
#define FERRY_ARENA_STRIDE 0x40000000000ull
#define FERRY_ARENAS 16u
_Static_assert(FERRY_CALL_LIMIT <= FERRY_KIND_REPLY, "call ids and frame kinds overlap");

enum ferry_call_id {
#define FERRY_CALL(id, name, flags, args, rets) FERRY_CALL_##name = (id),
#include "calls.def"
#undef FERRY_CALL
};
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  _Static_assert((id) < FERRY_CALL_LIMIT, #name "'s id is not below FERRY_CALL_LIMIT");
#include "calls.def"
#undef FERRY_CALL

/* one struct per call for its arguments and one for its results */
#define ARGS(...) __VA_ARGS__
#define RETS(...) __VA_ARGS__
#define F(type, field) ferry_##type field;
#define FERRY_CALL(id, name, flags, args, rets) struct ferry_##name##_args { args char unused_; };
#include "calls.def"
#undef FERRY_CALL
#define FERRY_CALL(id, name, flags, args, rets) struct ferry_##name##_rets { rets char unused_; };
#undef ARGS
#define ARGS(...)
#include "calls.def"
#undef ARGS
#undef RETS
#undef F
#undef FERRY_CALL

struct ferry_call_info {
  const char *name; /* NULL: no call has this id */
  unsigned flags;
};
extern const struct ferry_call_info ferry_calls[FERRY_CALL_LIMIT];

/* whether a call has this id; one case per id, so that two calls with the
   same id do not compile */
static inline int ferry_call_valid(unsigned call) {
  switch (call) {
#define FERRY_CALL(id, name, flags, args, rets) case (id):
#include "calls.def"
#undef FERRY_CALL
    return 1;
  default:
    return 0;
  }
}

#endif
