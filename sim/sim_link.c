/*
 * JIT linking on the CPU (cuLinkCreate, cuLinkAddData, cuLinkComplete,
 * cuLinkDestroy). PTX inputs are checked as far as the simulation can
 * (sim_image.c: a module header, braces that close), cubins as images;
 * every .extern device function must be defined by some input, and a name
 * defined twice fails, as with nvlink. The linked image is a small cubin
 * ELF whose symbol table names the kernels of every input, which
 * cuModuleLoadData takes with those kernels (their CPU twins run them).
 * The log buffers, their sizes and CU_JIT_WALL_TIME are written as the
 * driver writes them, into the caller's option values.
 */
#include "sim/sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/image.h"

struct list {
  char **v;
  size_t n, cap;
};

struct sim_link {
  struct sim_obj obj;
  void **values; /* the caller's: sizes and the wall time are written back */
  char *log[2];  /* info, error: the caller's buffers */
  size_t cap[2], len[2];
  int size_at[2], wall_at, verbose;
  struct list kernels, defined, externs;
  unsigned inputs;
  unsigned char *image;
  size_t image_size;
  uint64_t start_ns;
};

static void list_free(struct list *l) {
  sim_image_names_free(l->v, l->n);
  *l = (struct list){0};
}

static int list_has(const struct list *l, const char *s) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->v[i], s) == 0)
      return 1;
  return 0;
}

/* takes the n names of v (freed on failure too) */
static int list_take(struct list *l, char **v, size_t n) {
  if (l->n + n > l->cap) {
    size_t cap = l->cap ? l->cap : 8;
    while (cap < l->n + n)
      cap *= 2;
    char **p = realloc(l->v, cap * sizeof *p);
    if (!p) {
      sim_image_names_free(v, n);
      return -1;
    }
    l->v = p;
    l->cap = cap;
  }
  if (n)
    memcpy(l->v + l->n, v, n * sizeof *v);
  l->n += n;
  free(v);
  return 0;
}

void sim_link_free(struct sim_obj *o) {
  struct sim_link *k = (struct sim_link *)o;
  list_free(&k->kernels);
  list_free(&k->defined);
  list_free(&k->externs);
  free(k->image);
  free(k);
}

