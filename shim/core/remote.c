/*
 * The remote call path over a link (a vGPU's server, or its ferry-mhelper):
 * frames out, replies in. ASYNC calls are appended to a per-link buffer and
 * pushed by a flusher thread, so a stream of kernel launches costs a memcpy
 * each, not a system call each. SYNC calls flush everything before them
 * (order is kept) and wait for their reply; DEFERRED and OUTPUT frames that
 * precede a reply are handled on the way.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/setting.h"
#include "protocol/stripe.h"
#include "shim/core/link.h"
#include "shim/core/shadow.h"
#include "shim/core/local.h"
#include "shim/core/query_cache.h"
#include "shim/core/thread.h"
#include "transport/reader.h"

static pthread_mutex_t flusher_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flusher_cond = PTHREAD_COND_INITIALIZER;
static uint32_t flusher_pending; /* bit per vGPU */

static __thread struct ferry_thread thread_state = {.device = 0, .last_error = cudaSuccess};
static pthread_key_t reply_key;
static pthread_once_t reply_key_once = PTHREAD_ONCE_INIT;
static void free_reply(void *buf) { ferry_buf_free(buf); }
static void make_reply_key(void) { pthread_key_create(&reply_key, free_reply); }

/* the reply buffer of a thread that ends is freed with it */
struct ferry_thread *ferry_thread(void) {
  if (__builtin_expect(!thread_state.registered, 0)) {
    pthread_once(&reply_key_once, make_reply_key);
    pthread_setspecific(reply_key, &thread_state.reply);
    thread_state.registered = 1;
  }
  return &thread_state;
}

/* the link is dead; why goes to l->lost, and to stderr unless the link is
   quiet (a migration's target: the migration names it and says why) */
static int lost(struct ferry_link *l, const char *what) {
  int e = errno;
  if (!l->dead) {
    __atomic_store_n(&l->dead, 1, __ATOMIC_RELAXED);
    char reason[200];
    if (e == ETIMEDOUT && l->hello_ms)
      snprintf(reason, sizeof reason, "no answer to the hello within %g s (FERRY_CONNECT_TIMEOUT): "
               "it accepted the connection, then said nothing", l->hello_ms / 1000.0);
    else if (e == ETIMEDOUT)
      snprintf(reason, sizeof reason, "nothing came from it for %g s, not even a sign that the "
               "call still runs (FERRY_CALL_TIMEOUT)", ferry_call_timeout_ms() / 1000.0);
    else
      snprintf(reason, sizeof reason, "%s", e ? strerror(e) : "protocol error");
    if (e == ETIMEDOUT && l->hello_ms)
      snprintf(l->lost, sizeof l->lost, "%s", reason);
    else
      snprintf(l->lost, sizeof l->lost, "%s while %s: %s",
               l->hello_ms ? "the hello failed" : "lost the connection", what, reason);
    if (l->quiet)
      ;
    else if (l->hello_ms)
      ferry_log("device %d (%s): %s", l->vgpu, l->name, l->lost);
    else
      ferry_log("lost connection to %s (device %d) while %s: %s", l->name, l->vgpu, what, reason);
  }
  return cudaErrorDevicesUnavailable;
}

/* FERRY_CALL_TIMEOUT: seconds, 0 waits for ever; a positive value under
   1 ms is 1 ms (not 0) */
static int call_timeout_ms = 60000;
static pthread_once_t call_timeout_once = PTHREAD_ONCE_INIT;
static void read_call_timeout(void) {
  ferry_env_ms("FERRY_CALL_TIMEOUT", 86400, 1, &call_timeout_ms,
               "seconds from 0 (wait for ever) to 86400", "60");
}

int ferry_call_timeout_ms(void) {
  pthread_once(&call_timeout_once, read_call_timeout);
  return call_timeout_ms;
}

void ferry_link_watch(struct ferry_link *l) {
  int ms = ferry_call_timeout_ms();
  if (ms && l->conn->ops->set_timeout) l->conn->ops->set_timeout(l->conn, ms);
}

