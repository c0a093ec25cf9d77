/*
 * The crew (crew.h): one mutex and two condition variables, a generation
 * count per job so that a thread runs each job once.
 */
#include "common/crew.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

struct ferry_crew {
  unsigned n, started;
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  uint64_t gen;       /* the job's number */
  unsigned left;      /* threads still running it */
  int quit;
  int (*fn)(void *ctx, unsigned i);
  void *ctx;
  int rc, rc_errno;   /* the job's first failure */
  struct member {
    struct ferry_crew *c;
    unsigned i;
    pthread_t t;
  } m[];
};

static void *member_main(void *arg) {
  struct member *m = arg;
  struct ferry_crew *c = m->c;
  uint64_t seen = 0;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (c->gen == seen && !c->quit) pthread_cond_wait(&c->go, &c->mu);
    if (c->quit) break;
    seen = c->gen;
    pthread_mutex_unlock(&c->mu);
    errno = 0;
    int rc = c->fn(c->ctx, m->i);
    int e = errno;
    pthread_mutex_lock(&c->mu);
    if (rc && !c->rc) {
      c->rc = rc;
      c->rc_errno = e;
    }
    if (--c->left == 0) pthread_cond_signal(&c->done);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

struct ferry_crew *ferry_crew_start(unsigned n) {
  struct ferry_crew *c = calloc(1, sizeof *c + n * sizeof c->m[0]);
  if (!c) return NULL;
  c->n = n;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->go, NULL);
  pthread_cond_init(&c->done, NULL);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  for (unsigned i = 0; i < n; i++) {
    c->m[i] = (struct member){c, i, 0};
    if (pthread_create(&c->m[i].t, NULL, member_main, &c->m[i])) break;
    c->started++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (c->started < n) {
    ferry_crew_stop(c);
    return NULL;
  }
  return c;
}

int ferry_crew_run(struct ferry_crew *c, int (*fn)(void *ctx, unsigned i), void *ctx) {
  pthread_mutex_lock(&c->mu);
  c->fn = fn;
  c->ctx = ctx;
  c->rc = c->rc_errno = 0;
  c->left = c->n;
  c->gen++;
  pthread_cond_broadcast(&c->go);
  while (c->left) pthread_cond_wait(&c->done, &c->mu);
  int rc = c->rc;
  errno = c->rc_errno;
  pthread_mutex_unlock(&c->mu);
  return rc;
}

void ferry_crew_stop(struct ferry_crew *c) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  c->quit = 1;
  pthread_cond_broadcast(&c->go);
  pthread_mutex_unlock(&c->mu);
  for (unsigned i = 0; i < c->started; i++) pthread_join(c->m[i].t, NULL);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->go);
  pthread_cond_destroy(&c->done);
  free(c);
}

void ferry_crew_forget(struct ferry_crew *c) { free(c); }
