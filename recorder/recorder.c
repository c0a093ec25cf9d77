/*
 * The replay log (see recorder.h). How each call is keyed comes from its
 * FERRY_RECORD line in calls.def; what dies with a destroyed object is a
 * rule per kind here. Recording is on the path of every state-building
 * call, so it is a struct copy and a hash probe under one lock; str/blob
 * bytes are copied only for the few calls that have them.
 */
#include "recorder/recorder.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/clone.h"

/* key kinds (key_hi's top byte): the kind column of calls.def's FERRY_RECORD lines */
enum { K_NONE, K_MAP, K_MODULE, K_STREAM, K_EVENT, K_ARRAY, K_TEX, K_SURF, K_FLAGS, K_LIMIT,
       K_CACHE, K_FUNC_ATTR, K_FUNC_CACHE, K_EVENT_RECORD, K_MODULE_FUNC,
       K_CTX_OBJECT, K_GRAPH_EXEC };
#define KEY(kind, owner) ((uint64_t)(kind) << 56 | (uint64_t)(owner))

/* what a call does to the log (the action column); ONCE: only the first
   record of a key stays, where a later one must not move it */
enum action { PLAIN, CREATE, DESTROY, SET, RESET, ONCE, SKIP };

/* a call's place in the log, from its FERRY_RECORD line */
struct spec {
  enum action act;
  uint64_t hi, lo; /* the key: KEY(kind, owner), id */
  uint64_t object;
};

/* A RECORD call's args fit a record, and it has exactly one FERRY_RECORD
   line: the lines name RECORD calls only, none twice (its spec_ function
   would be defined twice), and there are as many as RECORD calls. */
