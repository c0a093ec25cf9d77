/*
 * JIT linking through the driver (cuLinkCreate, cuLinkAddData,
 * cuLinkAddFile, cuLinkComplete, cuLinkDestroy; ptxjit, Numba, CuPy). The
 * link state lives here: its options and a copy of each input. At
 * cuLinkComplete the whole link goes to the vGPU's server in one call
 * (link_complete), whose driver links for its GPU; the linked cubin comes
 * back and stays here until cuLinkDestroy, with the logs, which are copied
 * into the program's buffers. The program loads the image with
 * cuModuleLoadData, which is recorded, so a migration needs nothing of the
 * link. An input's error shows at cuLinkComplete, not at cuLinkAddData.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/jitlink.h"
#include "protocol/wire.h"
#include "shim/driver/cu.h"

#define LINK_MAGIC 0x4b4e494cu /* "LINK" */
/* the inputs' bytes travel as one call's bulk, which the server holds */
#define LINK_MAX_INPUT (4ull << 30)
/* the options and the table of inputs travel in the message's body */
#define LINK_MAX_TABLE (FERRY_MAX_BODY - 4096)

struct cu_link {
  uint32_t magic;
  int vgpu;
  void **values; /* the program's: log sizes, wall time, threads written back */
  char *log[2];  /* info, error: the program's buffers */
  uint32_t cap[2];
  int size_at[2], wall_at, threads_at;
  struct ferry_buf options, inputs, data;
  uint32_t ninputs;
  void *image;
};

static struct cu_link *link_of(CUlinkState h) {
  struct cu_link *l = (struct cu_link *)h;
  return l && l->magic == LINK_MAGIC ? l : NULL;
}

static CUresult refuse_option(const char *call, uint32_t option, const char *why) {
  char what[160];
  snprintf(what, sizeof what, "%s with %s%s", call, ferry_jit_option_name(option), why);
  return ferry_cu_unsupported(what);
}

static void link_free(struct cu_link *l) {
  l->magic = 0;
  ferry_buf_free(&l->options);
  ferry_buf_free(&l->inputs);
  ferry_buf_free(&l->data);
  free(l->image);
  free(l);
}

/* the options of cuLinkCreate: plain values travel, the log buffers stay */
static CUresult link_options(struct cu_link *l, unsigned n, const CUjit_option *opts, void **vals) {
  for (unsigned i = 0; i < n; i++) {
    uint32_t o = (uint32_t)opts[i];
    uint64_t v = (uintptr_t)vals[i];
    switch (ferry_jit_option_use(o)) {
    case FERRY_JIT_REFUSED: return refuse_option("cuLinkCreate", o, "");
    case FERRY_JIT_LOG_BUFFER: l->log[o == CU_JIT_ERROR_LOG_BUFFER] = vals[i]; continue;
    case FERRY_JIT_LOG_SIZE: {
      int k = o == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
      l->cap[k] = (uint32_t)v, l->size_at[k] = (int)i;
      break;
    }
    case FERRY_JIT_WALL_TIME: l->wall_at = (int)i, v = 0; break;
    case FERRY_JIT_THREADS: l->threads_at = (int)i; break;
    case FERRY_JIT_PLAIN: break;
    }
    if (l->options.len / FERRY_JIT_OPTION_BYTES >= FERRY_JIT_MAX_OPTIONS)
      return ferry_cu_unsupported("cuLinkCreate with more than 64 options");
    if (ferry_jit_put_option(&l->options, o, v)) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (int k = 0; k < 2; k++) {
    if (!l->log[k]) l->cap[k] = 0;
    if (l->cap[k]) l->log[k][0] = '\0';
  }
  return CUDA_SUCCESS;
}

CUresult cuLinkCreate(unsigned int n, CUjit_option *options, void **values, CUlinkState *state) {
  struct ferry_vgpu *v;
  CUresult rc = ferry_cu_current(&v);
  if (rc) return rc;
  if (!state || (n && (!options || !values))) return CUDA_ERROR_INVALID_VALUE;
  struct cu_link *l = calloc(1, sizeof *l);
  if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
  *l = (struct cu_link){.magic = LINK_MAGIC, .vgpu = v->index, .values = values,
                        .size_at = {-1, -1}, .wall_at = -1, .threads_at = -1};
  if ((rc = link_options(l, n, options, values))) {
    link_free(l);
    return rc;
  }
  *state = (CUlinkState)l;
  return CUDA_SUCCESS;
}

CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
                       const char *name, unsigned int n, CUjit_option *options, void **values) {
  struct cu_link *l = link_of(state);
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  if (!data || !size || (n && (!options || !values)) || (unsigned)type >= CU_JIT_NUM_INPUT_TYPES)
    return CUDA_ERROR_INVALID_VALUE;
  struct ferry_buf opts = {0};
  CUresult rc = CUDA_SUCCESS;
  for (unsigned i = 0; i < n && !rc; i++) {
    enum ferry_jit_use use = ferry_jit_option_use((uint32_t)options[i]);
    if (use == FERRY_JIT_REFUSED)
      rc = refuse_option("cuLinkAddData", (uint32_t)options[i], "");
    else if (use != FERRY_JIT_PLAIN) /* logs and outputs belong to the link */
      rc = refuse_option("cuLinkAddData", (uint32_t)options[i], " for one input");
    else if (i >= FERRY_JIT_MAX_OPTIONS)
      rc = ferry_cu_unsupported("cuLinkAddData with more than 64 options");
    else if (ferry_jit_put_option(&opts, (uint32_t)options[i], (uintptr_t)values[i]))
      rc = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (!rc && (l->data.len + size > LINK_MAX_INPUT || size > LINK_MAX_INPUT)) {
    ferry_log("cuLinkAddData: a link whose inputs come to %llu bytes (more than the %llu one call "
              "carries) is not supported by ferry; returning CUDA_ERROR_NOT_SUPPORTED",
              (unsigned long long)(l->data.len + size), LINK_MAX_INPUT);
    rc = CUDA_ERROR_NOT_SUPPORTED;
  }
  if (!rc && l->ninputs >= FERRY_JIT_MAX_INPUTS)
    rc = ferry_cu_unsupported("cuLinkAddData of more than 4096 inputs to one link");
  if (!rc && name && strlen(name) > FERRY_JIT_MAX_NAME) name = NULL; /* a name only labels logs */
  if (!rc && (ferry_jit_put_input(&l->inputs, (uint32_t)type, size, name, &opts, n) ||
              ferry_buf_append(&l->data, data, size)))
    rc = CUDA_ERROR_OUT_OF_MEMORY;
  if (!rc) l->ninputs++;
  ferry_buf_free(&opts);
  return rc;
}

/* the file is read here, on the program's machine */
CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path, unsigned int n,
                       CUjit_option *options, void **values) {
  if (!link_of(state)) return CUDA_ERROR_INVALID_HANDLE;
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  size_t len;
  char *buf = ferry_cu_read_file(path, &len);
  if (!buf) return CUDA_ERROR_FILE_NOT_FOUND;
  /* PTX text goes with its NUL */
  CUresult rc = cuLinkAddData(state, type, buf, type == CU_JIT_INPUT_PTX ? len + 1 : len, path,
                              n, options, values);
  free(buf);
  return rc;
}

