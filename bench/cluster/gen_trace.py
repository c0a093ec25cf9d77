#!/usr/bin/env python3
"""Synthetic GPU-job traces, in SWF, for the ferry cluster simulation.

usage: gen_trace.py [--load 0.85] [--seed 1] [--days 14] [-o trace.swf]

No public GPU trace in SWF is at hand (the Parallel Workloads Archive's logs
are CPU machines), so the jobs are drawn from documented distributions; every
one of them is in PARAMS below and in bench/cluster/README.md.

- Job bodies (GPUs, native run time, requested time, class, live GPU memory,
  user) are i.i.d. draws from one random.Random seeded with the seed, in a
  fixed order, so body i is the same at every load for a given seed (common
  random numbers: two loads differ only in how many jobs arrive).
- Offered load: bodies are drawn until their total GPU-work (GPUs x native
  run time) reaches load x GPUs x duration. Those N jobs arrive at N sorted
  uniform times on [0, duration): a Poisson process conditioned on its count,
  with rate N / duration. The realised offered load is the target (up to
  the last job) rather than the target only in expectation, which a
  heavy-tailed run time would make noisy.
- A job of more than one node's GPUs (8 here) is a multi-node job: it needs
  whole nodes (8 GPUs = two whole nodes of 4), in both policies; see
  simulate.py.

Per-class remote slowdown comes from ferry's measurements, derived at run
time from the cuda-samples table of docs/compatibility.md by
remote_slowdowns() below.
"""
import argparse
import math
import os
import random
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import swf  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPAT_MD = os.path.join(REPO, "docs", "compatibility.md")

CLASSES = {1: "compute-bound", 2: "mixed", 3: "data-heavy"}

PARAMS = {
    # cluster
    "nodes": 100,
    "gpus_per_node": 4,
    # GPUs per job: probability of each size. 8 = two whole nodes.
    "gpu_mix": {1: 0.70, 2: 0.15, 4: 0.10, 8: 0.05},
    # native run time: log-normal, median 45 min, sigma 1.6 (so the mean is
    # about 3.6x the median and 1 job in 20 runs longer than 10 h),
    # truncated (redrawn) to [1 min, 72 h], the longest a user may ask for.
    "runtime_median_s": 2700.0,
    "runtime_sigma": 1.6,
    "runtime_min_s": 60.0,
    "runtime_max_s": 72 * 3600.0,
    # requested time (wall-time limit): native run time x a factor,
    # log-uniform in [1.1, 4] (users overestimate), rounded up to 15 min,
    # at most 72 h (and never below the run time).
    "req_factor_lo": 1.1,
    "req_factor_hi": 4.0,
    "req_round_s": 900,
    "req_max_s": 72 * 3600,
    # job class mix (an assumption, not a measurement: the cuda-samples are
    # no workload): 1 compute-bound, 2 mixed, 3 data-heavy.
    "class_mix": {1: 0.60, 2: 0.30, 3: 0.10},
    # live GPU memory per GPU (what a migration copies): log-normal, median
    # 8 GiB, sigma 1.0, truncated to [0.25, 76] GiB (an 80 GB GPU).
    "mem_median_gib": 8.0,
    "mem_sigma": 1.0,
    "mem_min_gib": 0.25,
    "mem_max_gib": 76.0,
    # users: 200, drawn with Zipf weights 1/rank (a few heavy users).
    "users": 200,
}


# ---------------------------------------------------------------- slowdowns

# Classes by the measured ratio ferry s / native s of a sample (loopback TCP):
# below 1.3x compute-bound, below 3x mixed, else data-heavy.
CLASS_BOUNDS = (1.3, 3.0)
# A sample counts only if it ran long enough for its wall time not to be
# mostly process start-up: native or ferry wall time >= 1.0 s. (Short samples
# are *faster* through ferry, 0.3 s -> 0.2 s: ferry-server has its CUDA
# context open already; that says nothing about a job's steady state.)
MIN_WALL_S = 1.0


