/*
 * A TCP listener that accepts and never answers, for the handshake tests:
 * a peer like that (a wedged server, a port that is not ferry's) must cost
 * a program or a prepare its connect deadline, not its call timeout. CI has
 * no python3 or socat, and a shell cannot listen.
 * usage: silent_listener PORT_FILE
 *   listens on 127.0.0.1, port 0; writes the port to PORT_FILE once it
 *   listens; then accepts, holds each connection open without reading a
 *   byte, and prints "accepted N" (flushed) for the N-th, until killed.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: silent_listener PORT_FILE\n");
    return 64;
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 64) ||
      getsockname(fd, (struct sockaddr *)&a, &len)) {
    perror("silent_listener");
    return 1;
  }
  /* the port file appears whole: written beside, then renamed */
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
  FILE *f = fopen(tmp, "w");
  if (!f || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f) || rename(tmp, argv[1])) {
    perror(argv[1]);
    return 1;
  }
  for (int n = 1;; n++) {
    int c = accept(fd, NULL, NULL);
    if (c < 0) {
      n--;
      continue;
    }
    /* kept open (never closed, never read) until the process ends */
    printf("accepted %d\n", n);
    fflush(stdout);
  }
}