void ferry_link_init(struct ferry_link *l, int vgpu, const char *name) {
  memset(l, 0, sizeof *l);
  l->vgpu = vgpu;
  snprintf(l->name, sizeof l->name, "%s", name ? name : "");
  pthread_mutex_init(&l->send_lock, NULL);
  pthread_mutex_init(&l->sock_lock, NULL);
  pthread_mutex_init(&l->call_lock, NULL);
}

/* a vGPU's own link is flushed by the flusher; a migration's target is not */
static int own_link(const struct ferry_link *l) { return l == &ferry.vgpus[l->vgpu].link; }

/* append header + msgpack body (+ small bulk) to b; striped: the bulk
   goes over the data connections */
static int append_frame(struct ferry_buf *b, unsigned call, const void *args, const void *bulk,
                        uint64_t bulk_len, int bulk_inline, int striped) {
  size_t start = b->len;
  if (ferry_buf_reserve(b, sizeof(struct ferry_frame))) return -1;
  b->len += sizeof(struct ferry_frame);
  if (ferry_encode_args(call, args, b)) {
    b->len = start;
    return -1;
  }
  struct ferry_frame h = {.magic = FERRY_MAGIC,
                          .kind = (uint16_t)call,
                          .flags = striped ? FERRY_FRAME_STRIPED : 0,
                          .body_len = (uint32_t)(b->len - start - sizeof h),
                          .bulk_len = bulk_len};
  memcpy(b->data + start, &h, sizeof h);
  if (bulk_inline && bulk_len && ferry_buf_append(b, bulk, bulk_len)) {
    b->len = start;
    return -1;
  }
  return 0;
}

/* called with send_lock held; returns with send_lock released. Writes the
   buffered frames and then `extra` (a large bulk payload) in one go, or
   (striped) over the data connections once the frames are out: the
   session reads them right after the frame that announces them. */
static int send_locked(struct ferry_link *l, const void *extra, uint64_t extra_len, int striped) {
  pthread_mutex_lock(&l->sock_lock);
  struct ferry_buf out = l->sendbuf;
  l->sendbuf = (struct ferry_buf){0};
  l->flush_pending = 0;
  pthread_mutex_unlock(&l->send_lock);

  int rc = 0;
  if (!l->conn && !l->dead) {
    rc = cudaErrorDevicesUnavailable; /* closed by a migration: nothing may be sent */
  } else if (!l->dead && (out.len || extra_len)) {
    struct iovec iov[2];
    int n = 0;
    if (out.len) iov[n++] = (struct iovec){out.data, out.len};
    if (extra_len && !striped) iov[n++] = (struct iovec){(void *)extra, extra_len};
    errno = 0;
    if (n && ferry_sendv(l->conn, iov, n)) rc = lost(l, "sending");
    else if (striped && ferry_link_stripe_move(l, 1, (void *)extra, extra_len))
      rc = lost(l, "sending copy data over a data connection");
  } else if (l->dead) {
    rc = cudaErrorDevicesUnavailable;
  }
  out.len = 0;
  pthread_mutex_unlock(&l->sock_lock);
  /* give the storage back unless the appenders already made a new one
     (lock order is send_lock -> sock_lock, so sock_lock is released first) */
  pthread_mutex_lock(&l->send_lock);
  if (!l->sendbuf.data) l->sendbuf = out;
  else ferry_buf_free(&out);
  pthread_mutex_unlock(&l->send_lock);
  return rc;
}

int ferry_flush(struct ferry_link *l) {
  pthread_mutex_lock(&l->send_lock);
  if (!l->sendbuf.len) {
    pthread_mutex_unlock(&l->send_lock);
    return l->dead ? cudaErrorDevicesUnavailable : 0;
  }
  return send_locked(l, NULL, 0, 0);
}

static void *flusher_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&flusher_lock);
    while (!flusher_pending) pthread_cond_wait(&flusher_cond, &flusher_lock);
    uint32_t pending = flusher_pending;
    flusher_pending = 0;
    pthread_mutex_unlock(&flusher_lock);
    for (int i = 0; i < FERRY_MAX_VGPUS; i++)
      if (pending & (1u << i)) ferry_flush(&ferry.vgpus[i].link);
  }
  return NULL;
}

