/*
 * One client session, run in its own forked child. The child reads frames,
 * decodes them with the generated codec, runs them through the executor and
 * answers SYNC calls. A peer that misbehaves only ever ends its own session:
 * every length and id coming off the wire is checked before it is used, and
 * CUDA errors (bad handles, bad addresses) are just answers, not failures.
 * The per-call path is kept to as few system calls as it can be: every byte
 * of the connection is read through one buffered reader (a small request is
 * one receive), and a reply, bulk bytes and trailer included when they are
 * small, leaves in one send.
 */
#include "server.h"

#include <driver_types.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "executor/exec.h"
#include "protocol/codec.h"
#include "protocol/stripe.h"
#include "transport/reader.h"

/* bulk replies up to this size are held and sent with their header and
   trailer in one send; larger ones go out as the executor produces them */
#define HOLD_MAX (32u << 10)

struct session {
  struct ferry_conn *c;
  const struct server_opts *opts;
  struct ferry_exec *ex;
  struct ferry_decoder dec;
  struct ferry_buf out; /* reply bodies; reused, so no malloc per call */
  char *body;           /* incoming body */
  size_t body_cap;
  void *args, *rets;    /* big enough for any call */
  size_t rets_size;
  unsigned call;        /* the call being served */
  int broken;           /* the connection failed inside a callback */
  char reason[256];     /* why the session ended */
  /* bulk bookkeeping of the current call */
  uint64_t in_left;
  int out_begun;
  uint64_t out_total, out_sent;
  /* a bulk reply whose header (and first bytes) are not sent yet */
  int held;
  struct ferry_frame held_hdr;
  char *hold_buf; /* HOLD_MAX bytes */
  size_t hold_len;
  /* device code may have run since the device was last synchronised, so
     device printf output may sit in the capture pipe */
  int device_ran;
  /* keepalives: while a call runs longer than keepalive_ms and no byte of
     its reply went out yet, a thread sends KEEPALIVE frames, so the client
     tells a long call from a server gone silent. Every send takes send_mu. */
  pthread_mutex_t send_mu;
  pthread_cond_t ka_cond;
  pthread_t ka_thread;
  int ka_started, ka_stop;
  uint32_t keepalive_ms;
  int in_call, reply_started;
  uint64_t last_send_ms;
  /* FERRY_STREAMS: the data connections (stripe.c), and the striped bulk
     of the current call: in, the client's bytes; out, the reply's */
  struct server_stripe stripe;
  uint32_t client_timeout_ms; /* the client's FERRY_CALL_TIMEOUT, 0: none */
  int in_striped, out_striped;
  uint64_t in_seq, in_pos, out_seq;
  /* every read of the connection goes through here: it may already hold
     bytes of the next frame. Last, as it is large. */
  struct ferry_reader rd;
};

static void set_reason(struct session *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_reason(struct session *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->reason, sizeof s->reason, fmt, ap);
  va_end(ap);
}

/* the connection died: remember why, in the words the log wants */
static void conn_failed(struct session *s) {
  if (!s->broken) {
    if (errno == ECONNRESET || errno == EPIPE)
      set_reason(s, "client disconnected");
    else
      set_reason(s, "connection error: %s", strerror(errno));
  }
  s->broken = 1;
}

/* ---- sending ---- */

/* --metrics: counts into this session's shared slot, which the parent
   reads; relaxed, as each count stands alone */
#define STAT_ADD(s, field, n)                                                      \
  do {                                                                             \
    if ((s)->opts->stats)                                                          \
      __atomic_fetch_add(&(s)->opts->stats->field, (uint64_t)(n), __ATOMIC_RELAXED); \
  } while (0)

static uint64_t iov_bytes(const struct iovec *iov, int n) {
  uint64_t sum = 0;
  for (int i = 0; i < n; i++) sum += iov[i].iov_len;
  return sum;
}

static uint64_t mono_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* every frame leaves through here; reply: it is (part of) the call's reply */
static int sendv(struct session *s, const struct iovec *iov, int n, int reply) {
  pthread_mutex_lock(&s->send_mu);
  if (reply) s->reply_started = 1;
  int rc = ferry_sendv(s->c, iov, n);
  s->last_send_ms = mono_ms();
  if (!rc) STAT_ADD(s, bytes_out, iov_bytes(iov, n));
  pthread_mutex_unlock(&s->send_mu);
  return rc;
}

