/*
 * Maps a URL scheme to its backend. On a build without rdma-core the ib://
 * answer is spelled out, because a user who asks for InfiniBand needs to
 * know why it is missing and what to use instead. shm:// is no URL at all:
 * those channels are a memfd that ferry hands to the helpers it spawns.
 */
#include "transport.h"
#include "backends.h"

#include <stdio.h>
#include <string.h>

const struct ferry_transport *ferry_transport_find(const char *scheme, char *err, size_t errlen) {
  if (scheme && strcmp(scheme, "tcp") == 0) return &ferry_tcp_transport;
  if (scheme && strcmp(scheme, "ib") == 0) {
#ifdef FERRY_HAVE_IB
    return &ferry_ib_transport;
#endif
    snprintf(err, errlen,
             "ib:// transport is not built into this ferry (rdma-core was not found at build "
             "time); use tcp://");
    return NULL;
  }
  if (scheme && strcmp(scheme, "shm") == 0) {
    snprintf(err, errlen,
             "shm:// channels are made by ferry itself for ferry-mhelper; "
             "they cannot be named in a URL");
    return NULL;
  }
  snprintf(err, errlen, "unknown transport '%s://' (this ferry knows tcp://%s)", scheme ? scheme : "",
#ifdef FERRY_HAVE_IB
           " and ib://"
#else
           ""
#endif
  );
  return NULL;
}
