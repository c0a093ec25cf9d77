/*
 * One-line diagnostics on stderr, prefixed with the component, so that a
 * user sees which part of ferry speaks ("ferry: ...", "ferry-server: ...").
 */
#ifndef FERRY_LOG_H
#define FERRY_LOG_H

#include <stddef.h>

void ferry_log_set_prefix(const char *prefix);
/* where the lines go (default 2): a session whose fd 2 carries device
   output to its client logs to a copy of the old one */
void ferry_log_set_fd(int fd);
int ferry_log_fd(void);
void ferry_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* FERRY_DEBUG=1 enables these */
void ferry_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ferry_debug_enabled(void);

/* How a message or a control reply quotes what a user gave (a word, a URL):
   at most FERRY_ECHO_MAX bytes of it, unprintable bytes as '?', and "..."
   where it was cut, so that a long or odd input never crowds out the
   reason (docs/control.md). out gets at most FERRY_ECHO_MAX + 4 bytes with
   its NUL; the functions return out. */
#define FERRY_ECHO_MAX 32
const char *ferry_echo(const char *s, size_t len, char *out, size_t n);
/* a URL keeps its end (":7420/0", what tells two of one host apart) and is
   cut in the host: tcp://aaaaaaaaaaaaaaaaaaa...:7420/0 */
const char *ferry_echo_url(const char *url, char *out, size_t n);

#endif
