#!/usr/bin/env python3
"""Issue 13's pause table from bench/run_pause_gpu.sh OUTDIR: one row per
run (direction, program, how), the pause and what it is made of, checked
against the issue's targets: pause <= drain + changed bytes / bulk
throughput + 10 ms ("rest": the pause less the drain and the copy of the
changed bytes at that run's own copy rate: replay, hashing, variables,
switch), and with prepare the 4 GiB read-only variant pausing no longer
than the plain program plus 20 ms. usage: bench/pause_report.py OUTDIR"""
import os
import re
import sys

DIRECTIONS = {"r2l": "remote -> local", "r2r": "remote -> remote", "l2r": "local -> remote",
              "p2r": "local (in-process) -> remote"}
HOW = {(0, 0): "all in the pause", (0, 1): "copy ahead", (1, 1): "prepare + copy ahead"}


def stats_of(text):
    m = re.findall(r"migration stats: (.*)", text)
    if not m:
        return None
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", m[-1])}


def value(text, key):
    m = re.search(r"^%s (\S+)" % key, text, re.M)
    return m.group(1) if m else None


def iperf_gbs(path):
    try:
        text = open(path).read()
    except OSError:
        return None
    m = re.findall(r"([0-9.]+) Gbits/sec.*receiver", text)
    return float(m[-1]) / 8 if m else None


def main(out):
    native = open(os.path.join(out, "native.txt")).read() if os.path.exists(
        os.path.join(out, "native.txt")) else ""
    want = value(native, "checksum")
    runs = []
    rdir = os.path.join(out, "runs")
    for name in sorted(os.listdir(rdir)):
        m = re.match(r"(r2l|r2r|l2r|p2r)_ro(\d+)_prep(\d)_pre(\d)_r(\d+)\.out$", name)
        if not m:
            continue
        base = os.path.join(rdir, name[:-4])
        text = open(base + ".out").read()
        err = open(base + ".err").read() if os.path.exists(base + ".err") else ""
        st = stats_of(err)
        ro_ok = re.search(r"readonly_bytes \d+ \(0 differ\)", text) is not None
        state = value(text, "state_bytes")
        runs.append({
            "dir": m.group(1), "ro": int(m.group(2)), "prep": int(m.group(3)),
            "pre": int(m.group(4)), "round": int(m.group(5)), "st": st,
            "checksum": value(text, "checksum"),
            "state": int(state) if state else 0,
            "ok": (want is None or value(text, "checksum") == want) and
                  (int(m.group(2)) == 0 or ro_ok) and "rc 0" in text,
        })
    # mem-sync's throughput per direction, from the runs that copy all in the pause
    bulk = {}
    for r in runs:
        st = r["st"]
        if st and r["pre"] == 0 and st["memsync_ms"] > 0:
            gbs = st["bytes"] / st["memsync_ms"] / 1e6
            bulk[r["dir"]] = max(bulk.get(r["dir"], 0), gbs)
    print("| direction | program | how | pause ms | drain | replay | hash | copy in pause | "
          "rest ms | copy GB/s | copied ahead | unchanged | before the hold ms | "
          "whole ms | result |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    prepared = {}
    for r in sorted(runs, key=lambda r: (list(DIRECTIONS).index(r["dir"]), r["ro"], r["prep"],
                                         r["pre"], r["round"])):
        st = r["st"]
        prog = "plain (512 MiB)" if r["ro"] == 0 else "+ %d MiB read-only" % r["ro"]
        how = HOW.get((r["prep"], r["pre"]), "?")
        if not st:
            print("| %s | %s | %s | not moved | | | | | | | | | | | %s |" % (
                DIRECTIONS[r["dir"]], prog, how, "ok" if r["ok"] else "WRONG"))
            continue
        copy_ms = st["memsync_ms"] - st.get("hash_ms", 0)
        rest = st["pause_ms"] - st["drain_ms"] - copy_ms
        rate = st["bytes"] / copy_ms / 1e6 if copy_ms > 0 and st["bytes"] else 0
        # the Jacobi grids change every iteration: a pause that copied less
        # than them came after the loop had ended (the copy ahead took longer)
        over = " (loop ended before the hold)" if st["bytes"] < r["state"] / 2 else ""
        if r["prep"] and not over:
            prepared[(r["dir"], r["ro"] > 0, r["round"])] = st["pause_ms"]
        print("| %s | %s | %s%s | %.1f | %.1f | %.1f | %.1f | %.0f MiB | %.1f | %.2f | %.0f MiB | "
              "%.0f MiB | %.0f | %.0f | %s |" % (
                  DIRECTIONS[r["dir"]], prog, how, over, st["pause_ms"], st["drain_ms"],
                  st["replay_ms"], st.get("hash_ms", 0), st["bytes"] / 2**20, rest, rate,
                  st.get("bytes_precopied", 0) / 2**20, st.get("bytes_unchanged", 0) / 2**20,
                  st.get("ahead_ms", 0), st["total_ms"],
                  "checksum as native" if r["ok"] else "WRONG"))
    print()
    print("mem-sync in the pause (all copied there): " + ", ".join(
        "%s %.2f GB/s" % (DIRECTIONS[d], g) for d, g in sorted(bulk.items())))
    i1, i4 = iperf_gbs(os.path.join(out, "iperf3_1.txt")), iperf_gbs(os.path.join(out, "iperf3_4.txt"))
    i1m = iperf_gbs(os.path.join(out, "iperf3_1_1m.txt"))
    if i1:
        print("iperf3 over the same loopback: 1 stream %.2f GB/s, 4 streams %.2f GB/s; "
              "remote -> local mem-sync / iperf3 1 stream: %.2fx" % (
                  i1, i4 or 0, bulk.get("r2l", 0) / i1))
    if i1m:
        print("iperf3, 1 stream written 1 MiB at a time (-l 1M): %.2f GB/s; remote -> local "
              "mem-sync / that: %.2fx" % (i1m, bulk.get("r2l", 0) / i1m))
    print()
    for (d, ro, rnd), p in sorted(prepared.items()):
        if ro and (d, False, rnd) in prepared:
            plain = prepared[(d, False, rnd)]
            print("with prepare, %s: read-only variant %.1f ms vs plain %.1f ms: %+.1f ms (target <= +20)"
                  % (DIRECTIONS[d], p, plain, p - plain))


if __name__ == "__main__":
    main(sys.argv[1])
