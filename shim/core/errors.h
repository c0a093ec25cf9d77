/* Error names and messages of the CUDA runtime, and the one path every
 * unsupported runtime call takes, so that a program that imports a call ferry
 * does not implement still loads and gets a clean error instead of a crash. */
#ifndef FERRY_SHIM_ERRORS_H
#define FERRY_SHIM_ERRORS_H

#include <cuda_runtime_api.h>

/* cudaGetErrorName / cudaGetErrorString are declared by cuda_runtime_api.h and
 * defined in errors.c. */

/* Number of entries in the error table (every cudaError value of CUDA 13). */
unsigned ferry_error_count(void);

/* The i-th code of the table (in ascending order), for tests. */
cudaError_t ferry_error_code_at(unsigned i);

/* Called by each generated stub of an unsupported call: prints
 * "ferry: NAME is not supported by ferry; returning cudaErrorNotSupported"
 * to stderr the first time per call (*warned is that call's own flag,
 * zero-initialised; safe when threads race) and returns cudaErrorNotSupported. */
int ferry_unsupported_call(int *warned, const char *name);

#endif
