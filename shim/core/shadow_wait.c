/*
 * A wait that may never end. When the host changed pinned memory while
 * kernels that may read it still run (shadow.c finds it at the wait), a
 * kernel that polls that memory for the host's change (a latch, a
 * semaphore) never sees it on a remote GPU: the change goes out after the
 * wait, and the wait lasts as long as the kernel. Instead of blocking, the
 * wait asks whether the work is done until it is, or until
 * FERRY_MAPPED_WAIT_S passes (default 120 s; 0: no limit): then the call
 * fails with cudaErrorLaunchTimeout, said in one line, and the program
 * ends instead of hanging. XLA's timer kernels give up on their own after
 * 100 ms and pass.
 */
#include "shim/core/shadow.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/setting.h"
#include "shim/core/link.h"

#define DEFAULT_LIMIT_MS 120000

static int limit_ms(void) {
  static int ms = -1;
  if (__atomic_load_n(&ms, __ATOMIC_ACQUIRE) < 0) {
    int v = DEFAULT_LIMIT_MS;
    if (!ferry_env_ms("FERRY_MAPPED_WAIT_S", 86400, 1, &v, "seconds from 0 (no limit) to 86400",
                      "120"))
      v = DEFAULT_LIMIT_MS;
    __atomic_store_n(&ms, v, __ATOMIC_RELEASE);
  }
  return ms;
}

/* FERRY_FAULT=mapped_wait (tests): the work never reports done */
static int never_done(void) {
  const char *f = getenv("FERRY_FAULT");
  return f && !strcmp(f, "mapped_wait");
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* cudaErrorNotReady while the event's or stream's work runs */
static int query(struct ferry_vgpu *v, int event, uint32_t id) {
  if (event) {
    struct ferry_event_query_args a = {id};
    return ferry_source_call(v, FERRY_CALL_event_query, &a, NULL, NULL);
  }
  struct ferry_stream_query_args a = {id};
  return ferry_source_call(v, FERRY_CALL_stream_query, &a, NULL, NULL);
}

int ferry_shadow_wait_bounded(struct ferry_vgpu *v, int event, const uint32_t *ids, int n,
                              uint64_t addr) {
  int limit = limit_ms();
  if (!limit) return 0;
  double start = now_ms();
  long sleep_ns = 100000;
  for (int i = 0; i < n;) {
    int rc = never_done() ? cudaErrorNotReady : query(v, event, ids[i]);
    if (rc != cudaErrorNotReady) { /* done, or an error the wait itself will report */
      i++;
      continue;
    }
    if (now_ms() - start >= limit) {
      ferry_log("device %d: waited %g s for kernels that may be polling pinned memory at %#llx, "
                "which the host changed while they ran and a remote GPU cannot see "
                "(docs/mapped-memory.md); returning cudaErrorLaunchTimeout (FERRY_MAPPED_WAIT_S "
                "sets the limit, 0 none)",
                v->index, limit / 1e3, (unsigned long long)addr);
      return cudaErrorLaunchTimeout;
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < 5000000) sleep_ns *= 2;
  }
  return 0;
}
