"""How far PyTorch gets on the GPU it is given: each step prints one line,
"step NAME: ok VALUE" or "step NAME: FAILED ERROR", and later steps run even
when one fails, so a run through ferry shows the first call it stops at.
Run it natively and through `ferry run`; the values must match.
  python3 torch_probe.py [STEP...]
"""
import sys
import traceback

import torch


ONLY = set(sys.argv[1:])  # step names to run; all when empty


def step(name, fn):
    if ONLY and name not in ONLY:
        return True
    try:
        print(f"step {name}: ok {fn()}", flush=True)
        return True
    except Exception as e:  # a framework error, reported and passed over
        print(f"step {name}: FAILED {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
              flush=True)
        traceback.print_exc(file=sys.stderr)
        return False


def elementwise():
    x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    y = x * 2 + 1
    torch.cuda.synchronize()
    return f"{y.sum().item():.6e} {y[12345].item()}"


def matmul():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(256, 256, generator=g)
    b = torch.randn(256, 256, generator=g)
    c = (a.cuda() @ b.cuda()).cpu()
    return f"{(c - a @ b).abs().max().item():.2e} {c.sum().item():.6e}"


def mlp_steps():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 64, generator=g).cuda()
    t = torch.randint(0, 10, (256,), generator=g).cuda()
    for _ in range(20):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
    return f"{loss.item():.8f}"


def conv():
    torch.manual_seed(0)
    layer = torch.nn.Conv2d(3, 8, 3).cuda()
    x = torch.randn(4, 3, 32, 32).cuda()
    return f"{layer(x).sum().item():.6e}"


def cnn_train():
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(64, 3, 32, 32, generator=g).cuda()
    t = torch.randint(0, 10, (64,), generator=g).cuda()
    for _ in range(20):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
    return f"{loss.item():.8f}"


def sdpa(dtype):
    def run():
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True).cuda().to(dtype).eval()
        x = torch.randn(8, 128, 256).cuda().to(dtype)
        with torch.no_grad():
            y = layer(x)
        return f"{y.float().sum().item():.6e}"
    return run


def cuda_graph():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10)).cuda()
    static_x = torch.randn(32, 64, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = model(static_x)
    acc = 0.0
    for i in range(10):
        static_x.copy_(torch.full((32, 64), 0.01 * i, device="cuda"))
        g.replay()
        acc += static_y.sum().item()
    return f"{acc:.6e}"


def compiled(mode):
    def run():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(),
                                    torch.nn.Linear(128, 10)).cuda()
        f = torch.compile(model, mode=mode)
        x = torch.randn(32, 64, device="cuda")
        acc = 0.0
        for _ in range(5):
            acc += f(x).sum().item()
        return f"{acc:.6e}"
    return run


def alloc_stats():
    x = torch.empty(1 << 26, device="cuda")
    del x
    return f"{torch.cuda.memory_reserved() >> 20} MiB reserved"


print(f"torch {torch.__version__}", flush=True)
step("init", lambda: f"{torch.cuda.is_available()} {torch.cuda.device_count()} "
                      f"{torch.cuda.get_device_name(0)}")
step("elementwise", elementwise)
step("matmul", matmul)
step("mlp_steps", mlp_steps)
step("conv", conv)
step("cnn_train", cnn_train)
step("sdpa_fp32", sdpa(torch.float32))
step("sdpa_bf16", sdpa(torch.bfloat16))
step("alloc_stats", alloc_stats)
step("cuda_graph", cuda_graph)
step("compile_default", compiled("default"))
step("compile_reduce_overhead", compiled("reduce-overhead"))
