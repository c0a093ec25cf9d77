/*
 * Turns a fault inside simulated device work (a twin touching unmapped
 * memory, a copy from a bad host pointer) into an error code, the way a
 * GPU reports an illegal address instead of killing the process. A
 * temporary SIGSEGV/SIGBUS handler jumps back to the guarded call.
 */
#include "sim/sim.h"

#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local sigjmp_buf *guard_env;

static void on_fault(int sig, siginfo_t *si, void *uc) {
  (void)si, (void)uc;
  if (guard_env)
    siglongjmp(*guard_env, 1);
  /* not ours: fall back to the default action, the fault repeats and kills */
  signal(sig, SIG_DFL);
}

void sim_trap(void) {
  if (guard_env) siglongjmp(*guard_env, SIM_TRAPPED);
  abort(); /* only guarded device work traps */
}

int sim_guarded(void (*fn)(void *), void *arg) {
  struct sigaction sa, old_segv, old_bus;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
  sigjmp_buf env;
  volatile int rc = 0;
  int jumped = sigsetjmp(env, 1);
  if (jumped == 0) {
    guard_env = &env;
    fn(arg);
  } else {
    rc = jumped == SIM_TRAPPED ? SIM_TRAPPED : -1;
  }
  guard_env = NULL;
  sigaction(SIGSEGV, &old_segv, NULL);
  sigaction(SIGBUS, &old_bus, NULL);
  return rc;
}
