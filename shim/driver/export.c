/*
 * The private tables NVIDIA's runtime asks the driver for (cuGetExportTable)
 * before it serves any call: the static runtime of nvcc's default builds,
 * the shared one, and the copies inside cuBLAS and cuFFT. What each table
 * and entry is for, and how it was learnt, is in docs/driver-export-tables.md.
 * Entries ferry does not know say so in one line and return
 * CUDA_ERROR_NOT_SUPPORTED; an unknown table gets CUDA_ERROR_INVALID_VALUE.
 */
#include <dlfcn.h>
#include <nettle/hmac.h>
#include <nettle/md2.h>
#include <nettle/nettle-meta.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "shim/driver/cu.h"

typedef const void *slot;
#define FN(f) ((slot)(uintptr_t)(f))
#define SIZE(n) ((slot)(uintptr_t)((n) * sizeof(slot)))

/* entries nobody has decoded yet: each names itself */
static CUresult unknown_entry(const char *table, int n) {
  char what[96];
  snprintf(what, sizeof what, "entry %d of the driver's private table %s", n, table);
  return ferry_cu_unsupported(what);
}
#define UNKNOWN(table, n)                                                                      \
  static CUresult table##_##n(void) { return unknown_entry(#table, n); }
static CUresult ok_entry(void) { return CUDA_SUCCESS; }

/* ---- CUDART_INTERFACE: the primary context, modules from fat binary wrappers ---- */
static CUresult cudart_module_from_wrapper(CUmodule *out, const void *wrapper) {
  return cuModuleLoadFatBinary(out, wrapper);
}
/* the runtime retains the context itself next */
static CUresult cudart_primary_ctx(CUcontext *out, CUdevice dev) {
  CUresult rc = ferry_cu_ready();
  if (rc) return rc;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= ferry.count) return CUDA_ERROR_INVALID_DEVICE;
  *out = ferry_cu_primary(dev);
  return CUDA_SUCCESS;
}
static CUresult cudart_module_ext(CUmodule *out, const void *wrapper, void *a, void *b, unsigned c) {
  if (a || b || c) return unknown_entry("CUDART_INTERFACE", 6);
  return cuModuleLoadFatBinary(out, wrapper);
}
static void cudart_nothing(size_t x) { (void)x; }
static CUresult cudart_module_ext2(const void *fatbin, CUmodule *out, void *a, void *b, unsigned c) {
  if (a || b || c) return unknown_entry("CUDART_INTERFACE", 8);
  return cuModuleLoadFatBinary(out, fatbin);
}
UNKNOWN(CUDART_INTERFACE, 3)
UNKNOWN(CUDART_INTERFACE, 4)
UNKNOWN(CUDART_INTERFACE, 5)
UNKNOWN(CUDART_INTERFACE, 9)
UNKNOWN(CUDART_INTERFACE, 10)
UNKNOWN(CUDART_INTERFACE, 11)
static const slot cudart_interface[13] = {
    SIZE(13), FN(cudart_module_from_wrapper), FN(cudart_primary_ctx), FN(CUDART_INTERFACE_3),
    FN(CUDART_INTERFACE_4), FN(CUDART_INTERFACE_5), FN(cudart_module_ext), FN(cudart_nothing),
    FN(cudart_module_ext2), FN(CUDART_INTERFACE_9), FN(CUDART_INTERFACE_10),
    FN(CUDART_INTERFACE_11), FN(ok_entry)};

/* ---- TOOLS_RUNTIME_CALLBACK_HOOKS: two buffers the runtime writes into ---- */
static unsigned char hooks_buf[1024], hooks_buf2[16];
static void hooks_buffer(void **buf, size_t *size) {
  *buf = hooks_buf;
  *size = sizeof hooks_buf;
}
static void hooks_buffer2(void **buf, size_t *size) {
  *buf = hooks_buf2;
  *size = 14;
}
static const slot callback_hooks[7] = {SIZE(7), FN(ok_entry), FN(hooks_buffer), FN(ok_entry),
                                       FN(ok_entry), FN(ok_entry), FN(hooks_buffer2)};

/* ---- TOOLS_TLS: the calling thread's context (cuBLASLt) ---- */
static CUresult tls_current_ctx(CUcontext *out) { return cuCtxGetCurrent(out); }
static const slot tools_tls[4] = {SIZE(4), FN(ok_entry), FN(tls_current_ctx), FN(ok_entry)};

