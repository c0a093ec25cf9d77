/*
 * Starting a ferry-mhelper: the process that serves one vGPU on one local
 * GPU once a migration moves it there, or from the first call for a vGPU
 * that starts there (FERRY_DEVICES=local:N) and may later move to a server
 * (the mrCUDA paper's "one process, one GPU"). It is ferry's executor
 * behind the shared-memory transport: the
 * program hands it a channel, its shared host arena and the GPU, says hello
 * as it would to a server, and from then on talks to it like to one.
 *
 * The helper is spawned without fork() (no pthread_atfork handler of the
 * program runs) and leaves its first process at once, so that it is never
 * the program's child: a program's own wait() cannot reap it. It notices
 * the program's death by itself, through the channel.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "shim/core/host.h"
#include "shim/core/link.h"
#include "transport/reader.h"
#include "transport/shm.h"

extern char **environ;

/* FERRY_MHELPER_BIN, else next to this library: ../bin (build tree and
   installed tree) or the same directory */
static int find_binary(char *out, size_t n, char *err, size_t errlen) {
  const char *env = getenv("FERRY_MHELPER_BIN");
  if (env && *env) {
    if (access(env, X_OK) == 0) {
      snprintf(out, n, "%s", env);
      return 0;
    }
    snprintf(err, errlen, "FERRY_MHELPER_BIN=%s: %s", env, strerror(errno));
    return -1;
  }
  Dl_info info;
  char dir[PATH_MAX] = ".";
  if (dladdr((void *)find_binary, &info) && info.dli_fname) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", info.dli_fname);
    snprintf(dir, sizeof dir, "%s", dirname(tmp));
  }
  const char *tries[] = {"%s/../bin/ferry-mhelper", "%s/../../bin/ferry-mhelper", "%s/ferry-mhelper"};
  for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
    snprintf(out, n, tries[i], dir);
    if (access(out, X_OK) == 0) return 0;
  }
  snprintf(err, errlen, "cannot find ferry-mhelper next to %s (set FERRY_MHELPER_BIN)", dir);
  return -1;
}

/* a copy of fd at 100 or above, so the dup2s into 3, 4 and 5 cannot clash */
static int high_fd(int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, 100); }

static pid_t spawn(const char *bin, const struct ferry_shm_peer *peer, int host_fd, int gpu,
                   int vgpu, char *err, size_t errlen) {
  int fds[3] = {high_fd(peer->mem_fd), high_fd(peer->sock_fd), high_fd(host_fd)};
  char a_gpu[16], a_vgpu[16], a_base[32], a_size[32];
  snprintf(a_gpu, sizeof a_gpu, "%d", gpu);
  snprintf(a_vgpu, sizeof a_vgpu, "%d", vgpu);
  snprintf(a_base, sizeof a_base, "0x%llx", (unsigned long long)FERRY_HOST_ARENA_BASE);
  snprintf(a_size, sizeof a_size, "0x%llx", (unsigned long long)FERRY_HOST_ARENA_SIZE);
  const char *backend = getenv("FERRY_LOCAL_BACKEND");
  const char *twins = getenv("FERRY_SIM_KERNELS");
  char *argv[20];
  int k = 0;
  argv[k++] = (char *)"ferry-mhelper";
  argv[k++] = (char *)"--channel";
  argv[k++] = (char *)"3,4";
  argv[k++] = (char *)"--host-memory";
  argv[k++] = (char *)"5";
  argv[k++] = a_base;
  argv[k++] = a_size;
  argv[k++] = (char *)"--gpu";
  argv[k++] = a_gpu;
  argv[k++] = (char *)"--vgpu";
  argv[k++] = a_vgpu;
  argv[k++] = (char *)"--backend";
  argv[k++] = (char *)(backend && *backend ? backend : "cuda");
  if (twins && *twins) {
    argv[k++] = (char *)"--sim-kernels";
    argv[k++] = (char *)twins;
  }
  argv[k] = NULL;

  pid_t pid = -1;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  /* the program's blocked signals and handlers are not the helper's */
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &all);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  int rc = fds[0] < 0 || fds[1] < 0 || fds[2] < 0 ? errno : 0;
  for (int i = 0; i < 3 && !rc; i++) rc = posix_spawn_file_actions_adddup2(&fa, fds[i], 3 + i);
  if (!rc) rc = posix_spawn(&pid, bin, &fa, &at, argv, environ);
  if (rc) snprintf(err, errlen, "cannot start %s: %s", bin, strerror(rc));
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  for (int i = 0; i < 3; i++)
    if (fds[i] >= 0) close(fds[i]);
  return rc ? -1 : pid;
}

int ferry_helper_start(struct ferry_vgpu *v, int gpu, struct ferry_link *l,
                       struct ferry_hello_rets *hello, char *err, size_t errlen) {
  char bin[PATH_MAX], why[200];
  int host_fd = ferry_host_arena_fd(why, sizeof why);
  if (host_fd < 0) {
    snprintf(err, errlen, "no shared host memory for a ferry-mhelper: %s", why);
    return cudaErrorNotSupported;
  }
  if (find_binary(bin, sizeof bin, err, errlen)) return cudaErrorNotSupported;
  struct ferry_shm_peer peer;
  struct ferry_conn *c = ferry_shm_create(0, &peer, why, sizeof why);
  if (!c) {
    snprintf(err, errlen, "cannot make a shared-memory channel: %s", why);
    return cudaErrorNotSupported;
  }
  pid_t first = spawn(bin, &peer, host_fd, gpu, v->index, err, errlen);
  ferry_shm_peer_close(&peer); /* only the helper holds its end now */
  if (first < 0) {
    c->ops->close(c);
    return cudaErrorNotSupported;
  }
  /* the first process leaves at once; the helper goes on in its child. One
     that failed (a wrong binary, bad arguments) is said here, not as a lost
     connection (where the program reaps children itself, the hello tells) */
  int status = 0;
  pid_t w;
  while ((w = waitpid(first, &status, 0)) < 0 && errno == EINTR) continue;
  if (w == first && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    if (WIFEXITED(status)) snprintf(err, errlen, "%s exited with status %d before it started", bin,
                                    WEXITSTATUS(status));
    else snprintf(err, errlen, "%s was killed by signal %d before it started", bin, WTERMSIG(status));
    c->ops->close(c);
    return cudaErrorNotSupported;
  }

  ferry_link_init(l, v->index, NULL);
  snprintf(l->name, sizeof l->name, "ferry-mhelper (local GPU %d)", gpu);
  l->conn = c;
  l->helper_gpu = gpu;
  l->quiet = 1;
  l->reader = malloc(sizeof *l->reader);
  if (!l->reader) {
    ferry_link_close(l);
    snprintf(err, errlen, "out of memory");
    return cudaErrorMemoryAllocation;
  }
  ferry_reader_init(l->reader, c);
  struct ferry_hello_rets r;
  uint64_t base = ferry_arena_base(v->index);
  int rc = ferry_link_hello(l, (uint32_t)gpu, base, &r, 0);
  if (rc) {
    snprintf(err, errlen, "%s",
             l->goodbye[0] ? l->goodbye : l->lost[0] ? l->lost : "ferry-mhelper did not start");
    ferry_link_close(l);
    return rc;
  }
  l->helper_pid = (int)ferry_shm_peer_pid(c);
  snprintf(l->name, sizeof l->name, "local GPU %d in ferry-mhelper pid %d (%s)", gpu,
           l->helper_pid, r.name ? r.name : "?");
  if (hello) *hello = r;
  return 0;
}