void ferry_start_flusher(void) {
  if (ferry_start_thread(flusher_main, NULL))
    ferry_log("cannot start the flusher thread; asynchronous calls will be sent at the next "
              "synchronizing call");
}

static int call_async(struct ferry_link *l, unsigned call, const void *args,
                      const struct ferry_bulk *bulk) {
  const void *in = bulk ? bulk->in : NULL;
  uint64_t in_len = bulk ? bulk->in_len : 0;
  int inline_bulk = in_len <= FERRY_ASYNC_BULK_INLINE;
  int striped = ferry_link_striped(l, in_len);
  pthread_mutex_lock(&l->send_lock);
  if (l->dead) {
    pthread_mutex_unlock(&l->send_lock);
    return cudaErrorDevicesUnavailable;
  }
  if (append_frame(&l->sendbuf, call, args, in, in_len, inline_bulk, striped)) {
    pthread_mutex_unlock(&l->send_lock);
    return cudaErrorMemoryAllocation;
  }
  if (!inline_bulk) return send_locked(l, in, in_len, striped);
  /* a migration's target has no flusher; a helper's shared-memory channel
     costs a memcpy per send (a wake-up only when the helper sleeps), so
     waiting for the flusher would only add the flusher's own wake-up */
  if (l->sendbuf.len >= 256 * 1024 || !own_link(l) || l->helper_pid) return send_locked(l, NULL, 0, 0);
  int wake = !l->flush_pending;
  l->flush_pending = 1;
  pthread_mutex_unlock(&l->send_lock);
  if (wake) {
    pthread_mutex_lock(&flusher_lock);
    flusher_pending |= 1u << l->vgpu;
    pthread_cond_signal(&flusher_cond);
    pthread_mutex_unlock(&flusher_lock);
  }
  return 0;
}

uint64_t ferry_defer(struct ferry_link *l, void *dst, uint64_t size) {
  pthread_mutex_lock(&l->send_lock);
  uint64_t token = 0;
  if (l->ndeferred == l->deferred_cap) {
    size_t cap = l->deferred_cap ? l->deferred_cap * 2 : 16;
    struct ferry_deferred *d = realloc(l->deferred, cap * sizeof *d);
    if (!d) goto out;
    l->deferred = d;
    l->deferred_cap = cap;
  }
  token = ++l->next_token;
  l->deferred[l->ndeferred++] = (struct ferry_deferred){token, dst, size};
out:
  pthread_mutex_unlock(&l->send_lock);
  return token;
}

static int take_deferred(struct ferry_link *l, uint64_t token, struct ferry_deferred *out) {
  int found = 0;
  pthread_mutex_lock(&l->send_lock);
  for (size_t i = 0; i < l->ndeferred; i++) {
    if (l->deferred[i].token != token) continue;
    *out = l->deferred[i];
    l->deferred[i] = l->deferred[--l->ndeferred];
    found = 1;
    break;
  }
  pthread_mutex_unlock(&l->send_lock);
  return found;
}

size_t ferry_deferred_pending(struct ferry_link *l) {
  pthread_mutex_lock(&l->send_lock);
  size_t n = l->ndeferred;
  pthread_mutex_unlock(&l->send_lock);
  return n;
}

int ferry_deferred_complete(struct ferry_link *l, uint64_t token, const void *p, size_t n) {
  struct ferry_deferred d;
  if (!take_deferred(l, token, &d)) return -1;
  if (p && n == d.size) memcpy(d.dst, p, n);
  return 0;
}

static int discard(struct ferry_link *l, uint64_t n) {
  char scratch[4096];
  while (n) {
    size_t k = n < sizeof scratch ? n : sizeof scratch;
    if (ferry_read(l->reader, scratch, k)) return -1;
    n -= k;
  }
  return 0;
}

/* reads a body into the thread's reply buffer */
static int read_body(struct ferry_link *l, uint32_t len) {
  struct ferry_buf *b = &ferry_thread()->reply;
  b->len = 0;
  if (len > FERRY_MAX_BODY || ferry_buf_reserve(b, len + 1)) return -1;
  if (len && ferry_read(l->reader, b->data, len)) return -1;
  b->len = len;
  b->data[len] = '\0';
  return 0;
}

