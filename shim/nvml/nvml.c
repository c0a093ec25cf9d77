/*
 * The NVML front end (ferry's libnvidia-ml.so.1). Frameworks ask NVML, not
 * CUDA, how many GPUs there are: PyTorch's torch.cuda.device_count() counts
 * with NVML so as not to initialise CUDA before it forks workers, and
 * trusts that count over CUDA's. NVIDIA's NVML counts this machine's GPUs,
 * which are not the program's vGPUs, so a program on 1 vGPU of a 2-GPU
 * host asked CUDA for device 1. Here NVML says what CUDA through ferry says:
 *   - init, the count and the handles come from FERRY_DEVICES (or the
 *     rCUDA variables) alone: no server is reached and CUDA is not
 *     initialised, so a process may still fork afterwards;
 *   - a device's facts (name, UUID, memory, PCI address, compute
 *     capability, versions) come from the driver front end's cu* functions
 *     (and the memory call of the vGPU), the very answers of ferry's
 *     libcuda.so.1; these, and only these, connect;
 *   - every other NVML function is a weak stub (gen_stubs.sh) that says so
 *     once and returns NVML_ERROR_NOT_SUPPORTED.
 * docs/nvml.md says what is served and why.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "shim/core/link.h"
#include "common/nvml_types.h"
#include "protocol/nvlink.h"

/* the handles the program gets: one per vGPU */
struct nvmlDevice_st {
  int index;
};
static struct nvmlDevice_st devs[FERRY_MAX_VGPUS];

static int inits;      /* nvmlInit* less nvmlShutdown calls (atomic) */
static int dev_count;  /* the vGPUs, read at the first nvmlInit (atomic) */

/* a stub's one line per name (gen_stubs.sh) */
int ferry_nvml_unsupported_call(int *warned, const char *name) {
  if (!warned || __atomic_exchange_n(warned, 1, __ATOMIC_RELAXED) == 0)
    ferry_log("%s is not supported by ferry; returning NVML_ERROR_NOT_SUPPORTED",
              name ? name : "(unnamed call)");
  return NVML_ERROR_NOT_SUPPORTED;
}

