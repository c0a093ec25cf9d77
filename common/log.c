/* Prefixed, single-write log lines so lines from several processes do not interleave. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *log_prefix = "ferry";
static int log_fd = 2;

void ferry_log_set_prefix(const char *prefix) { log_prefix = prefix; }
void ferry_log_set_fd(int fd) { log_fd = fd; }
int ferry_log_fd(void) { return log_fd; }

static void vlog(const char *fmt, va_list ap) {
  char line[1024];
  int n = snprintf(line, sizeof line, "%s: ", log_prefix);
  if (n < 0 || n >= (int)sizeof line) return;
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  if (m < 0) return;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  ssize_t w = write(log_fd, line, len);
  (void)w;
}

void ferry_log(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

int ferry_debug_enabled(void) {
  static int enabled = -1;
  if (enabled < 0) {
    const char *v = getenv("FERRY_DEBUG");
    enabled = v && *v && *v != '0';
  }
  return enabled;
}

void ferry_debug(const char *fmt, ...) {
  if (!ferry_debug_enabled()) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}
