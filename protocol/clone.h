/*
 * Deep copies of a call's ARGS or RETS struct, generated from calls.def.
 * Decoded and caller-built structs point at memory that lives only for one
 * call; the recorder keeps arguments for a later replay, and the shim's
 * local mode hands results to threads, so both need copies that own their
 * str and blob bytes.
 */
#ifndef FERRY_CLONE_H
#define FERRY_CLONE_H

#include <stddef.h>
#include "wire.h"

/* bytes of str/blob data a clone needs beyond the struct itself */
size_t ferry_args_extra(unsigned call, const void *args);
size_t ferry_rets_extra(unsigned call, const void *rets);
/* copies the struct to dst and its str/blob bytes to `extra` (at least the
   size the _extra function gave); dst's pointers then point into extra */
void ferry_args_clone(unsigned call, const void *src, void *dst, void *extra);
void ferry_rets_clone(unsigned call, const void *src, void *dst, void *extra);

#endif