static void *keepalive_main(void *arg) {
  struct session *s = arg;
  struct ferry_frame h = {.magic = FERRY_MAGIC, .kind = FERRY_KIND_KEEPALIVE};
  struct iovec iov = {&h, sizeof h};
  pthread_mutex_lock(&s->send_mu);
  while (!s->ka_stop) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)s->keepalive_ms * 1000000u;
    until.tv_sec += (time_t)(ns / 1000000000u);
    until.tv_nsec = (long)(ns % 1000000000u);
    pthread_cond_timedwait(&s->ka_cond, &s->send_mu, &until);
    /* a frame in the middle of a reply would tear it: only before one */
    if (s->ka_stop || !s->in_call || s->reply_started ||
        mono_ms() - s->last_send_ms < s->keepalive_ms)
      continue;
    if (ferry_sendv(s->c, &iov, 1)) break; /* the call's own send will say why */
    s->last_send_ms = mono_ms();
    STAT_ADD(s, bytes_out, sizeof h);
  }
  pthread_mutex_unlock(&s->send_mu);
  return NULL;
}

static void keepalive_start(struct session *s, uint32_t ms) {
  if (!ms) return;
  s->keepalive_ms = ms < 100 ? 100 : ms;
  s->ka_started = pthread_create(&s->ka_thread, NULL, keepalive_main, s) == 0;
}

static void keepalive_stop(struct session *s) {
  if (!s->ka_started) return;
  pthread_mutex_lock(&s->send_mu);
  s->ka_stop = 1;
  pthread_cond_signal(&s->ka_cond);
  pthread_mutex_unlock(&s->send_mu);
  pthread_join(s->ka_thread, NULL);
}

static int send_frame(struct session *s, unsigned kind, int32_t status, int32_t async_status,
                      const void *body, size_t body_len, const void *bulk, uint64_t bulk_len,
                      uint64_t announced_bulk) {
  struct ferry_frame h = {.magic = FERRY_MAGIC,
                          .kind = (uint16_t)kind,
                          .status = status,
                          .async_status = async_status,
                          .body_len = (uint32_t)body_len,
                          .bulk_len = announced_bulk};
  struct iovec iov[3] = {{&h, sizeof h}, {(void *)body, body_len}, {(void *)bulk, bulk_len}};
  if (sendv(s, iov, 3, kind == FERRY_KIND_REPLY)) {
    conn_failed(s);
    return -1;
  }
  return 0;
}

static int buf_write(void *data, const char *p, size_t n) {
  return ferry_buf_append(data, p, n);
}

/* appends a whole frame with only a body */
static int append_frame(struct ferry_buf *out, unsigned kind, int32_t status, const void *body,
                        size_t body_len) {
  struct ferry_frame h = {.magic = FERRY_MAGIC, .kind = (uint16_t)kind, .status = status,
                          .body_len = (uint32_t)body_len};
  return ferry_buf_append(out, &h, sizeof h) || ferry_buf_append(out, body, body_len) ? -1 : 0;
}

/* GOODBYE body: msgpack [reason]; strings travel with their NUL, like the codec's */
static int pack_goodbye(struct ferry_buf *body, const char *reason) {
  msgpack_packer pk;
  msgpack_packer_init(&pk, body, buf_write);
  size_t n = strlen(reason) + 1;
  return msgpack_pack_array(&pk, 1) || msgpack_pack_str(&pk, n) ||
                 msgpack_pack_str_body(&pk, reason, n)
             ? -1
             : 0;
}

int session_refusal(struct ferry_buf *out, int32_t status, const char *reason) {
  struct ferry_buf body = {0};
  int r = 0;
  if (status) { /* the hello's reply, with every field empty */
    struct ferry_hello_rets none;
    memset(&none, 0, sizeof none);
    r = ferry_encode_rets(FERRY_CALL_hello, &none, &body) ||
        append_frame(out, FERRY_KIND_REPLY, status, body.data, body.len);
    body.len = 0;
  }
  if (!r)
    r = pack_goodbye(&body, reason) ||
        append_frame(out, FERRY_KIND_GOODBYE, 0, body.data, body.len);
  ferry_buf_free(&body);
  return r ? -1 : 0;
}

static void send_goodbye(struct session *s, const char *reason) {
  s->out.len = 0;
  if (pack_goodbye(&s->out, reason)) return;
  send_frame(s, FERRY_KIND_GOODBYE, 0, 0, s->out.data, s->out.len, NULL, 0, 0);
}

/* ---- striped bulk bytes (protocol/stripe.h) ---- */

/* bulk bytes the server sends go striped when there are data connections
   and the copy is large */
static int stripe_this(const struct session *s, uint64_t n) {
  return s->stripe.set && n >= ferry_stripe_min();
}