/* body is msgpack [x]; returns the object x. The peer's counts are checked
   against the body first: a count alone must not size an allocation. */
static int first_item(const struct ferry_buf *b, msgpack_zone *z, msgpack_object *item) {
  size_t off = 0;
  msgpack_object o;
  char why[160];
  if (ferry_msgpack_check(b->data, b->len, 1, why, sizeof why)) return -1;
  if (msgpack_unpack(b->data, b->len, &off, z, &o) != MSGPACK_UNPACK_SUCCESS) return -1;
  if (o.type != MSGPACK_OBJECT_ARRAY || o.via.array.size < 1) return -1;
  *item = o.via.array.ptr[0];
  return 0;
}

/* DEFERRED: [token] and the copy's bytes, or [token, why] and none for a
   copy the server refused to hold (over --max-deferred); a failed copy has
   no bytes either. The error of either comes with the reply. */
static int on_deferred(struct ferry_link *l, const struct ferry_frame *h) {
  if (read_body(l, h->body_len)) return -1;
  const struct ferry_buf *b = &ferry_thread()->reply;
  msgpack_zone z;
  msgpack_zone_init(&z, 256);
  msgpack_object o;
  size_t off = 0;
  char check[160], why[256] = "";
  int ok = !ferry_msgpack_check(b->data, b->len, 1, check, sizeof check) &&
           msgpack_unpack(b->data, b->len, &off, &z, &o) == MSGPACK_UNPACK_SUCCESS &&
           o.type == MSGPACK_OBJECT_ARRAY && o.via.array.size >= 1 &&
           o.via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER;
  uint64_t t = ok ? o.via.array.ptr[0].via.u64 : 0;
  if (ok && o.via.array.size >= 2 && o.via.array.ptr[1].type == MSGPACK_OBJECT_STR) {
    const msgpack_object_str *w = &o.via.array.ptr[1].via.str;
    size_t n = w->size < sizeof why - 1 ? w->size : sizeof why - 1;
    memcpy(why, w->ptr, n);
    why[n] = '\0';
  }
  msgpack_zone_destroy(&z);
  if (!ok) return -1;
  struct ferry_deferred d;
  int striped = (h->flags & FERRY_FRAME_STRIPED) != 0;
  int known = take_deferred(l, t, &d);
  if (known && h->bulk_len == d.size)
    return striped ? ferry_link_stripe_move(l, 0, d.dst, d.size) : ferry_read(l->reader, d.dst, d.size);
  if (known && h->bulk_len == 0) {
    /* once: every refused copy has the same cause */
    if (why[0] && !l->quiet && !__atomic_exchange_n(&l->refusal_said, 1, __ATOMIC_RELAXED))
      ferry_log("device %d (%s): an asynchronous device-to-host copy of %llu bytes was refused: "
                "%s; that call returns cudaErrorMemoryAllocation (synchronize more often, or "
                "raise the limit)", l->vgpu, l->name,
                (unsigned long long)d.size, why);
    return 0;
  }
  if (known)
    ferry_log("server sent %llu bytes for an asynchronous copy of %llu bytes (token %llu); ignored",
              (unsigned long long)h->bulk_len, (unsigned long long)d.size, (unsigned long long)t);
  else
    ferry_log("server sent data for an unknown asynchronous copy (token %llu); ignored",
              (unsigned long long)t);
  return striped ? ferry_link_stripe_move(l, 0, NULL, h->bulk_len) : discard(l, h->bulk_len);
}

/* device output for the program's stdout (printf) or stderr (a failed
   device assert), as the frame's status says */
static int on_output(struct ferry_link *l, const struct ferry_frame *h) {
  if (read_body(l, h->body_len)) return -1;
  FILE *to = h->status == 2 ? stderr : stdout;
  char chunk[16384];
  uint64_t left = h->bulk_len;
  while (left) {
    size_t k = left < sizeof chunk ? left : sizeof chunk;
    if (ferry_read(l->reader, chunk, k)) return -1;
    fwrite(chunk, 1, k, to);
    left -= k;
  }
  fflush(to);
  return 0;
}