/* ---- CONTEXT_LOCAL_STORAGE: a value per (context, key), read before every runtime call ---- */
typedef void (*cls_dtor)(CUcontext, void *, void *);
static struct cls_entry {
  CUcontext ctx;
  void *key, *value;
  cls_dtor dtor;
} cls[64];
static int ncls;
static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;
/* Read before every runtime call: each thread keeps its last answer, good
   while nothing was stored, deleted or dropped since (cls_generation). */
static uint64_t cls_generation = 1; /* atomic, under cls_lock when it changes; never 0 */

/* NULL (or -1) names the calling thread's current context */
static CUresult cls_ctx(CUcontext *ctx) {
  if (*ctx && *ctx != (CUcontext)(intptr_t)-1) return CUDA_SUCCESS;
  CUresult rc = cuCtxGetCurrent(ctx);
  return rc ? rc : (*ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT);
}
static CUresult cls_put(CUcontext ctx, void *key, void *value, cls_dtor dtor) {
  CUresult rc = cls_ctx(&ctx);
  if (rc) return rc;
  pthread_mutex_lock(&cls_lock);
  int i = 0;
  while (i < ncls && !(cls[i].ctx == ctx && cls[i].key == key)) i++;
  if (i == ncls && ncls < (int)(sizeof cls / sizeof *cls)) ncls++;
  else if (i == ncls) rc = CUDA_ERROR_OUT_OF_MEMORY;
  if (!rc) cls[i] = (struct cls_entry){ctx, key, value, dtor};
  __atomic_add_fetch(&cls_generation, 2, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&cls_lock);
  return rc;
}
static CUresult cls_delete(CUcontext ctx, void *key) {
  CUresult rc = cls_ctx(&ctx);
  if (rc) return rc;
  pthread_mutex_lock(&cls_lock);
  for (int i = 0; i < ncls; i++)
    if (cls[i].ctx == ctx && cls[i].key == key) {
      cls[i] = cls[--ncls];
      break;
    }
  __atomic_add_fetch(&cls_generation, 2, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&cls_lock);
  return CUDA_SUCCESS;
}
static __thread struct {
  uint64_t generation;
  CUcontext ctx;
  void *key, *value;
} cls_seen;

/* a miss tells the runtime the context is not set up yet */
static CUresult cls_get(void **value, CUcontext ctx, void *key) {
  if (cls_ctx(&ctx)) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t gen = __atomic_load_n(&cls_generation, __ATOMIC_ACQUIRE);
  if (cls_seen.generation == gen && cls_seen.ctx == ctx && cls_seen.key == key) {
    *value = cls_seen.value;
    return CUDA_SUCCESS;
  }
  CUresult rc = CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&cls_lock);
  gen = __atomic_load_n(&cls_generation, __ATOMIC_RELAXED);
  for (int i = 0; i < ncls; i++)
    if (cls[i].ctx == ctx && cls[i].key == key) {
      *value = cls[i].value;
      cls_seen.generation = gen, cls_seen.ctx = ctx, cls_seen.key = key, cls_seen.value = *value;
      rc = CUDA_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&cls_lock);
  return rc;
}
void ferry_cu_cls_drop(CUcontext ctx) {
  struct cls_entry gone[64];
  int n = 0;
  pthread_mutex_lock(&cls_lock);
  for (int i = 0; i < ncls;)
    if (cls[i].ctx == ctx) {
      gone[n++] = cls[i];
      cls[i] = cls[--ncls];
    } else {
      i++;
    }
  __atomic_add_fetch(&cls_generation, 2, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&cls_lock);
  for (int i = 0; i < n; i++)
    if (gone[i].dtor) gone[i].dtor(gone[i].ctx, gone[i].key, gone[i].value);
}

static const slot context_storage[4] = {FN(cls_put), FN(cls_delete), FN(cls_get), NULL};

/* ---- CONTEXT_CHECKS: nothing to report about ferry's contexts ---- */
static CUresult checks_unsupported(void) { return unknown_entry("CONTEXT_CHECKS", 1); }
static CUresult checks_ctx(CUcontext ctx, unsigned *flags, const void **detail) {
  (void)ctx;
  if (flags) *flags = 0;
  if (detail) *detail = NULL;
  return CUDA_SUCCESS;
}
static unsigned checks_global(void) { return 0; }
static const slot context_checks[4] = {SIZE(4), FN(checks_unsupported), FN(checks_ctx),
                                       FN(checks_global)};

/* ---- INTEGRITY_CHECK: the runtime checks a keyed hash of what this driver told it ---- */
static CUresult integrity(unsigned version, uint64_t seconds, uint64_t result[2]);
static const slot integrity_check[3] = {SIZE(3), FN(integrity), NULL};