static void stripe_failed(struct session *s, const char *what) {
  if (!s->broken)
    set_reason(s, "a data connection failed %s: %s", what,
               errno == ECONNRESET || errno == EPIPE ? "client disconnected" : strerror(errno));
  s->broken = 1;
}

/* tests (FERRY_FAULT=stripe_stall): the session goes silent for 10 s
   before the first striped bytes it sends, as a stopped server would */
static void stall_once(void) {
  static int done;
  const char *f = getenv("FERRY_FAULT");
  if (done || !f || strcmp(f, "stripe_stall")) return;
  done = 1;
  nanosleep(&(struct timespec){10, 0}, NULL);
}

static int stripe_send(struct session *s, uint64_t seq, uint64_t total, uint64_t pos, const void *p,
                       size_t n) {
  stall_once();
  if (ferry_stripes_move(s->stripe.set, 1, seq, total, pos, (void *)p, n)) {
    stripe_failed(s, "sending");
    return -1;
  }
  STAT_ADD(s, bytes_out, n);
  return 0;
}

/* a small fixed buffer for the DEFERRED body, so deferred copies cost no malloc */
struct small_buf {
  char data[256];
  size_t len;
};
static int small_write(void *data, const char *p, size_t n) {
  struct small_buf *b = data;
  if (n > sizeof b->data - b->len) return -1;
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

/* DEFERRED frame: body msgpack [token], bulk the copied bytes; a copy
   refused over --max-deferred: [token, why] and no bytes, so that the
   program says why (a client that reads only the token still works) */
static int send_deferred(void *ctx, uint64_t token, const void *p, size_t n, const char *refused) {
  struct session *s = ctx;
  struct small_buf b = {.len = 0};
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, small_write);
  size_t why = refused ? strlen(refused) : 0;
  if (why > sizeof b.data - 32) why = sizeof b.data - 32;
  if (msgpack_pack_array(&pk, refused ? 2 : 1) || msgpack_pack_uint64(&pk, token) ||
      (refused && (msgpack_pack_str(&pk, why) || msgpack_pack_str_body(&pk, refused, why))))
    return -1;
  if (!stripe_this(s, n)) return send_frame(s, FERRY_KIND_DEFERRED, 0, 0, b.data, b.len, p, n, n);
  /* the header first: the client starts receiving the pieces when it reads it */
  struct ferry_frame h = {.magic = FERRY_MAGIC, .kind = FERRY_KIND_DEFERRED,
                          .flags = FERRY_FRAME_STRIPED, .body_len = (uint32_t)b.len, .bulk_len = n};
  struct iovec iov[2] = {{&h, sizeof h}, {b.data, b.len}};
  if (sendv(s, iov, 2, 0)) {
    conn_failed(s);
    return -1;
  }
  return stripe_send(s, ferry_stripes_begin(s->stripe.set, 1), n, 0, p, n);
}

/* everything that must reach the client before a reply: finished deferred
   copies, then device printf output, which only FLUSHES_OUTPUT calls (those
   at which CUDA flushes it) look for, so a query or a create never pays
   the look into the pipe */
static int flush_pending(struct session *s) {
  if (ferry_exec_flush_deferred(s->ex, send_deferred, s) || s->broken) {
    if (!s->broken) conn_failed(s);
    return -1;
  }
  struct capture_out out[CAPTURE_STREAMS];
  capture_take(out, s->device_ran && (ferry_calls[s->call].flags & FLUSHES_OUTPUT));
  /* OUTPUT frames stay below FERRY_MAX_BULK trivially; split for the
     client's sake. The status names the program's stream. */
  int r = 0;
  for (int i = 0; i < CAPTURE_STREAMS; i++) {
    for (size_t off = 0; off < out[i].len && r == 0;) {
      size_t k = out[i].len - off > (1u << 20) ? (1u << 20) : out[i].len - off;
      r = send_frame(s, FERRY_KIND_OUTPUT, out[i].fd, 0, NULL, 0, out[i].buf + off, k, k);
      off += k;
    }
    free(out[i].buf);
  }
  return r;
}

static int encode_rets(struct session *s) {
  s->out.len = 0;
  if (ferry_encode_rets(s->call, s->rets, &s->out)) {
    set_reason(s, "out of memory encoding the reply of %s", ferry_calls[s->call].name);
    return -1;
  }
  return 0;
}

/* ---- bulk callbacks handed to the executor ---- */

