/*
 * Fat binaries, kernels and device variables. Registration (before main)
 * only records what the program contains; a module is loaded on a vGPU the
 * first time one of its kernels or variables is used there, in one round
 * trip that also brings back every kernel's parameter layout. Kernel
 * handles (cudaKernel_t) are ferry objects that live as long as the
 * program, so they survive a later migration.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "protocol/layout.h"
#include "shim/core/shadow.h"
#include "shim/core/link.h"
#include "shim/core/local.h"
#include "shim/core/hooks.h"
#include "shim/migrate/migrate.h"
#include "shim/runtime/graph.h"

#define FATBIN_WRAPPER_MAGIC 0x466243B1u
#define FATBIN_CONTAINER_MAGIC 0xBA55ED50u
#define KERNEL_MAGIC 0x4b524e4cu

struct ferry_var {
  const void *host_var;
  char *name;
  uint64_t size;
  int constant;
  struct ferry_fatbin *fb;
  uint64_t addr[FERRY_MAX_VGPUS];
  unsigned char present[FERRY_MAX_VGPUS];
};

struct ferry_fatbin {
  uint32_t id;
  const void *image;
  uint64_t image_size;
  struct ferry_kernel **kernels;
  uint32_t nkernels;
  struct ferry_var **vars;
  uint32_t nvars;
  pthread_mutex_t lock;
  unsigned char loaded[FERRY_MAX_VGPUS];
};

struct ferry_kernel {
  uint32_t magic;
  const void *host_fun;
  char *name;
  struct ferry_fatbin *fb;
  uint32_t index;
  int have_layout;
  struct ferry_layout layout;
  unsigned char present[FERRY_MAX_VGPUS];
};

/* host pointer -> object maps; registration is rare, lookups take a read lock */
struct ptr_entry {
  const void *key;
  void *obj;
};
struct ptr_map {
  struct ptr_entry *slots;
  size_t cap, n;
};
static pthread_rwlock_t registry_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct ptr_map kernels_by_host, vars_by_host, kernel_objects;
static uint32_t next_module_id = 1;

uint32_t ferry_module_id_new(void) {
  pthread_rwlock_wrlock(&registry_lock);
  uint32_t id = next_module_id++;
  pthread_rwlock_unlock(&registry_lock);
  return id;
}

static size_t hash_ptr(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

static void *map_get(const struct ptr_map *m, const void *key) {
  if (!m->cap) return NULL;
  for (size_t i = hash_ptr(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (!m->slots[i].key) return NULL;
    if (m->slots[i].key == key) return m->slots[i].obj;
  }
}

static int map_put(struct ptr_map *m, const void *key, void *obj) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    struct ptr_entry *s = calloc(cap, sizeof *s);
    if (!s) return -1;
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->slots[i].key) continue;
      size_t j = hash_ptr(m->slots[i].key, cap);
      while (s[j].key) j = (j + 1) & (cap - 1);
      s[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = s;
    m->cap = cap;
  }
  size_t i = hash_ptr(key, m->cap);
  while (m->slots[i].key && m->slots[i].key != key) i = (i + 1) & (m->cap - 1);
  if (!m->slots[i].key) m->n++;
  m->slots[i] = (struct ptr_entry){key, obj};
  return 0;
}

static void *grow_array(void *arr, uint32_t n, size_t elem) {
  /* arrays grow in powers of two */
  if (n & (n - 1)) return arr;
  return realloc(arr, (n ? n * 2 : 4) * elem);
}