def parse_compat_samples(text):
    """[(sample, native_s, ferry_s)] for the cuda-samples that passed through
    ferry with identical output, from the table of docs/compatibility.md
    (| sample | native | ferry | output | native s | ferry s | notes |)."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or cells[3] != "identical":
            continue
        try:
            nat, fer = float(cells[4]), float(cells[5])
        except ValueError:
            continue
        if not cells[1].startswith("PASS") or not cells[2].startswith("PASS"):
            continue
        out.append((re.sub(r"\s*\(required\)", "", cells[0]), nat, fer))
    return out


def remote_slowdowns(samples, bounds=CLASS_BOUNDS, min_wall=MIN_WALL_S):
    """{class: (slowdown, [(sample, ratio), ...])}.

    Each sample's ratio ferry s / native s is floored at 1.0 (a remote GPU
    is not faster in steady state), samples shorter than min_wall (both
    times) are left out, the rest fall into classes by bounds, and a class's
    slowdown is the median of its samples' ratios.
    """
    by = {1: [], 2: [], 3: []}
    for name, nat, fer in samples:
        if max(nat, fer) < min_wall or nat <= 0:
            continue
        r = max(1.0, fer / nat)
        c = 1 if r < bounds[0] else 2 if r < bounds[1] else 3
        by[c].append((name, r))
    out = {}
    for c, xs in by.items():
        if not xs:
            raise ValueError(f"no sample falls into class {c} ({CLASSES[c]})")
        out[c] = (statistics.median(r for _, r in xs), sorted(xs, key=lambda x: x[1]))
    return out


def default_slowdowns(path=COMPAT_MD):
    with open(path) as f:
        samples = parse_compat_samples(f.read())
    if len(samples) < 10:
        raise ValueError(f"{path}: only {len(samples)} cuda-samples rows found; table format changed?")
    return remote_slowdowns(samples)


# ------------------------------------------------------------------ traces

def _weighted(rng, mix):
    x = rng.random()
    acc = 0.0
    for k, p in mix.items():
        acc += p
        if x < acc:
            return k
    return k


def _lognormal_trunc(rng, median, sigma, lo, hi):
    mu = math.log(median)
    while True:
        v = rng.lognormvariate(mu, sigma)
        if lo <= v <= hi:
            return v


def _bodies(seed, p):
    """Endless stream of job bodies for this seed."""
    rng = random.Random(f"ferry-cluster-bodies-{seed}")
    weights = [1.0 / (i + 1) for i in range(p["users"])]
    cum = []
    acc = 0.0
    for w in weights:
        acc += w
        cum.append(acc)
    while True:
        gpus = _weighted(rng, p["gpu_mix"])
        run = round(_lognormal_trunc(rng, p["runtime_median_s"], p["runtime_sigma"],
                                     p["runtime_min_s"], p["runtime_max_s"]))
        f = math.exp(rng.uniform(math.log(p["req_factor_lo"]), math.log(p["req_factor_hi"])))
        q = p["req_round_s"]
        req = min(p["req_max_s"], int(math.ceil(run * f / q) * q))
        req = max(req, run)
        cls = _weighted(rng, p["class_mix"])
        mem = _lognormal_trunc(rng, p["mem_median_gib"], p["mem_sigma"],
                               p["mem_min_gib"], p["mem_max_gib"])
        u = rng.random() * acc
        user = 1 + next(i for i, c in enumerate(cum) if u < c)
        yield {"gpus": gpus, "run": run, "req": req, "cls": cls,
               "mem_kib": int(mem * 1024 * 1024), "user": user}


def generate(load, seed, days, params=None):
    """The trace as a list of job dicts (id, submit, run, gpus, req, cls,
    mem_kib, user), sorted by submit time. See the module docstring."""
    p = dict(PARAMS, **(params or {}))
    duration = days * 86400.0
    target = load * p["nodes"] * p["gpus_per_node"] * duration
    jobs, work = [], 0.0
    for b in _bodies(seed, p):
        if work >= target:
            break
        jobs.append(b)
        work += b["gpus"] * b["run"]
    arr = random.Random(f"ferry-cluster-arrivals-{seed}-{load!r}-{days!r}")
    times = sorted(arr.uniform(0.0, duration) for _ in jobs)
    t0 = times[0] if times else 0.0
    for i, (j, t) in enumerate(zip(jobs, times), 1):
        j["id"] = i
        j["submit"] = round(t - t0, 3)  # SWF: the first job is submitted at 0
    return jobs


def to_records(jobs):
    return [swf.record(job=j["id"], submit=j["submit"], wait=-1, run=j["run"],
                       alloc_procs=j["gpus"], used_mem=j["mem_kib"],
                       req_procs=j["gpus"], req_time=j["req"], status=1,
                       user=j["user"], executable=j["cls"])
            for j in jobs]


def from_records(records, default_cls=1, default_mem_kib=8 * 1024 * 1024):
    """Job dicts from SWF records (a generated trace or any SWF log):
    GPUs = field 8 (else 5), run time = field 4, requested time = field 9
    (else the run time), class = field 14 if 1-3 (else default_cls),
    memory = field 7 (else default_mem_kib). Jobs with no run time or no
    GPUs are skipped (as are SWF's cancelled jobs, status 5)."""
    jobs = []
    for r in records:
        gpus = r["req_procs"] if r["req_procs"] > 0 else r["alloc_procs"]
        if gpus <= 0 or r["run"] <= 0 or r["status"] == 5:
            continue
        req = r["req_time"] if r["req_time"] > 0 else r["run"]
        cls = r["executable"] if r["executable"] in CLASSES else default_cls
        mem = r["used_mem"] if r["used_mem"] > 0 else default_mem_kib
        jobs.append({"id": r["job"], "submit": r["submit"], "run": r["run"],
                     "gpus": gpus, "req": max(req, r["run"]), "cls": cls,
                     "mem_kib": mem, "user": r["user"]})
    jobs.sort(key=lambda j: (j["submit"], j["id"]))
    return jobs


def header(load, seed, days, jobs, params=None, slowdowns=None):
    p = dict(PARAMS, **(params or {}))
    h = [
        "Version: 2.2",
        "Computer: synthetic GPU cluster (ferry bench/cluster)",
        "Installation: generated by bench/cluster/gen_trace.py",
        f"Acknowledge: synthetic, seed {seed}, offered load {load}, {days} days",
        f"MaxJobs: {len(jobs)}",
        f"MaxRecords: {len(jobs)}",
        "UnixStartTime: 0",
        "TimeZoneString: UTC",
        f"MaxNodes: {p['nodes']}",
        f"MaxProcs: {p['nodes'] * p['gpus_per_node']}",
        "Note: processors are GPUs (fields 5 and 8); field 4 is the native run time",
        "Note: ferry: field 7 = live GPU memory per GPU (KiB), copied by a migration",
        "Note: ferry: field 14 = job class, 1 compute-bound, 2 mixed, 3 data-heavy",
        "Note: ferry: jobs of more than MaxProcs/MaxNodes GPUs need whole nodes",
    ]
    if slowdowns:
        h.append("Note: ferry: remote slowdown by class (docs/compatibility.md): " +
                 ", ".join(f"{c}={slowdowns[c][0]:.3f}" for c in sorted(slowdowns)))
    return h


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", type=float, default=0.85)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--days", type=float, default=14)
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args(argv)
    jobs = generate(a.load, a.seed, a.days)
    h = header(a.load, a.seed, a.days, jobs, slowdowns=default_slowdowns())
    if a.output == "-":
        sys.stdout.write("\n".join(swf.format_lines(to_records(jobs), h)) + "\n")
    else:
        swf.write(a.output, to_records(jobs), h)
        print(f"{a.output}: {len(jobs)} jobs", file=sys.stderr)


if __name__ == "__main__":
    main()