static void on_goodbye(struct ferry_link *l, const struct ferry_frame *h) {
  char reason[512] = "no reason given";
  if (!read_body(l, h->body_len)) {
    msgpack_zone z;
    msgpack_zone_init(&z, 256);
    msgpack_object s;
    if (!first_item(&ferry_thread()->reply, &z, &s) && s.type == MSGPACK_OBJECT_STR) {
      size_t n = s.via.str.size < sizeof reason - 1 ? s.via.str.size : sizeof reason - 1;
      memcpy(reason, s.via.str.ptr, n);
      reason[n] = '\0';
      if (n && reason[n - 1] == '\0') n--;
    }
    msgpack_zone_destroy(&z);
  }
  snprintf(l->goodbye, sizeof l->goodbye, "%s", reason);
  if (!l->dead && !l->quiet) ferry_log("%s (device %d): %s", l->name, l->vgpu, reason);
  __atomic_store_n(&l->dead, 1, __ATOMIC_RELAXED);
}

/* after a refused hello: read and print the peer's reason */
static void read_goodbye(struct ferry_link *l) {
  struct ferry_frame h;
  if (ferry_read(l->reader, &h, sizeof h) == 0 && h.magic == FERRY_MAGIC &&
      h.kind == FERRY_KIND_GOODBYE)
    on_goodbye(l, &h);
}

/* reads frames until the reply of `call`; returns its cudaError_t */
static int read_reply(struct ferry_link *l, unsigned call, void *rets,
                      const struct ferry_bulk *bulk) {
  struct ferry_decoder dec;
  for (;;) {
    struct ferry_frame h;
    errno = 0;
    if (ferry_read(l->reader, &h, sizeof h)) return lost(l, "waiting for a reply");
    if (h.magic != FERRY_MAGIC) {
      errno = 0;
      return lost(l, "reading a reply (bad frame magic)");
    }
    /* striped bytes come only where this side has data connections, and
       only as a reply's or a deferred copy's bulk */
    if (h.flags && (h.flags != FERRY_FRAME_STRIPED || !l->stripes || !h.bulk_len ||
                    (h.kind != FERRY_KIND_REPLY && h.kind != FERRY_KIND_DEFERRED))) {
      errno = 0;
      return lost(l, "reading a reply (unexpected frame flags)");
    }
    switch (h.kind) {
    case FERRY_KIND_DEFERRED:
      if (on_deferred(l, &h)) return lost(l, "receiving asynchronous copy data");
      continue;
    case FERRY_KIND_OUTPUT:
      if (on_output(l, &h)) return lost(l, "receiving device output");
      continue;
    case FERRY_KIND_GOODBYE:
      on_goodbye(l, &h);
      return cudaErrorDevicesUnavailable;
    case FERRY_KIND_KEEPALIVE: /* the call still runs */
      if (h.body_len || h.bulk_len) return lost(l, "reading a reply (a keepalive with a body)");
      continue;
    case FERRY_KIND_REPLY:
      break;
    default:
      errno = 0;
      return lost(l, "reading a reply (unexpected frame kind)");
    }
    if (read_body(l, h.body_len)) return lost(l, "reading a reply body");
    int status = h.status;
    if (h.bulk_len) {
      void *dst = bulk ? bulk->out : NULL;
      if (!dst || h.bulk_len > bulk->out_len) {
        errno = 0;
        return lost(l, "reading a reply (unexpected bulk data)");
      }
      int32_t final_status;
      if (h.flags & FERRY_FRAME_STRIPED) {
        if (ferry_link_stripe_move(l, 0, dst, h.bulk_len))
          return lost(l, "receiving copy data over a data connection");
        if (ferry_read(l->reader, &final_status, sizeof final_status))
          return lost(l, "receiving copy data");
      } else if (ferry_read(l->reader, dst, h.bulk_len) ||
                 ferry_read(l->reader, &final_status, sizeof final_status)) {
        return lost(l, "receiving copy data");
      }
      if (final_status) status = final_status;
    }
    if (status == 0 && h.async_status) status = h.async_status;
    if (rets && status == 0) {
      ferry_decoder_init(&dec);
      struct ferry_buf *b = &ferry_thread()->reply;
      int bad = ferry_decode_rets(&dec, call, b->data, b->len, rets);
      if (bad) ferry_log("malformed reply from %s: %s", l->name, dec.error);
      ferry_decoder_destroy(&dec);
      if (bad) {
        l->dead = 1;
        return cudaErrorDevicesUnavailable;
      }
    }
    return status;
  }
}

