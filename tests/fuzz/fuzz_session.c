/*
 * Fuzz harness: a whole server session. The input is what a client sends;
 * it goes through an in-memory connection into session_run (server/
 * session.c) on the CPU simulation, as ferry-server's child would run it.
 * Besides the sanitizers, the server's output is checked: frames of server
 * kinds only (0xff00 and up), sane lengths, and a session that ends for a protocol error
 * says why in a GOODBYE that is msgpack [str].
 *
 * The server captures device printf by turning fd 1 into a pipe, once per
 * session child (server/capture.c); done once per input it would leak a
 * pipe and a thread each time. The sim runs no device code that prints,
 * so these two stand in for it (the linker then leaves capture.o out).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memconn.h"
#include "protocol/codec.h"
#include "server/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int capture_start(void) { return 0; }
void capture_take(struct capture_out out[CAPTURE_STREAMS], int look) {
  (void)look;
  for (int i = 0; i < CAPTURE_STREAMS; i++) out[i] = (struct capture_out){NULL, 0, i + 1};
}

static void fail(const char *what, size_t at) {
  fprintf(stderr, "fuzz_session: %s (output byte %zu)\n", what, at);
  abort();
}

/* Found by this harness and reported, not fixed here (server/ is not
   ours): a BULK_OUT call of zero bytes (memcpy_dtoh of size 0) gets a
   reply with no bulk bytes but a 4-byte final status after it, which
   wire.h (and the shim) only expect after bulk bytes. The walk skips it so
   that fuzzing goes on past it; set this to 0 once session.c is fixed. */
#define TOLERATE_EMPTY_BULK_TRAILER 0

/* Also found and reported: module_load mallocs the bulk length its header
   announces (up to 4 GiB, executor/exec_module.c) before a byte of it has
   come. Inputs that announce more module bytes than they carry are skipped
   so that fuzzing goes on; set this to 0 once the executor is fixed. */
#define TOLERATE_MODULE_LOAD_PREALLOC 0

/* whether a module_load frame in data announces more bulk than follows it */
static int announces_missing_module(const uint8_t *data, size_t size) {
  size_t off = 0;
  struct ferry_frame h;
  while (size - off >= sizeof h) {
    memcpy(&h, data + off, sizeof h);
    if (h.magic != FERRY_MAGIC) return 0;
    off += sizeof h;
    if (h.body_len > size - off) return 0;
    off += h.body_len;
    if (h.bulk_len > size - off) return h.kind == FERRY_CALL_module_load;
    off += (size_t)h.bulk_len;
  }
  return 0;
}

static uint32_t magic_at(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* walks the frames the session sent; returns the kind of the last, 0 for
   none, -1 when the output was kept only in part */
static long check_output(const struct memconn *m) {
  const uint8_t *p = m->out;
  size_t len = m->out_len, off = 0;
  long last = 0;
  while (off < len) {
    struct ferry_frame h;
    if (len - off < sizeof h) return -1;
    memcpy(&h, p + off, sizeof h);
    if (h.magic != FERRY_MAGIC || h.flags) fail("a frame without magic", off);
    if (h.kind < FERRY_KIND_REPLY) fail("a frame of a call's kind from the server", off);
    if (h.body_len > FERRY_MAX_BODY) fail("a body over the limit", off);
    if (h.bulk_len > FERRY_MAX_BULK) fail("a bulk over the limit", off);
    size_t body = off + sizeof h;
    if (len - body < h.body_len) return -1;
    char why[128];
    if (h.body_len && ferry_msgpack_check(p + body, h.body_len, 1, why, sizeof why))
      fail(why, body);
    if (h.kind == FERRY_KIND_GOODBYE) {
      /* [str]: a fixarray of one, then a str that ends in its NUL */
      const uint8_t *b = p + body;
      size_t n = h.body_len, s = 0, hdr = 0;
      if (n < 2 || b[0] != 0x91) fail("a goodbye that is not [reason]", body);
      if (b[1] >= 0xa0 && b[1] <= 0xbf) s = b[1] & 0x1f, hdr = 1;
      else if (b[1] == 0xd9 && n >= 3) s = b[2], hdr = 2;
      else if (b[1] == 0xda && n >= 4) s = (size_t)b[2] << 8 | b[3], hdr = 3;
      else fail("a goodbye whose reason is not a str", body);
      if (1 + hdr + s != n || s < 2 || b[n - 1] != '\0') fail("a goodbye with no reason", body);
    }
    last = h.kind;
    /* bulk bytes follow the body; a reply's end in a 4-byte final status */
    uint64_t rest = h.bulk_len + (h.kind == FERRY_KIND_REPLY && h.bulk_len ? 4 : 0);
    if (rest > len - body - h.body_len) return -1;
    off = body + h.body_len + (size_t)rest;
    if (TOLERATE_EMPTY_BULK_TRAILER && h.kind == FERRY_KIND_REPLY && !h.bulk_len &&
        len - off >= 8 && magic_at(p + off) != FERRY_MAGIC && magic_at(p + off + 4) == FERRY_MAGIC)
      off += 4;
  }
  return last;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t *out;
  if (!out && !(out = malloc(MEMCONN_KEEP))) abort();
  if (TOLERATE_MODULE_LOAD_PREALLOC && announces_missing_module(data, size)) return 0;
  struct memconn m;
  memconn_init(&m, data, size, out);
  /* a session may map 64 MiB: one input that maps and gathers GiBs spends
     seconds in ASan's memmove checks, a timeout that finds nothing (the
     server's --max-session-mem bounds real sessions the same way) */
  struct server_opts opts = {.backend = "sim", .quiet = 1, .max_session_mem = 64ull << 20};
  int st = session_run(&m.c, &opts);
  /* for triage: FERRY_FUZZ_DUMP=file keeps what the session sent */
  const char *dump = getenv("FERRY_FUZZ_DUMP");
  FILE *f = dump ? fopen(dump, "wb") : NULL;
  if (f) {
    fwrite(m.out, 1, m.out_len, f);
    fclose(f);
  }
  if (st < SESSION_OK || st > SESSION_INTERNAL) fail("a status no session returns", 0);
  if (!m.closed) fail("the connection was left open", 0);
  long last = check_output(&m);
  if (st == SESSION_PROTOCOL && last >= 0 && last != FERRY_KIND_GOODBYE)
    fail("a protocol error without a goodbye last", m.out_len);
  return 0;
}