static int bulk_in_read(void *ctx, void *dst, size_t n) {
  struct session *s = ctx;
  if (n > s->in_left) return -1; /* the executor asked for more than the client sent */
  if (s->in_striped) {
    if (ferry_stripes_move(s->stripe.set, 0, s->in_seq, s->in_pos + s->in_left, s->in_pos, dst, n)) {
      stripe_failed(s, "receiving");
      return -1;
    }
    s->in_pos += n;
  } else if (ferry_read(&s->rd, dst, n)) {
    conn_failed(s);
    return -1;
  }
  STAT_ADD(s, bytes_in, n);
  s->in_left -= n;
  return 0;
}

static int bulk_out_begin(void *ctx, uint64_t len) {
  struct session *s = ctx;
  if (s->out_begun || len > FERRY_MAX_BULK) return -1;
  /* the reply header goes out now, so whatever must precede it goes first */
  if (flush_pending(s) || encode_rets(s)) return -1;
  s->out_begun = 1;
  s->out_total = len;
  s->out_sent = 0;
  /* the header goes out with the first bytes as ever; the bytes themselves
     over the data connections, and the final status after the last */
  s->out_striped = stripe_this(s, len);
  if (s->out_striped) s->out_seq = ferry_stripes_begin(s->stripe.set, 1);
  /* the header waits for the first bytes (and, for a small reply, the
     trailer): s->out keeps the encoded rets until then */
  s->held = 1;
  s->hold_len = 0;
  s->held_hdr = (struct ferry_frame){.magic = FERRY_MAGIC,
                                     .kind = FERRY_KIND_REPLY,
                                     .flags = s->out_striped ? FERRY_FRAME_STRIPED : 0,
                                     .async_status = ferry_exec_take_async_error(s->ex),
                                     .body_len = (uint32_t)s->out.len,
                                     .bulk_len = len};
  return 0;
}

/* sends the held header and bytes, then p[0..n) and tail[0..tail_n) */
static int send_held(struct session *s, const void *p, size_t n, const void *tail,
                     size_t tail_n) {
  struct iovec iov[5];
  int k = 0;
  if (s->held) {
    iov[k++] = (struct iovec){&s->held_hdr, sizeof s->held_hdr};
    iov[k++] = (struct iovec){s->out.data, s->out.len};
    iov[k++] = (struct iovec){s->hold_buf, s->hold_len};
  }
  iov[k++] = (struct iovec){(void *)p, n};
  iov[k++] = (struct iovec){(void *)tail, tail_n};
  s->held = 0;
  if (sendv(s, iov, k, 1)) {
    conn_failed(s);
    return -1;
  }
  return 0;
}

static int bulk_out_write(void *ctx, const void *p, size_t n) {
  struct session *s = ctx;
  if (!s->out_begun || n > s->out_total - s->out_sent) return -1;
  s->out_sent += n;
  if (s->out_striped) {
    if (s->held && send_held(s, NULL, 0, NULL, 0)) return -1;
    return stripe_send(s, s->out_seq, s->out_total, s->out_sent - n, p, n);
  }
  if (s->held && s->out_total <= HOLD_MAX) { /* small: all of it goes with the trailer */
    memcpy(s->hold_buf + s->hold_len, p, n);
    s->hold_len += n;
    return 0;
  }
  return send_held(s, p, n, NULL, 0);
}

/* skips bulk bytes the executor did not consume, to stay in step with the frame */
static int discard_bulk(struct session *s) {
  char sink[65536];
  while (s->in_left) {
    size_t k = s->in_left > sizeof sink ? sizeof sink : (size_t)s->in_left;
    if (bulk_in_read(s, sink, k)) return -1;
  }
  return 0;
}

/* fills an announced bulk reply that the executor stopped short of */
static int pad_bulk(struct session *s) {
  static const char zeros[65536];
  while (s->out_sent < s->out_total) {
    uint64_t left = s->out_total - s->out_sent;
    if (bulk_out_write(s, zeros, left > sizeof zeros ? sizeof zeros : (size_t)left)) return -1;
  }
  return 0;
}

/* ---- receiving ---- */


