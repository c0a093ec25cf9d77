/*
 * The targets of a migration, opened before the program is held: the GPU
 * in this process (its context and the vGPU's arena), a ferry-mhelper, or
 * another server's session at the same arena addresses; and mem-sync's
 * buffers there, page-locked ahead. migrate.c takes them from here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/setting.h"
#include "shim/migrate/migrate_int.h"
#include "transport/reader.h"

static int link_target_call(void *ctx, unsigned call, const void *args, void *rets,
                            const struct ferry_bulk *bulk) {
  return ferry_link_call(ctx, call, args, rets, bulk);
}

void mig_target_name(const struct mig *m, char *out, size_t n) {
  if (m->url) {
    char full[320];
    ferry_url_format(m->url, full, sizeof full);
    ferry_echo_url(full, out, n);
  } else {
    snprintf(out, n, "local GPU %d%s", m->gpu, m->helper ? " (ferry-mhelper)" : "");
  }
}

/* a helper is opened, its GPU and staging set up, before the hold */
int mig_open_helper(struct mig *m) {
  char why[256] = "";
  m->tl = calloc(1, sizeof *m->tl);
  if (!m->tl) return mig_fail(m, "out of memory");
  if (ferry_helper_start(m->v, m->gpu, m->tl, NULL, why, sizeof why)) return mig_fail(m, "%s", why);
  if (mig_cuttable(m, m->tl->conn)) return -1;
  if (mig_fault("reserve")) return mig_fail(m, "cannot reserve the device arena at the same address "
                                       "(injected fault)");
  if (ferry_staging_open(m->tl, why, sizeof why)) return mig_fail(m, "%s", why);
  m->t = (struct ferry_target){link_target_call, m->tl};
  return 0;
}

void mig_blame_target(struct mig *m) {
  struct ferry_link *l = m->tl;
  if (!m->err || !l || !l->dead) return;
  const char *why = l->goodbye[0] ? l->goodbye : l->lost;
  if (!why[0] || strstr(m->err, why)) return; /* said already (the hello) */
  char name[320], step[256];
  mig_target_name(m, name, sizeof name);
  snprintf(step, sizeof step, "%s", m->err);
  snprintf(m->err, m->errlen, "%s: %s%s%s%s", name, why, step[0] ? " (" : "", step, step[0] ? ")" : "");
}

void mig_close_link(struct mig *m) {
  if (!m->tl) return;
  ferry_link_close(m->tl); /* the helper sees the channel close and exits */
  ferry_staging_free(m->tl->staging);
  free(m->tl->deferred);
  ferry_buf_free(&m->tl->sendbuf);
  pthread_mutex_destroy(&m->tl->send_lock);
  pthread_mutex_destroy(&m->tl->sock_lock);
  pthread_mutex_destroy(&m->tl->call_lock);
  free(m->tl);
  m->tl = NULL;
}

/* another server's session for the vGPU, at the same arena addresses,
   opened before the hold like a helper. What goes wrong is said of the
   target, by its URL: the vGPU's own link is not involved. */
int mig_open_remote(struct mig *m) {
  char why[256] = "";
  struct ferry_vgpu *v = m->v;
  m->tl = calloc(1, sizeof *m->tl);
  if (!m->tl) return mig_fail(m, "out of memory");
  char full[320], name[FERRY_ECHO_MAX + 4];
  ferry_url_format(m->url, full, sizeof full);
  mig_target_name(m, name, sizeof name);
  ferry_link_init(m->tl, v->index, full);
  m->tl->quiet = 1;
  const struct ferry_transport *tr = ferry_transport_find(m->url->scheme, why, sizeof why);
  if (!tr) return mig_fail(m, "%s: %s", name, why);
  if (!(m->tl->conn = tr->connect(m->url, ferry_connect_timeout_ms(), why, sizeof why)))
    return mig_fail(m, "%s", why);
  if (!(m->tl->reader = malloc(sizeof *m->tl->reader))) return mig_fail(m, "out of memory");
  ferry_reader_init(m->tl->reader, m->tl->conn);
  if (mig_cuttable(m, m->tl->conn)) return -1;
  struct ferry_hello_rets r;
  m->tl->streams = m->url->streams;
  if (ferry_link_hello(m->tl, (uint32_t)(m->url->gpu < 0 ? 0 : m->url->gpu),
                       ferry_arena_base(v->index), &r, ferry_connect_timeout_ms()))
    return mig_fail(m, "%s: %s", name,
                    m->tl->goodbye[0] ? m->tl->goodbye
                    : m->tl->lost[0]  ? m->tl->lost
                                      : "the server refused the session");
  /* the program's allocations keep their addresses: the new GPU must map
     memory in the same steps */
  if ((r.granularity ? r.granularity : (2u << 20)) != v->granularity)
    return mig_fail(m, "%s maps device memory in steps of %llu bytes, device %d's in %llu", name,
                (unsigned long long)r.granularity, v->index, (unsigned long long)v->granularity);
  ferry_link_stripes_open(m->tl);
  m->t = (struct ferry_target){link_target_call, m->tl};
  return 0;
}

