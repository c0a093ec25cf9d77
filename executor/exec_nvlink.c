/*
 * The nvlinks call: the session GPU's NVLinks as the machine's NVML reports
 * them (executor/nvml_links.c for the real driver; the simulation's
 * FERRY_SIM_NVLINKS), for ferry's NVML front end, which NCCL asks.
 */
#include "executor/exec_internal.h"

#include <stdio.h>

#include "protocol/nvlink.h"

int ferry_x_nvlinks(struct ferry_exec *ex, const struct ferry_nvlinks_args *a,
                    struct ferry_nvlinks_rets *r, struct ferry_io *io) {
  (void)a, (void)io;
  int domain = 0, bus = 0, device = 0;
  if (ex->d->DeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, ex->dev) ||
      ex->d->DeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, ex->dev) ||
      ex->d->DeviceGetAttribute(&device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, ex->dev))
    domain = bus = device = 0;
  char bus_id[32];
  snprintf(bus_id, sizeof bus_id, "%08x:%02x:%02x.0", (unsigned)domain, (unsigned)bus,
           (unsigned)device);
  struct ferry_nvlink *links = exec_ret_alloc(ex, 0, FERRY_NVLINK_MAX * sizeof *links);
  if (!links)
    return EXEC_MEMORY_ALLOCATION;
  unsigned n = ex->d->nvlinks ? ex->d->nvlinks(ex->dev, bus_id, links) : 0;
  r->links = (ferry_blob){links, (uint32_t)(n * sizeof *links)};
  return EXEC_OK;
}