int ferry_link_call(struct ferry_link *l, unsigned call, const void *args, void *rets,
                      const struct ferry_bulk *bulk) {
  if (ferry_calls[call].flags & ASYNC) return call_async(l, call, args, bulk);
  const void *in = bulk ? bulk->in : NULL;
  uint64_t in_len = bulk ? bulk->in_len : 0;
  int inline_bulk = in_len <= 64 * 1024;
  /* any call's bulk may go striped: the session reads it in order either way */
  int striped = ferry_link_striped(l, in_len);
  pthread_mutex_lock(&l->call_lock);
  pthread_mutex_lock(&l->send_lock);
  if (l->dead) {
    pthread_mutex_unlock(&l->send_lock);
    pthread_mutex_unlock(&l->call_lock);
    return cudaErrorDevicesUnavailable;
  }
  if (append_frame(&l->sendbuf, call, args, in, in_len, inline_bulk, striped)) {
    pthread_mutex_unlock(&l->send_lock);
    pthread_mutex_unlock(&l->call_lock);
    return cudaErrorMemoryAllocation;
  }
  int rc = send_locked(l, inline_bulk ? NULL : in, inline_bulk ? 0 : in_len, striped);
  if (!rc) rc = read_reply(l, call, rets, bulk);
  pthread_mutex_unlock(&l->call_lock);
  return rc;
}

int ferry_link_send(struct ferry_link *l, unsigned call, const void *args) {
  pthread_mutex_lock(&l->send_lock);
  if (l->dead) {
    pthread_mutex_unlock(&l->send_lock);
    return cudaErrorDevicesUnavailable;
  }
  if (append_frame(&l->sendbuf, call, args, NULL, 0, 1, 0)) {
    pthread_mutex_unlock(&l->send_lock);
    return cudaErrorMemoryAllocation;
  }
  return send_locked(l, NULL, 0, 0);
}

int ferry_link_reply(struct ferry_link *l, unsigned call, void *rets,
                       const struct ferry_bulk *bulk) {
  pthread_mutex_lock(&l->call_lock);
  int rc = l->dead ? cudaErrorDevicesUnavailable : read_reply(l, call, rets, bulk);
  pthread_mutex_unlock(&l->call_lock);
  return rc;
}

int ferry_link_hello(struct ferry_link *l, uint32_t gpu, uint64_t arena_base,
                     struct ferry_hello_rets *r, int deadline_ms) {
  struct ferry_hello_args a = {.version = FERRY_PROTOCOL_VERSION,
                               .gpu = gpu,
                               .arena_base = arena_base,
                               .arena_size = FERRY_ARENA_STRIDE,
                               .client_pid = (uint32_t)getpid(),
                               .token = ferry_client_token(),
                               /* rounded up: a timeout of 1 to 3 ms still asks for them */
                               .keepalive_ms = (uint32_t)((ferry_call_timeout_ms() + 3) / 4)};
  /* a peer that accepts and never answers costs the deadline, not the
     call timeout; the hello's reply comes before any keepalive */
  const struct ferry_conn_ops *ops = l->conn->ops;
  int timed = deadline_ms > 0 && ops->set_deadline && !ops->set_deadline(l->conn, deadline_ms);
  if (timed) l->hello_ms = deadline_ms;
  else ferry_link_watch(l);
  int rc = ferry_link_call(l, FERRY_CALL_hello, &a, r, NULL);
  if (rc) {
    /* the peer explains a refusal in a GOODBYE frame next to the reply */
    if (!l->dead) read_goodbye(l);
    if (!l->dead && !l->quiet) ferry_log("device %d (%s) refused the session: %s", l->vgpu, l->name,
                            cudaGetErrorString((cudaError_t)rc));
    __atomic_store_n(&l->dead, 1, __ATOMIC_RELAXED);
  }
  l->hello_ms = 0;
  if (timed && !rc) {
    ops->set_deadline(l->conn, 0);
    ferry_link_watch(l);
  }
  return rc;
}

