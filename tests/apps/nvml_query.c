/*
 * Asks NVML what PyTorch asks it, as PyTorch does (dlopen of
 * "libnvidia-ml.so.1", no nvml.h), then asks the same of the driver
 * (dlopen of "libcuda.so.1") and prints both, so that nvml.sh can check
 * that through ferry NVML says what CUDA says. Needs neither header: the
 * few types it uses are declared here.
 *   nvml_query count   nvmlInit_v2 and nvmlDeviceGetCount_v2 only (CUDA is
 *                      never opened)
 *   nvml_query all     and per device: name, UUID, memory, PCI address,
 *                      compute capability from NVML and from the driver;
 *                      an index out of range; a call ferry does not serve
 * Lines: "key: value"; "FAIL ..." on a broken expectation; "PASSED" at the
 * end of a run whose own checks held.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef void *nvml_dev;
struct nvml_memory {
  unsigned long long total, free, used;
};
struct nvml_pci {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct cu_uuid {
  unsigned char bytes[16];
};
enum { NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_SUPPORTED = 3 };
/* nvmlFieldValue_t: its value union read as the unsigned int it holds here */
struct nvml_field {
  unsigned field_id, scope_id;
  long long timestamp, latency;
  int value_type, nvml_return;
  unsigned value, value_high;
};
enum { CU_ATTR_CC_MAJOR = 75, CU_ATTR_CC_MINOR = 76 };

static void *nvml, *cuda;
static int failed;

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) {
    printf("FAIL no %s: %s\n", name, dlerror());
    failed = 1;
  }
  return p;
}
#define NVML(name, ...) ((int (*)())sym(nvml, name))(__VA_ARGS__)
#define CU(name, ...) ((int (*)())sym(cuda, name))(__VA_ARGS__)

static nvml_dev first_handle(void);
static void check(int ok, const char *what) {
  if (!ok) {
    printf("FAIL %s\n", what);
    failed = 1;
  }
}

static nvml_dev first_handle(void) {
  nvml_dev d = NULL;
  NVML("nvmlDeviceGetHandleByIndex_v2", 0u, &d);
  return d;
}

