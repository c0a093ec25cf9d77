#!/usr/bin/env python3
"""Turns one bench/run_gpu.sh run into the ratio tables of bench/results/.

usage: bench/report.py RESULTS_DIR > bench/results/<date>-<machine>.md
Every ratio compares numbers taken in the same run on the same machine.
"""
import re
import statistics
import sys


def load(path):
    """metric -> value; a metric measured several times gives its median"""
    samples = {}
    for line in open(path):
        m = re.match(r"^(\S+) ([0-9.]+) ", line)
        if m:
            samples.setdefault(m.group(1), []).append(float(m.group(2)))
    return {k: statistics.median(v) for k, v in samples.items()}


def main(d):
    native, ferry, tcp = (load(f"{d}/bench_{k}.txt") for k in ("native", "ferry", "tcp"))
    out = []
    machine = open(f"{d}/machine.txt").read().strip()
    out.append("Machine:\n\n```\n" + machine + "\n```\n")
    out.append("## Latency and launch rate\n")
    out.append("Latencies are medians over the rounds of the run (ferry, native and raw TCP "
               "alternate); the other figures come from one pass.\n")
    out.append("| metric | native | ferry | raw TCP ping-pong (4 B) | ferry / TCP | ferry / native | target |")
    out.append("|---|---|---|---|---|---|---|")
    ping = tcp["tcp_pingpong_4"]
    for key, target in (("stream_query_latency", "<= 1.3x TCP"), ("d2h_4B_latency", "<= 1.3x TCP")):
        out.append(f"| {key} (us) | {native[key]:.2f} | {ferry[key]:.2f} | {ping:.2f} | "
                   f"{ferry[key] / ping:.2f}x | {ferry[key] / native[key]:.2f}x | {target} |")
    # what forwarding adds to a call, over the call itself
    fwd = ferry["d2h_4B_latency"] - native["d2h_4B_latency"]
    out.append(f"| d2h_4B forwarding cost: ferry - native (us) | | {fwd:.2f} | {ping:.2f} | "
               f"{fwd / ping:.2f}x | | |")
    key = "empty_launch_rate"
    out.append(f"| {key} (launches/s) | {native[key]:.0f} | {ferry[key]:.0f} | | | "
               f"{ferry[key] / native[key]:.2f}x | >= 0.5x native (0.9x aim) |")
    key = "launch_sync_latency"
    out.append(f"| {key} (us) | {native[key]:.2f} | {ferry[key]:.2f} | {ping:.2f} | "
               f"{ferry[key] / ping:.2f}x | {ferry[key] / native[key]:.2f}x | |")
    out.append("")
    out.append("## Copy bandwidth (GB/s)\n")
    out.append("A synchronous copy is a request and a reply, so its raw-transport equivalent is "
               "`tcp put` (host to device: SIZE bytes out, 48 bytes back) or `tcp get` (device to "
               "host); `tcp stream` is a one-way stream in SIZE chunks. Target: >= 0.8x raw.\n")
    out.append("| copy | size | native | ferry | raw put/get | raw stream | ferry / put-get | ferry / stream | ferry / native |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    sizes = sorted({int(k.rsplit("_", 1)[1]) for k in ferry if re.match(r"^(h2d|d2h)_(pinned|pageable)_", k)})
    for direction, raw in (("h2d", "put"), ("d2h", "get")):
        for mem in ("pinned", "pageable"):
            for s in sizes:
                k = f"{direction}_{mem}_{s}"
                if k not in ferry:
                    continue
                r = tcp.get(f"tcp_{raw}_{s}")
                st = tcp.get(f"tcp_stream_{s}")
                out.append(
                    f"| {direction} {mem} | {s} | {native.get(k, 0):.2f} | {ferry[k]:.2f} | "
                    f"{r or 0:.2f} | {st or 0:.2f} | {ferry[k] / r if r else 0:.2f}x | "
                    f"{ferry[k] / st if st else 0:.2f}x | {ferry[k] / native[k] if native.get(k) else 0:.2f}x |")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
