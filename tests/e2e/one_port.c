/*
 * LD_PRELOAD for tests/e2e/stripe.sh: a firewall between the program and
 * its server that lets through one TCP port only, FERRY_TEST_ONE_PORT, as
 * a site that opens only ferry-server's port does. connect() to any other
 * port of an IP address is refused at once (a firewall that rejects);
 * everything else is the C library's. CI has no network namespaces or
 * iptables to build one with.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

int connect(int fd, const struct sockaddr *sa, socklen_t len) {
  static int (*real)(int, const struct sockaddr *, socklen_t);
  if (!real) real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
  const char *only = getenv("FERRY_TEST_ONE_PORT");
  int port = -1;
  if (sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in))
    port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
  if (sa && sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6))
    port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
  if (only && port >= 0 && port != atoi(only)) {
    errno = ECONNREFUSED;
    return -1;
  }
  return real(fd, sa, len);
}