/* appends a line to log 0 (info) or 1 (error), cut at its buffer's size */
static void say(struct sim_link *k, int which, const char *fmt, ...) {
  if (!k->log[which] || k->cap[which] < 2 || k->len[which] + 1 >= k->cap[which])
    return;
  va_list ap;
  va_start(ap, fmt);
  char *at = k->log[which] + k->len[which];
  size_t room = k->cap[which] - k->len[which];
  int n = vsnprintf(at, room, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  k->len[which] += (size_t)n < room ? (size_t)n : room - 1;
  if (k->len[which] + 1 < k->cap[which]) {
    k->log[which][k->len[which]++] = '\n';
    k->log[which][k->len[which]] = '\0';
  }
}

/* the option values the driver writes: what each log holds, the time so far */
static void write_back(struct sim_link *k) {
  for (int i = 0; i < 2; i++)
    if (k->size_at[i] >= 0)
      k->values[k->size_at[i]] = (void *)(uintptr_t)k->len[i];
  if (k->wall_at >= 0) {
    float ms = (float)(sim_now_ns() - k->start_ns) / 1e6f;
    memset(&k->values[k->wall_at], 0, sizeof(void *));
    memcpy(&k->values[k->wall_at], &ms, sizeof ms); /* over the value, as cuda.h says */
  }
}

CUresult sim_LinkCreate(unsigned int n, CUjit_option *options, void **values, CUlinkState *state) {
  CUresult r = sim_enter();
  if (r)
    return r;
  if (!state || (n && (!options || !values)))
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  struct sim_link *k = calloc(1, sizeof *k);
  if (!k)
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  *k = (struct sim_link){.obj.kind = SIM_LINK, .values = values, .size_at = {-1, -1},
                         .wall_at = -1, .start_ns = sim_now_ns()};
  for (unsigned i = 0; i < n; i++) {
    switch (options[i]) {
    case CU_JIT_INFO_LOG_BUFFER: k->log[0] = values[i]; break;
    case CU_JIT_ERROR_LOG_BUFFER: k->log[1] = values[i]; break;
    case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: k->cap[0] = (uintptr_t)values[i], k->size_at[0] = (int)i; break;
    case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: k->cap[1] = (uintptr_t)values[i], k->size_at[1] = (int)i; break;
    case CU_JIT_LOG_VERBOSE: k->verbose = values[i] != NULL; break;
    case CU_JIT_WALL_TIME: k->wall_at = (int)i; break;
    default:
      if ((unsigned)options[i] >= CU_JIT_NUM_OPTIONS) {
        free(k);
        return sim_leave(CUDA_ERROR_INVALID_VALUE);
      }
    }
  }
  for (int i = 0; i < 2; i++) {
    if (!k->log[i])
      k->cap[i] = 0;
    else if (k->cap[i])
      k->log[i][0] = '\0';
  }
  if (sim_register(k)) {
    free(k);
    return sim_leave(CUDA_ERROR_OUT_OF_MEMORY);
  }
  *state = (CUlinkState)k;
  return sim_leave(CUDA_SUCCESS);
}

/* a PTX input: its kernels and its device functions, defined and extern */
static CUresult add_ptx(struct sim_link *k, const char *text, const char *name) {
  char why[160];
  CUresult r = sim_ptx_check(text, why, sizeof why);
  if (r) {
    say(k, 1, "%s", why);
    return r;
  }
  char **kv, **dv, **ev;
  size_t kn, dn, en;
  int named;
  if ((r = sim_image_kernels(text, &kv, &kn, &named)))
    return r;
  if ((r = sim_ptx_funcs(text, &dv, &dn, &ev, &en))) {
    sim_image_names_free(kv, kn);
    return r;
  }
  for (size_t i = 0; i < kn + dn; i++) {
    const char *s = i < kn ? kv[i] : dv[i - kn];
    if (list_has(&k->kernels, s) || list_has(&k->defined, s)) {
      say(k, 1, "error   : Multiple definition of '%s' in '%s'", s, name);
      sim_image_names_free(kv, kn);
      sim_image_names_free(dv, dn);
      sim_image_names_free(ev, en);
      return CUDA_ERROR_INVALID_IMAGE;
    }
  }
  if (k->verbose)
    for (size_t i = 0; i < kn; i++)
      say(k, 0, "ptxas info    : Compiling entry function '%s' for 'sm_90'", kv[i]);
  if (list_take(&k->kernels, kv, kn) | list_take(&k->defined, dv, dn) |
      list_take(&k->externs, ev, en))
    return CUDA_ERROR_OUT_OF_MEMORY;
  return CUDA_SUCCESS;
}

CUresult sim_LinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
                         const char *name, unsigned int n, CUjit_option *options, void **values) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_link *k = sim_lookup(state, SIM_LINK);
  if (!k)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!data || !size || (n && (!options || !values)) || (unsigned)type >= CU_JIT_NUM_INPUT_TYPES)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if (!name)
    name = "<unnamed>";
  if (type == CU_JIT_INPUT_PTX) {
    char *text = strndup(data, size); /* the size may or may not count the NUL */
    r = text ? add_ptx(k, text, name) : CUDA_ERROR_OUT_OF_MEMORY;
    free(text);
  } else if (type == CU_JIT_INPUT_CUBIN) {
    uint64_t len;
    const char *kind;
    char **kv;
    size_t kn;
    int named;
    if (ferry_image_size(data, size, &len, &kind) || strcmp(kind, "cubin") != 0) {
      say(k, 1, "error   : '%s' is not a cubin", name);
      r = CUDA_ERROR_INVALID_IMAGE;
    } else if (!(r = sim_image_kernels(data, &kv, &kn, &named))) {
      r = list_take(&k->kernels, kv, kn) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    }
  } else {
    say(k, 1, "error   : '%s': the simulation links PTX and cubin inputs only", name);
    r = CUDA_ERROR_NOT_SUPPORTED;
  }
  if (!r)
    k->inputs++;
  write_back(k);
  return sim_leave(r);
}

/* ---- the linked image: an ELF64 cubin with one STT_FUNC per kernel ---- */
#define EHDR 64u
#define SHDR 64u
#define SYM 24u

