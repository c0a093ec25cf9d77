// drv_jitlink's kernel (tests/apps/drv_jitlink.c): PTX built with -rdc, its
// device function jit_mix left to a second PTX (drv_jit_mix.cu) that the
// program links in at run time with cuLink*.
extern "C" __device__ unsigned jit_mix(unsigned v, unsigned k);

extern "C" __global__ void jit_step(unsigned *x, int n, unsigned k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = jit_mix(x[i], k + (unsigned)i);
}
