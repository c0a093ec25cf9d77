/* A GPU's NVLinks from the machine's NVML (nvml_links.c), for the real
   driver's ops table: the nvlinks call answers NCCL's topology questions. */
#ifndef FERRY_EXECUTOR_NVML_LINKS_H
#define FERRY_EXECUTOR_NVML_LINKS_H

#include <cuda.h>

#include "protocol/nvlink.h"

/* the GPU at PCI address bus_id: its NVLinks into out (FERRY_NVLINK_MAX at
   most); how many. 0 where NVIDIA's NVML is missing or says none */
unsigned ferry_nvml_nvlinks(CUdevice dev, const char *bus_id, struct ferry_nvlink *out);

#endif