int session_check_header(const struct ferry_frame *h, char *why, size_t n) {
  if (h->magic != FERRY_MAGIC)
    snprintf(why, n, "malformed frame: bad magic 0x%08" PRIx32 " (not a ferry client?)", h->magic);
  else if (h->flags & ~FERRY_FRAME_STRIPED)
    snprintf(why, n, "malformed frame: flags 0x%x are reserved", h->flags);
  else if (h->body_len > FERRY_MAX_BODY)
    snprintf(why, n, "malformed frame: body of %" PRIu32 " bytes exceeds %u", h->body_len,
             FERRY_MAX_BODY);
  else if (h->bulk_len > FERRY_MAX_BULK)
    snprintf(why, n, "malformed frame: bulk of %" PRIu64 " bytes exceeds the limit", h->bulk_len);
  else if (!ferry_call_valid(h->kind) && h->kind >= FERRY_KIND_REPLY)
    snprintf(why, n, "malformed frame: kind 0x%x is a server frame", h->kind);
  else if (!ferry_call_valid(h->kind))
    snprintf(why, n, "unknown call id %u", h->kind);
  else if (h->bulk_len && !(ferry_calls[h->kind].flags & BULK_IN))
    snprintf(why, n, "malformed frame: %s carries %" PRIu64 " bulk bytes it does not take",
             ferry_calls[h->kind].name, h->bulk_len);
  else if ((h->flags & FERRY_FRAME_STRIPED) && !h->bulk_len)
    snprintf(why, n, "malformed frame: %s is striped but has no bulk bytes",
             ferry_calls[h->kind].name);
  else
    return 0;
  return -1;
}

/* reads a header; -1 when the connection is gone, -2 for a protocol error */
static int read_header(struct session *s, struct ferry_frame *h) {
  if (ferry_read(&s->rd, h, sizeof *h)) {
    conn_failed(s);
    return -1;
  }
  STAT_ADD(s, bytes_in, sizeof *h);
  if (session_check_header(h, s->reason, sizeof s->reason)) return -2;
  if ((h->flags & FERRY_FRAME_STRIPED) && !s->stripe.set) {
    set_reason(s, "protocol violation: %s is striped, but there are no data connections",
               ferry_calls[h->kind].name);
    return -2;
  }
  return 0;
}

/* reads (or, when from is set, copies) the body and decodes it into
   s->args; -1 broken, -2 protocol */
static int read_body(struct session *s, const struct ferry_frame *h, const char *from) {
  if (h->body_len > s->body_cap) {
    size_t cap = s->body_cap ? s->body_cap : 4096;
    while (cap < h->body_len) cap *= 2;
    char *p = realloc(s->body, cap);
    if (!p) {
      set_reason(s, "out of memory for a %" PRIu32 " byte body", h->body_len);
      return -2;
    }
    s->body = p;
    s->body_cap = cap;
  }
  if (from) {
    if (h->body_len) memcpy(s->body, from, h->body_len);
  } else if (ferry_read(&s->rd, s->body, h->body_len)) {
    conn_failed(s);
    return -1;
  }
  STAT_ADD(s, bytes_in, h->body_len);
  if (ferry_decode_args(&s->dec, h->kind, s->body, h->body_len, s->args)) {
    set_reason(s, "malformed frame: %s", s->dec.error);
    return -2;
  }
  return 0;
}

/* ---- hello ---- */

/* the deadline of a hello the parent did not read */
static char alarm_msg[512];
static size_t alarm_len;

static void on_handshake_alarm(int sig) {
  (void)sig;
  ssize_t w = write(ferry_log_fd(), alarm_msg, alarm_len); /* async-signal-safe, unlike ferry_log */
  (void)w;
  _exit(SESSION_PROTOCOL);
}

/* the process ends itself if the hello is not complete within ms; a timer,
   since the transport (ib://: its RDMA setup, then the hello) may block */
static void arm_handshake(const struct ferry_conn *c, int ms) {
  int n = snprintf(alarm_msg, sizeof alarm_msg,
                   "ferry-server[%d]: session from %s ended: handshake timeout: no complete "
                   "hello within %d ms\n", (int)getpid(), c->peer, ms);
  alarm_len = n < 0 ? 0 : (size_t)n < sizeof alarm_msg ? (size_t)n : sizeof alarm_msg - 1;
  struct sigaction sa = {0};
  sa.sa_handler = on_handshake_alarm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval t = {.it_value = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000}};
  setitimer(ITIMER_REAL, &t, NULL);
}

static void disarm_handshake(void) {
  struct itimerval t = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &t, NULL);
  signal(SIGALRM, SIG_DFL);
}

/* compares in time independent of where the strings differ, over all of
   the secret: expected holds no NUL (server_read_token refuses one), so its
   strlen is its whole length; a given token that ends early (a NUL on the
   wire) or goes on differs in length */
static int token_matches(const char *given, const char *expected) {
  if (!given) return 0;
  size_t n = strlen(expected), m = strlen(given);
  unsigned diff = (unsigned)(n ^ m);
  for (size_t i = 0; i < n; i++) diff |= (unsigned char)expected[i] ^ (unsigned char)(i < m ? given[i] : 0);
  return diff == 0;
}

