"""PyTorch DistributedDataParallel on two ranks (issue 23): the MLP or the
CNN of workloads.py, each rank training on its own half of a fixed batch,
gradients all-reduced by NCCL. Deterministic, so the loss lines of a run
through ferry must equal a native run's. Each rank sees only its own GPU
(FERRY_DEVICES cut to the rank's entry through ferry, CUDA_VISIBLE_DEVICES
natively, the rank's entry of NCCL_PROBE_NATIVE_GPUS, default "0,1"), as
Slurm binds a task to one.
  python3 ddp_train.py mlp|cnn [STEPS=30]   (NCCL_PROBE_RANKS=1: one rank)
Prints "rank R step S loss L" every 10 steps and "rank R result loss L
ms M" (median step time after warm-up) at the end.
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def model_and_batch(name, rank, world):
    nn = torch.nn
    torch.manual_seed(0)
    if name == "mlp":
        model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                              nn.Linear(4096, 10))
        g = torch.Generator().manual_seed(1)
        x, t = torch.randn(512, 1024, generator=g), torch.randint(0, 10, (512,), generator=g)
    else:
        model = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(128, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(), nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10))
        g = torch.Generator().manual_seed(2)
        x, t = torch.randn(128, 3, 32, 32, generator=g), torch.randint(0, 10, (128,), generator=g)
    part = x.shape[0] // world
    return model, x[rank * part:(rank + 1) * part], t[rank * part:(rank + 1) * part]


def rank_main(rank, world, name, steps, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if os.environ.get("FERRY_DEVICES"):
        os.environ["FERRY_DEVICES"] = os.environ["FERRY_DEVICES"].split(",")[rank]
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = os.environ.get("NCCL_PROBE_NATIVE_GPUS", "0,1").split(",")[rank]
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", 0))
    model, x, t = model_and_batch(name, rank, world)
    model = torch.nn.parallel.DistributedDataParallel(model.cuda(), device_ids=[0])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, t = x.cuda(), t.cuda()
    times = []
    loss = None
    for s in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if s >= 3:
            times.append((time.perf_counter() - t0) * 1e3)
        if s % 10 == 0:
            print(f"rank {rank} step {s} loss {loss.item():.8f}", flush=True)
    print(f"rank {rank} result loss {loss.item():.8f} ms {statistics.median(times):.3f}", flush=True)
    dist.destroy_process_group()


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "mlp"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    world = int(os.environ.get("NCCL_PROBE_RANKS", "2"))
    mp.spawn(rank_main, args=(world, name, steps, 29600 + os.getpid() % 1000), nprocs=world, join=True)


if __name__ == "__main__":
    main()
