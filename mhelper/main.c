/*
 * ferry-mhelper: serves one vGPU of one program on one GPU of this machine
 * (the mrCUDA paper's "one process, one GPU"). The program starts it when
 * a migration moves a vGPU here and it already runs one in its own
 * process; it is ferry-server's session (decode, executor, reply) over the
 * shared-memory channel instead of a socket. It maps the program's shared
 * host arena at the same address, so copies from pinned memory go straight
 * to the GPU. It lives exactly as long as the program: when the channel's
 * other end goes away, the session ends and so does the helper.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "server/server.h"
#include "transport/shm.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: ferry-mhelper --channel MEMFD,SOCKFD --host-memory FD BASE SIZE --gpu N\n"
          "                     [--vgpu N] [--backend cuda|sim] [--sim-kernels TWINS.so]\n"
          "Started by ferry's libcudart when a migration moves a vGPU onto a GPU of this\n"
          "machine (see FERRY_MHELPER); not meant to be run by hand.\n");
}

static int parse_num(const char *s, unsigned long long *out) {
  char *end;
  errno = 0;
  *out = strtoull(s, &end, 0);
  return errno || end == s || *end ? -1 : 0;
}

int main(int argc, char **argv) {
  ferry_log_set_prefix("ferry-mhelper");
  static const struct option longopts[] = {
      {"channel", required_argument, NULL, 'c'}, {"host-memory", required_argument, NULL, 'm'},
      {"gpu", required_argument, NULL, 'g'},     {"vgpu", required_argument, NULL, 'v'},
      {"backend", required_argument, NULL, 'b'}, {"sim-kernels", required_argument, NULL, 'k'},
      {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
  int mem_fd = -1, sock_fd = -1, host_fd = -1, vgpu = -1;
  unsigned long long host_base = 0, host_size = 0, n;
  struct server_opts opts = {.backend = "cuda", .quiet = 1, .helper = 1};
  int c;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 'c':
      if (sscanf(optarg, "%d,%d", &mem_fd, &sock_fd) != 2 || mem_fd < 0 || sock_fd < 0) goto bad;
      break;
    case 'm':
      /* FD BASE SIZE: the option's argument and the next two words */
      if (optind + 1 >= argc || parse_num(optarg, &n) || parse_num(argv[optind], &host_base) ||
          parse_num(argv[optind + 1], &host_size))
        goto bad;
      host_fd = (int)n;
      optind += 2;
      break;
    case 'g': break; /* the program names the GPU in its hello, like to a server */
    case 'v':
      if (parse_num(optarg, &n)) goto bad;
      vgpu = (int)n;
      break;
    case 'b':
      if (strcmp(optarg, "cuda") && strcmp(optarg, "sim")) goto bad;
      opts.backend = optarg;
      break;
    case 'k': opts.sim_kernels = optarg; break;
    case 'h': usage(stdout); return 0;
    default: goto bad;
    }
  }
  if (mem_fd < 0 || host_fd < 0 || optind != argc) goto bad;

  /* leave the program's child at once: it reaps that one, and this process
     is never among the children its own wait() sees */
  pid_t pid = fork();
  if (pid < 0) {
    ferry_log("fork: %s", strerror(errno));
    return 1;
  }
  if (pid > 0) _exit(0);
  /* the program's terminal signals are its own; this process ends with it */
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);

  char err[256];
  struct ferry_conn *conn = ferry_shm_attach(mem_fd, sock_fd, err, sizeof err);
  if (!conn) {
    ferry_log("vGPU %d: %s", vgpu, err);
    return 1;
  }
  void *p = mmap((void *)(uintptr_t)host_base, host_size, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_NORESERVE | MAP_FIXED_NOREPLACE, host_fd, 0);
  static char why[200];
  if (p == MAP_FAILED || (uintptr_t)p != host_base) {
    snprintf(why, sizeof why, "ferry-mhelper cannot map the program's shared host memory at "
             "0x%llx: %s", host_base, strerror(errno));
    opts.setup_error = why; /* the hello carries the reason to the program */
  } else {
    opts.host_base = host_base;
    opts.host_size = host_size;
  }
  close(host_fd);
  int status = session_run(conn, &opts);
  return status;

bad:
  usage(stderr);
  return 2;
}
