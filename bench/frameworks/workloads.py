"""Framework workloads for issue 21, each deterministic and short: run one
by name, natively or through ferry (remote, migrated), and compare the
`result` lines; `time` lines give the median step time after warm-up.
  python3 workloads.py NAME [STEPS]
PyTorch: mlp_train cnn_train transformer_fp32 transformer_bf16 (and _b256, a batch
that keeps the GPU busy) cudagraph
compile_default compile_ro; JAX: jax_train; CuPy: cupy_ops. Allocator
variants come from the environment (PYTORCH_CUDA_ALLOC_CONF, XLA_FLAGS).
"""
import statistics
import sys
import time


def timed(fn, steps, sync, warmup=3):
    times = []
    out = None
    for i in range(steps):
        t0 = time.perf_counter()
        out = fn(i)
        sync()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return out, (statistics.median(times) if times else 0.0)


def torch_setup():
    import torch
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def mlp_train(steps):
    torch = torch_setup()
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 1024, generator=g).cuda()
    t = torch.randint(0, 10, (512,), generator=g).cuda()

    def step(_):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        return loss
    loss, ms = timed(step, steps, torch.cuda.synchronize)
    return f"loss {loss.item():.8f}", ms


def cnn_train(steps):
    torch = torch_setup()
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(128, 3, 32, 32, generator=g).cuda()
    t = torch.randint(0, 10, (128,), generator=g).cuda()

    def step(_):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        return loss
    loss, ms = timed(step, steps, torch.cuda.synchronize)
    acc = (model(x).argmax(1) == t).float().mean().item()
    return f"loss {loss.item():.8f} acc {acc:.4f}", ms


def transformer(dtype_name, batch=32):
    def run(steps):
        torch = torch_setup()
        dtype = getattr(torch, dtype_name)
        layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
        model = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).cuda().to(dtype).eval()
        g = torch.Generator().manual_seed(3)
        x = torch.randn(batch, 256, 512, generator=g).cuda().to(dtype)
        with torch.no_grad():
            y, ms = timed(lambda i: model(x), steps, torch.cuda.synchronize)
        return f"sum {y.float().sum().item():.6e} abs {y.float().abs().sum().item():.6e}", ms
    return run


def cudagraph(steps):
    torch = torch_setup()
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024)).cuda().eval()
    static_x = torch.zeros(256, 1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(s):
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_y = model(static_x)
    g = torch.Generator().manual_seed(4)
    inputs = torch.randn(8, 256, 1024, generator=g).cuda()
    acc = torch.zeros((), device="cuda", dtype=torch.float64)

    def step(i):
        static_x.copy_(inputs[i % 8])
        graph.replay()
        acc.add_(static_y.double().sum())
        return acc
    acc, ms = timed(step, steps, torch.cuda.synchronize)
    return f"acc {acc.item():.10e}", ms


def compiled(mode):
    def run(steps):
        torch = torch_setup()
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                    torch.nn.Linear(4096, 1024)).cuda().eval()
        f = torch.compile(model, mode=mode)
        g = torch.Generator().manual_seed(5)
        inputs = torch.randn(8, 256, 1024, generator=g).cuda()
        acc = torch.zeros((), device="cuda", dtype=torch.float64)

        def step(i):
            with torch.no_grad():
                acc.add_(f(inputs[i % 8]).double().sum())
            return acc
        acc, ms = timed(step, steps, torch.cuda.synchronize, warmup=5)
        return f"acc {acc.item():.10e}", ms
    return run


def jax_train(steps):
    import jax
    import jax.numpy as jnp
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(0), 4)
    params = {"w1": jax.random.normal(k1, (1024, 2048)) * 0.02,
              "w2": jax.random.normal(k2, (2048, 10)) * 0.02}
    x = jax.random.normal(k3, (512, 1024))
    y = jax.random.randint(k4, (512,), 0, 10)

    def loss_fn(p):
        h = jax.nn.relu(x @ p["w1"])
        logits = h @ p["w2"]
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(512), y])

    @jax.jit
    def step_fn(p):
        loss, grads = jax.value_and_grad(loss_fn)(p)
        return jax.tree_util.tree_map(lambda a, b: a - 0.05 * b, p, grads), loss

    state = [params, None]

    def step(_):
        state[0], state[1] = step_fn(state[0])
        return state[1]
    loss, ms = timed(step, steps, lambda: state[1].block_until_ready())
    return f"loss {float(loss):.8f} dev {jax.devices()[0].platform}", ms


def cupy_ops(steps):
    import cupy as cp
    add = cp.RawKernel(r'''extern "C" __global__ void scale_add(float *x, float a, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = x[i] * a + 1.0f; }''',
                       "scale_add")
    x = cp.arange(1 << 20, dtype=cp.float32) / (1 << 20)

    def step(_):
        add(((1 << 20) // 256,), (256,), (x, cp.float32(0.5), cp.int32(1 << 20)))
        f = cp.abs(cp.fft.fft(x[:65536])).sum()
        a = cp.eye(128, dtype=cp.float64) * 3 + x[:128 * 128].reshape(128, 128).astype(cp.float64) * 0.01
        s = cp.linalg.solve(a, cp.ones(128)).sum()
        o = cp.sort(x[::-1])[12345]
        return f, s, o
    (f, s, o), ms = timed(step, steps, cp.cuda.Device().synchronize)
    return f"fft {float(f):.6e} solve {float(s):.10e} sort {float(o):.8e} sum {float(x.sum()):.6e}", ms


WORKLOADS = {
    "mlp_train": (mlp_train, 300), "cnn_train": (cnn_train, 200),
    "transformer_fp32": (transformer("float32"), 30), "transformer_bf16": (transformer("bfloat16"), 30),
    "transformer_bf16_b256": (transformer("bfloat16", 256), 30),
    "cudagraph": (cudagraph, 200), "compile_default": (compiled("default"), 100),
    "compile_ro": (compiled("reduce-overhead"), 100), "jax_train": (jax_train, 200),
    "cupy_ops": (cupy_ops, 50),
}

if __name__ == "__main__":
    name = sys.argv[1]
    fn, steps = WORKLOADS[name]
    if len(sys.argv) > 2:
        steps = int(sys.argv[2])
    result, ms = fn(steps)
    print(f"result {name}: {result}", flush=True)
    print(f"time {name}: {ms:.4f} ms/step over {steps} steps", flush=True)
