/*
 * The backends compiled into ferry_transport; only registry.c looks at
 * them, everyone else goes through ferry_transport_find.
 */
#ifndef FERRY_TRANSPORT_BACKENDS_H
#define FERRY_TRANSPORT_BACKENDS_H

#include "transport.h"

extern const struct ferry_transport ferry_tcp_transport;

#endif
