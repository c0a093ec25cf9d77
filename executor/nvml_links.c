/*
 * NVLinks from NVIDIA's NVML on the GPU's machine. A program's NCCL asks
 * ferry's NVML which NVLinks its GPU has (and to what); the answer is the
 * server's, read here: NVML loaded at the first question, never ferry's
 * own libnvidia-ml.so.1 (in a program's process, for a local vGPU, that one
 * comes first on the path). Links NVML says nothing of are left out.
 */
#include "executor/nvml_links.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "common/nvml_types.h"
#include "executor/driver.h"

static struct {
  nvmlReturn_t (*init)(void);
  nvmlReturn_t (*by_bus)(const char *bus, nvmlDevice_t *dev);
  nvmlReturn_t (*state)(nvmlDevice_t dev, unsigned link, nvmlEnableState_t *active);
  nvmlReturn_t (*cap)(nvmlDevice_t dev, unsigned link, nvmlNvLinkCapability_t cap, unsigned *result);
  nvmlReturn_t (*remote)(nvmlDevice_t dev, unsigned link, nvmlPciInfo_t *pci);
  int ready;
} nvml;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

static void load(void) {
  void *dl = ferry_open_nvidia_library("libnvidia-ml.so.1", "ferry_nvml_unsupported_call");
  if (!dl)
    return;
  void *p[5] = {dlsym(dl, "nvmlInit_v2"), dlsym(dl, "nvmlDeviceGetHandleByPciBusId_v2"),
                dlsym(dl, "nvmlDeviceGetNvLinkState"), dlsym(dl, "nvmlDeviceGetNvLinkCapability"),
                dlsym(dl, "nvmlDeviceGetNvLinkRemotePciInfo_v2")};
  for (int i = 0; i < 5; i++)
    if (!p[i])
      return;
  memcpy(&nvml.init, &p[0], sizeof p[0]);
  memcpy(&nvml.by_bus, &p[1], sizeof p[1]);
  memcpy(&nvml.state, &p[2], sizeof p[2]);
  memcpy(&nvml.cap, &p[3], sizeof p[3]);
  memcpy(&nvml.remote, &p[4], sizeof p[4]);
  nvml.ready = nvml.init() == NVML_SUCCESS;
}

unsigned ferry_nvml_nvlinks(CUdevice dev, const char *bus_id, struct ferry_nvlink *out) {
  (void)dev;
  pthread_once(&nvml_once, load);
  nvmlDevice_t d;
  if (!nvml.ready || nvml.by_bus(bus_id, &d) != NVML_SUCCESS)
    return 0;
  unsigned n = 0;
  for (unsigned l = 0; l < FERRY_NVLINK_MAX; l++) {
    nvmlEnableState_t active = NVML_FEATURE_DISABLED;
    unsigned p2p = 0;
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof pci);
    if (nvml.state(d, l, &active) != NVML_SUCCESS)
      continue;
    if (nvml.cap(d, l, NVML_NVLINK_CAP_P2P_SUPPORTED, &p2p) != NVML_SUCCESS)
      p2p = 0;
    if (nvml.remote(d, l, &pci) != NVML_SUCCESS)
      pci.busId[0] = 0;
    struct ferry_nvlink *k = &out[n++];
    memset(k, 0, sizeof *k);
    k->link = l;
    k->flags = (p2p ? FERRY_NVLINK_P2P : 0) | (active == NVML_FEATURE_ENABLED ? FERRY_NVLINK_ACTIVE : 0);
    memcpy(k->remote_bus, pci.busId, sizeof k->remote_bus - 1);
  }
  return n;
}
