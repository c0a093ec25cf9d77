/*
 * The replay log of one vGPU: the calls flagged RECORD in calls.def, kept
 * while the vGPU runs remotely so that a migration can rebuild its state on
 * a local GPU. Each record has a key (an address, a handle, a setting), so
 * a destroy cancels its create and a new setting replaces the old one: the
 * log holds what is live, not the history, and stays small in programs that
 * allocate and free in a loop.
 */
#ifndef FERRY_RECORDER_H
#define FERRY_RECORDER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/wire.h"

/* the largest ARGS struct of a RECORD call (checked at compile time) */
#define FERRY_RECORD_ARGS_BYTES 128

struct ferry_record {
  uint64_t key_hi, key_lo; /* what this record creates or sets (0, 0: no key) */
  uint32_t call;
  uint32_t live;
  const void *bulk; /* module_load: the program's fat binary (lives with the program) */
  uint64_t bulk_len;
  uint64_t object;  /* tex_create/surf_create: the object value the program holds;
                       module_function: the index it holds */
  char *extra;      /* the args' str/blob bytes, then module_load's var_info */
  const void *var_info; /* module_load: variable addresses on the source GPU */
  uint32_t var_info_len;
  _Alignas(8) unsigned char args[FERRY_RECORD_ARGS_BYTES];
};

struct ferry_recorder {
  pthread_mutex_t lock;
  struct ferry_record *recs; /* in call order */
  size_t n, cap, dead;
  size_t *slots; /* open-addressing index by key: record index + 1, 0 empty */
  size_t nslots;
  uint64_t total; /* records ever appended */
  /* after a mark (the log replayed ahead on a migration's target): every
     change since, in call order, so that the pause replays only those */
  struct ferry_record *journal;
  size_t njournal, journal_cap;
  int journaling;
  int journal_broken; /* a reset, too many changes, or out of memory */
};

void ferry_recorder_init(struct ferry_recorder *r);
void ferry_recorder_destroy(struct ferry_recorder *r);

/* logs one successful call; rets as the call returned them. 0, or -1 when
   out of memory (the log is then incomplete: migration must refuse) */
int ferry_record(struct ferry_recorder *r, unsigned call, const void *args, const void *rets,
                 const void *bulk, uint64_t bulk_len);

/* live records, in call order; fn returns non-zero to stop (that value is
   returned). The caller keeps new records out (the migration gate). */
int ferry_recorder_foreach(struct ferry_recorder *r,
                           int (*fn)(void *ctx, const struct ferry_record *rec), void *ctx);
size_t ferry_recorder_live(struct ferry_recorder *r);
/* a module now lives on another GPU: its load record takes the variable
   addresses it has there (same length as before); 0, or -1 when unknown */
/* runs fn over the live records like foreach and, in the same hold of the
   lock, starts the journal: what is recorded from then on is kept in call
   order (creates, settings and destroys alike) until journal_stop */
int ferry_recorder_mark(struct ferry_recorder *r,
                        int (*fn)(void *ctx, const struct ferry_record *rec), void *ctx);
/* the changes since the mark, in call order; -1 without calling fn when
   the journal is broken (the caller must replay the whole log on a fresh
   target), else fn's first non-zero value or 0 */
int ferry_recorder_journal_foreach(struct ferry_recorder *r,
                                   int (*fn)(void *ctx, const struct ferry_record *rec), void *ctx);
int ferry_recorder_journal_broken(struct ferry_recorder *r);
void ferry_recorder_journal_stop(struct ferry_recorder *r);
/* the journal is broken past this many changes */
#define FERRY_JOURNAL_MAX 65536

int ferry_recorder_rebind(struct ferry_recorder *r, uint32_t module, ferry_blob var_info);


#endif
