#!/usr/bin/env python3
"""Turns a bench/run_kernel_time_gpu.sh output directory into markdown: kernel
times by CUDA events and loops of asynchronous work, ferry's placements
against native (ratios of medians over the rounds), the probe's async loop,
the calls FERRY_STATS counted against the program's own, and the device
assert's output. Plain python.
  python3 bench/kernel_time_report.py OUTDIR
"""
import os
import re
import statistics
import sys

PLACES = ["native", "remote", "inproc", "helper"]


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def values(text, pattern):
    return [float(m.group(1)) for m in re.finditer(pattern, text, re.M)]


def med(xs):
    return statistics.median(xs) if xs else None


def ratio(x, base):
    return f"{x / base:.3f}" if x is not None and base else "-"


def main(out):
    print(open(os.path.join(out, "machine.txt")).read().strip().replace("\n", "  \n"))
    for build in ["shared", "static"]:
        runs = {p: read(os.path.join(out, f"kt_{build}_{p}.txt")) for p in PLACES}
        print(f"\n### kernel_time, {build} runtime (median of the rounds; ratio = placement / native)\n")
        print("| kernel | measure | native | remote | in-process | helper |")
        print("|---|---|---|---|---|---|")
        for kernel in ["memory", "atomic", "compute"]:
            for what, unit in [("event_ms", "kernel ms (events)"), ("loop_us", "loop us/iteration")]:
                m = {p: med(values(runs[p], rf"^{what} {kernel} ([0-9.]+)")) for p in PLACES}
                base = m["native"]
                cells = [f"{base:.4g}" if base else "-"] + [ratio(m[p], base) for p in PLACES[1:]]
                print(f"| {kernel} | {unit} | " + " | ".join(cells) + " |")
        loops = {p: read(os.path.join(out, f"loop_{build}_{p}.txt")) for p in PLACES}
        print(f"\n### async_loop (the probe's loop), {build} runtime\n")
        print("| placement | GB/s read by the kernels | / native | memsets | launches | stream_synchronize | device_synchronize |")
        print("|---|---|---|---|---|---|---|")
        base = med(values(loops["native"], r"^loop: [0-9.]+ s, ([0-9.]+) GB/s"))
        for p in PLACES:
            bw = med(values(loops[p], r"^loop: [0-9.]+ s, ([0-9.]+) GB/s"))
            stats = re.findall(r"stats: device=0 calls:(.*)", loops[p])

            def count(name):
                return max((int(m.group(1)) for s in stats for m in [re.search(rf" {name}=(\d+)", s)] if m),
                           default=0) if stats else "-"

            print(f"| {p} | {bw if bw is not None else '-'} | {ratio(bw, base)} | {count('memset')} | "
                  f"{count('launch')} | {count('stream_synchronize')} | {count('device_synchronize')} |")
        asked = re.findall(r"^(memsets|launches|synchronizes|frees): (\d+)", loops["native"], re.M)
        print("\nthe program's own calls per run: " + ", ".join(f"{k} {v}" for k, v in dict(asked).items()))
    print("\n### device assert\n")
    for side in ["native", "ferry"]:
        print(f"{side}:\n```\n" + read(os.path.join(out, f"assert_{side}.out")).strip() + "\n--- stderr\n"
              + read(os.path.join(out, f"assert_{side}.err")).strip() + "\n```")


if __name__ == "__main__":
    main(sys.argv[1])
