/* Generation-checked handle table; see handles.h. */
#include "handles.h"

#include <stdlib.h>
#include <string.h>

#define INDEX_BITS 24
#define INDEX_MASK ((1u << INDEX_BITS) - 1)

void ferry_handles_init(struct ferry_handles *h) {
  memset(h, 0, sizeof *h);
  pthread_mutex_init(&h->lock, NULL);
}

void ferry_handles_destroy(struct ferry_handles *h) {
  free(h->slots);
  pthread_mutex_destroy(&h->lock);
}

static uint64_t encode(uint32_t index, uint32_t gen) {
  return FERRY_HANDLE_TAG | ((uint64_t)(gen & 0xffffffu) << INDEX_BITS) | index;
}

uint64_t ferry_handle_add(struct ferry_handles *h, void *obj) {
  uint64_t value = 0;
  pthread_mutex_lock(&h->lock);
  uint32_t index;
  if (h->free_head) {
    index = h->free_head - 1;
    h->free_head = h->slots[index].next_free;
  } else {
    if (h->n == h->cap) {
      uint32_t cap = h->cap ? h->cap * 2 : 64;
      if (cap > INDEX_MASK) goto out;
      struct ferry_handle_slot *s = realloc(h->slots, cap * sizeof *s);
      if (!s) goto out;
      h->slots = s;
      h->cap = cap;
    }
    index = h->n++;
    h->slots[index].gen = 1;
  }
  h->slots[index].obj = obj;
  h->slots[index].next_free = 0;
  value = encode(index, h->slots[index].gen);
out:
  pthread_mutex_unlock(&h->lock);
  return value;
}

static struct ferry_handle_slot *lookup(struct ferry_handles *h, uint64_t value) {
  if ((value & 0xff00000000000000ull) != FERRY_HANDLE_TAG) return NULL;
  uint32_t index = (uint32_t)(value & INDEX_MASK);
  uint32_t gen = (uint32_t)((value >> INDEX_BITS) & 0xffffffu);
  if (index >= h->n) return NULL;
  struct ferry_handle_slot *s = &h->slots[index];
  if (!s->obj || (s->gen & 0xffffffu) != gen) return NULL;
  return s;
}

void *ferry_handle_get(struct ferry_handles *h, uint64_t value) {
  pthread_mutex_lock(&h->lock);
  struct ferry_handle_slot *s = lookup(h, value);
  void *obj = s ? s->obj : NULL;
  pthread_mutex_unlock(&h->lock);
  return obj;
}

/* the handle stops resolving; its slot (and wire id) is reused only when
   recycle is set, or after ferry_handle_release */
static void *take(struct ferry_handles *h, uint64_t value, int recycle) {
  pthread_mutex_lock(&h->lock);
  struct ferry_handle_slot *s = lookup(h, value);
  void *obj = NULL;
  if (s) {
    obj = s->obj;
    s->obj = NULL;
    s->gen++;
    if ((s->gen & 0xffffffu) == 0) s->gen = 1;
    if (recycle) {
      uint32_t index = (uint32_t)(s - h->slots);
      s->next_free = h->free_head;
      h->free_head = index + 1;
    }
  }
  pthread_mutex_unlock(&h->lock);
  return obj;
}

void *ferry_handle_remove(struct ferry_handles *h, uint64_t value) { return take(h, value, 1); }
void *ferry_handle_take(struct ferry_handles *h, uint64_t value) { return take(h, value, 0); }

void ferry_handle_release(struct ferry_handles *h, uint64_t value) {
  uint32_t index = (uint32_t)(value & 0xffffffu);
  pthread_mutex_lock(&h->lock);
  if (index < h->n && !h->slots[index].obj) {
    h->slots[index].next_free = h->free_head;
    h->free_head = index + 1;
  }
  pthread_mutex_unlock(&h->lock);
}

unsigned ferry_handles_remove_if(struct ferry_handles *h, int (*pred)(void *obj, void *ctx),
                                 void *ctx, void (*release)(void *obj)) {
  unsigned removed = 0;
  pthread_mutex_lock(&h->lock);
  for (uint32_t i = 0; i < h->n; i++) {
    struct ferry_handle_slot *s = &h->slots[i];
    if (!s->obj || !pred(s->obj, ctx)) continue;
    if (release) release(s->obj);
    s->obj = NULL;
    s->gen++;
    if ((s->gen & 0xffffffu) == 0) s->gen = 1;
    s->next_free = h->free_head;
    h->free_head = i + 1;
    removed++;
  }
  pthread_mutex_unlock(&h->lock);
  return removed;
}