static void put16(unsigned char *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

static void shdr(unsigned char *h, uint32_t name, uint32_t type, uint64_t off, uint64_t size,
                 uint32_t link, uint64_t entsize) {
  put32(h, name);
  put32(h + 4, type);
  put64(h + 24, off);
  put64(h + 32, size);
  put32(h + 40, link);
  put32(h + 44, type == 2 ? 1 : 0); /* symtab: the first global symbol */
  put64(h + 48, type == 2 ? 8 : 1);
  put64(h + 56, entsize);
}

static int build_image(struct sim_link *k) {
  static const char shstr[] = "\0.shstrtab\0.strtab\0.symtab"; /* names at 1, 11, 19 */
  size_t strsz = 1;
  for (size_t i = 0; i < k->kernels.n; i++)
    strsz += strlen(k->kernels.v[i]) + 1;
  size_t shstr_off = EHDR, str_off = shstr_off + sizeof shstr;
  size_t sym_off = (str_off + strsz + 7) & ~(size_t)7, symsz = (k->kernels.n + 1) * SYM;
  size_t sh_off = sym_off + symsz, total = sh_off + 4 * SHDR;
  unsigned char *p = calloc(1, total);
  if (!p)
    return -1;
  memcpy(p, "\177ELF\2\1\1\x33\7", 9); /* 64-bit, little endian, CUDA's OS ABI and version */
  put16(p + 16, 2);                      /* ET_EXEC */
  put16(p + 18, 190);                    /* EM_CUDA */
  put32(p + 20, 1);
  put64(p + 40, sh_off);
  put32(p + 48, 90);                     /* sm_90 */
  put16(p + 52, EHDR);
  put16(p + 54, 56);
  put16(p + 58, SHDR);
  put16(p + 60, 4);
  put16(p + 62, 1); /* .shstrtab */
  memcpy(p + shstr_off, shstr, sizeof shstr);
  size_t at = 1;
  for (size_t i = 0; i < k->kernels.n; i++) {
    size_t len = strlen(k->kernels.v[i]) + 1;
    memcpy(p + str_off + at, k->kernels.v[i], len);
    unsigned char *s = p + sym_off + (i + 1) * SYM;
    put32(s, (uint32_t)at);
    s[4] = 0x12; /* STB_GLOBAL, STT_FUNC */
    at += len;
  }
  unsigned char *h = p + sh_off;
  shdr(h + SHDR, 1, 3, shstr_off, sizeof shstr, 0, 0);
  shdr(h + 2 * SHDR, 11, 3, str_off, strsz, 0, 0);
  shdr(h + 3 * SHDR, 19, 2, sym_off, symsz, 2, SYM);
  free(k->image);
  k->image = p;
  k->image_size = total;
  return 0;
}

CUresult sim_LinkComplete(CUlinkState state, void **cubin, size_t *size) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_link *k = sim_lookup(state, SIM_LINK);
  if (!k)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  if (!cubin || !size)
    return sim_leave(CUDA_ERROR_INVALID_VALUE);
  if (!k->inputs) {
    say(k, 1, "error   : no input to link");
    r = CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; !r && i < k->externs.n; i++)
    if (!list_has(&k->defined, k->externs.v[i])) {
      say(k, 1, "error   : Undefined reference to '%s'", k->externs.v[i]);
      r = CUDA_ERROR_INVALID_IMAGE;
    }
  if (!r && build_image(k))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  if (!r && k->verbose)
    say(k, 0, "info    : linked %u inputs, %zu kernels", k->inputs, k->kernels.n);
  write_back(k);
  if (!r) {
    *cubin = k->image;
    *size = k->image_size;
  }
  return sim_leave(r);
}

CUresult sim_LinkDestroy(CUlinkState state) {
  CUresult r = sim_enter();
  if (r)
    return r;
  struct sim_link *k = sim_lookup(state, SIM_LINK);
  if (!k)
    return sim_leave(CUDA_ERROR_INVALID_HANDLE);
  sim_unregister(k);
  sim_link_free(&k->obj);
  return sim_leave(CUDA_SUCCESS);
}