#define FERRY_CALL(id, name, flags, args, rets)                                                \
  _Static_assert(!((flags) & RECORD) ||                                                        \
                     sizeof(struct ferry_##name##_args) <= FERRY_RECORD_ARGS_BYTES,            \
                 #name "'s args do not fit a record");                                         \
  enum { flags_##name = (flags) };
#include "protocol/calls.def"
#undef FERRY_CALL
enum {
  record_calls = 0
#define FERRY_CALL(id, name, flags, args, rets) + !!((flags) & RECORD)
#include "protocol/calls.def"
#undef FERRY_CALL
  , record_specs = 0
#define FERRY_CALL(...)
#define FERRY_RECORD(...) + 1
#include "protocol/calls.def"
#undef FERRY_CALL
};
_Static_assert(record_calls == record_specs, "a RECORD call has no FERRY_RECORD line in calls.def");

#define FERRY_CALL(...)
#define FERRY_RECORD(name, action, kind, owner, id, object)                                    \
  _Static_assert(flags_##name & RECORD, #name " has a FERRY_RECORD line but no RECORD flag");  \
  static struct spec spec_##name(const void *args, const void *rets) {                         \
    static const struct ferry_##name##_rets none;                                              \
    const struct ferry_##name##_args *a = args;                                                \
    const struct ferry_##name##_rets *r = rets ? rets : &none;                                 \
    (void)a, (void)r;                                                                          \
    return (struct spec){(action), KEY(K_##kind, (owner)), (id), (object)};                    \
  }
#include "protocol/calls.def"
#undef FERRY_CALL

static struct spec (*const specs[FERRY_CALL_LIMIT])(const void *args, const void *rets) = {
#define FERRY_CALL(...)
#define FERRY_RECORD(name, ...) [FERRY_CALL_##name] = spec_##name,
#include "protocol/calls.def"
#undef FERRY_CALL
};

static size_t hash_key(uint64_t hi, uint64_t lo, size_t n) {
  uint64_t x = hi * 0x9e3779b97f4a7c15ull ^ lo;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return (size_t)x & (n - 1);
}

/* the slot holding key, or the empty slot where it would go */
static size_t *find_slot(struct ferry_recorder *r, uint64_t hi, uint64_t lo) {
  for (size_t i = hash_key(hi, lo, r->nslots);; i = (i + 1) & (r->nslots - 1)) {
    size_t s = r->slots[i];
    if (!s) return &r->slots[i];
    const struct ferry_record *rec = &r->recs[s - 1];
    if (rec->key_hi == hi && rec->key_lo == lo) return &r->slots[i];
  }
}

/* rebuilds the index over live keyed records (after compaction or growth) */
static int reindex(struct ferry_recorder *r, size_t want) {
  size_t n = 64;
  while (n < want * 2) n *= 2;
  size_t *slots = calloc(n, sizeof *slots);
  if (!slots) return -1;
  free(r->slots);
  r->slots = slots;
  r->nslots = n;
  for (size_t i = 0; i < r->n; i++) {
    const struct ferry_record *rec = &r->recs[i];
    if (rec->live && (rec->key_hi || rec->key_lo)) *find_slot(r, rec->key_hi, rec->key_lo) = i + 1;
  }
  return 0;
}

static void drop(struct ferry_record *rec) {
  free(rec->extra);
  rec->extra = NULL;
  rec->live = 0;
}

/* removes dead records once they are the majority, keeping call order */
static int compact(struct ferry_recorder *r) {
  size_t w = 0;
  for (size_t i = 0; i < r->n; i++)
    if (r->recs[i].live) r->recs[w++] = r->recs[i];
  r->n = w;
  r->dead = 0;
  return reindex(r, r->n);
}

/* deletion from linear probing: re-seat the records after the hole */
static void unindex(struct ferry_recorder *r, size_t *slot) {
  size_t i = (size_t)(slot - r->slots);
  r->slots[i] = 0;
  for (size_t j = (i + 1) & (r->nslots - 1); r->slots[j]; j = (j + 1) & (r->nslots - 1)) {
    size_t s = r->slots[j];
    r->slots[j] = 0;
    const struct ferry_record *rec = &r->recs[s - 1];
    *find_slot(r, rec->key_hi, rec->key_lo) = s;
  }
}

static void kill_key(struct ferry_recorder *r, uint64_t hi, uint64_t lo) {
  if (!r->nslots) return;
  size_t *slot = find_slot(r, hi, lo);
  if (!*slot) return;
  drop(&r->recs[*slot - 1]);
  r->dead++;
  unindex(r, slot);
}

/* a module's kernels go with it: their resolutions and attribute records die too */
static void kill_module_funcs(struct ferry_recorder *r, uint64_t module) {
  for (size_t i = 0; i < r->n; i++) {
    struct ferry_record *rec = &r->recs[i];
    unsigned kind = (unsigned)(rec->key_hi >> 56);
    uint64_t func = rec->key_hi & ((1ull << 56) - 1);
    if (rec->live && (kind == K_FUNC_ATTR || kind == K_FUNC_CACHE || kind == K_MODULE_FUNC) &&
        func >> 16 == module)
      kill_key(r, rec->key_hi, rec->key_lo);
  }
}

/* the driver's objects of a destroyed stream are not made again */
static void kill_stream_objects(struct ferry_recorder *r, uint64_t stream) {
  for (size_t i = 0; i < r->n; i++) {
    struct ferry_record *rec = &r->recs[i];
    if (rec->live && rec->key_hi == KEY(K_CTX_OBJECT, stream)) kill_key(r, rec->key_hi, rec->key_lo);
  }
}

/* what dies with a destroyed object besides its own record */
static void kill_owned(struct ferry_recorder *r, uint64_t hi, uint64_t id) {
  switch (hi >> 56) {
  case K_MODULE: kill_module_funcs(r, id); break;
  case K_STREAM: kill_stream_objects(r, id); break;
  case K_EVENT: kill_key(r, KEY(K_EVENT_RECORD, 0), id); break; /* its latest record */
  }
}

static void journal_clear(struct ferry_recorder *r) {
  for (size_t i = 0; i < r->njournal; i++) drop(&r->journal[i]);
  r->njournal = 0;
}

void ferry_recorder_init(struct ferry_recorder *r) {
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->lock, NULL);
}

static void clear(struct ferry_recorder *r) {
  for (size_t i = 0; i < r->n; i++) drop(&r->recs[i]);
  r->n = r->dead = 0;
  if (r->slots) memset(r->slots, 0, r->nslots * sizeof *r->slots);
}

void ferry_recorder_destroy(struct ferry_recorder *r) {
  clear(r);
  journal_clear(r);
  free(r->journal);
  free(r->recs);
  free(r->slots);
  pthread_mutex_destroy(&r->lock);
  memset(r, 0, sizeof *r);
}

/* a record's copy of one call: args, their str/blob bytes, module_load's
   variable addresses, the object or index the program holds; keyed or not
   (a journal entry) */
static int fill(struct ferry_record *rec, unsigned call, const void *args, const void *rets,
                const void *bulk, uint64_t bulk_len, const struct spec *s, int keyed) {
  rec->key_hi = keyed ? s->hi : 0;
  rec->key_lo = keyed ? s->lo : 0;
  rec->call = call;
  rec->bulk = bulk;
  rec->bulk_len = bulk_len;
  rec->object = s->object;
  rec->extra = NULL;
  rec->var_info = NULL;
  rec->var_info_len = 0;
  size_t extra = ferry_args_extra(call, args);
  ferry_blob vars = {NULL, 0};
  if (call == FERRY_CALL_module_load && rets) vars = ((const struct ferry_module_load_rets *)rets)->var_info;
  if (extra + vars.len) {
    if (!(rec->extra = malloc(extra + vars.len))) return -1;
    if (vars.len) {
      memcpy(rec->extra + extra, vars.ptr, vars.len);
      rec->var_info = rec->extra + extra;
      rec->var_info_len = vars.len;
    }
  }
  ferry_args_clone(call, args, rec->args, rec->extra);
  rec->live = 1;
  return 0;
}

static int append(struct ferry_recorder *r, unsigned call, const void *args, const void *rets,
                  const void *bulk, uint64_t bulk_len, const struct spec *s) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 256;
    struct ferry_record *p = realloc(r->recs, cap * sizeof *p);
    if (!p) return -1;
    r->recs = p;
    r->cap = cap;
  }
  if ((r->n - r->dead + 1) * 2 > r->nslots && reindex(r, r->n - r->dead + 1)) return -1;
  if (fill(&r->recs[r->n], call, args, rets, bulk, bulk_len, s, 1)) return -1;
  r->n++;
  r->total++;
  if (s->hi || s->lo) *find_slot(r, s->hi, s->lo) = r->n;
  return 0;
}

/* one change after the mark; a failure only breaks the journal */
static void journal(struct ferry_recorder *r, unsigned call, const void *args, const void *rets,
                    const void *bulk, uint64_t bulk_len, const struct spec *s) {
  if (!r->journaling || r->journal_broken) return;
  if (r->njournal == FERRY_JOURNAL_MAX) goto broken;
  if (r->njournal == r->journal_cap) {
    size_t cap = r->journal_cap ? r->journal_cap * 2 : 64;
    struct ferry_record *p = realloc(r->journal, cap * sizeof *p);
    if (!p) goto broken;
    r->journal = p;
    r->journal_cap = cap;
  }
  if (fill(&r->journal[r->njournal], call, args, rets, bulk, bulk_len, s, 0)) goto broken;
  r->njournal++;
  return;
broken:
  r->journal_broken = 1;
  journal_clear(r);
}

int ferry_record(struct ferry_recorder *r, unsigned call, const void *args, const void *rets,
                 const void *bulk, uint64_t bulk_len) {
  if (!ferry_call_valid(call) || !(ferry_calls[call].flags & RECORD)) return 0;
  struct spec s = specs[call](args, rets);
  int rc = 0;
  pthread_mutex_lock(&r->lock);
  switch (s.act) {
  case SKIP: break;
  case RESET: /* a reset device has none of the earlier state */
    clear(r);
    if (r->journaling) r->journal_broken = 1, journal_clear(r);
    break;
  case DESTROY:
    journal(r, call, args, rets, bulk, bulk_len, &s);
    kill_key(r, s.hi, s.lo);
    kill_owned(r, s.hi, s.lo);
    break;
  case ONCE:
    if (r->nslots && *find_slot(r, s.hi, s.lo)) break; /* the first record stands */
    rc = append(r, call, args, rets, bulk, bulk_len, &s);
    if (!rc) journal(r, call, args, rets, bulk, bulk_len, &s);
    break;
  case CREATE:
  case SET: kill_key(r, s.hi, s.lo); /* fall through */
  case PLAIN:
    rc = append(r, call, args, rets, bulk, bulk_len, &s);
    if (!rc) journal(r, call, args, rets, bulk, bulk_len, &s);
    break;
  }
  if (!rc && r->dead > 64 && r->dead * 2 > r->n) rc = compact(r);
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int ferry_recorder_foreach(struct ferry_recorder *r,
                           int (*fn)(void *ctx, const struct ferry_record *rec), void *ctx) {
  pthread_mutex_lock(&r->lock);
  int rc = 0;
  for (size_t i = 0; i < r->n && !rc; i++)
    if (r->recs[i].live) rc = fn(ctx, &r->recs[i]);
  pthread_mutex_unlock(&r->lock);
  return rc;
}

size_t ferry_recorder_live(struct ferry_recorder *r) {
  pthread_mutex_lock(&r->lock);
  size_t n = r->n - r->dead;
  pthread_mutex_unlock(&r->lock);
  return n;
}

int ferry_recorder_mark(struct ferry_recorder *r,
                        int (*fn)(void *ctx, const struct ferry_record *rec), void *ctx) {
  pthread_mutex_lock(&r->lock);
  journal_clear(r);
  r->journal_broken = 0;
  int rc = 0;
  for (size_t i = 0; i < r->n && !rc; i++)
    if (r->recs[i].live) rc = fn(ctx, &r->recs[i]);
  r->journaling = !rc;
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int ferry_recorder_journal_foreach(struct ferry_recorder *r,
                                   int (*fn)(void *ctx, const struct ferry_record *rec), void *ctx) {
  pthread_mutex_lock(&r->lock);
  int rc = r->journal_broken || !r->journaling ? -1 : 0;
  for (size_t i = 0; i < r->njournal && !rc; i++) rc = fn(ctx, &r->journal[i]);
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int ferry_recorder_journal_broken(struct ferry_recorder *r) {
  pthread_mutex_lock(&r->lock);
  int broken = r->journal_broken || !r->journaling;
  pthread_mutex_unlock(&r->lock);
  return broken;
}

void ferry_recorder_journal_stop(struct ferry_recorder *r) {
  pthread_mutex_lock(&r->lock);
  journal_clear(r);
  r->journaling = r->journal_broken = 0;
  pthread_mutex_unlock(&r->lock);
}

int ferry_recorder_rebind(struct ferry_recorder *r, uint32_t module, ferry_blob var_info) {
  int rc = -1;
  pthread_mutex_lock(&r->lock);
  for (size_t i = 0; i < r->n; i++) {
    struct ferry_record *rec = &r->recs[i];
    if (!rec->live || rec->call != FERRY_CALL_module_load ||
        ((const struct ferry_module_load_args *)(const void *)rec->args)->module != module)
      continue;
    if (rec->var_info_len == var_info.len) {
      if (var_info.len) memcpy((void *)rec->var_info, var_info.ptr, var_info.len);
      rc = 0;
    }
    break;
  }
  pthread_mutex_unlock(&r->lock);
  return rc;
}
