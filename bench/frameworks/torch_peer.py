"""Two GPUs in one PyTorch process (issue 23): peer access as PyTorch asks
for it (torch.cuda.can_device_access_peer, then its copies enable it),
Tensor.copy_ from cuda:0 to cuda:1 from 1 MiB to 1 GiB (bandwidth, and the
copied integers summed on the device), and a model split across the two
GPUs (its first layer on cuda:0, the rest on cuda:1) trained with fixed
seeds, so that a run through ferry must print a native run's loss lines.
  python3 torch_peer.py [STEPS=20]
Prints "can 0->1 B 1->0 B", "copy N MiB cuda:0->cuda:1: G GB/s ok B",
"step S loss L" every 5 steps and "result loss L ms M" (median step time
after warm-up).
"""
import statistics
import sys
import time

import torch


def copies():
    for size in (1 << 20, 16 << 20, 256 << 20, 1 << 30):
        n = size // 4
        x = torch.arange(n, device="cuda:0", dtype=torch.int32)
        y = torch.zeros(n, device="cuda:1", dtype=torch.int32)
        y.copy_(x)
        ok = y.sum(dtype=torch.int64).item() == n * (n - 1) // 2
        reps = 20 if size <= 16 << 20 else 5
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
        t = time.perf_counter()
        for _ in range(reps):
            y.copy_(x)
        torch.cuda.synchronize(1)
        torch.cuda.synchronize(0)
        dt = (time.perf_counter() - t) / reps
        print(f"copy {size >> 20} MiB cuda:0->cuda:1: {size / dt / 1e9:.2f} GB/s ok {ok}", flush=True)
        del x, y


def split_model(steps):
    nn = torch.nn
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    first = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU()).to("cuda:0")
    rest = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)).to("cuda:1")
    opt = torch.optim.SGD(list(first.parameters()) + list(rest.parameters()), lr=0.01)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 1024, generator=g).to("cuda:0")
    t = torch.randint(0, 10, (512,), generator=g).to("cuda:1")
    times, loss = [], 0.0
    for s in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        out = nn.functional.cross_entropy(rest(first(x).to("cuda:1")), t)
        out.backward()
        opt.step()
        loss = out.item()
        times.append(time.perf_counter() - t0)
        if s % 5 == 0 or s == steps - 1:
            print(f"step {s} loss {loss:.6f}", flush=True)
    print(f"result loss {loss:.6f} ms {statistics.median(times[3:]) * 1e3:.2f}", flush=True)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    print(f"devices {torch.cuda.device_count()}", flush=True)
    print(f"can 0->1 {torch.cuda.can_device_access_peer(0, 1)} 1->0 {torch.cuda.can_device_access_peer(1, 0)}",
          flush=True)
    copies()
    split_model(steps)


if __name__ == "__main__":
    main()
