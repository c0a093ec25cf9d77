#!/usr/bin/env python3
"""Builds the rows of docs/compatibility.md from one or more GPU runs.

usage: bench/compat_table.py RUN_DIR [RUN_DIR...]   (later runs win per sample)
Each RUN_DIR holds s_native/ and s_ferry/ (NAME.log, NAME.rc, NAME.time, as
written by the samples runner) and compare.txt. Prints Markdown rows.
"""
import os
import re
import sys

REQUIRED = ("vectorAdd matrixMul asyncAPI simpleStreams simpleOccupancy convolutionSeparable "
            "binomialOptions deviceQuery simplePrintf LargeKernelParameter radixSortThrust "
            "simpleMultiCopy BlackScholes transpose mergeSort").split()


def read(path):
    return open(path).read().strip() if os.path.exists(path) else ""


def first_ferry_message(log):
    for line in log.splitlines():
        if "ferry:" in line:
            return line[line.index("ferry:") + 7:].split(";")[0].strip()
    return ""


def load(run):
    rows = {}
    for line in read(f"{run}/compare.txt").splitlines():
        m = re.match(r"^([A-Za-z0-9_]+)\s+(\S+)\s+(\S+)\s+(\S+)", line)
        if not m or m.group(1) in ("SAMPLE", "samples"):
            continue
        name = m.group(1)
        log = read(f"{run}/s_ferry/{name}.log")
        note = first_ferry_message(log)
        if not note and read(f"{run}/s_ferry/{name}.rc") != "0":
            errs = [l for l in log.splitlines() if "error" in l.lower()]
            note = errs[-1][:120] if errs else ""
        rows[name] = dict(native=m.group(2), ferry=m.group(3), output=m.group(4),
                          t_native=read(f"{run}/s_native/{name}.time"),
                          t_ferry=read(f"{run}/s_ferry/{name}.time"), note=note)
    return rows


def main(runs):
    merged = {}
    for run in runs:
        merged.update(load(run))
    names = [n for n in REQUIRED if n in merged]
    names += sorted((n for n in merged if n not in REQUIRED), key=str.lower)
    print("| sample | native | ferry | output | native s | ferry s | notes |")
    print("|---|---|---|---|---|---|---|")
    passed = 0
    for n in names:
        r = merged[n]
        ok = r["ferry"].startswith("PASS") and r["output"] == "identical"
        passed += ok
        print(f"| {n}{' (required)' if n in REQUIRED else ''} | {r['native']} | {r['ferry']} | "
              f"{r['output']} | {r['t_native']} | {r['t_ferry']} | {r['note']} |")
    print(f"\n{passed} of {len(names)} samples pass through ferry with output identical to native.")


if __name__ == "__main__":
    main(sys.argv[1:])