void **__cudaRegisterFatBinary(void *fat_cubin) {
  const struct {
    int magic, version;
    const unsigned long long *data;
    void *filename_or_fatbins;
  } *wrapper = fat_cubin;
  struct ferry_fatbin *fb = calloc(1, sizeof *fb);
  if (!fb) return NULL;
  pthread_mutex_init(&fb->lock, NULL);
  if (wrapper && (uint32_t)wrapper->magic == FATBIN_WRAPPER_MAGIC && wrapper->data) {
    const unsigned char *c = (const unsigned char *)wrapper->data;
    uint32_t magic;
    uint16_t header_size;
    uint64_t fat_size;
    memcpy(&magic, c, 4);
    memcpy(&header_size, c + 6, 2);
    memcpy(&fat_size, c + 8, 8);
    if (magic == FATBIN_CONTAINER_MAGIC) {
      fb->image = c;
      fb->image_size = header_size + fat_size;
    }
  }
  if (!fb->image)
    ferry_log("a fat binary of this program has an unknown format (version %d); its kernels "
              "cannot run under ferry",
              wrapper ? wrapper->version : -1);
  fb->id = ferry_module_id_new();
  if (fb->id > 0xffff) ferry_log("more than 65535 fat binaries registered");
  return (void **)fb;
}

void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }

void __cudaUnregisterFatBinary(void **handle) {
  /* kernel handles stay valid for the program's whole life, and the server
     frees modules when the session ends: nothing to do */
  (void)handle;
}

char __cudaInitModule(void **handle) {
  (void)handle;
  return 1;
}

void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                            const char *device_name, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bdim, dim3 *gdim, int *wsize) {
  (void)device_name, (void)thread_limit, (void)tid, (void)bid, (void)bdim, (void)gdim,
      (void)wsize;
  struct ferry_fatbin *fb = (struct ferry_fatbin *)handle;
  struct ferry_kernel *k = calloc(1, sizeof *k);
  if (!fb || !k) return;
  k->magic = KERNEL_MAGIC;
  k->host_fun = host_fun;
  k->name = strdup(device_fun);
  k->fb = fb;
  pthread_rwlock_wrlock(&registry_lock);
  struct ferry_kernel **arr = grow_array(fb->kernels, fb->nkernels, sizeof *arr);
  if (arr && k->name) {
    fb->kernels = arr;
    k->index = fb->nkernels;
    fb->kernels[fb->nkernels++] = k;
    map_put(&kernels_by_host, host_fun, k);
    map_put(&kernel_objects, k, k);
  }
  pthread_rwlock_unlock(&registry_lock);
}

void __cudaRegisterVar(void **handle, char *host_var, char *device_address,
                       const char *device_name, int ext, size_t size, int constant, int global) {
  (void)device_address, (void)ext, (void)global;
  struct ferry_fatbin *fb = (struct ferry_fatbin *)handle;
  struct ferry_var *var = calloc(1, sizeof *var);
  if (!fb || !var) return;
  var->host_var = host_var;
  var->name = strdup(device_name);
  var->size = size;
  var->constant = constant;
  var->fb = fb;
  pthread_rwlock_wrlock(&registry_lock);
  struct ferry_var **arr = grow_array(fb->vars, fb->nvars, sizeof *arr);
  if (arr && var->name) {
    fb->vars = arr;
    fb->vars[fb->nvars++] = var;
    map_put(&vars_by_host, host_var, var);
  }
  pthread_rwlock_unlock(&registry_lock);
}

void __cudaRegisterManagedVar(void **handle, void **host_var_ptr, char *device_address,
                              const char *device_name, int ext, size_t size, int constant,
                              int global) {
  (void)handle, (void)host_var_ptr, (void)device_address, (void)ext, (void)size, (void)constant,
      (void)global;
  ferry_log("__managed__ variable '%s' is not supported on a remote GPU", device_name);
}

/* builds "a\0b\0c\0" for the names of n items */
static int names_blob(char **out, uint32_t *len, uint32_t n, const char *(*name_of)(void *, uint32_t),
                      void *arr) {
  size_t total = 0;
  for (uint32_t i = 0; i < n; i++) total += strlen(name_of(arr, i)) + 1;
  char *b = malloc(total ? total : 1);
  if (!b) return -1;
  size_t off = 0;
  for (uint32_t i = 0; i < n; i++) {
    size_t l = strlen(name_of(arr, i)) + 1;
    memcpy(b + off, name_of(arr, i), l);
    off += l;
  }
  *out = b;
  *len = (uint32_t)total;
  return 0;
}
static const char *kernel_name(void *arr, uint32_t i) { return ((struct ferry_kernel **)arr)[i]->name; }
static const char *var_name(void *arr, uint32_t i) { return ((struct ferry_var **)arr)[i]->name; }

