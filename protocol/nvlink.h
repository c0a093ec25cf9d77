/* A GPU's NVLinks as its machine's NVML reports them, for the nvlinks call
   (calls.def): NCCL finds two GPUs' NVLink through NVML, and without it
   tunes the pair for PCIe. Fixed layout, little-endian, inside a blob. */
#ifndef FERRY_PROTOCOL_NVLINK_H
#define FERRY_PROTOCOL_NVLINK_H

#include <stdint.h>

#define FERRY_NVLINK_MAX 18u  /* links of one GPU (Hopper has 18) */
#define FERRY_NVLINK_P2P 1u    /* NVML_NVLINK_CAP_P2P_SUPPORTED */
#define FERRY_NVLINK_ACTIVE 2u /* the link is up */

struct ferry_nvlink {
  uint32_t link;       /* NVML's link index */
  uint32_t flags;      /* FERRY_NVLINK_* */
  char remote_bus[32]; /* the PCI address at its other end, as NVML writes it */
};

#endif
