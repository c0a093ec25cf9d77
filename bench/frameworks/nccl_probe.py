"""How far NCCL gets through ferry (issue 23): two ranks on two GPUs, each a
process of its own (torch.multiprocessing), an all-reduce whose sum is
known, then a bus-bandwidth measurement of a large all-reduce. Each rank
prints "rank R step NAME: ok VALUE" or "... FAILED ERROR" so that a run
through ferry shows the first step it stops at; run it natively and through
`ferry run` with FERRY_DEVICES naming two GPUs.
  python3 nccl_probe.py [BYTES=1073741824]   (NCCL_PROBE_RANKS=1: one rank)
With NCCL_PROBE_ONE_GPU=1 each rank sees only its own GPU, as Slurm binds
a task to one: through ferry FERRY_DEVICES is cut to the rank's entry,
natively CUDA_VISIBLE_DEVICES to the rank's entry of NCCL_PROBE_NATIVE_GPUS
(default "0,1").
"""
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def say(rank, name, fn):
    try:
        print(f"rank {rank} step {name}: ok {fn()}", flush=True)
        return True
    except Exception as e:  # reported, and the rank stops
        first = str(e).splitlines()[0] if str(e) else ""
        print(f"rank {rank} step {name}: FAILED {type(e).__name__}: {first}", flush=True)
        traceback.print_exc(file=sys.stderr)
        return False


def rank_main(rank, world, nbytes, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dev = rank
    if os.environ.get("NCCL_PROBE_ONE_GPU") == "1":  # before CUDA starts in this process
        if os.environ.get("FERRY_DEVICES"):
            os.environ["FERRY_DEVICES"] = os.environ["FERRY_DEVICES"].split(",")[rank]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = os.environ.get("NCCL_PROBE_NATIVE_GPUS", "0,1").split(",")[rank]
        dev = 0
    if not say(rank, "device", lambda: (torch.cuda.set_device(dev), torch.cuda.get_device_name(dev))[1]):
        return
    if not say(rank, "init", lambda: dist.init_process_group("nccl", rank=rank, world_size=world) or "nccl"):
        return

    def small():
        x = torch.full((1 << 20,), float(rank + 1), device="cuda")
        dist.all_reduce(x)
        torch.cuda.synchronize()
        return f"{x.sum().item():.6e}"  # (1 + 2) * 2^20 = 3.145728e+06 with two ranks

    def bandwidth():
        n = nbytes // 4
        x = torch.ones(n, device="cuda")
        for _ in range(2):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        reps = 5
        t0 = time.perf_counter()
        for _ in range(reps):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        t = (time.perf_counter() - t0) / reps
        busbw = nbytes / t * 2 * (world - 1) / world / 1e9
        return f"{nbytes} bytes {t * 1e3:.2f} ms busbw {busbw:.1f} GB/s"

    if say(rank, "allreduce", small):
        say(rank, "busbw", bandwidth)
    dist.destroy_process_group()


def main():
    nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 30
    world = int(os.environ.get("NCCL_PROBE_RANKS", "2"))
    print(f"devices: {torch.cuda.device_count()}", flush=True)
    mp.spawn(rank_main, args=(world, nbytes, 29500 + os.getpid() % 1000), nprocs=world, join=True)


if __name__ == "__main__":
    main()
