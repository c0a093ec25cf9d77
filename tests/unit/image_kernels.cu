// Module images for test_image and test_sim, built with nvcc as -fatbin,
// -cubin and -ptx: inc has a CPU twin (tests/twins/unit_twins.c),
// only_here has none, g_counter is a __device__ variable.
__device__ int g_counter;

__global__ void inc(int *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

extern "C" __global__ void only_here(int *p) { *p = g_counter; }
