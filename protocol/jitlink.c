/*
 * The cuLink* blobs of link_complete (jitlink.h): which JIT options travel,
 * and the encoding and checked decoding of the options and the inputs.
 */
#include "protocol/jitlink.h"

#include <stdio.h>
#include <string.h>

#include "common/image.h"

/* CUjit_option's names, by value (cuda.h, CUDA 13.0) */
static const char *const names[] = {
    "CU_JIT_MAX_REGISTERS", "CU_JIT_THREADS_PER_BLOCK", "CU_JIT_WALL_TIME",
    "CU_JIT_INFO_LOG_BUFFER", "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES", "CU_JIT_ERROR_LOG_BUFFER",
    "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES", "CU_JIT_OPTIMIZATION_LEVEL",
    "CU_JIT_TARGET_FROM_CUCONTEXT", "CU_JIT_TARGET", "CU_JIT_FALLBACK_STRATEGY",
    "CU_JIT_GENERATE_DEBUG_INFO", "CU_JIT_LOG_VERBOSE", "CU_JIT_GENERATE_LINE_INFO",
    "CU_JIT_CACHE_MODE", "CU_JIT_NEW_SM3X_OPT", "CU_JIT_FAST_COMPILE",
    "CU_JIT_GLOBAL_SYMBOL_NAMES", "CU_JIT_GLOBAL_SYMBOL_ADDRESSES", "CU_JIT_GLOBAL_SYMBOL_COUNT",
    "CU_JIT_LTO", "CU_JIT_FTZ", "CU_JIT_PREC_DIV", "CU_JIT_PREC_SQRT", "CU_JIT_FMA",
    "CU_JIT_REFERENCED_KERNEL_NAMES", "CU_JIT_REFERENCED_KERNEL_COUNT",
    "CU_JIT_REFERENCED_VARIABLE_NAMES", "CU_JIT_REFERENCED_VARIABLE_COUNT",
    "CU_JIT_OPTIMIZE_UNUSED_DEVICE_VARIABLES", "CU_JIT_POSITION_INDEPENDENT_CODE",
    "CU_JIT_MIN_CTA_PER_SM", "CU_JIT_MAX_THREADS_PER_BLOCK", "CU_JIT_OVERRIDE_DIRECTIVE_VALUES",
    "CU_JIT_SPLIT_COMPILE",
};
#define NOPTIONS (sizeof names / sizeof *names)

enum ferry_jit_use ferry_jit_option_use(uint32_t option) {
  switch (option) {
  case 1: return FERRY_JIT_THREADS;
  case 2: return FERRY_JIT_WALL_TIME;
  case 3: case 5: return FERRY_JIT_LOG_BUFFER;
  case 4: case 6: return FERRY_JIT_LOG_SIZE;
  /* arrays of the program's names or addresses, and the counts that go
     with them (meaningless alone) */
  case 17: case 18: case 19: case 25: case 26: case 27: case 28: return FERRY_JIT_REFUSED;
  default: return option < NOPTIONS ? FERRY_JIT_PLAIN : FERRY_JIT_REFUSED;
  }
}

const char *ferry_jit_option_name(uint32_t option) {
  static _Thread_local char other[32];
  if (option < NOPTIONS) return names[option];
  snprintf(other, sizeof other, "CUjit_option %u", option);
  return other;
}

static int put32(struct ferry_buf *b, uint32_t v) { return ferry_buf_append(b, &v, 4); }
static int put64(struct ferry_buf *b, uint64_t v) { return ferry_buf_append(b, &v, 8); }

int ferry_jit_put_option(struct ferry_buf *b, uint32_t option, uint64_t value) {
  return put32(b, option) || put64(b, value) ? -1 : 0;
}

int ferry_jit_put_input(struct ferry_buf *b, uint32_t type, uint64_t size, const char *name,
                        const struct ferry_buf *options, uint32_t nopts) {
  size_t name_len = name ? strlen(name) : 0;
  if (put32(b, type) || put64(b, size) || put32(b, (uint32_t)name_len) ||
      (name_len && ferry_buf_append(b, name, name_len)) || put32(b, nopts) ||
      (nopts && ferry_buf_append(b, options->data, options->len)))
    return -1;
  return 0;
}

static int travels(uint32_t option) {
  enum ferry_jit_use u = ferry_jit_option_use(option);
  return u != FERRY_JIT_LOG_BUFFER && u != FERRY_JIT_REFUSED;
}

int ferry_jit_options_count(const void *p, size_t len) {
  if (len % FERRY_JIT_OPTION_BYTES || len / FERRY_JIT_OPTION_BYTES > FERRY_JIT_MAX_OPTIONS)
    return -1;
  for (size_t off = 0; off < len; off += FERRY_JIT_OPTION_BYTES)
    if (!travels(ferry_u32_at((const unsigned char *)p + off))) return -1;
  return (int)(len / FERRY_JIT_OPTION_BYTES);
}

void ferry_jit_option_at(const void *p, uint32_t i, uint32_t *option, uint64_t *value) {
  const unsigned char *o = (const unsigned char *)p + (size_t)i * FERRY_JIT_OPTION_BYTES;
  *option = ferry_u32_at(o);
  *value = ferry_u64_at(o + 4);
}

int ferry_jit_next_input(const void *p, size_t len, size_t *pos, struct ferry_jit_input *in) {
  const unsigned char *b = p;
  size_t at = *pos;
  if (at == len) return 0;
  if (at > len || len - at < 16) return -1;
  in->type = ferry_u32_at(b + at);
  in->size = ferry_u64_at(b + at + 4);
  in->name_len = ferry_u32_at(b + at + 12);
  at += 16;
  if (in->type >= FERRY_JIT_INPUT_TYPES || in->name_len > FERRY_JIT_MAX_NAME ||
      len - at < (size_t)in->name_len + 4)
    return -1;
  in->name = (const char *)b + at;
  if (memchr(in->name, '\0', in->name_len)) return -1;
  at += in->name_len;
  in->nopts = ferry_u32_at(b + at);
  at += 4;
  if (in->nopts > FERRY_JIT_MAX_OPTIONS ||
      len - at < (size_t)in->nopts * FERRY_JIT_OPTION_BYTES)
    return -1;
  in->options = b + at;
  size_t olen = (size_t)in->nopts * FERRY_JIT_OPTION_BYTES;
  if (ferry_jit_options_count(in->options, olen) < 0) return -1;
  *pos = at + olen;
  return 1;
}
