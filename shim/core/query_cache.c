/*
 * Answers of calls that only read what a device and its functions are
 * (function attributes, occupancy), kept per vGPU. cuBLAS asks several of
 * them before every GEMM (cuOccupancyMaxActiveClusters three times,
 * cuFuncGetAttribute, the occupancy calculator), cuDNN asks the stack
 * limit before its kernels: a round trip each, for the same answer. An
 * answer is kept until a call that could change it (function attributes,
 * cache and limit settings, a reset), a migration, which may bring a
 * different GPU, or the first launch of a kernel since then: CUDA grows the
 * stack limit for a kernel that needs more (cuCtxSetLimit). Module loads
 * change no answer: module and function ids are never reused. Which calls
 * are answered here (CACHED) and which drop the answers (INVALIDATES) is
 * said in calls.def.
 */
#include <stdlib.h>
#include <string.h>

#include "shim/core/query_cache.h"
#include "shim/core/vgpu.h"

#define QC_SLOTS 64 /* per vGPU; a direct-mapped table */
#define QC_MAX_KEY 256
#define QC_MAX_RETS 512

struct qc_entry {
  uint64_t epoch; /* 0: empty */
  uint32_t call, key_len, rets_len;
  unsigned char key[QC_MAX_KEY], rets[QC_MAX_RETS];
};

static struct qc_table {
  pthread_mutex_t lock;
  uint64_t epoch; /* bumped when an answer may have changed */
  struct ferry_decoder decoder; /* decodes hits, under lock */
  struct qc_entry slots[QC_SLOTS];
  /* kernels (and executable graphs) launched since the last change, on
     the GPU of generation launched_gen: a set of key + 1 (0: empty) */
  uint64_t *launched;
  size_t nlaunched, launched_cap; /* a power of two */
  uint64_t launched_gen;
} tables[FERRY_MAX_VGPUS];
static int disabled; /* FERRY_NO_QUERY_CACHE=1: every query goes to the GPU */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void) {
  for (int i = 0; i < FERRY_MAX_VGPUS; i++) {
    pthread_mutex_init(&tables[i].lock, NULL);
    ferry_decoder_init(&tables[i].decoder);
    tables[i].epoch = 1;
  }
  const char *off = getenv("FERRY_NO_QUERY_CACHE");
  disabled = off && *off && strcmp(off, "0");
}

/* the table's epoch joined with the vGPU's migration count */
static uint64_t epoch_of(struct ferry_vgpu *v, struct qc_table *t) {
  return t->epoch << 16 ^ __atomic_load_n(&v->generation, __ATOMIC_ACQUIRE);
}

static size_t slot_of(unsigned call, const unsigned char *key, size_t len) {
  uint64_t h = 1469598103934665603ull ^ call;
  for (size_t i = 0; i < len; i++) h = (h ^ key[i]) * 1099511628211ull;
  return (size_t)(h % QC_SLOTS);
}

/* the decoded answer points into this thread's copy of the bytes, good
   until its next hit */
static __thread unsigned char hit_body[QC_MAX_RETS];

static void launched_clear(struct qc_table *t) {
  if (t->launched) memset(t->launched, 0, t->launched_cap * sizeof *t->launched);
  t->nlaunched = 0;
}

void ferry_query_cache_bump(struct ferry_vgpu *v) {
  pthread_once(&tables_once, tables_init);
  struct qc_table *t = &tables[v->index];
  pthread_mutex_lock(&t->lock);
  t->epoch++;
  launched_clear(t); /* a kernel launched before may grow a limit set now */
  pthread_mutex_unlock(&t->lock);
}

/* open addressing, linear probing; 1 when key + 1 was there */
static int launched_add(struct qc_table *t, uint64_t k) {
  if (2 * (t->nlaunched + 1) > t->launched_cap) {
    size_t cap = t->launched_cap ? 2 * t->launched_cap : 256;
    uint64_t *grown = calloc(cap, sizeof *grown);
    if (!grown) return 0; /* not kept: the next launch bumps again */
    for (size_t i = 0; i < t->launched_cap; i++) {
      if (!t->launched[i]) continue;
      size_t j = (size_t)(t->launched[i] * 0x9e3779b97f4a7c15ull >> 32) & (cap - 1);
      while (grown[j]) j = (j + 1) & (cap - 1);
      grown[j] = t->launched[i];
    }
    free(t->launched);
    t->launched = grown;
    t->launched_cap = cap;
  }
  size_t j = (size_t)(k * 0x9e3779b97f4a7c15ull >> 32) & (t->launched_cap - 1);
  for (; t->launched[j]; j = (j + 1) & (t->launched_cap - 1))
    if (t->launched[j] == k) return 1;
  t->launched[j] = k;
  t->nlaunched++;
  return 0;
}

void ferry_query_cache_launch(struct ferry_vgpu *v, uint64_t key) {
  pthread_once(&tables_once, tables_init);
  if (disabled) return;
  struct qc_table *t = &tables[v->index];
  uint64_t gen = __atomic_load_n(&v->generation, __ATOMIC_ACQUIRE);
  pthread_mutex_lock(&t->lock);
  if (t->launched_gen != gen) {
    launched_clear(t);
    t->launched_gen = gen;
  }
  if (!launched_add(t, key + 1)) t->epoch++;
  pthread_mutex_unlock(&t->lock);
}

int ferry_query_cache_get(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                          struct ferry_buf *key, uint64_t *epoch) {
  pthread_once(&tables_once, tables_init);
  if (disabled || !rets) return -1;
  key->len = 0;
  if (ferry_encode_args(call, args, key) || key->len > QC_MAX_KEY) return -1;
  struct qc_table *t = &tables[v->index];
  pthread_mutex_lock(&t->lock);
  *epoch = epoch_of(v, t);
  struct qc_entry *e = &t->slots[slot_of(call, (unsigned char *)key->data, key->len)];
  int hit = e->epoch == *epoch && e->call == call && e->key_len == key->len &&
            !memcmp(e->key, key->data, key->len);
  if (hit) {
    memcpy(hit_body, e->rets, e->rets_len);
    hit = !ferry_decode_rets(&t->decoder, call, hit_body, e->rets_len, rets);
  }
  pthread_mutex_unlock(&t->lock);
  return hit ? 0 : -1;
}

void ferry_query_cache_put(struct ferry_vgpu *v, unsigned call, const void *rets,
                           const struct ferry_buf *key, uint64_t epoch_before) {
  struct ferry_buf body = {0};
  if (ferry_encode_rets(call, rets, &body) || body.len > QC_MAX_RETS) {
    ferry_buf_free(&body);
    return;
  }
  struct qc_table *t = &tables[v->index];
  pthread_mutex_lock(&t->lock);
  /* an answer that raced with a change (or a migration) is not kept */
  if (epoch_of(v, t) == epoch_before) {
    struct qc_entry *e = &t->slots[slot_of(call, (unsigned char *)key->data, key->len)];
    e->epoch = epoch_before;
    e->call = call;
    e->key_len = (uint32_t)key->len;
    e->rets_len = (uint32_t)body.len;
    memcpy(e->key, key->data, key->len);
    memcpy(e->rets, body.data, body.len);
  }
  pthread_mutex_unlock(&t->lock);
  ferry_buf_free(&body);
}

