#!/usr/bin/env python3
"""Table of bench/run_copy_tuning_gpu.sh's results: for each configuration
(s1: one stream; s4_MIN: four streams, the smallest striped copy) the copy bandwidth from 1 MiB up and
its ratio to iperf3 with as many streams, measured just before it.

usage: bench/copy_tuning_report.py OUTDIR [--min BYTES]
"""
import os
import re
import sys


def gbps_of_iperf(line):
    m = re.search(r"([\d.]+) ([GM])bits/sec", line)
    if not m:
        return None
    v = float(m.group(1)) / 8
    return v if m.group(2) == "G" else v / 1000


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    smallest = int(sys.argv[sys.argv.index("--min") + 1]) if "--min" in sys.argv else 1 << 20
    yard = {}
    try:
        with open(os.path.join(out, "iperf3.txt")) as f:
            for line in f:
                label = line.split()[0]
                yard[label] = gbps_of_iperf(line)
    except FileNotFoundError:
        pass
    labels = sorted((n[:-4] for n in os.listdir(out)
                     if re.match(r"(s1|s4_\d+)\.txt$", n)),
                    key=lambda n: (n[:2], int(n.split("_")[1]) if "_" in n else 0))
    if not labels:
        sys.exit(f"{out}: no results")
    rows, cols = {}, []
    for label in labels:
        cols.append(label)
        with open(os.path.join(out, label + ".txt")) as f:
            for line in f:
                m = re.match(r"(h2d|d2h)_(pinned|pageable)_(\d+) ([\d.]+) GB/s", line)
                if m and int(m.group(3)) >= smallest:
                    rows.setdefault((int(m.group(3)), m.group(1), m.group(2)), {})[label] = float(m.group(4))
    print("| copy | " + " | ".join(f"{c} GB/s (x iperf3)" for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for key in sorted(rows):
        size, way, mem = key
        cells = []
        for c in cols:
            v = rows[key].get(c)
            y = yard.get(c)
            cells.append("-" if v is None else f"{v:.2f}" + (f" ({v / y:.2f})" if y else ""))
        print(f"| {way} {mem} {size >> 20} MiB | " + " | ".join(cells) + " |")
    print()
    print("iperf3 (GB/s): " + ", ".join(f"{c} {yard[c]:.2f}" for c in cols if yard.get(c)))
    worst = {}
    for key, vals in rows.items():
        for c, v in vals.items():
            if yard.get(c):
                worst[c] = min(worst.get(c, 9e9), v / yard[c])
    print("worst ratio per configuration: " + ", ".join(f"{c} {w:.2f}" for c, w in worst.items()))


if __name__ == "__main__":
    main()