int session_check_hello(const struct server_opts *opts, const struct ferry_hello_args *a,
                        char *why, size_t n) {
  if (opts->setup_error) {
    snprintf(why, n, "%s", opts->setup_error);
    return cudaErrorNoDevice;
  }
  if (opts->token && !token_matches(a->token, opts->token)) {
    snprintf(why, n, "authentication failed: %s token (set FERRY_TOKEN_FILE to the "
             "file the server's --token-file names)", a->token ? "wrong" : "no");
    return cudaErrorNotPermitted;
  }
  if (a->version != FERRY_PROTOCOL_VERSION) {
    snprintf(why, n, "protocol version mismatch: client speaks %" PRIu32
             ", this server speaks %u (update ferry on one side)", a->version,
             FERRY_PROTOCOL_VERSION);
    return cudaErrorInsufficientDriver;
  }
  return 0;
}

static int open_session(struct session *s, const struct session_hello *pre) {
  struct ferry_frame h;
  int r;
  /* only the reading of the hello is timed: loading the driver may take
     long on a large machine */
  int timed = !pre && s->opts->handshake_ms > 0;
  if (timed) arm_handshake(s->c, s->opts->handshake_ms);
  if (pre) { /* checked by the parent already; checked again, as it is cheap */
    h = pre->h;
    STAT_ADD(s, bytes_in, sizeof h); /* its body is counted as it is copied */
    r = session_check_header(&h, s->reason, sizeof s->reason) ? -2 : 0;
  } else {
    r = read_header(s, &h);
  }
  if (r == 0 && h.kind != FERRY_CALL_hello) {
    set_reason(s, "protocol violation: first frame is %s, not hello", ferry_calls[h.kind].name);
    r = -2;
  }
  if (r == 0) r = read_body(s, &h, pre ? pre->body : NULL);
  if (timed) disarm_handshake();
  if (r == -1) return SESSION_OK;
  if (r == -2) {
    send_goodbye(s, s->reason);
    return SESSION_PROTOCOL;
  }
  s->call = FERRY_CALL_hello;
  const struct ferry_hello_args *a = s->args;
  struct ferry_hello_rets *rets = s->rets;
  memset(rets, 0, s->rets_size);

  int status = 0;
  const struct ferry_driver *drv = NULL;
  unsigned gpu = a->gpu;
  char err[256] = "";
  const char *place = s->opts->helper ? "machine" : "server";
  if ((status = session_check_hello(s->opts, a, err, sizeof err))) {
    /* refused: err says why */
  } else if (s->opts->ngpus && a->gpu >= (unsigned)s->opts->ngpus) {
    status = cudaErrorInvalidDevice;
    snprintf(err, sizeof err, "GPU %" PRIu32 " is out of range: this server offers %d GPU%s",
             a->gpu, s->opts->ngpus, s->opts->ngpus == 1 ? "" : "s");
  } else {
    if (s->opts->ngpus) gpu = (unsigned)s->opts->gpus[a->gpu];
    drv = server_load_driver(s->opts, err, sizeof err);
    int count = 0;
    if (!drv) {
      status = cudaErrorNoDevice;
    } else if (drv->Init(0) != CUDA_SUCCESS || drv->DeviceGetCount(&count) != CUDA_SUCCESS) {
      status = cudaErrorNoDevice;
      snprintf(err, sizeof err, "the %s driver failed to initialise", drv->name);
    } else if (gpu >= (unsigned)count) {
      status = cudaErrorInvalidDevice;
      snprintf(err, sizeof err, "GPU %" PRIu32 " is out of range: this %s has %d GPU%s",
               a->gpu, place, count, count == 1 ? "" : "s");
    } else {
      s->ex = ferry_exec_open(drv, gpu, a->arena_base, a->arena_size, err, sizeof err);
      if (!s->ex) status = cudaErrorNoDevice;
      else if (s->opts->host_size) ferry_exec_allow_host(s->ex, s->opts->host_base, s->opts->host_size);
      if (s->ex) ferry_exec_set_limits(s->ex, s->opts->max_deferred, s->opts->max_session_mem);
      if (s->ex && s->opts->broker) ferry_exec_set_broker(s->ex, s->opts->broker);
    }
  }

  static char name[256];
  static int32_t attrs[FERRY_NATTRS];
  static uint8_t uuid[16];
  if (s->ex && ferry_exec_describe(s->ex, rets, name, sizeof name, attrs, FERRY_NATTRS, uuid)) {
    status = cudaErrorNoDevice;
    snprintf(err, sizeof err, "cannot read the properties of GPU %u", gpu);
  }
  if (status) {
    /* the same bytes as the server's parent sends when it refuses a hello */
    s->out.len = 0;
    if (session_refusal(&s->out, status, err)) return SESSION_INTERNAL;
    struct iovec iov = {s->out.data, s->out.len};
    if (sendv(s, &iov, 1, 1)) conn_failed(s);
    set_reason(s, "hello refused: %s", err);
    return SESSION_SETUP;
  }
  if (encode_rets(s)) return SESSION_INTERNAL;
  uint32_t keepalive_ms = a->keepalive_ms; /* args are the next call's from here on */
  s->client_timeout_ms = keepalive_ms > UINT32_MAX / 4 ? 0 : keepalive_ms * 4;
  if (send_frame(s, FERRY_KIND_REPLY, status, 0, s->out.data, s->out.len, NULL, 0, 0))
    return SESSION_OK;
  keepalive_start(s, keepalive_ms);
  if (!s->opts->quiet) {
    if (s->opts->ngpus)
      ferry_log("session from %s: client pid %" PRIu32 " on GPU %" PRIu32 " (physical %u, %s)",
                s->c->peer, a->client_pid, a->gpu, gpu, rets->name ? rets->name : "?");
    else
      ferry_log("session from %s: client pid %" PRIu32 " on GPU %u (%s)", s->c->peer,
                a->client_pid, gpu, rets->name ? rets->name : "?");
  }
  return -1; /* keep going */
}

