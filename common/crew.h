/*
 * A crew: a fixed set of threads that run one function at once, each with
 * its own index, while the caller waits for all of them. Striped copies
 * (protocol/stripe.c) move each connection's pieces on its own thread.
 */
#ifndef FERRY_CREW_H
#define FERRY_CREW_H

struct ferry_crew;

/* n threads, every signal blocked in them; NULL when they cannot start */
struct ferry_crew *ferry_crew_start(unsigned n);
/* runs fn(ctx, i) for every i < n on the crew's threads and waits for
   all; the first nonzero result, with the errno its thread saw */
int ferry_crew_run(struct ferry_crew *c, int (*fn)(void *ctx, unsigned i), void *ctx);
/* ends and joins the threads */
void ferry_crew_stop(struct ferry_crew *c);
/* a forked child has none of the threads: frees what is left, joins nothing */
void ferry_crew_forget(struct ferry_crew *c);

#endif