/* the in-process target, opened before the hold: the arena's placeholder
   must go just before the driver reserves the range */
int mig_open_local(struct mig *m) {
  char why[256] = "";
  if (mig_fault("reserve")) {
    ferry_placeholder_release(m->v);
    return mig_fail(m, "cannot reserve the device arena at the same address (injected fault)");
  }
  m->L = ferry_local_open(m->v, m->gpu, why, sizeof why);
  if (!m->L) return mig_fail(m, "%s", why);
  m->t = ferry_exec_target(ferry_local_exec(m->L));
  return 0;
}


/* FERRY_MEMSYNC_BUFFER: the largest buffer (bytes, 1 MiB to 256 MiB; 4 MiB
   by default): one request's bytes */
uint64_t mig_buffer_max(void) {
  static uint64_t max;
  if (!max) {
    uint64_t v = 0;
    if (!ferry_env_uint("FERRY_MEMSYNC_BUFFER", 1u << 20, 256u << 20, &v,
                        "bytes from 1048576 to 268435456", "4194304"))
      v = 0;
    max = v ? v / 4096 * 4096 : MEMSYNC_MAX_BUFFER;
  }
  return max;
}

/* a buffer for total bytes: page-rounded, at most mig_buffer_max()
   (page-locking is paid per byte, and 2 x 4 MiB cost a millisecond where
   one 4 KiB region needs a page) */
uint64_t mig_buffer_size(uint64_t total) {
  uint64_t page = 4096, need = (total + page - 1) / page * page, max = mig_buffer_max();
  return need < page ? page : need > max ? max : need;
}

void mig_buffers_close(struct mig *m) {
  for (int i = 0; i < MEMSYNC_BUFFERS; i++) {
    struct ferry_host_unregister_args u = {(uint64_t)(uintptr_t)m->bufs[i]};
    if (m->registered[i]) mig_tcall(m, FERRY_CALL_host_unregister, &u, NULL);
    if (m->bufs[i] && (uint64_t)(uintptr_t)m->bufs[i] - FERRY_HOST_ARENA_BASE < FERRY_HOST_ARENA_SIZE)
      ferry_host_shared_free(m->bufs[i]);
    else
      free(m->bufs[i]);
    m->bufs[i] = NULL;
    m->registered[i] = 0;
  }
  m->buf_bytes = 0;
}

/* two buffers of bytes each; the target page-locks them (another server
   cannot read this process: its bytes travel with the calls) */
int mig_buffers_open(struct mig *m, uint64_t bytes) {
  for (int i = 0; i < MEMSYNC_BUFFERS; i++) {
    if (m->url) {
      if (posix_memalign(&m->bufs[i], 4096, bytes)) m->bufs[i] = NULL;
    } else {
      m->bufs[i] = ferry_host_shared_alloc(bytes);
      /* in this process any memory will do; a helper needs the shared arena */
      if (!m->bufs[i] && !m->helper && posix_memalign(&m->bufs[i], 4096, bytes)) m->bufs[i] = NULL;
    }
    if (!m->bufs[i]) {
      mig_buffers_close(m);
      return mig_fail(m, "no host memory for mem-sync's buffers");
    }
    m->buf_bytes = bytes;
    if (m->url) continue;
    struct ferry_host_register_args r = {(uint64_t)(uintptr_t)m->bufs[i], bytes};
    int rc = mig_tcall(m, FERRY_CALL_host_register, &r, NULL);
    if (rc) {
      mig_buffers_close(m);
      return mig_fail(m, "cannot page-lock mem-sync's buffers on the local GPU: %s", mig_error_name(rc));
    }
    m->registered[i] = 1;
  }
  return 0;
}

/* the buffers for the memory the vGPU holds now, before the hold */
int mig_buffers_ahead(struct mig *m) {
  pthread_mutex_lock(&m->v->arena_lock);
  uint64_t live = m->v->arena.live_bytes;
  pthread_mutex_unlock(&m->v->arena_lock);
  return mig_buffers_open(m, mig_buffer_size(live));
}

/* closes what a failed migration or a cancelled prepare opened */
void mig_close_opened(struct mig *m) {
  struct ferry_vgpu *v = m->v;
  if (m->t.call) mig_buffers_close(m);
  if (m->L) ferry_local_close(m->L);
  m->L = NULL;
  if (!m->helper && !m->url && !v->placeholder && ferry_placeholder_reserve(v))
    ferry_log("device %d: the address range of its memory could not be set aside again; "
              "host memory may now be mapped there", v->index);
  mig_close_link(m);
  if (m->helper) ferry_host_forget_helper(v->index);
}

int mig_open_ahead(struct mig *m) {
  int failed = m->url ? mig_open_remote(m) : m->helper ? mig_open_helper(m) : mig_open_local(m);
  if (!failed) failed = mig_buffers_ahead(m);
  if (!failed && mig_precopy_enabled()) failed = mig_ahead(m);
  return failed;
}