static const uint8_t integrity_key[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                          0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};

/* HMAC-MD2 of (driver version, version, pid, thread, the two tables' and
   the function's addresses, seconds) and, per device, its UUID and PCI
   domain, bus and device: the values this driver gave the runtime */
static CUresult integrity(unsigned version, uint64_t seconds, uint64_t result[2]) {
  if (!result) return CUDA_ERROR_INVALID_VALUE;
  if (version % 10 < 2) { /* fixed answers */
    result[0] = version % 10 ? 0x1841181c03cb675cull : 0x3341181c03cb675cull;
    result[1] = 0x8ed383aa1f4cd1e8ull;
    return CUDA_SUCCESS;
  }
  int driver = 0, count = 0;
  CUresult rc = cuDriverGetVersion(&driver);
  if (!rc) rc = cuDeviceGetCount(&count);
  if (rc) return rc;
  struct {
    uint32_t driver, version, pid, thread;
    uint64_t cudart_table, integrity_table, integrity_fn, seconds;
  } head = {(uint32_t)driver, version, (uint32_t)getpid(), (uint32_t)(uintptr_t)pthread_self(),
            (uint64_t)(uintptr_t)cudart_interface, (uint64_t)(uintptr_t)integrity_check,
            (uint64_t)(uintptr_t)integrity_check[1], seconds};
  _Static_assert(sizeof head == 48, "the hashed record is 48 bytes");
  struct HMAC_CTX(struct md2_ctx) h;
  HMAC_SET_KEY(&h, &nettle_md2, sizeof integrity_key, integrity_key);
  hmac_update(&h.state, &nettle_md2, sizeof head, (const uint8_t *)&head);
  for (int d = 0; d < count; d++) {
    struct {
      uint8_t uuid[16];
      int32_t domain, bus, device;
    } dev;
    CUuuid u;
    rc = cuDeviceGetUuid_v2(&u, d);
    if (!rc) rc = cuDeviceGetAttribute(&dev.domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d);
    if (!rc) rc = cuDeviceGetAttribute(&dev.bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d);
    if (!rc) rc = cuDeviceGetAttribute(&dev.device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d);
    if (rc) return rc;
    _Static_assert(sizeof dev == 28, "a device's record is 28 bytes");
    memcpy(dev.uuid, u.bytes, 16);
    hmac_update(&h.state, &nettle_md2, sizeof dev, (const uint8_t *)&dev);
  }
  uint8_t digest[MD2_DIGEST_SIZE];
  HMAC_DIGEST(&h, &nettle_md2, sizeof digest, digest);
  memcpy(result, digest, 16);
  return CUDA_SUCCESS;
}

/* ---- TOOLS_CONTEXT (cuBLAS, cuBLASLt, cuFFT): the context's id; 51 and 39
   are passed to the driver (ctx_objects.c) ---- */
static CUresult tools_ctx_id(CUcontext ctx, uint64_t *id) {
  if (!id) return CUDA_ERROR_UNKNOWN;
  return cuCtxGetId(ctx, (unsigned long long *)id);
}
#define U(n) UNKNOWN(TOOLS_CONTEXT, n)
U(1) U(2) U(3) U(5) U(6) U(7) U(8) U(9) U(10) U(11) U(12) U(13) U(14) U(15) U(16) U(17) U(18) U(19)
U(20) U(21) U(22) U(23) U(24) U(25) U(26) U(27) U(28) U(29) U(30) U(31) U(32) U(33) U(34) U(35)
U(36) U(37) U(38) U(40) U(41) U(42) U(43) U(44) U(45) U(46) U(47) U(48) U(49) U(50)
U(52) U(53) U(54) U(55) U(56) U(57) U(58) U(59) U(60) U(61) U(62) U(63)
#undef U
#define T(n) FN(TOOLS_CONTEXT_##n)
static const slot tools_context[64] = {
    SIZE(64), T(1),  T(2),  T(3),  FN(tools_ctx_id), T(5), T(6), T(7), T(8), T(9), T(10), T(11),
    T(12), T(13), T(14), T(15), T(16), T(17), T(18), T(19), T(20), T(21), T(22), T(23), T(24),
    T(25), T(26), T(27), T(28), T(29), T(30), T(31), T(32), T(33), T(34), T(35), T(36), T(37),
    T(38), FN(ferry_cu_ctx_object_query), T(40), T(41), T(42), T(43), T(44), T(45), T(46), T(47), T(48), T(49), T(50),
    FN(ferry_cu_ctx_object), T(52), T(53), T(54), T(55), T(56), T(57), T(58), T(59), T(60), T(61), T(62), T(63)};
