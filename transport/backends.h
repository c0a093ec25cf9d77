/*
 * The backends compiled into ferry_transport; only registry.c looks at
 * them, everyone else goes through ferry_transport_find.
 */
#ifndef FERRY_TRANSPORT_BACKENDS_H
#define FERRY_TRANSPORT_BACKENDS_H

#include "transport.h"

extern const struct ferry_transport ferry_tcp_transport;
/* the socket of a tcp connection, -1 for any other kind */
int ferry_tcp_fd(struct ferry_conn *c);
/* a connected tcp socket as a connection (NULL, fd closed, out of memory) */
struct ferry_conn *ferry_tcp_adopt(int fd);
#ifdef FERRY_HAVE_IB
extern const struct ferry_transport ferry_ib_transport;
#endif

#endif