int main(int argc, char **argv) {
  int all = argc > 1 && !strcmp(argv[1], "all");
  nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!nvml) {
    printf("FAIL dlopen libnvidia-ml.so.1: %s\n", dlerror());
    return 1;
  }
  Dl_info where;
  void *init = sym(nvml, "nvmlInit_v2");
  if (init && dladdr(init, &where)) printf("nvml library: %s\n", where.dli_fname);
  int rc = NVML("nvmlInit_v2");
  printf("nvmlInit_v2: %d\n", rc);
  unsigned count = 0;
  rc = NVML("nvmlDeviceGetCount_v2", &count);
  printf("nvmlDeviceGetCount_v2: %d count %u\n", rc, count);
  if (!all) return rc;

  cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) {
    printf("FAIL dlopen libcuda.so.1: %s\n", dlerror());
    return 1;
  }
  check(CU("cuInit", 0u) == 0, "cuInit");
  int cu_count = -1;
  check(CU("cuDeviceGetCount", &cu_count) == 0, "cuDeviceGetCount");
  printf("cuDeviceGetCount: %d\n", cu_count);
  check((int)count == cu_count, "NVML and CUDA count differently");

  for (unsigned i = 0; i < count; i++) {
    nvml_dev dev = NULL;
    char name[96] = "", cu_name[96] = "", uuid[96] = "", cu_uuid_text[96];
    check(NVML("nvmlDeviceGetHandleByIndex_v2", i, &dev) == 0, "nvmlDeviceGetHandleByIndex_v2");
    unsigned index = 99;
    check(NVML("nvmlDeviceGetIndex", dev, &index) == 0 && index == i, "nvmlDeviceGetIndex");
    check(NVML("nvmlDeviceGetName", dev, name, (unsigned)sizeof name) == 0, "nvmlDeviceGetName");
    check(CU("cuDeviceGetName", cu_name, (int)sizeof cu_name, (int)i) == 0, "cuDeviceGetName");
    printf("device %u name: nvml '%s' cuda '%s'\n", i, name, cu_name);
    check(name[0] && !strcmp(name, cu_name), "names differ");

    check(NVML("nvmlDeviceGetUUID", dev, uuid, (unsigned)sizeof uuid) == 0, "nvmlDeviceGetUUID");
    struct cu_uuid u;
    check(CU("cuDeviceGetUuid", &u, (int)i) == 0, "cuDeviceGetUuid");
    const unsigned char *b = u.bytes;
    snprintf(cu_uuid_text, sizeof cu_uuid_text,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    printf("device %u uuid: nvml %s cuda %s\n", i, uuid, cu_uuid_text);
    check(!strcmp(uuid, cu_uuid_text), "UUIDs differ");
    nvml_dev by_uuid = NULL;
    check(NVML("nvmlDeviceGetHandleByUUID", uuid, &by_uuid) == 0 && by_uuid == dev,
          "nvmlDeviceGetHandleByUUID");

    struct nvml_memory m;
    size_t cu_total = 0, cu_free = 0, cu_total2 = 0;
    check(NVML("nvmlDeviceGetMemoryInfo", dev, &m) == 0, "nvmlDeviceGetMemoryInfo");
    check(CU("cuDeviceTotalMem_v2", &cu_total, (int)i) == 0, "cuDeviceTotalMem");
    void *ctx = NULL;
    check(CU("cuDevicePrimaryCtxRetain", &ctx, (int)i) == 0, "cuDevicePrimaryCtxRetain");
    check(CU("cuCtxSetCurrent", ctx) == 0, "cuCtxSetCurrent");
    check(CU("cuMemGetInfo_v2", &cu_free, &cu_total2) == 0, "cuMemGetInfo");
    printf("device %u memory: nvml total %llu free %llu used %llu cuda total %zu free %zu\n", i,
           m.total, m.free, m.used, cu_total, cu_free);
    check(m.total == cu_total && m.total > 0, "total memory differs");
    check(m.free == cu_free && m.used == m.total - m.free, "free memory differs");

    struct nvml_pci p;
    char cu_bus[64] = "";
    check(NVML("nvmlDeviceGetPciInfo_v3", dev, &p) == 0, "nvmlDeviceGetPciInfo_v3");
    check(CU("cuDeviceGetPCIBusId", cu_bus, (int)sizeof cu_bus, (int)i) == 0, "cuDeviceGetPCIBusId");
    printf("device %u pci: nvml %s cuda %s\n", i, p.bus_id, cu_bus);
    check(!strcmp(p.bus_id, cu_bus), "PCI bus ids differ");
    /* looked up as CUDA writes the address and as NCCL does (a 4-digit
       domain, lower case): the same device, or one at the same address */
    unsigned pd, pb, pv, pf;
    char nccl_bus[32];
    check(sscanf(cu_bus, "%x:%x:%x.%x", &pd, &pb, &pv, &pf) == 4, "the PCI bus id does not parse");
    snprintf(nccl_bus, sizeof nccl_bus, "%04x:%02x:%02x.%x", pd, pb, pv, pf);
    for (int form = 0; form < 2; form++) {
      nvml_dev by_bus = NULL;
      struct nvml_pci q;
      rc = NVML("nvmlDeviceGetHandleByPciBusId_v2", form ? nccl_bus : cu_bus, &by_bus);
      printf("device %u by pci %s: %d\n", i, form ? nccl_bus : cu_bus, rc);
      check(rc == 0 && NVML("nvmlDeviceGetPciInfo_v3", by_bus, &q) == 0 && !strcmp(q.bus_id, cu_bus),
            "nvmlDeviceGetHandleByPciBusId");
    }

    int major = -1, minor = -1, cu_major = -2, cu_minor = -2;
    check(NVML("nvmlDeviceGetCudaComputeCapability", dev, &major, &minor) == 0,
          "nvmlDeviceGetCudaComputeCapability");
    CU("cuDeviceGetAttribute", &cu_major, CU_ATTR_CC_MAJOR, (int)i);
    CU("cuDeviceGetAttribute", &cu_minor, CU_ATTR_CC_MINOR, (int)i);
    printf("device %u cc: nvml %d.%d cuda %d.%d\n", i, major, minor, cu_major, cu_minor);
    check(major == cu_major && minor == cu_minor, "compute capabilities differ");
  }

  /* P2P status: every pair as NCCL asks it at start-up, itself included;
     between two devices what cuDeviceCanAccessPeer says */
  for (unsigned a = 0; a < count; a++)
    for (unsigned b = 0; b < count; b++) {
      nvml_dev da = NULL, db = NULL;
      NVML("nvmlDeviceGetHandleByIndex_v2", a, &da);
      NVML("nvmlDeviceGetHandleByIndex_v2", b, &db);
      for (int caps = 0; caps < 2; caps++) { /* read, write */
        int status = -1, can = a == b;
        rc = NVML("nvmlDeviceGetP2PStatus", da, db, caps, &status);
        if (a != b) check(CU("cuDeviceCanAccessPeer", &can, (int)a, (int)b) == 0, "cuDeviceCanAccessPeer");
        printf("p2p %u %u caps %d: %d status %d cuda %d\n", a, b, caps, rc, status, can);
        check(rc == 0 && (status == 0) == (can == 1) && (status == 0 || status == 5),
              "nvmlDeviceGetP2PStatus differs from cuDeviceCanAccessPeer");
      }
    }
  /* NVLinks as the server's NVML reports them (FERRY_SIM_NVLINKS on the
     simulation), asked as NCCL does: capability, state (both ways), the
     PCI address at the other end, which must be another device's */
  for (unsigned d = 0; d < count; d++) {
    nvml_dev dev = NULL;
    char own[64] = "";
    NVML("nvmlDeviceGetHandleByIndex_v2", d, &dev);
    CU("cuDeviceGetPCIBusId", own, (int)sizeof own, (int)d);
    int links = 0;
    for (unsigned l = 0; l < 18; l++) {
      unsigned p2p = 9;
      int state = -1;
      struct nvml_pci remote;
      struct nvml_field f = {.field_id = 165, .scope_id = l}; /* NVML_FI_DEV_NVLINK_GET_STATE */
      int rc_cap = NVML("nvmlDeviceGetNvLinkCapability", dev, l, 0, &p2p);
      int rc_state = NVML("nvmlDeviceGetNvLinkState", dev, l, &state);
      int rc_pci = NVML("nvmlDeviceGetNvLinkRemotePciInfo_v2", dev, l, &remote);
      check(NVML("nvmlDeviceGetFieldValues", dev, 1, &f) == 0, "nvmlDeviceGetFieldValues");
      if (rc_state == NVML_ERROR_NOT_SUPPORTED) {
        check(rc_cap == NVML_ERROR_NOT_SUPPORTED && rc_pci == NVML_ERROR_NOT_SUPPORTED &&
                  f.nvml_return == NVML_ERROR_NOT_SUPPORTED, "a missing link answered one way only");
        continue;
      }
      links++;
      printf("device %u link %u: state %d p2p %u remote %s field %d/%u\n", d, l, state, p2p,
             remote.bus_id, f.nvml_return, f.value);
      check(rc_cap == 0 && rc_state == 0 && rc_pci == 0 && f.nvml_return == 0 &&
                f.value == (unsigned)state, "an NVLink answered inconsistently");
      check(strcmp(remote.bus_id, own) != 0, "an NVLink leads back to its own device");
    }
    printf("device %u nvlinks: %d\n", d, links);
  }
  check(NVML("nvmlDeviceGetNvLinkState", first_handle(), 18u, &(int){0}) == NVML_ERROR_INVALID_ARGUMENT,
        "a link number out of range was not refused");

  int bad_status = -1;
  nvml_dev first = NULL;
  NVML("nvmlDeviceGetHandleByIndex_v2", 0u, &first);
  check(NVML("nvmlDeviceGetP2PStatus", first, first, 7, &bad_status) == NVML_ERROR_INVALID_ARGUMENT,
        "nvmlDeviceGetP2PStatus took an unknown capability index");
  nvml_dev none = NULL;
  check(NVML("nvmlDeviceGetHandleByPciBusId_v2", "not:a:bus", &none) == NVML_ERROR_INVALID_ARGUMENT,
        "a malformed PCI address was not refused");

  int nvml_cuda = 0, cu_version = 0;
  check(NVML("nvmlSystemGetCudaDriverVersion", &nvml_cuda) == 0, "nvmlSystemGetCudaDriverVersion");
  check(CU("cuDriverGetVersion", &cu_version) == 0, "cuDriverGetVersion");
  printf("cuda driver version: nvml %d cuda %d\n", nvml_cuda, cu_version);
  check(nvml_cuda == cu_version, "CUDA driver versions differ");

  nvml_dev dev = NULL;
  rc = NVML("nvmlDeviceGetHandleByIndex_v2", count, &dev);
  printf("out of range index %u: %d\n", count, rc);
  check(rc == NVML_ERROR_INVALID_ARGUMENT, "an index out of range was not refused");

  /* twice: the line is said once */
  unsigned milliwatts;
  NVML("nvmlDeviceGetHandleByIndex_v2", 0u, &dev);
  rc = NVML("nvmlDeviceGetPowerUsage", dev, &milliwatts);
  int rc2 = NVML("nvmlDeviceGetPowerUsage", dev, &milliwatts);
  printf("nvmlDeviceGetPowerUsage: %d %d (%s)\n", rc, rc2,
         ((const char *(*)(int))sym(nvml, "nvmlErrorString"))(rc));
  check(rc == NVML_ERROR_NOT_SUPPORTED && rc2 == rc, "an unserved call did not say NOT_SUPPORTED");
  check(NVML("nvmlShutdown") == 0, "nvmlShutdown");
  if (!failed) printf("PASSED\n");
  return failed;
}
