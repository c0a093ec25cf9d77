/*
 * The raw baseline for FERRY_STREAMS: the same total moved over one TCP
 * connection and over N, one thread per connection on each side, with
 * ferry's socket options, over loopback. `put` sends SIZE bytes and waits
 * for a 1-byte answer, `get` asks with 1 byte and receives SIZE bytes: the
 * shape of a synchronous copy of SIZE bytes each way, so ferry's striped
 * copies (bench_calls bandwidth with FERRY_STREAMS=N) can be set against
 * it, and against iperf3 -P N, in one run.
 * usage: ferry-bench-tcp-streams put|get SIZE REPS [N...]   (N default: 1 2 4 8 16)
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/raw_io.h"

#define MAX_STREAMS 16

/* one connection's share of every exchange: [off, off + len) of buf */
struct lane {
  int fd, writing;
  char *p;
  size_t len, reps;
  pthread_barrier_t *start, *done;
};

static void *lane_main(void *arg) {
  struct lane *l = arg;
  for (size_t r = 0; r < l->reps; r++) {
    pthread_barrier_wait(l->start);
    if (io_all(l->fd, l->p, l->len, l->writing)) exit(1);
    pthread_barrier_wait(l->done);
  }
  return NULL;
}

/* reps exchanges over n connections; the bulk goes the way `writing` says
   for this side, the 1-byte answer over connection 0 the other way */
static void exchange(int *fds, int n, char *buf, size_t size, size_t reps, int writing,
                     int first, double *secs) {
  pthread_barrier_t start, done;
  pthread_barrier_init(&start, NULL, (unsigned)n + 1);
  pthread_barrier_init(&done, NULL, (unsigned)n + 1);
  struct lane lanes[MAX_STREAMS];
  pthread_t t[MAX_STREAMS];
  size_t share = (size_t)((size + n - 1) / n);
  for (int i = 0; i < n; i++) {
    size_t off = share * i < size ? share * i : size;
    size_t len = off + share <= size ? share : size - off;
    lanes[i] = (struct lane){fds[i], writing, buf + off, len, reps, &start, &done};
    pthread_create(&t[i], NULL, lane_main, &lanes[i]);
  }
  char one = 0;
  double t0 = now();
  for (size_t r = 0; r < reps; r++) {
    /* get: the client asks, the peer waits for the question */
    if (first && !writing && io_all(fds[0], &one, 1, 1)) exit(1);
    if (!first && writing && io_all(fds[0], &one, 1, 0)) exit(1);
    pthread_barrier_wait(&start);
    pthread_barrier_wait(&done);
    /* put: the peer answers once all of it came */
    if (first && writing && io_all(fds[0], &one, 1, 0)) exit(1);
    if (!first && !writing && io_all(fds[0], &one, 1, 1)) exit(1);
  }
  *secs = now() - t0;
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&start);
  pthread_barrier_destroy(&done);
}

static int run(int put, size_t size, size_t reps, int n) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, MAX_STREAMS) ||
      getsockname(ls, (struct sockaddr *)&a, &len)) {
    perror("listen");
    return 1;
  }
  char *buf = calloc(1, size);
  pid_t child = fork();
  if (child == 0) { /* the peer: receives what put sends, sends what get asks */
    int fds[MAX_STREAMS];
    for (int i = 0; i < n; i++) tune(fds[i] = accept(ls, NULL, NULL));
    double unused;
    exchange(fds, n, buf, size, reps + 3, !put, 0, &unused);
    _exit(0);
  }
  int fds[MAX_STREAMS];
  for (int i = 0; i < n; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fds[i], (struct sockaddr *)&a, sizeof a)) {
      perror("connect");
      return 1;
    }
    tune(fds[i]);
  }
  double warm, secs;
  exchange(fds, n, buf, size, 3, put, 1, &warm);
  exchange(fds, n, buf, size, reps, put, 1, &secs);
  printf("tcp_streams_%s_%zu_x%d %.3f GB/s\n", put ? "put" : "get", size, n,
         (double)size * reps / secs / 1e9);
  for (int i = 0; i < n; i++) close(fds[i]);
  close(ls);
  waitpid(child, NULL, 0);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4 || (strcmp(argv[1], "put") && strcmp(argv[1], "get"))) {
    fprintf(stderr, "usage: %s put|get SIZE REPS [N...]\n", argv[0]);
    return 2;
  }
  size_t size = strtoull(argv[2], NULL, 0), reps = strtoull(argv[3], NULL, 0);
  int ns[MAX_STREAMS] = {1, 2, 4, 8, 16}, count = 5;
  if (argc > 4) {
    count = 0;
    for (int i = 4; i < argc && count < MAX_STREAMS; i++) ns[count++] = atoi(argv[i]);
  }
  for (int i = 0; i < count; i++) {
    if (ns[i] < 1 || ns[i] > MAX_STREAMS || !size || !reps) {
      fprintf(stderr, "N from 1 to %d, SIZE and REPS above 0\n", MAX_STREAMS);
      return 2;
    }
    fflush(stdout);
    if (run(!strcmp(argv[1], "put"), size, reps, ns[i])) return 1;
  }
  return 0;
}
