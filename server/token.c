/*
 * The shared secret that keeps other users of a cluster off a server's
 * GPUs. It lives in a file only its owner may read, so it never shows in
 * `ps` or in the environment of other processes. It is a password, not
 * encryption: the hello that carries it crosses the network in clear.
 */
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"

#define TOKEN_MIN 16
#define TOKEN_MAX 256

const char *server_read_token(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    ferry_log("--token-file %s: %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) || (st.st_mode & 077)) {
    ferry_log("--token-file %s: group or others may read it; chmod 600 it first", path);
    fclose(f);
    return NULL;
  }
  static char token[TOKEN_MAX + 2];
  size_t n = fread(token, 1, sizeof token - 1, f);
  fclose(f);
  token[n] = '\0';
  /* the token is compared as a C string: only the bytes before a NUL would
     count (a leading one makes the empty token authenticate) */
  const char *nul = memchr(token, '\0', n);
  if (nul) {
    ferry_log("--token-file %s: the token has a NUL byte at offset %zu; a token is text "
              "(e.g. `head -c 24 /dev/urandom | base64`)", path, (size_t)(nul - token));
    return NULL;
  }
  while (n && (token[n - 1] == '\n' || token[n - 1] == '\r' || token[n - 1] == ' ')) token[--n] = '\0';
  if (n < TOKEN_MIN || n > TOKEN_MAX) {
    ferry_log("--token-file %s: the token must be %d to %d characters (e.g. `head -c 24 "
              "/dev/urandom | base64`)", path, TOKEN_MIN, TOKEN_MAX);
    return NULL;
  }
  return token;
}
