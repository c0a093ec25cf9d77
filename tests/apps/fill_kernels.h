// Two kernels several test programs share (mapped.cu, managed.cu,
// mempool.cu), with fill's value on the host: a fill that depends on a
// seed and the index, and an accumulation that depends on the order of the
// fills. Their CPU twins are in tests/twins/app_twins.c.
#ifndef FERRY_TESTS_FILL_KERNELS_H
#define FERRY_TESTS_FILL_KERNELS_H

__global__ void mp_fill(unsigned *out, int n, unsigned seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = seed * 2654435761u + (unsigned)i * 40503u;
}
__global__ void mp_accum(unsigned *acc, const unsigned *in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] = acc[i] * 31u + in[i];
}
// mp_fill's value, on the host
static unsigned fill_value(unsigned seed, int i) { return seed * 2654435761u + (unsigned)i * 40503u; }

#endif
