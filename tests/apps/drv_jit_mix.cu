// drv_jitlink's device function, linked into drv_jit_step's kernel at run
// time (tests/apps/drv_jitlink.c); the host and the CPU twin compute the same.
extern "C" __device__ unsigned jit_mix(unsigned v, unsigned k) {
  return (v ^ (v >> 7)) * 2654435761u + k;
}
