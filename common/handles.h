/*
 * Handle tables. Streams and events that the program holds are ferry
 * handles, not pointers: a value encodes (generation, index), so a stale or
 * garbage handle is detected by a lookup instead of a use-after-free, and
 * the same handle can later be bound to a different executor (migration).
 * Thread-safe.
 */
#ifndef FERRY_HANDLES_H
#define FERRY_HANDLES_H

#include <pthread.h>
#include <stdint.h>

/* values never collide with NULL, cudaStreamLegacy (1) or cudaStreamPerThread (2) */
#define FERRY_HANDLE_TAG 0x7e00000000000000ull
#define FERRY_HANDLE_FIRST_ID 16u /* ids below this are reserved on the wire */

struct ferry_handle_slot {
  void *obj;
  uint32_t gen;
  uint32_t next_free;
};

struct ferry_handles {
  pthread_mutex_t lock;
  struct ferry_handle_slot *slots;
  uint32_t n, cap, free_head; /* free_head: index+1, 0 = none */
};

void ferry_handles_init(struct ferry_handles *h);
void ferry_handles_destroy(struct ferry_handles *h);
/* 0 on out of memory */
uint64_t ferry_handle_add(struct ferry_handles *h, void *obj);
/* NULL when the value is not a live handle of this table */
void *ferry_handle_get(struct ferry_handles *h, uint64_t value);
void *ferry_handle_remove(struct ferry_handles *h, uint64_t value);
/* as remove, but the handle's wire id is not given to a new handle until
   ferry_handle_release: a destroy that still has to reach the server must
   not race with a create that would reuse its id (the replay log would
   drop the new object with the old) */
void *ferry_handle_take(struct ferry_handles *h, uint64_t value);
void ferry_handle_release(struct ferry_handles *h, uint64_t value);
/* the wire id of a live handle: index + FERRY_HANDLE_FIRST_ID */
static inline uint32_t ferry_handle_id(uint64_t value) {
  return (uint32_t)(value & 0xffffffu) + FERRY_HANDLE_FIRST_ID;
}



/* removes every handle whose object satisfies pred; returns how many */
unsigned ferry_handles_remove_if(struct ferry_handles *h, int (*pred)(void *obj, void *ctx),
                                 void *ctx, void (*release)(void *obj));
#endif