#undef T

/* ---- TOOLS_MODULE (cuFFT): entry 7 hands a module's function to a callback ---- */
#define U(n) UNKNOWN(TOOLS_MODULE, n)
U(1) U(2) U(3) U(4) U(5) U(6) U(8) U(9) U(10) U(11) U(12) U(13) U(14) U(15)
#undef U
#define T(n) FN(TOOLS_MODULE_##n)
static const slot tools_module[16] = {SIZE(16), T(1), T(2), T(3), T(4), T(5), T(6),
                                      FN(ferry_cu_module_each_function), T(8), T(9), T(10),
                                      T(11), T(12), T(13), T(14), T(15)};
#undef T

/* ---- 1734dc26 (cuBLASLt, in cublasLtMatmulAlgoGetHeuristic for some
   types): 17 entries on driver 580, natively entries 4 and 13 called; their
   meaning is not known. cuBLASLt reads the table without checking the
   result of cuGetExportTable (a refusal crashed it), so each entry is
   served and says it is unknown, which cuBLASLt sees as an error. ---- */
#define U(n) UNKNOWN(LT_1734dc26, n)
U(1) U(2) U(3) U(4) U(5) U(6) U(7) U(8) U(9) U(10) U(11) U(12) U(13) U(14) U(15) U(16)
#undef U
#define T(n) FN(LT_1734dc26_##n)
static const slot lt_1734dc26[17] = {SIZE(17), T(1), T(2), T(3), T(4), T(5), T(6), T(7), T(8),
                                     T(9), T(10), T(11), T(12), T(13), T(14), T(15), T(16)};
#undef T

/* ---- the tables by UUID ---- */
static const struct export_table {
  const char *name;
  uint8_t uuid[16];
  const slot *table; /* NULL: refused with CUDA_ERROR_INVALID_VALUE, silently */
} tables[] = {
    {"CUDART_INTERFACE", {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9}, cudart_interface},
    {"TOOLS_TLS", {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc}, tools_tls},
    {"TOOLS_RUNTIME_CALLBACK_HOOKS", {0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66}, callback_hooks},
    {"CONTEXT_LOCAL_STORAGE", {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93}, context_storage},
    {"CONTEXT_CHECKS", {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e}, context_checks},
    {"INTEGRITY_CHECK", {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2}, integrity_check},
    {"TOOLS_CONTEXT", {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2}, tools_context},
    {"TOOLS_MODULE", {0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e}, tools_module},
    {"1734dc26 (cuBLASLt)", {0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca}, lt_1734dc26},
    /* asked first by every runtime; a refusal changes nothing (docs) */
    {"f8cff951 (start-up requirements)", {0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9}, NULL},
};

CUresult cuGetExportTable(const void **out, const CUuuid *id) {
  if (!out || !id) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
    if (memcmp(tables[i].uuid, id->bytes, 16)) continue;
    ferry_debug("cuGetExportTable(%s)%s", tables[i].name, tables[i].table ? "" : ": refused");
    *out = tables[i].table;
    return tables[i].table ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  char what[256];
  const unsigned char *b = (const unsigned char *)id->bytes;
  /* the thin libcuda.so.1 jumps here, so the return address is the asker's:
     naming its library tells a user (and us) which one goes without */
  Dl_info who = {0};
  const char *lib = dladdr(__builtin_return_address(0), &who) && who.dli_fname ? who.dli_fname : "";
  const char *base = strrchr(lib, '/');
  snprintf(what, sizeof what,
           "the driver's private table %02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x "
           "(cuGetExportTable%s%s)",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15],
           *lib ? ", asked by " : "", base ? base + 1 : lib);
  ferry_cu_unsupported(what);
  *out = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

/* the id CUDA gives a context: primary contexts by device, others by handle */
CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id) {
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  if (!ctx) {
    CUresult rc = cuCtxGetCurrent(&ctx);
    if (rc) return rc;
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  }
  struct ferry_vgpu *v = ferry_cu_ctx_vgpu(ctx);
  if (!v) return CUDA_ERROR_INVALID_CONTEXT;
  *id = ctx == ferry_cu_primary(v->index) ? (unsigned long long)v->index + 1
                                          : (unsigned long long)(uintptr_t)ctx;
  return CUDA_SUCCESS;
}