/* applies a module_load reply; fb->lock held */
static int apply_layouts(struct ferry_fatbin *fb, int vi, ferry_blob funcs, ferry_blob vars) {
  const unsigned char *p = funcs.ptr, *end = p + funcs.len;
  for (uint32_t i = 0; i < fb->nkernels; i++) {
    struct ferry_kernel *k = fb->kernels[i];
    struct ferry_layout l;
    int rc = ferry_layout_read(&p, end, &l);
    if (rc < 0) return -1;
    if (rc > 0) continue; /* not in this module's image for this GPU */
    if (!k->have_layout) {
      k->layout = l;
      k->have_layout = 1;
    } else {
      int same = ferry_layout_equal(&k->layout, &l);
      ferry_layout_free(&l);
      if (!same) {
        ferry_log("kernel %s has a different parameter layout on device %d", k->name, vi);
        continue;
      }
    }
    k->present[vi] = 1;
  }
  const unsigned char *q = vars.ptr, *qend = q + vars.len;
  for (uint32_t i = 0; i < fb->nvars; i++) {
    uint64_t addr, size;
    if (qend - q < 16) return -1;
    memcpy(&addr, q, 8);
    memcpy(&size, q + 8, 8);
    q += 16;
    fb->vars[i]->addr[vi] = addr;
    fb->vars[i]->present[vi] = addr != 0;
  }
  return 0;
}

