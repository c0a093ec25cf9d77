// Kernels several test programs share (mapped.cu, managed.cu, mempool.cu),
// with fill's value on the host: a fill that depends on a seed and the
// index, an accumulation that depends on the order of the fills, and one
// that finds its data through a structure (NCCL's kernels find host memory
// so). Their CPU twins are in tests/twins/app_twins.c.
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
struct Holder {
  unsigned *data;
  unsigned k;
};
// h->data[i] = h->data[i] * 3 + h->k: data found through the structure
__global__ void mm_follow(const Holder *h, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) h->data[i] = h->data[i] * 3u + h->k;
}
// mp_fill's value, on the host
static unsigned fill_value(unsigned seed, int i) { return seed * 2654435761u + (unsigned)i * 40503u; }

#endif
