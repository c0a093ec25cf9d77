/*
 * ferry-server --metrics ADDR: Prometheus text (format 0.0.4) over HTTP,
 * served by the parent's poll loop. Each session (a forked child) counts
 * into a slot of an anonymous shared mapping made before any fork; the
 * parent reads the slots when it answers GET /metrics.
 */
#ifndef FERRY_SERVER_METRICS_H
#define FERRY_SERVER_METRICS_H

#include <poll.h>
#include <sys/types.h>

struct session_stats;

/* listens on addr ("127.0.0.1:9420", "tcp://host:port", "[::1]:9420"),
   with slots for max_sessions sessions and counters for the refusal
   reasons named (kept, not copied); 0, or -1 after logging why */
int metrics_open(const char *addr, int max_sessions, const char *const *reasons, int nreasons);
/* a zeroed slot for a session from client, or NULL (metrics off, or full) */
struct session_stats *metrics_take(const char *client);
/* the session of slot s runs as pid (the parent, after fork) */
void metrics_started(struct session_stats *s, pid_t pid);
/* the session of s ended (or never started): its counts join the totals */
void metrics_release(struct session_stats *s);
/* a connection refused for reasons[reason] */
void metrics_refused(int reason);
/* in a session child: closes what the parent serves metrics on */
void metrics_close_in_child(void);
/* adds the poll entries of the endpoint at p (room for METRICS_POLLFDS)
   and lowers *wait_ms to its nearest deadline; returns how many */
#define METRICS_POLLFDS 9
int metrics_pollfds(struct pollfd *p, long now_ms, int *wait_ms);
/* serves what the n entries metrics_pollfds added report */
void metrics_step(const struct pollfd *p, int n, long now_ms);

#endif