static int ensure_loaded(struct ferry_fatbin *fb, struct ferry_vgpu *v) {
  if (__atomic_load_n(&fb->loaded[v->index], __ATOMIC_ACQUIRE)) return 0;
  if (!fb->image) return cudaErrorInvalidKernelImage;
  pthread_mutex_lock(&fb->lock);
  int rc = 0;
  if (!fb->loaded[v->index]) {
    struct ferry_module_load_args a = {.module = fb->id};
    struct ferry_module_load_rets r;
    char *fnames = NULL, *vnames = NULL;
    pthread_rwlock_rdlock(&registry_lock);
    rc = names_blob(&fnames, &a.func_names.len, fb->nkernels, kernel_name, fb->kernels) ||
                 names_blob(&vnames, &a.var_names.len, fb->nvars, var_name, fb->vars)
             ? cudaErrorMemoryAllocation
             : 0;
    pthread_rwlock_unlock(&registry_lock);
    a.func_names.ptr = fnames;
    a.var_names.ptr = vnames;
    struct ferry_bulk bulk = {.in = fb->image, .in_len = fb->image_size};
    if (!rc) rc = ferry_call(v, FERRY_CALL_module_load, &a, &r, &bulk);
    if (!rc && apply_layouts(fb, v->index, r.func_layouts, r.var_info)) {
      ferry_log("malformed module reply from %s", v->url_text);
      rc = cudaErrorInvalidKernelImage;
    }
    free(fnames);
    free(vnames);
    if (!rc) __atomic_store_n(&fb->loaded[v->index], 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&fb->lock);
  return rc;
}

void ferry_modules_forget(int vgpu) {
  pthread_rwlock_rdlock(&registry_lock);
  for (size_t i = 0; i < kernel_objects.cap; i++) {
    struct ferry_kernel *k = kernel_objects.slots[i].obj;
    if (k) {
      __atomic_store_n(&k->fb->loaded[vgpu], 0, __ATOMIC_RELEASE);
      k->present[vgpu] = 0;
    }
  }
  for (size_t i = 0; i < vars_by_host.cap; i++) {
    struct ferry_var *var = vars_by_host.slots[i].obj;
    if (var) {
      __atomic_store_n(&var->fb->loaded[vgpu], 0, __ATOMIC_RELEASE);
      var->present[vgpu] = 0;
    }
  }
  pthread_rwlock_unlock(&registry_lock);
}

/* a pointer that is no kernel: CUDA 13 says "invalid resource handle" (H100, driver 580) */
int ferry_kernel_lookup(const void *func, struct ferry_kernel **k) {
  if (!func) return cudaErrorInvalidResourceHandle;
  pthread_rwlock_rdlock(&registry_lock);
  struct ferry_kernel *found = map_get(&kernels_by_host, func);
  if (!found) found = map_get(&kernel_objects, func); /* a cudaKernel_t passed as func */
  pthread_rwlock_unlock(&registry_lock);
  *k = found;
  return found ? 0 : cudaErrorInvalidResourceHandle;
}

int ferry_kernel_func_id(struct ferry_kernel *k, struct ferry_vgpu *v, uint32_t *func) {
  int rc = ensure_loaded(k->fb, v);
  if (rc) return rc;
  if (!k->present[v->index]) return cudaErrorInvalidDeviceFunction;
  *func = k->fb->id << 16 | k->index;
  return 0;
}

int ferry_symbol_lookup(const void *symbol, struct ferry_vgpu *v, uint64_t *addr, uint64_t *size) {
  pthread_rwlock_rdlock(&registry_lock);
  struct ferry_var *var = map_get(&vars_by_host, symbol);
  pthread_rwlock_unlock(&registry_lock);
  if (!var) return cudaErrorInvalidSymbol;
  int rc = ensure_loaded(var->fb, v);
  if (rc) return rc;
  if (!var->present[v->index]) return cudaErrorInvalidSymbol;
  *addr = var->addr[v->index];
  *size = var->size;
  return 0;
}

/* CUDA 13 launches through the driver, which answers a bad configuration
   with "invalid value" (measured on an H100, driver 580) */
int ferry_launch_check(const struct ferry_vgpu *v, dim3 grid, dim3 block) {
  const int32_t *at = v->attrs;
  uint64_t threads = (uint64_t)block.x * block.y * block.z;
  if (!grid.x || !grid.y || !grid.z || !threads) return cudaErrorInvalidValue;
  if (at[cudaDevAttrMaxThreadsPerBlock] && threads > (uint64_t)at[cudaDevAttrMaxThreadsPerBlock])
    return cudaErrorInvalidValue;
  if ((at[cudaDevAttrMaxBlockDimX] && block.x > (unsigned)at[cudaDevAttrMaxBlockDimX]) ||
      (at[cudaDevAttrMaxBlockDimY] && block.y > (unsigned)at[cudaDevAttrMaxBlockDimY]) ||
      (at[cudaDevAttrMaxBlockDimZ] && block.z > (unsigned)at[cudaDevAttrMaxBlockDimZ]))
    return cudaErrorInvalidValue;
  if ((at[cudaDevAttrMaxGridDimX] && grid.x > (unsigned)at[cudaDevAttrMaxGridDimX]) ||
      (at[cudaDevAttrMaxGridDimY] && grid.y > (unsigned)at[cudaDevAttrMaxGridDimY]) ||
      (at[cudaDevAttrMaxGridDimZ] && grid.z > (unsigned)at[cudaDevAttrMaxGridDimZ]))
    return cudaErrorInvalidValue;
  return 0;
}

uint64_t ferry_variable_now(int vgpu, uint64_t addr) {
  return vgpu >= 0 && ferry_hooks.global_now ? ferry_hooks.global_now(vgpu, addr) : addr;
}

/* Every pointer-aligned word of the parameters, not only pointer-sized
   parameters: cuBLASLt's kernels take one structure holding its pointers
   (cuBLAS's deviceConstants among them). A word equal to a handed
   variable's address is only ever that address: variables sit outside the
   arena and the host's memory, and the bounds test rejects other words. */
const unsigned char *ferry_params_now(const struct ferry_layout *l, int vgpu,
                                      const unsigned char *params, uint32_t len, unsigned char *buf) {
  const unsigned char *out = params;
  for (uint32_t i = 0; l && i < l->nparams; i++) {
    if (l->sizes[i] < 8 || l->offsets[i] % 8 || l->offsets[i] + l->sizes[i] > len) continue;
    for (uint32_t at = l->offsets[i]; at + 8 <= l->offsets[i] + l->sizes[i]; at += 8) {
      uint64_t x, y;
      memcpy(&x, out + at, 8);
      if ((y = ferry_variable_now(vgpu, x)) == x) continue;
      if (out != buf) {
        if (buf != params) memcpy(buf, params, len);
        out = buf;
      }
      memcpy(buf + at, &y, 8);
    }
  }
  return out;
}

static __thread unsigned char param_buf[FERRY_MAX_PARAM_BYTES];

int ferry_launch(struct ferry_kernel *k, dim3 grid, dim3 block, void **args, size_t shmem,
                 cudaStream_t stream, unsigned flags, ferry_blob attrs) {
  int err;
  struct ferry_vgpu *v = ferry_current(&err);
  if (!v) return err;
  if (!k || k->magic != KERNEL_MAGIC) return cudaErrorInvalidDeviceFunction;
  struct ferry_vgpu *sv;
  uint32_t sid;
  if ((err = ferry_stream_resolve(stream, flags & FERRY_LAUNCH_PER_THREAD, &sv, &sid))) return err;
  if (sv != v) return cudaErrorInvalidResourceHandle;
  if ((err = ferry_launch_check(v, grid, block))) return err;
  uint32_t func;
  if ((err = ferry_kernel_func_id(k, v, &func))) return err;
  if (k->layout.nparams && !args) return cudaErrorInvalidValue;
  ferry_layout_pack(&k->layout, args, param_buf);
  if (shmem > UINT32_MAX) return cudaErrorInvalidValue;
  /* pinned host memory passed to the kernel (zero-copy) */
  if ((err = ferry_shadow_scan(v, param_buf, k->layout.bytes)) > 0) return err;
  struct ferry_launch_args a = {.func = func,
                                .gx = grid.x, .gy = grid.y, .gz = grid.z,
                                .bx = block.x, .by = block.y, .bz = block.z,
                                .shmem = (uint32_t)shmem,
                                .stream = sid,
                                .cooperative = (flags & FERRY_LAUNCH_COOPERATIVE) != 0,
                                .params = {param_buf, k->layout.bytes},
                                .attrs = attrs};
  /* a capturing stream's launch becomes a kernel node */
  if ((err = ferry_capture_launch(v, sid, &a, &k->layout, k->host_fun))) return FERRY_CAPTURE_DONE(err);
  ferry_migrate_at_launch(v->index);
  return ferry_call(v, FERRY_CALL_launch, &a, NULL, NULL);
}

/* after a migration: module `module`'s variables live where the local GPU
   put them (var_info: {addr, size} per variable, in registration order) */
static void modules_rebind(int vgpu, uint32_t module, ferry_blob var_info) {
  struct ferry_fatbin *fb = NULL;
  pthread_rwlock_rdlock(&registry_lock);
  for (size_t i = 0; i < vars_by_host.cap && !fb; i++) {
    struct ferry_var *var = vars_by_host.slots[i].obj;
    if (var && var->fb->id == module) fb = var->fb;
  }
  pthread_rwlock_unlock(&registry_lock);
  if (!fb) return;
  const unsigned char *q = var_info.ptr;
  for (uint32_t i = 0; i < fb->nvars && (i + 1) * 16 <= var_info.len; i++) {
    uint64_t addr;
    memcpy(&addr, q + i * 16, 8);
    fb->vars[i]->addr[vgpu] = addr;
    fb->vars[i]->present[vgpu] = addr != 0;
  }
}
/* migration moves a registered module's variables (the core's module_moved hook) */
__attribute__((constructor)) static void rebind_hook(void) { ferry_hooks.module_moved = modules_rebind; }
