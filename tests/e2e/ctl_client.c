/*
 * A raw client of a program's control socket, for the migration tests: it
 * sends bytes exactly as given (no newline added, none required), so the
 * tests can send what `ferry` never would: unknown verbs, overlong lines,
 * and a line cut off by a hang-up. CI has no python3 or socat to do this.
 * usage: ctl_client SOCKET [--hangup | --wait SECONDS] < BYTES
 *   sends stdin; then prints every reply byte until the program closes the
 *   connection or stays silent for 10 s, or SECONDS (exit 2 if nothing came
 *   back). --hangup: closes right after sending, without reading.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int main(int argc, char **argv) {
  int hangup = argc == 3 && !strcmp(argv[2], "--hangup");
  int wait_ms = argc == 4 && !strcmp(argv[2], "--wait") ? atoi(argv[3]) * 1000 : 10000;
  if (argc < 2 || argc > 4 || (argc == 3 && !hangup) || (argc == 4 && wait_ms <= 0)) {
    fprintf(stderr, "usage: ctl_client SOCKET [--hangup | --wait SECONDS] < BYTES\n");
    return 64;
  }
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(argv[1]) >= sizeof addr.sun_path) {
    fprintf(stderr, "ctl_client: socket path too long\n");
    return 64;
  }
  strcpy(addr.sun_path, argv[1]);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr)) {
    fprintf(stderr, "ctl_client: %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  char buf[4096];
  size_t n;
  /* a program that refuses a request may hang up before all of it is
     sent: its reply is still there to read */
  int sent_all = 1;
  while (sent_all && (n = fread(buf, 1, sizeof buf, stdin)) > 0)
    sent_all = !send_all(fd, buf, n);
  if (hangup) {
    close(fd);
    return sent_all ? 0 : 1;
  }
  shutdown(fd, SHUT_WR); /* end of requests: the program may close after replying */
  size_t got = 0;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    ssize_t m = recv(fd, buf, sizeof buf, 0);
    if (m < 0 && errno == EINTR) continue;
    if (m <= 0) break;
    fwrite(buf, 1, (size_t)m, stdout);
    got += (size_t)m;
  }
  close(fd);
  return got ? 0 : 2;
}
