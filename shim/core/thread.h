/* ferry's own threads: detached, every signal blocked (thread.c) */
#ifndef FERRY_THREAD_H
#define FERRY_THREAD_H

/* 0, or an errno value */
int ferry_start_thread(void *(*fn)(void *), void *arg);

#endif
