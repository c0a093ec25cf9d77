"""How far PyTorch gets on the GPU it is given: each step prints one line,
"step NAME: ok VALUE" or "step NAME: FAILED ERROR", and later steps run even
when one fails, so a run through ferry shows the first call it stops at.
Run it natively and through `ferry run`; the values must match.
  python3 torch_probe.py
"""
import sys
import traceback

import torch


def step(name, fn):
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


print(f"torch {torch.__version__}", flush=True)
step("init", lambda: f"{torch.cuda.is_available()} {torch.cuda.device_count()} "
                      f"{torch.cuda.get_device_name(0)}")
step("elementwise", elementwise)
step("matmul", matmul)
step("mlp_steps", mlp_steps)
step("conv", conv)
