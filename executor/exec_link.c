/*
 * JIT linking (link_complete): the client's cuLinkCreate, cuLinkAddData and
 * cuLinkComplete, run here as one link on this GPU's driver, which compiles
 * PTX for this GPU. The linked image and the logs go back; nothing is kept
 * (the program loads the image with module_load, which migration replays).
 * The driver's own result travels in the reply, so that a link that failed
 * still brings its error log.
 */
#include "executor/exec_internal.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/jitlink.h"
#include "protocol/wire.h"

#define MAX_INPUT_BYTES (4ull << 30)
/* the reply's body holds the image and both logs */
#define MAX_REPLY_BLOBS (FERRY_MAX_BODY - 4096)

/* options as the driver takes them: a log size brings its buffer of that
   size (the server's own), the outputs remember where they are */
struct jit_opts {
  CUjit_option opt[2 * FERRY_JIT_MAX_OPTIONS];
  void *val[2 * FERRY_JIT_MAX_OPTIONS];
  unsigned n;
  char *log[2]; /* info, error */
  int size_at[2], wall_at, threads_at;
  /* CUDA says the wall time overwrites the option's value; a driver that
     took the value for a float * finds this one */
  float wall;
};

static int jit_opts(struct jit_opts *o, const unsigned char *p, uint32_t n, int per_input) {
  for (uint32_t i = 0; i < n; i++) {
    uint32_t opt;
    uint64_t v;
    ferry_jit_option_at(p, i, &opt, &v);
    enum ferry_jit_use use = ferry_jit_option_use(opt);
    if (per_input && use != FERRY_JIT_PLAIN) return EXEC_INVALID_VALUE;
    if (use == FERRY_JIT_LOG_SIZE) {
      int k = opt == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
      if (o->log[k]) return EXEC_INVALID_VALUE; /* given twice */
      size_t size = v > FERRY_JIT_MAX_LOG ? FERRY_JIT_MAX_LOG : (size_t)v;
      if (!(o->log[k] = calloc(1, size ? size : 1))) return EXEC_MEMORY_ALLOCATION;
      o->opt[o->n] = k ? CU_JIT_ERROR_LOG_BUFFER : CU_JIT_INFO_LOG_BUFFER;
      o->val[o->n++] = o->log[k];
      o->size_at[k] = (int)o->n;
      v = size;
    } else if (use == FERRY_JIT_WALL_TIME) {
      o->wall_at = (int)o->n, v = (uintptr_t)&o->wall;
    } else if (use == FERRY_JIT_THREADS) {
      o->threads_at = (int)o->n;
    }
    o->opt[o->n] = (CUjit_option)opt;
    o->val[o->n++] = (void *)(uintptr_t)v;
  }
  return EXEC_OK;
}

/* every input's bytes, in one buffer */
static int read_inputs(struct ferry_bulk_in *in, const ferry_blob *table, char **out) {
  uint64_t total = 0;
  size_t pos = 0;
  struct ferry_jit_input ji;
  int rc;
  while ((rc = ferry_jit_next_input(table->ptr, table->len, &pos, &ji)) == 1) {
    if (ji.size > MAX_INPUT_BYTES - total) return EXEC_INVALID_VALUE;
    total += ji.size;
  }
  if (rc < 0 || total != in->len) return EXEC_INVALID_VALUE;
  *out = malloc(total ? (size_t)total : 1);
  if (!*out) return EXEC_MEMORY_ALLOCATION;
  for (uint64_t got = 0; got < total;) {
    size_t k = total - got > (16u << 20) ? (16u << 20) : (size_t)(total - got);
    if (in->read(in->ctx, *out + got, k)) {
      free(*out);
      *out = NULL;
      return EXEC_UNKNOWN;
    }
    got += k;
  }
  return EXEC_OK;
}

