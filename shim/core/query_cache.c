/*
 * Answers of calls that only read what a device and its functions are
 * (function attributes, occupancy), kept per vGPU. cuBLAS asks several of
 * them before every GEMM (cuOccupancyMaxActiveClusters three times,
 * cuFuncGetAttribute, the occupancy calculator): a round trip each, for
 * the same answer. An answer is kept until a call that could change it
 * (function attributes, cache and limit settings, module loads and unloads,
 * a reset) or a migration, which may bring a different GPU. Which calls are
 * answered here (CACHED) and which drop the answers (INVALIDATES) is said
 * in calls.def.
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

void ferry_query_cache_bump(struct ferry_vgpu *v) {
  pthread_once(&tables_once, tables_init);
  struct qc_table *t = &tables[v->index];
  pthread_mutex_lock(&t->lock);
  t->epoch++;
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

