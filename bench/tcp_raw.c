/*
 * The raw transport baseline for the benchmarks: a plain TCP ping-pong of a
 * given size and a one-way TCP stream, over loopback, with the same socket
 * options ferry uses. ferry's numbers are reported as ratios against these.
 * A synchronous copy is a request and a reply, so `put` (SIZE bytes out, a
 * 48-byte answer back) and `get` (48 bytes out, SIZE bytes back) are the
 * raw-transport shape of a cudaMemcpy of SIZE bytes.
 * usage: ferry-bench-tcp pingpong SIZE REPS | stream SIZE TOTAL | put SIZE REPS | get SIZE REPS
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/raw_io.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s pingpong SIZE REPS | stream CHUNK TOTAL | put SIZE REPS | get SIZE REPS\n",
            argv[0]);
    return 2;
  }
  int pingpong = !strcmp(argv[1], "pingpong"), put = !strcmp(argv[1], "put"),
      get = !strcmp(argv[1], "get");
  size_t size = strtoull(argv[2], NULL, 0), count = strtoull(argv[3], NULL, 0);
  size_t out_size = size, back_size = size; /* bytes each way per exchange */
  if (put) back_size = 48;
  if (get) out_size = 48;
  if (put || get) pingpong = 1;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1) ||
      getsockname(ls, (struct sockaddr *)&a, &len)) {
    perror("listen");
    return 1;
  }
  char *buf = calloc(1, size > 48 ? size : 48);
  pid_t child = fork();
  if (child == 0) { /* the echoing / draining peer */
    int c = accept(ls, NULL, NULL);
    tune(c);
    if (pingpong) {
      for (size_t i = 0; i < count + 100; i++)
        if (io_all(c, buf, out_size, 0) || io_all(c, buf, back_size, 1)) _exit(1);
    } else {
      for (size_t got = 0; got < count; got += size)
        if (io_all(c, buf, size, 0)) _exit(1);
      io_all(c, buf, 1, 1);
    }
    _exit(0);
  }
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(s, (struct sockaddr *)&a, sizeof a)) {
    perror("connect");
    return 1;
  }
  tune(s);
  if (pingpong) {
    for (int i = 0; i < 100; i++) io_all(s, buf, out_size, 1), io_all(s, buf, back_size, 0);
    double t0 = now();
    for (size_t i = 0; i < count; i++)
      if (io_all(s, buf, out_size, 1) || io_all(s, buf, back_size, 0)) return 1;
    double t = (now() - t0) / count;
    if (put || get)
      printf("tcp_%s_%zu %.3f GB/s\n", argv[1], size, size / t / 1e9);
    else
      printf("tcp_pingpong_%zu %.3f us\n", size, t * 1e6);
  } else {
    double t0 = now();
    for (size_t sent = 0; sent < count; sent += size)
      if (io_all(s, buf, size, 1)) return 1;
    io_all(s, buf, 1, 0);
    printf("tcp_stream_%zu %.3f GB/s\n", size, count / (now() - t0) / 1e9);
  }
  close(s);
  waitpid(child, NULL, 0);
  return 0;
}
