/*
 * ferry's own threads (the flusher, the control socket): detached, and with
 * every signal blocked, so the program's signals always reach its own
 * threads, as they would without ferry.
 */
#include <pthread.h>
#include <signal.h>

#include "shim/core/thread.h"

int ferry_start_thread(void *(*fn)(void *), void *arg) {
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&t, &attr, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  return rc;
}
