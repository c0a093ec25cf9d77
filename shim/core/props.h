/* Builds the CUDA 13 cudaDeviceProp locally from the device attribute values
 * the server sent once per device, so cudaGetDeviceProperties and
 * cudaDeviceGetAttribute need no round trip. */
#ifndef FERRY_SHIM_PROPS_H
#define FERRY_SHIM_PROPS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/* attrs[i] is the value of device attribute i, numbered as CUdevice_attribute
 * (the same numbers as cudaDeviceAttr); nattrs is the array length. A field
 * whose attribute lies at or past nattrs is left 0. name is copied (cut to
 * 255 bytes), uuid (16 bytes) may be NULL. Every other field is zeroed. */
void ferry_props_build(struct cudaDeviceProp *p, const char *name, const unsigned char uuid[16],
                       size_t total_mem, const int32_t *attrs, unsigned nattrs);

/* *value = attrs[attr]; returns cudaSuccess, or cudaErrorInvalidValue when
 * attr is negative, not below nattrs, or value is NULL. */
int ferry_props_attr(const int32_t *attrs, unsigned nattrs, int attr, int *value);

#endif
