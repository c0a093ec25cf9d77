#!/usr/bin/env python3
"""Markdown (and a PNG) from one bench/run_multigpu_gpu.sh run.

usage: bench/multigpu_report.py OUTDIR [PLOT.png]
Reads runs.txt (the programs: exit codes, migrations in-process / to helpers,
refusals), hb_calls_*.txt and hb_copies_*.txt (helper_bench natively, in the
program's process, in a ferry-mhelper and remotely) and shm_raw.txt. Prints
the tables; with PLOT.png also draws copy time against size (matplotlib).
"""
import re
import statistics
import sys


def figures(path):
    """name -> list of values (one per line that names it)"""
    out = {}
    try:
        for line in open(path):
            m = re.match(r"^(?:BENCH )?([A-Za-z0-9_]+) ([0-9.]+) (us|GB/s)$", line.strip())
            if m:
                out.setdefault(m.group(1), []).append(float(m.group(2)))
    except FileNotFoundError:
        pass
    return out


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def runs_table(out):
    print("| run | exit | in-process | helpers | refused/failed | seconds |")
    print("|---|---:|---:|---:|---:|---:|")
    for line in open(f"{out}/runs.txt"):
        parts = line.split()
        kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        print(f"| {parts[0]} | {kv.get('rc', '?')} | {kv.get('in_process', '')} | "
              f"{kv.get('helpers', '')} | {kv.get('failed', '')} | {kv.get('s', '')} |")


def calls_table(out):
    modes = ["native", "inproc", "helper", "remote"]
    f = {m: figures(f"{out}/hb_calls_{m}.txt") for m in modes}
    print("| per call (median of 3 runs) | native | in-process | helper | remote | "
          "helper - in-process |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, what in [("launch_us", "null-kernel launch (rate)"),
                       ("launch_sync_us", "launch + synchronize"),
                       ("query_us", "cudaStreamQuery"),
                       ("d2h_4B_us", "4-byte cudaMemcpy back")]:
        v = {m: med(f[m].get(name, [])) for m in modes}
        print(f"| {what} | {v['native']:.2f} µs | {v['inproc']:.2f} µs | {v['helper']:.2f} µs | "
              f"{v['remote']:.2f} µs | **{v['helper'] - v['inproc']:+.2f} µs** |")


def copies(out):
    f = {m: figures(f"{out}/hb_copies_{m}.txt") for m in ["native", "inproc", "helper"]}
    sizes = sorted({int(k.rsplit("_", 1)[1]) for k in f["inproc"] if k.startswith("h2d_pinned_")})
    return f, sizes


def copies_table(out):
    f, sizes = copies(out)
    print("| size | kind | native µs | in-process µs | helper µs | in-process / helper "
          "(bandwidth ratio) |")
    print("|---:|---|---:|---:|---:|---:|")
    for d in ["h2d", "d2h"]:
        for kind in ["pinned", "pageable"]:
            for s in sizes:
                k = f"{d}_{kind}_{s}"
                n, i, h = (med(f[m].get(k, [])) for m in ["native", "inproc", "helper"])
                print(f"| {s} | {d} {kind} | {n:.2f} | {i:.2f} | {h:.2f} | {i / h:.2f} |")
    return f, sizes


def plot(out, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    f, sizes = copies(out)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, kind in zip(axes, ["pinned", "pageable"]):
        for mode, style in [("native", "k:"), ("inproc", "b-o"), ("helper", "r-s")]:
            ys = [s / med(f[mode].get(f"h2d_{kind}_{s}", [])) / 1e3 for s in sizes]
            ax.plot(sizes, ys, style, label={"inproc": "in-process", "helper": "ferry-mhelper",
                                              "native": "native"}[mode], markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"host-to-device cudaMemcpy, {kind} memory")
        ax.set_xlabel("bytes per copy")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("GB/s")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def shm_table(out):
    f = figures(f"{out}/shm_raw.txt")
    if not f:
        return
    print("| raw channel | value |")
    print("|---|---:|")
    for k in sorted(f):
        unit = "GB/s" if k.startswith("stream") else "µs"
        print(f"| {k} | {med(f[k]):.3f} {unit} |")


def main():
    out = sys.argv[1]
    print("## Runs\n")
    runs_table(out)
    print("\n## Helper against in-process: one call (paper Fig. 11)\n")
    calls_table(out)
    print("\n## Helper against in-process: 1,000 synchronous copies per size (paper Fig. 12)\n")
    copies_table(out)
    print("\n## The raw shared-memory channel\n")
    shm_table(out)
    if len(sys.argv) > 2:
        plot(out, sys.argv[2])


if __name__ == "__main__":
    main()