/* the logs into the program's buffers, and what the driver wrote back */
static void give_back(struct cu_link *l, const struct ferry_link_complete_rets *r) {
  const ferry_blob logs[2] = {r->info_log, r->error_log};
  const uint32_t filled[2] = {r->info_filled, r->error_filled};
  for (int k = 0; k < 2; k++) {
    if (l->cap[k]) {
      size_t n = logs[k].len < l->cap[k] - 1 ? logs[k].len : l->cap[k] - 1;
      if (n) memcpy(l->log[k], logs[k].ptr, n);
      l->log[k][n] = '\0';
    }
    if (l->size_at[k] >= 0)
      l->values[l->size_at[k]] = (void *)(uintptr_t)(filled[k] < l->cap[k] ? filled[k] : l->cap[k]);
  }
  if (l->wall_at >= 0) {
    float ms;
    memcpy(&ms, &r->wall_time, sizeof ms);
    void **slot = &l->values[l->wall_at];
    if (r->wall_by_pointer && *slot) {
      memcpy(*slot, &ms, sizeof ms);
    } else {
      memset(slot, 0, sizeof *slot);
      memcpy(slot, &ms, sizeof ms);
    }
  }
  if (l->threads_at >= 0) l->values[l->threads_at] = (void *)(uintptr_t)r->threads;
}

CUresult cuLinkComplete(CUlinkState state, void **cubin, size_t *size) {
  struct cu_link *l = link_of(state);
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  if (!cubin || !size) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  struct ferry_vgpu *v = &ferry.vgpus[l->vgpu];
  if (ferry_dead(v)) return CUDA_ERROR_DEVICE_UNAVAILABLE;
  if (l->options.len + l->inputs.len > LINK_MAX_TABLE) {
    ferry_log("cuLinkComplete of a link whose options and names come to %zu bytes (more than the "
              "%u of one message) is not supported by ferry; returning CUDA_ERROR_NOT_SUPPORTED",
              l->options.len + l->inputs.len, LINK_MAX_TABLE);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  struct ferry_link_complete_args a = {
      .options = {l->options.data, (uint32_t)l->options.len},
      .inputs = {l->inputs.data, (uint32_t)l->inputs.len}};
  struct ferry_link_complete_rets r;
  struct ferry_bulk bulk = {.in = l->data.data, .in_len = l->data.len};
  rc = FERRY_CU_RT(ferry_call(v, FERRY_CALL_link_complete, &a, &r, &bulk));
  if (rc) return rc;
  give_back(l, &r);
  if (r.result == CUDA_ERROR_NOT_SUPPORTED && r.image_size) {
    ferry_log("cuLinkComplete: a linked image of %llu bytes (more than one reply's %u) is not "
              "supported by ferry; returning CUDA_ERROR_NOT_SUPPORTED",
              (unsigned long long)r.image_size, LINK_MAX_TABLE);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (r.result) return (CUresult)r.result;
  void *image = malloc(r.image.len ? r.image.len : 1);
  if (!image) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(image, r.image.ptr, r.image.len);
  free(l->image);
  l->image = image;
  *cubin = image;
  *size = r.image.len;
  return CUDA_SUCCESS;
}

CUresult cuLinkDestroy(CUlinkState state) {
  struct cu_link *l = link_of(state);
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  link_free(l);
  return CUDA_SUCCESS;
}

/* the first versions have the same form */
#undef cuLinkCreate
#undef cuLinkAddData
#undef cuLinkAddFile
CUresult cuLinkCreate(unsigned int n, CUjit_option *options, void **values, CUlinkState *state) {
  return cuLinkCreate_v2(n, options, values, state);
}
CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
                       const char *name, unsigned int n, CUjit_option *options, void **values) {
  return cuLinkAddData_v2(state, type, data, size, name, n, options, values);
}
CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path, unsigned int n,
                       CUjit_option *options, void **values) {
  return cuLinkAddFile_v2(state, type, path, n, options, values);
}