/* ---- the call loop ---- */

/* --metrics: one more call (and error), and the device memory it left mapped */
static void count_call(struct session *s, int status) {
  if (!s->opts->stats) return;
  STAT_ADD(s, calls, 1);
  if (status != cudaSuccess) STAT_ADD(s, errors, 1);
  __atomic_store_n(&s->opts->stats->mapped, ferry_exec_mapped(s->ex), __ATOMIC_RELAXED);
}

/* stripe_open and stripe_attach: the session's own calls, not the executor's */
static int serve_stripe(struct session *s) {
  int status = cudaSuccess;
  const char *why = NULL;
  if (s->call == FERRY_CALL_stripe_open) {
    const struct ferry_stripe_open_args *a = s->args;
    struct ferry_stripe_open_rets *r = s->rets;
    status = server_stripe_open(&s->stripe, s->c, s->opts->parent, a->streams, &r->port, &why);
    if (!status) r->key = (ferry_blob){s->stripe.key, sizeof s->stripe.key};
    else ferry_debug("stripe_open refused: %s", why);
  } else {
    const struct ferry_stripe_attach_args *a = s->args;
    struct ferry_stripe_attach_rets *r = s->rets;
    if (!s->stripe.parent) status = cudaErrorInvalidValue; /* no stripe_open before */
    else r->streams = server_stripe_attach(&s->stripe, a->streams, (int)s->client_timeout_ms,
                                           s->c->peer, s->opts->quiet);
  }
  if (encode_rets(s)) return -2;
  return send_frame(s, FERRY_KIND_REPLY, status, 0, s->out.data, s->out.len, NULL, 0, 0);
}

