// Kernels for the driver-API test programs (drv_tour.c, drv_mixed.cu). They
// are not linked into any program: the build compiles this file three ways
// (tests/e2e/driver.cmake) and the programs load the results at run time:
//   drv_kernels.fatbin  nvcc -fatbin (sm_90 SASS + compute_90 PTX)
//   drv_kernels.cubin   nvcc -cubin -arch=sm_90
//   drv_kernels.ptx     nvcc -ptx
// Most kernels are extern "C", so cuModuleGetFunction takes their plain
// names; drv_fold is C++ and is looked up by its mangled name.
// CPU twins of all of them: tests/twins/app_twins.c (params as nvcc lays
// them out; the offsets are noted here too).

// set by the host with cuModuleGetGlobal + cuMemcpyHtoD
__device__ float drv_factor;
__device__ unsigned drv_salt;

// c[i] = a[i] + b[i]   params: c 0, a 8, b 16, n 24
extern "C" __global__ void drv_vadd(float *c, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// x[i] *= drv_factor   params: x 0, n 8
extern "C" __global__ void drv_scale(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= drv_factor;
}

struct DrvPair {
  char tag;   // 0
  double val; // 8
  int count;  // 16, sizeof 24, align 8
};

// writes its parameters back, so a wrong layout shows as wrong values
// params: out 0, c 8 (1), d 16 (8), i 24 (4), p 32 (8), s 40 (24), h 64 (2)
extern "C" __global__ void drv_params(double *out, char c, double d, int i, const int *p,
                                      DrvPair s, short h) {
  if (blockIdx.x || threadIdx.x) return;
  out[0] = c;
  out[1] = d;
  out[2] = i;
  out[3] = p[0];
  out[4] = s.tag;
  out[5] = s.val;
  out[6] = s.count;
  out[7] = h;
}

// reverses each block's chunk of x through dynamic shared memory
// (blockDim.x ints of it)   params: x 0, n 8
extern "C" __global__ void drv_reverse(int *x, int n) {
  extern __shared__ int buf[];
  int base = blockIdx.x * blockDim.x, t = threadIdx.x;
  int len = n - base < (int)blockDim.x ? n - base : (int)blockDim.x;
  if (t < len) buf[t] = x[base + t];
  __syncthreads();
  if (t < len) x[base + t] = buf[len - 1 - t];
}

// 2D fill of pitched memory: p[y][x] = base + y * 1000 + x
// params: p 0, pitch 8 (8), w 16, h 20, base 24
extern "C" __global__ void drv_fill2d(float *p, size_t pitch, int w, int h, float base) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) ((float *)((char *)p + y * pitch))[x] = base + (float)(y * 1000 + x);
}

// integer mixing with a module global: exact everywhere (the loops)
// params: x 0, n 8, k 12
extern "C" __global__ void drv_mix(unsigned *x, int n, unsigned k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 1664525u + drv_salt + k + (unsigned)i;
}

// C++ linkage: _Z8drv_foldPjPKji   params: y 0, x 8, n 16
__global__ void drv_fold(unsigned *y, const unsigned *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i] ^ (unsigned)i;
}

// drv_fold with its pointers in one structure, as cuBLASLt's kernels take
// theirs: extern "C", params: the structure (24 bytes) at 0
struct DrvFoldArgs {
  unsigned *y;
  const unsigned *x;
  int n;
};
extern "C" __global__ void drv_fold_struct(DrvFoldArgs a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < a.n) a.y[i] += a.x[i] ^ (unsigned)i;
}
