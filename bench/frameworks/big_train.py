"""A PyTorch training process with several GiB of live GPU memory (an MLP
of 8192-wide layers, Adam's two states, gradients, activations), for the
migration pause benchmark: prints one line per step, "step I T_MS WALL_S" (and "loss I VALUE" every 50 steps),
until SECONDS have passed, then the final loss and the live memory.
  python3 big_train.py [SECONDS] [LAYERS]
"""
import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
layers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
mods = []
for _ in range(layers):
    mods += [torch.nn.Linear(8192, 8192), torch.nn.ReLU()]
model = torch.nn.Sequential(*mods, torch.nn.Linear(8192, 10)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
g = torch.Generator().manual_seed(1)
x = torch.randn(256, 8192, generator=g).cuda()
t = torch.randint(0, 10, (256,), generator=g).cuda()
start = time.perf_counter()
i = 0
while True:
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=False)
    loss = torch.nn.functional.cross_entropy(model(x), t)
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    now = time.perf_counter()
    print(f"step {i} {(now - t0) * 1e3:.3f} {now - start:.4f}", flush=True)
    if i % 50 == 0:  # deterministic: compared between runs step by step
        print(f"loss {i} {loss.item():.8f}", flush=True)
    i += 1
    if now - start > seconds:
        break
print(f"result big_train: loss {loss.item():.8f} steps {i}", flush=True)
print(f"live {torch.cuda.memory_allocated() / 2**30:.2f} GiB", flush=True)