static int serve_one(struct session *s, const struct ferry_frame *h) {
  unsigned flags = ferry_calls[h->kind].flags;
  s->call = h->kind;
  s->in_striped = (h->flags & FERRY_FRAME_STRIPED) != 0;
  s->out_striped = 0;
  if (s->in_striped) {
    s->in_seq = ferry_stripes_begin(s->stripe.set, 0);
    s->in_pos = 0;
  }
  if (flags & LAUNCHES) s->device_ran = 1;
  struct ferry_bulk_in in = {.len = h->bulk_len, .read = bulk_in_read, .ctx = s};
  struct ferry_bulk_out out = {.begin = bulk_out_begin, .write = bulk_out_write, .ctx = s};
  struct ferry_io io = {.in = (flags & BULK_IN) ? &in : NULL,
                        .out = (flags & BULK_OUT) ? &out : NULL};
  s->in_left = h->bulk_len;
  s->out_begun = 0;
  s->out_total = s->out_sent = 0;
  memset(s->rets, 0, s->rets_size);

  pthread_mutex_lock(&s->send_mu);
  s->in_call = 1;
  s->reply_started = 0;
  pthread_mutex_unlock(&s->send_mu);
  if (h->kind == FERRY_CALL_stripe_open || h->kind == FERRY_CALL_stripe_attach)
    return serve_stripe(s);
  int status = ferry_exec_call(s->ex, s->call, s->args, s->rets, &io);
  ferry_debug("%s -> %d", ferry_calls[s->call].name, status);
  count_call(s, status);
  if (s->broken) return -1;
  const char *bad = ferry_exec_violation(s->ex);
  if (bad) {
    set_reason(s, "protocol violation: %s: %s", ferry_calls[s->call].name, bad);
    return -2;
  }
  if (discard_bulk(s)) return -1;
  if (s->out_begun) {
    if (s->out_sent < s->out_total && status == cudaSuccess) status = cudaErrorUnknown;
    if (pad_bulk(s)) return -1;
    if (!s->out_total) { /* no bytes, so no trailer after them: the header says it all */
      s->held_hdr.status = status;
      return send_held(s, NULL, 0, NULL, 0);
    }
    int32_t final = status;
    return send_held(s, NULL, 0, &final, sizeof final);
  }
  if (!(flags & SYNC)) return 0;
  if (flush_pending(s)) return -1;
  /* everything launched is done and its output flushed into the pipe,
     which flush_pending just read */
  if (flags & DRAINS) s->device_ran = 0;
  if (encode_rets(s)) return -2;
  return send_frame(s, FERRY_KIND_REPLY, status, ferry_exec_take_async_error(s->ex), s->out.data,
                    s->out.len, NULL, 0, 0);
}

const struct ferry_driver *server_load_driver(const struct server_opts *opts, char *err,
                                              size_t errlen) {
  if (strcmp(opts->backend, "sim") == 0) return ferry_driver_sim(opts->sim_kernels, err, errlen);
  return ferry_driver_cuda(err, errlen);
}

int session_run(struct ferry_conn *c, const struct server_opts *opts) {
  return session_run_hello(c, opts, NULL);
}

int session_run_hello(struct ferry_conn *c, const struct server_opts *opts,
                      const struct session_hello *hello) {
  struct session s = {.c = c, .opts = opts};
  pthread_mutex_init(&s.send_mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s.ka_cond, &ca);
  pthread_condattr_destroy(&ca);
  ferry_decoder_init(&s.dec);
  size_t amax = 0;
  for (unsigned i = 0; i < FERRY_CALL_LIMIT; i++) {
    if (ferry_args_size[i] > amax) amax = ferry_args_size[i];
    if (ferry_rets_size[i] > s.rets_size) s.rets_size = ferry_rets_size[i];
  }
  ferry_reader_init(&s.rd, c);
  s.args = calloc(1, amax);
  s.rets = calloc(1, s.rets_size);
  s.hold_buf = malloc(HOLD_MAX);
  int status;
  if (!s.args || !s.rets || !s.hold_buf) {
    set_reason(&s, "out of memory");
    status = SESSION_INTERNAL;
  } else if (capture_start()) {
    set_reason(&s, "cannot capture device output: %s", strerror(errno));
    status = SESSION_INTERNAL;
  } else {
    status = open_session(&s, hello);
  }
  while (status < 0) {
    struct ferry_frame h;
    int r = read_header(&s, &h);
    if (r == 0 && h.kind == FERRY_CALL_hello) {
      set_reason(&s, "protocol violation: a second hello");
      r = -2;
    }
    if (r == 0) r = read_body(&s, &h, NULL);
    if (r == 0) r = serve_one(&s, &h);
    pthread_mutex_lock(&s.send_mu);
    s.in_call = 0;
    pthread_mutex_unlock(&s.send_mu);
    if (r == -1) status = SESSION_OK; /* the connection is gone */
    if (r == -2) {
      send_goodbye(&s, s.reason);
      status = SESSION_PROTOCOL;
    }
  }
  keepalive_stop(&s);
  server_stripe_close(&s.stripe);
  if (s.ex) ferry_exec_close(s.ex);
  /* a helper's program says why its hello was refused; the helper need not */
  if (!opts->quiet || (status != SESSION_OK && !(opts->helper && status == SESSION_SETUP)))
    ferry_log("session from %s ended: %s", c->peer, s.reason[0] ? s.reason : "done");
  c->ops->close(c);
  ferry_decoder_destroy(&s.dec);
  ferry_buf_free(&s.out);
  free(s.body);
  free(s.args);
  free(s.rets);
  free(s.hold_buf);
  pthread_cond_destroy(&s.ka_cond);
  pthread_mutex_destroy(&s.send_mu);
  return status;
}
