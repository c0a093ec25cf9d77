/*
 * One-line diagnostics on stderr, prefixed with the component, so that a
 * user sees which part of ferry speaks ("ferry: ...", "ferry-server: ...").
 */
#ifndef FERRY_LOG_H
#define FERRY_LOG_H

void ferry_log_set_prefix(const char *prefix);
/* where the lines go (default 2): a session whose fd 2 carries device
   output to its client logs to a copy of the old one */
void ferry_log_set_fd(int fd);
int ferry_log_fd(void);
void ferry_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* FERRY_DEBUG=1 enables these */
void ferry_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ferry_debug_enabled(void);

#endif