void ferry_link_close(struct ferry_link *l) {
  pthread_mutex_lock(&l->call_lock);
  pthread_mutex_lock(&l->send_lock);
  pthread_mutex_lock(&l->sock_lock);
  ferry_stripes_close(l->stripes);
  l->stripes = NULL;
  if (l->conn) l->conn->ops->close(l->conn);
  l->conn = NULL;
  free(l->reader);
  l->reader = NULL;
  l->sendbuf.len = 0;
  pthread_mutex_unlock(&l->sock_lock);
  pthread_mutex_unlock(&l->send_lock);
  pthread_mutex_unlock(&l->call_lock);
}

void ferry_link_adopt(struct ferry_link *own, struct ferry_link *from) {
  ferry_link_close(own);
  pthread_mutex_lock(&own->call_lock);
  pthread_mutex_lock(&own->send_lock);
  pthread_mutex_lock(&own->sock_lock);
  own->conn = from->conn;
  own->reader = from->reader;
  memcpy(own->name, from->name, sizeof own->name);
  own->helper_pid = from->helper_pid;
  own->helper_gpu = from->helper_gpu;
  own->staging = from->staging;
  own->stripes = from->stripes;
  own->dead = from->dead;
  pthread_mutex_unlock(&own->sock_lock);
  pthread_mutex_unlock(&own->send_lock);
  pthread_mutex_unlock(&own->call_lock);
  ferry_buf_free(&from->sendbuf);
  free(from->deferred);
  from->conn = NULL;
  from->reader = NULL;
  from->staging = NULL;
  from->stripes = NULL;
  from->deferred = NULL;
  from->ndeferred = from->deferred_cap = 0;
}

/* an error the drain of a migration found belongs to the next sync call */
static int carried(struct ferry_vgpu *v, unsigned call, int rc) {
  if (rc || !(ferry_calls[call].flags & SYNC) || !__atomic_load_n(&v->carry_error, __ATOMIC_RELAXED))
    return rc;
  return __atomic_exchange_n(&v->carry_error, 0, __ATOMIC_ACQ_REL);
}

static __thread struct {
  struct ferry_vgpu *v;
  uint64_t gen;
} expected;

void ferry_expect_generation(struct ferry_vgpu *v, uint64_t gen) {
  expected.v = v;
  expected.gen = gen;
}

int ferry_stale(struct ferry_vgpu *v) {
  return __builtin_expect(expected.v == v, 0) &&
         __atomic_load_n(&v->generation, __ATOMIC_ACQUIRE) != expected.gen;
}

static int call_now(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                    const struct ferry_bulk *bulk);

int ferry_call(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
               const struct ferry_bulk *bulk) {
  if (!ferry_call_valid(call)) return call_now(v, call, args, rets, bulk);
  __atomic_fetch_add(&v->calls[call], 1, __ATOMIC_RELAXED);
  unsigned flags = ferry_calls[call].flags;
  if (flags & INVALIDATES) {
    ferry_query_cache_bump(v);
    int rc = call_now(v, call, args, rets, bulk);
    ferry_query_cache_bump(v);
    return rc;
  }
  if (flags & LAUNCHES)
    ferry_query_cache_launch(v, call == FERRY_CALL_launch
                                    ? ((const struct ferry_launch_args *)args)->func
                                    : 1ull << 32 | ((const struct ferry_graph_launch_args *)args)->exec);
  if (!(flags & CACHED)) return call_now(v, call, args, rets, bulk);
  struct ferry_buf key = {0};
  uint64_t epoch = 0;
  if (!ferry_query_cache_get(v, call, args, rets, &key, &epoch)) {
    ferry_buf_free(&key);
    return 0;
  }
  int rc = call_now(v, call, args, rets, bulk);
  if (!rc && key.len) ferry_query_cache_put(v, call, rets, &key, epoch);
  ferry_buf_free(&key);
  return rc;
}

