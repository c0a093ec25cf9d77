/*
 * segv: preloaded into a program that crashes without a trace (a Python
 * framework on a GPU machine without gdb), prints the native stack with
 * each frame's library and offset, then dies as it would have.
 *   LD_PRELOAD=libsegv.so prog
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_fault(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  void *frames[64];
  int n = backtrace(frames, 64);
  char line[512];
  int len = snprintf(line, sizeof line, "segv: signal %d at address %p\n", sig, si->si_addr);
  write(2, line, (size_t)len);
  for (int i = 0; i < n; i++) {
    Dl_info di;
    if (dladdr(frames[i], &di) && di.dli_fname)
      len = snprintf(line, sizeof line, "segv: #%d %s+0x%lx (%s)\n", i, di.dli_fname,
                     (unsigned long)((char *)frames[i] - (char *)di.dli_fbase),
                     di.dli_sname ? di.dli_sname : "?");
    else
      len = snprintf(line, sizeof line, "segv: #%d %p\n", i, frames[i]);
    write(2, line, (size_t)len);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void segv_init(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
}
