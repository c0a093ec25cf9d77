/*
 * Kernel parameter layouts: how the shim turns the `void **args` of a
 * launch into one packed buffer that the server can hand to the driver.
 * The server reports each kernel's (offset, size) pairs at module load;
 * on the wire a layout is u32 count, then count pairs of u32, and a count
 * of FERRY_LAYOUT_ABSENT says the module has no such kernel.
 */
#ifndef FERRY_LAYOUT_H
#define FERRY_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define FERRY_LAYOUT_ABSENT 0xffffffffu
#define FERRY_MAX_PARAM_BYTES (32u * 1024u) /* CUDA 12.1+: 32764 bytes of parameters */
#define FERRY_MAX_PARAMS 4096u

struct ferry_layout {
  uint32_t nparams;
  uint32_t bytes; /* packed size: the end of the last parameter */
  uint32_t *offsets, *sizes;
};

/* reads one layout at *p and advances it. Returns 0, 1 when the kernel is
   absent, or -1 for a malformed or out-of-bounds layout */
int ferry_layout_read(const unsigned char **p, const unsigned char *end, struct ferry_layout *l);
void ferry_layout_free(struct ferry_layout *l);
int ferry_layout_equal(const struct ferry_layout *a, const struct ferry_layout *b);

/* copies each args[i] to buf + offsets[i]; buf holds l->bytes. Gaps are zeroed. */
void ferry_layout_pack(const struct ferry_layout *l, void *const *args, unsigned char *buf);

#endif
