/*
 * cuLink* on the wire (link_complete, issue 22): the client keeps a link's
 * JIT options and inputs and sends them in one call, whose server runs the
 * whole link on its driver. Two blobs describe them; the inputs' bytes
 * travel as the call's bulk, one after another in the table's order.
 *
 * Layout, every integer little-endian, no padding:
 *   options  n x option: u32 option (CUjit_option), u64 value
 *   inputs   per input: u32 type (CUjitInputType), u64 size, u32 name_len,
 *            name bytes (no NUL), u32 nopts, nopts x option
 * Only options whose value is plain data travel (ferry_jit_option_use); the
 * log buffers stay with the client, which sends their sizes, and the server
 * links with buffers of its own of those sizes (at most FERRY_JIT_MAX_LOG).
 */
#ifndef FERRY_JITLINK_H
#define FERRY_JITLINK_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/codec.h"

#define FERRY_JIT_OPTION_BYTES 12u
#define FERRY_JIT_MAX_OPTIONS 64u     /* in one list: CUDA 13 has 35 options */
#define FERRY_JIT_MAX_INPUTS 4096u
#define FERRY_JIT_MAX_NAME 4096u
#define FERRY_JIT_MAX_LOG (256u << 10) /* bytes of a log the server keeps */
#define FERRY_JIT_INPUT_TYPES 6u      /* CU_JIT_INPUT_CUBIN .. CU_JIT_INPUT_NVVM */

/* what ferry does with a CUjit_option */
enum ferry_jit_use {
  FERRY_JIT_PLAIN,      /* a value: sent as it is */
  FERRY_JIT_THREADS,    /* CU_JIT_THREADS_PER_BLOCK: sent, and the driver's answer written back */
  FERRY_JIT_WALL_TIME,  /* sent (value 0); the time written back as a float */
  FERRY_JIT_LOG_SIZE,   /* a log buffer's size: sent; what the log filled written back */
  FERRY_JIT_LOG_BUFFER, /* a log buffer of the program's: kept by the client, not sent */
  FERRY_JIT_REFUSED,    /* pointers ferry cannot carry, or an option it does not know */
};
enum ferry_jit_use ferry_jit_option_use(uint32_t option);
/* "CU_JIT_GLOBAL_SYMBOL_ADDRESSES", or "CUjit_option 99" (in a static buffer
   of the calling thread) */
const char *ferry_jit_option_name(uint32_t option);

/* appends one option or one input's entry; 0, or -1 when out of memory */
int ferry_jit_put_option(struct ferry_buf *b, uint32_t option, uint64_t value);
int ferry_jit_put_input(struct ferry_buf *b, uint32_t type, uint64_t size, const char *name,
                        const struct ferry_buf *options, uint32_t nopts);

/* an options list of len bytes: how many options, or -1 when it is
   malformed (a partial option, too many, one that does not travel) */
int ferry_jit_options_count(const void *p, size_t len);
/* option i of a list ferry_jit_options_count accepted */
void ferry_jit_option_at(const void *p, uint32_t i, uint32_t *option, uint64_t *value);

struct ferry_jit_input {
  uint32_t type;
  uint64_t size;
  const char *name; /* name_len bytes, not NUL-terminated */
  uint32_t name_len;
  const unsigned char *options; /* a list of nopts, as ferry_jit_option_at reads it */
  uint32_t nopts;
};
/* the input at *pos of an inputs table of len bytes, *pos moved past it:
   1, 0 at the table's end, -1 when it is malformed (a bad type, a name
   with a NUL or too long, options as ferry_jit_options_count refuses) */
int ferry_jit_next_input(const void *p, size_t len, size_t *pos, struct ferry_jit_input *in);

#endif
