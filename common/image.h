/*
 * Module images as a program hands them to cuModuleLoadData: a pointer and
 * no length. Before the bytes can travel (or be parsed), their extent has
 * to come from the image's own headers.
 */
#ifndef FERRY_IMAGE_H
#define FERRY_IMAGE_H

#include <stdint.h>
#include <string.h>

/* little-endian fields at any alignment (images are byte arrays) */
static inline uint16_t ferry_u16_at(const unsigned char *p) {
  uint16_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline uint32_t ferry_u32_at(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline uint64_t ferry_u64_at(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

#define FERRY_FATBIN_MAGIC 0xBA55ED50u  /* fat binary container */
#define FERRY_WRAPPER_MAGIC 0x466243B1u /* __cudaFatCudaBinary2 wrapper */

/* The number of bytes the image at `image` occupies, reading no byte at or
   past image + max, and its kind:
     "fatbin"  container: magic, u16 version, u16 header_size (>= 16),
               u64 fat_size; size = header_size + fat_size
     "cubin"   ELF64 little endian: the furthest of its program headers,
               section headers and section contents (SHT_NOBITS excluded)
     "ptx"     NUL-terminated text starting with printable characters;
               size = strlen + 1
     "wrapper" the fat binary wrapper {int magic; int version; const
               unsigned long long *data; void *}: size is that of the
               container at ->data (bounded by max too); the caller sends
               ->data, not the wrapper
   0, or -1 for an image that is none of these or contradicts itself
   (sizes that overflow or end past max). */
int ferry_image_size(const void *image, uint64_t max, uint64_t *size, const char **kind);

#endif