/* ---- init, count, handles: the environment alone ---- */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  int n = ferry_configured_devices();
  /* like NVIDIA's on a machine without GPUs; PyTorch then asks CUDA,
     whose start-up says what is wrong with the configuration */
  if (n == 0 && !(flags & NVML_INIT_FLAG_NO_GPUS)) return NVML_ERROR_DRIVER_NOT_LOADED;
  for (int i = 0; i < n; i++) devs[i].index = i;
  __atomic_store_n(&dev_count, n, __ATOMIC_RELEASE);
  __atomic_add_fetch(&inits, 1, __ATOMIC_ACQ_REL);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
  int n = __atomic_load_n(&inits, __ATOMIC_ACQUIRE);
  while (n > 0 && !__atomic_compare_exchange_n(&inits, &n, n - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    ;
  return n > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static nvmlReturn_t ready(void) {
  return __atomic_load_n(&inits, __ATOMIC_ACQUIRE) > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
  nvmlReturn_t rc = ready();
  if (rc) return rc;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = (unsigned)__atomic_load_n(&dev_count, __ATOMIC_ACQUIRE);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  nvmlReturn_t rc = ready();
  if (rc) return rc;
  if (!device || index >= (unsigned)__atomic_load_n(&dev_count, __ATOMIC_ACQUIRE))
    return NVML_ERROR_INVALID_ARGUMENT;
  *device = &devs[index];
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* the vGPU a handle stands for, or -1 */
static int index_of(nvmlDevice_t device) {
  uintptr_t at = (uintptr_t)device, first = (uintptr_t)devs;
  int n = __atomic_load_n(&dev_count, __ATOMIC_ACQUIRE);
  if (ready() || at < first || (at - first) % sizeof devs[0] || (at - first) / sizeof devs[0] >= (uintptr_t)n)
    return -1;
  return (int)((at - first) / sizeof devs[0]);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
  nvmlReturn_t rc = ready();
  if (rc) return rc;
  int i = index_of(device);
  if (i < 0 || !index) return NVML_ERROR_INVALID_ARGUMENT;
  *index = (unsigned)i;
  return NVML_SUCCESS;
}

/* ---- a device's facts: the driver front end's answers ---- */

static nvmlReturn_t from_cu(CUresult rc) {
  switch (rc) {
  case CUDA_SUCCESS: return NVML_SUCCESS;
  case CUDA_ERROR_INVALID_VALUE:
  case CUDA_ERROR_INVALID_DEVICE: return NVML_ERROR_INVALID_ARGUMENT;
  case CUDA_ERROR_NOT_SUPPORTED: return NVML_ERROR_NOT_SUPPORTED;
  case CUDA_ERROR_OUT_OF_MEMORY: return NVML_ERROR_MEMORY;
  /* the server cannot be reached, or was lost */
  case CUDA_ERROR_NO_DEVICE:
  case CUDA_ERROR_NOT_INITIALIZED:
  case CUDA_ERROR_DEVICE_UNAVAILABLE: return NVML_ERROR_GPU_IS_LOST;
  default: return NVML_ERROR_UNKNOWN;
  }
}

/* the handle's vGPU, its server connected (the first such call connects
   every vGPU, as CUDA's first call does) */
static nvmlReturn_t connected(nvmlDevice_t device, int *index) {
  nvmlReturn_t rc = ready();
  if (rc) return rc;
  if ((*index = index_of(device)) < 0) return NVML_ERROR_INVALID_ARGUMENT;
  return from_cu(cuInit(0));
}

static nvmlReturn_t copy_out(const char *s, char *out, unsigned int length) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(s) >= length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(out, s, strlen(s) + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
  char buf[256];
  int i;
  nvmlReturn_t rc = connected(device, &i);
  if (!rc) rc = from_cu(cuDeviceGetName(buf, sizeof buf, i));
  return rc ? rc : copy_out(buf, name, length);
}

/* "GPU-" and the 16 bytes as 8-4-4-4-12 hex digits, as nvidia-smi shows them */
static void format_uuid(const unsigned char *b, char *out, size_t n) {
  snprintf(out, n,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
           b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
}

static nvmlReturn_t uuid_text(int i, char *out, size_t n) {
  CUuuid u;
  nvmlReturn_t rc = from_cu(cuDeviceGetUuid(&u, i));
  if (!rc) format_uuid((const unsigned char *)u.bytes, out, n);
  return rc;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
  char buf[64];
  int i;
  nvmlReturn_t rc = connected(device, &i);
  if (!rc) rc = uuid_text(i, buf, sizeof buf);
  return rc ? rc : copy_out(buf, uuid, length);
}

/* a PCI address as NVML takes it: "domain:bus:device.function" with a
   domain of any width (CUDA writes 8 digits, NCCL asks with 4), or
   "bus:device.function"; -1 when it is none */
static long long bus_id_value(const char *s) {
  unsigned dom = 0, bus, dev, fn;
  int end = 0;
  if (sscanf(s, "%x:%x:%x.%x%n", &dom, &bus, &dev, &fn, &end) != 4 || s[end]) {
    dom = 0;
    end = 0;
    if (sscanf(s, "%x:%x.%x%n", &bus, &dev, &fn, &end) != 3 || s[end]) return -1;
  }
  if (bus > 0xff || dev > 0x1f || fn > 7) return -1;
  return (long long)dom << 20 | bus << 12 | dev << 4 | fn;
}

/* the first vGPU whose answer is the one asked for (two vGPUs may be one
   GPU of a server, or GPUs of two servers at the same PCI address) */
static nvmlReturn_t find(const char *want, nvmlDevice_t *device, int by_uuid) {
  nvmlReturn_t rc = ready();
  if (rc) return rc;
  if (!want || !device) return NVML_ERROR_INVALID_ARGUMENT;
  long long want_bus = by_uuid ? -1 : bus_id_value(want);
  if (!by_uuid && want_bus < 0) return NVML_ERROR_INVALID_ARGUMENT;
  int n = __atomic_load_n(&dev_count, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++) {
    char got[64];
    int k;
    if ((rc = connected(&devs[i], &k))) return rc;
    rc = by_uuid ? uuid_text(i, got, sizeof got) : from_cu(cuDeviceGetPCIBusId(got, sizeof got, i));
    if (rc) return rc;
    if (by_uuid ? !strcasecmp(got, want) : bus_id_value(got) == want_bus) {
      *device = &devs[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
  return find(uuid, device, 1);
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device) {
  return find(bus_id, device, 0);
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device) {
  return find(bus_id, device, 0);
}

/* total as cuDeviceTotalMem says; free as cuMemGetInfo says on that vGPU,
   asked of the vGPU itself so that no thread's current context changes */
static nvmlReturn_t memory(nvmlDevice_t device, unsigned long long *total, unsigned long long *free_bytes) {
  int i;
  size_t t;
  nvmlReturn_t rc = connected(device, &i);
  if (!rc) rc = from_cu(cuDeviceTotalMem(&t, i));
  if (rc) return rc;
  struct ferry_vgpu *v = &ferry.vgpus[i];
  if (ferry_dead(v)) return NVML_ERROR_GPU_IS_LOST;
  struct ferry_mem_get_info_args a = {0};
  struct ferry_mem_get_info_rets r;
  int err = ferry_call(v, FERRY_CALL_mem_get_info, &a, &r, NULL);
  if (err) return NVML_ERROR_GPU_IS_LOST;
  *total = t;
  *free_bytes = r.free_bytes < t ? r.free_bytes : t;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *mem) {
  unsigned long long total, free_bytes;
  if (!mem) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = memory(device, &total, &free_bytes);
  if (rc) return rc;
  *mem = (nvmlMemory_t){.total = total, .free = free_bytes, .used = total - free_bytes};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *mem) {
  unsigned long long total, free_bytes;
  if (!mem) return NVML_ERROR_INVALID_ARGUMENT;
  if (mem->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlReturn_t rc = memory(device, &total, &free_bytes);
  if (rc) return rc;
  *mem = (nvmlMemory_v2_t){.version = nvmlMemory_v2, .total = total, .reserved = 0,
                           .free = free_bytes, .used = total - free_bytes};
  return NVML_SUCCESS;
}

/* the address cuDeviceGetPCIBusId gives; ferry knows no PCI device ids */
static nvmlReturn_t pci(nvmlDevice_t device, nvmlPciInfo_t *out, size_t bytes) {
  int i, domain = 0, bus = 0, dev = 0;
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = connected(device, &i);
  if (!rc) rc = from_cu(cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, i));
  if (!rc) rc = from_cu(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, i));
  if (!rc) rc = from_cu(cuDeviceGetAttribute(&dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, i));
  nvmlPciInfo_t p = {.domain = (unsigned)domain, .bus = (unsigned)bus, .device = (unsigned)dev};
  if (!rc) rc = from_cu(cuDeviceGetPCIBusId(p.busId, sizeof p.busId, i));
  if (rc) return rc;
  snprintf(p.busIdLegacy, sizeof p.busIdLegacy, "%04x:%02x:%02x.0", (unsigned)domain & 0xffff,
           (unsigned)bus & 0xff, (unsigned)dev & 0xff);
  memcpy(out, &p, bytes);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *p) {
  return pci(device, p, sizeof *p);
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *p) {
  return pci(device, p, sizeof *p);
}
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *p) {
  return pci(device, p, FERRY_NVML_PCI_V1_BYTES);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
  int i;
  if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = connected(device, &i);
  if (!rc) rc = from_cu(cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, i));
  if (!rc) rc = from_cu(cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, i));
  return rc;
}

/* the CUDA version the servers' driver supports (13000 for 13.0) */
static nvmlReturn_t cuda_version(int *version) {
  nvmlReturn_t rc = ready();
  if (rc) return rc;
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  if ((rc = from_cu(cuInit(0)))) return rc;
  return from_cu(cuDriverGetVersion(version));
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) { return cuda_version(version); }
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) { return cuda_version(version); }

/* ferry learns no kernel-module version from its servers: the version is
   that of CUDA their driver supports, "13.0" (docs/nvml.md) */
nvmlReturn_t nvmlSystemGetDriverVersion(char *out, unsigned int length) {
  int v;
  char buf[32];
  nvmlReturn_t rc = cuda_version(&v);
  if (rc) return rc;
  snprintf(buf, sizeof buf, "%d.%d", v / 1000, v % 1000 / 10);
  return copy_out(buf, out, length);
}

/* Peer access between two vGPUs is what CUDA through ferry says
   (cuDeviceCanAccessPeer); a device reaches its own memory. NCCL asks
   every pair, itself included, when it starts, and stops if any fails */
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                    nvmlGpuP2PCapsIndex_t index, nvmlGpuP2PStatus_t *status) {
  nvmlReturn_t rc = ready();
  if (rc) return rc;
  int a = index_of(device1), b = index_of(device2);
  if (a < 0 || b < 0 || !status || (unsigned)index >= NVML_P2P_CAPS_INDEX_UNKNOWN)
    return NVML_ERROR_INVALID_ARGUMENT;
  int can = 1;
  if (a != b) {
    if ((rc = connected(device1, &a))) return rc;
    if ((rc = from_cu(cuDeviceCanAccessPeer(&can, a, b)))) return rc;
  }
  *status = can ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

/* ---- NVLink: the server machine's NVML, through the nvlinks call ----
   NCCL builds its topology from these; without them it takes two GPUs of
   one server for a PCIe pair and tunes (or refuses P2P) accordingly */

/* the handle's link number `link`: NOT_SUPPORTED where the server's NVML
   names none (no NVLink, no NVML, or a server too old for the call) */
static nvmlReturn_t nvlink_of(nvmlDevice_t device, unsigned link, struct ferry_nvlink *out) {
  int i;
  nvmlReturn_t rc = connected(device, &i);
  if (rc) return rc;
  if (link >= FERRY_NVLINK_MAX) return NVML_ERROR_INVALID_ARGUMENT;
  struct ferry_vgpu *v = &ferry.vgpus[i];
  if (ferry_dead(v)) return NVML_ERROR_GPU_IS_LOST;
  struct ferry_nvlinks_args a = {0};
  struct ferry_nvlinks_rets r;
  if (ferry_call(v, FERRY_CALL_nvlinks, &a, &r, NULL)) return NVML_ERROR_NOT_SUPPORTED;
  if (r.links.len % sizeof *out) return NVML_ERROR_UNKNOWN;
  for (uint32_t at = 0; at < r.links.len; at += sizeof *out) {
    memcpy(out, (const char *)r.links.ptr + at, sizeof *out); /* the blob may be unaligned */
    if (out->link == link) {
      out->remote_bus[sizeof out->remote_bus - 1] = 0;
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *active) {
  struct ferry_nvlink k;
  if (!active) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = nvlink_of(device, link, &k);
  if (!rc) *active = k.flags & FERRY_NVLINK_ACTIVE ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return rc;
}

/* P2P over the link, and whether the link exists; the other capabilities
   are not learned */
nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link,
                                           nvmlNvLinkCapability_t cap, unsigned int *result) {
  struct ferry_nvlink k;
  if (!result) return NVML_ERROR_INVALID_ARGUMENT;
  if (cap != NVML_NVLINK_CAP_P2P_SUPPORTED && cap != NVML_NVLINK_CAP_VALID)
    return NVML_ERROR_NOT_SUPPORTED;
  nvmlReturn_t rc = nvlink_of(device, link, &k);
  if (!rc) *result = cap == NVML_NVLINK_CAP_VALID ? 1u : (k.flags & FERRY_NVLINK_P2P) != 0;
  return rc;
}

static nvmlReturn_t nvlink_remote(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
  struct ferry_nvlink k;
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = nvlink_of(device, link, &k);
  if (rc) return rc;
  nvmlPciInfo_t p;
  memset(&p, 0, sizeof p);
  snprintf(p.busId, sizeof p.busId, "%s", k.remote_bus);
  unsigned domain = 0, bus = 0, dev = 0;
  if (sscanf(k.remote_bus, "%x:%x:%x", &domain, &bus, &dev) == 3) {
    p.domain = domain, p.bus = bus, p.device = dev;
    snprintf(p.busIdLegacy, sizeof p.busIdLegacy, "%04x:%02x:%02x.0", domain & 0xffff, bus & 0xff,
             dev & 0xff);
  }
  *pci = p;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci) {
  return nvlink_remote(device, link, pci);
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
                                              nvmlPciInfo_t *pci) {
  return nvlink_remote(device, link, pci);
}

/* NCCL asks the state of each link this way on Hopper and later; every
   other field is NOT_SUPPORTED in its own entry, as NVML answers fields it
   does not have */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t *values) {
  nvmlReturn_t rc = ready();
  if (rc) return rc;
  if (index_of(device) < 0 || count < 0 || (count && !values)) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < count; i++) {
    nvmlFieldValue_t *f = &values[i];
    f->timestamp = f->latencyUsec = 0;
    f->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    if (f->fieldId != NVML_FI_DEV_NVLINK_GET_STATE) continue;
    struct ferry_nvlink k;
    f->nvmlReturn = nvlink_of(device, f->scopeId, &k);
    if (f->nvmlReturn == NVML_SUCCESS) {
      f->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
      f->value.uiVal = k.flags & FERRY_NVLINK_ACTIVE ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    }
  }
  return NVML_SUCCESS;
}

/* ferry has no counters of a GPU's activity */
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u) {
  static int warned;
  (void)u;
  nvmlReturn_t rc = ready();
  if (rc) return rc;
  if (index_of(device) < 0) return NVML_ERROR_INVALID_ARGUMENT;
  return (nvmlReturn_t)ferry_nvml_unsupported_call(&warned, "nvmlDeviceGetUtilizationRates");
}

const char *nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
  case NVML_SUCCESS: return "Success";
  case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
  case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
  case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
  case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
  case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
  case NVML_ERROR_NOT_FOUND: return "Not Found";
  case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
  case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
  case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
  case NVML_ERROR_TIMEOUT: return "Timeout";
  case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
  case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
  case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
  case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
  case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
  case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
  case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
  case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
  case NVML_ERROR_IN_USE: return "In use by another client";
  case NVML_ERROR_MEMORY: return "Insufficient Memory";
  case NVML_ERROR_NO_DATA: return "No data";
  case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return "ECC is not supported on vGPU";
  case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
  case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
  case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
  case NVML_ERROR_DEPRECATED: return "Deprecated";
  case NVML_ERROR_NOT_READY: return "Not ready";
  case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
  case NVML_ERROR_INVALID_STATE: return "Invalid state";
  case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: return "Reset type not supported";
  default: return "Unknown Error";
  }
}