/* runs the link; its CUresult, or -1 with *err an executor error */
static CUresult link_run(struct ferry_exec *ex, struct jit_opts *o, const ferry_blob *table,
                         const char *data, CUlinkState *st, void **image, size_t *size,
                         int *err) {
  CUresult res = ex->d->LinkCreate(o->n, o->opt, o->val, st);
  if (res != CUDA_SUCCESS) return res;
  size_t pos = 0;
  struct ferry_jit_input ji;
  char name[FERRY_JIT_MAX_NAME + 1];
  while (ferry_jit_next_input(table->ptr, table->len, &pos, &ji) == 1) {
    struct jit_opts in = {.wall_at = -1, .threads_at = -1};
    if ((*err = jit_opts(&in, ji.options, ji.nopts, 1))) return (CUresult)-1;
    memcpy(name, ji.name, ji.name_len);
    name[ji.name_len] = '\0';
    res = ex->d->LinkAddData(*st, (CUjitInputType)ji.type, (void *)data, (size_t)ji.size,
                             ji.name_len ? name : NULL, in.n, in.n ? in.opt : NULL,
                             in.n ? in.val : NULL);
    if (res != CUDA_SUCCESS) return res;
    data += ji.size;
  }
  return ex->d->LinkComplete(*st, image, size);
}

int ferry_x_link_complete(struct ferry_exec *ex, const struct ferry_link_complete_args *a,
                          struct ferry_link_complete_rets *r, struct ferry_io *io) {
  struct jit_opts o = {.wall_at = -1, .threads_at = -1, .size_at = {-1, -1}};
  int n = ferry_jit_options_count(a->options.ptr, a->options.len);
  char *data = NULL;
  int err = !io->in || n < 0 ? EXEC_INVALID_VALUE : jit_opts(&o, a->options.ptr, (uint32_t)n, 0);
  if (!err) err = read_inputs(io->in, &a->inputs, &data);
  /* refused before any byte was read: the bytes are skipped */
  if (err && err != EXEC_UNKNOWN && io->in && exec_drain(io->in, io->in->len)) err = EXEC_UNKNOWN;
  CUlinkState st = NULL;
  void *image = NULL;
  size_t size = 0;
  CUresult res = CUDA_SUCCESS;
  if (!err) res = link_run(ex, &o, &a->inputs, data, &st, &image, &size, &err);
  free(data);
  if (!err) {
    size_t info = o.log[0] ? strnlen(o.log[0], FERRY_JIT_MAX_LOG) : 0;
    size_t error = o.log[1] ? strnlen(o.log[1], FERRY_JIT_MAX_LOG) : 0;
    if (res == CUDA_SUCCESS && size + info + error > MAX_REPLY_BLOBS) {
      r->image_size = size;
      res = CUDA_ERROR_NOT_SUPPORTED;
      size = 0;
    }
    if (res != CUDA_SUCCESS) size = 0;
    char *buf = exec_ret_alloc(ex, 0, size + info + error);
    if (!buf) {
      err = EXEC_MEMORY_ALLOCATION;
    } else {
      if (size) memcpy(buf, image, size);
      if (info) memcpy(buf + size, o.log[0], info);
      if (error) memcpy(buf + size + info, o.log[1], error);
      r->result = (int32_t)res;
      r->image = (ferry_blob){buf, (uint32_t)size};
      r->info_log = (ferry_blob){buf + size, (uint32_t)info};
      r->error_log = (ferry_blob){buf + size + info, (uint32_t)error};
      /* what the driver wrote back into the option values */
      if (o.size_at[0] >= 0) r->info_filled = (uint32_t)(uintptr_t)o.val[o.size_at[0]];
      if (o.size_at[1] >= 0) r->error_filled = (uint32_t)(uintptr_t)o.val[o.size_at[1]];
      if (o.wall_at >= 0 && o.val[o.wall_at] == &o.wall) {
        memcpy(&r->wall_time, &o.wall, sizeof r->wall_time);
        r->wall_by_pointer = 1;
      } else if (o.wall_at >= 0) {
        memcpy(&r->wall_time, &o.val[o.wall_at], sizeof r->wall_time);
      }
      if (o.threads_at >= 0) r->threads = (uint32_t)(uintptr_t)o.val[o.threads_at];
    }
  }
  if (st) ex->d->LinkDestroy(st);
  free(o.log[0]);
  free(o.log[1]);
  return err;
}