/* Every call holds the gate shared, wherever the vGPU runs (its server, a
   ferry-mhelper, or the GPU in this process), and what builds GPU state is
   recorded in every mode: any vGPU can move again. */
static int call_now(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                    const struct ferry_bulk *bulk) {
  pthread_rwlock_rdlock(&v->gate);
  if (ferry_stale(v)) {
    pthread_rwlock_unlock(&v->gate);
    return FERRY_STALE;
  }
  int timed = ferry.stats && (ferry_calls[call].flags & SYNC) && !ferry_is_local(v);
  struct timespec t0, t1;
  if (timed) clock_gettime(CLOCK_MONOTONIC, &t0);
  /* mapped host memory a server's kernels use: out before, home after */
  int rc = ferry_shadow_before(v, call, args);
  _Alignas(16) unsigned char scratch[FERRY_ALIAS_SCRATCH];
  const void *sent = rc ? args : ferry_shadow_translate(v, call, args, scratch);
  if (!rc) rc = ferry_shadow_after(v, call, args, ferry_source_call(v, call, sent, rets, bulk));
  if (timed) {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    __atomic_fetch_add(&v->trips[call], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&v->trip_ns[call],
                       (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec)),
                       __ATOMIC_RELAXED);
  }
  if (!rc && (ferry_calls[call].flags & RECORD) &&
      ferry_record(&v->log, call, args, rets, bulk ? bulk->in : NULL, bulk ? bulk->in_len : 0)) {
    if (!v->log_broken) ferry_log("device %d: out of memory while recording; it cannot migrate", v->index);
    v->log_broken = 1;
  }
  rc = carried(v, call, rc);
  pthread_rwlock_unlock(&v->gate);
  return rc;
}

int ferry_link_call_held(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                         const struct ferry_bulk *bulk) {
  return carried(v, call, ferry_link_call(&v->link, call, args, rets, bulk));
}

int ferry_source_call(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                      const struct ferry_bulk *bulk) {
  return ferry_is_local(v) ? ferry_local_call(v, call, args, rets, bulk)
                           : ferry_link_call(&v->link, call, args, rets, bulk);
}

int ferry_source_call_ctx(void *v, unsigned call, const void *args, void *rets,
                          const struct ferry_bulk *bulk) {
  return ferry_source_call(v, call, args, rets, bulk);
}

int ferry_helper_call(struct ferry_vgpu *v, unsigned call, const void *args, void *rets,
                      const struct ferry_bulk *bulk) {
  pthread_rwlock_rdlock(&v->gate);
  int rc = FERRY_NOT_HELPER;
  if (ferry_stale(v))
    rc = FERRY_STALE;
  else if (!ferry_is_local(v) && v->link.helper_pid)
    rc = carried(v, call, ferry_link_call(&v->link, call, args, rets, bulk));
  pthread_rwlock_unlock(&v->gate);
  return rc;
}

/* The buffer is registered and the request sent under the gate, together:
   a migration's drain, which waits for every registered buffer, must never
   find one whose request it cannot have seen. */
int ferry_call_deferred(struct ferry_vgpu *v, void *dst, const struct ferry_memcpy_dtoh_async_args *a) {
  pthread_rwlock_rdlock(&v->gate);
  int rc;
  if (ferry_stale(v)) {
    rc = FERRY_STALE;
  } else if (ferry_is_local(v)) {
    rc = ferry_local_copy_held(v, dst, (const void *)(uintptr_t)a->src, a->size, 2, a->stream, 1);
  } else {
    struct ferry_memcpy_dtoh_async_args t = *a;
    t.token = ferry_defer(&v->link, dst, a->size);
    rc = t.token ? ferry_link_call(&v->link, FERRY_CALL_memcpy_dtoh_async, &t, NULL, NULL)
                 : cudaErrorMemoryAllocation;
  }
  pthread_rwlock_unlock(&v->gate);
  return rc;
}
