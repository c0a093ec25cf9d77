"""How far CuPy gets on the GPU it is given; one line per step, as
torch_probe.py.
  python3 cupy_probe.py
"""
import sys
import traceback


def step(name, fn):
    try:
        print(f"step {name}: ok {fn()}", flush=True)
    except Exception as e:  # a framework error, reported and passed over
        print(f"step {name}: FAILED {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
              flush=True)
        traceback.print_exc(file=sys.stderr)


import cupy as cp  # noqa: E402

print(f"cupy {cp.__version__}", flush=True)
step("elementwise", lambda: float((cp.arange(1 << 20, dtype=cp.float32) * 2 + 1).sum()))
add = cp.RawKernel(r'''extern "C" __global__ void add1(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }''', "add1")


def raw():
    x = cp.zeros(1000, dtype=cp.float32)
    add((4,), (256,), (x, cp.int32(1000)))
    return float(x.sum())


step("raw_kernel", raw)
step("fft", lambda: f"{float(cp.abs(cp.fft.fft(cp.arange(4096, dtype=cp.float32))).sum()):.6e}")
step("linalg", lambda: f"{float(cp.linalg.solve(cp.eye(64) * 2 + 0.01, cp.ones(64)).sum()):.6e}")
step("sort", lambda: int(cp.sort(cp.arange(100000)[::-1])[12345]))
step("mempool_async", lambda: (cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc),
                               float(cp.ones(1 << 20).sum()))[1])
