#!/usr/bin/env python3
"""Turns one bench/run_static_bench_gpu.sh run into the tables of bench/results/.

usage: bench/static_report.py RESULTS_DIR > bench/results/<date>-<machine>-static.md
The static-runtime build of bench_calls through ferry (driver front end)
against native, the raw TCP transport and the -cudart shared build through
ferry (runtime front end); every ratio compares numbers of the same run.
"""
import re
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from report import load  # noqa: E402  (medians of repeated metrics)


def main(d):
    nat, fst, fsh, tcp = (load(f"{d}/bench_{k}.txt")
                          for k in ("native_static", "ferry_static", "ferry_shared", "tcp"))
    out = ["Machine:\n\n```\n" + open(f"{d}/machine.txt").read().strip() + "\n```\n"]
    out.append("Command: `bench/run_static_bench_gpu.sh BUILD OUT && bench/static_report.py OUT`.\n")
    out.append("## Latency and launch rate\n")
    out.append("Medians of seven rounds in which the static and the shared build take turns "
               "at going first.\n")
    out.append("| metric | native (static) | ferry, static build | ferry, shared build | "
               "static / TCP or native | static / shared | targets |")
    out.append("|---|---|---|---|---|---|---|")
    ping = tcp["tcp_pingpong_4"]
    for key in ("stream_query_latency", "d2h_4B_latency", "launch_sync_latency"):
        out.append(f"| {key} (us) | {nat[key]:.2f} | {fst[key]:.2f} | {fsh[key]:.2f} | "
                   f"{fst[key] / ping:.2f}x TCP ({ping:.2f} us) | {fst[key] / fsh[key]:.2f}x | "
                   f"{'<= 1.3x TCP, ' if key != 'launch_sync_latency' else ''}<= 1.1x shared |")
    key = "empty_launch_rate"
    out.append(f"| {key} (/s) | {nat[key]:.0f} | {fst[key]:.0f} | {fsh[key]:.0f} | "
               f"{fst[key] / nat[key]:.2f}x native | {fst[key] / fsh[key]:.2f}x | >= 0.9x native, "
               ">= 1/1.1 shared |")
    try:
        lup = load(f"{d}/bench_lupine_static.txt")
    except OSError:
        lup = {}
    if lup:
        out.append("\n## Against Lupine (the same static-runtime program, same run)\n")
        out.append("| metric | ferry | Lupine | ferry / Lupine |")
        out.append("|---|---|---|---|")
        for key in ("stream_query_latency", "d2h_4B_latency", "launch_sync_latency", "empty_launch_rate"):
            if key in lup:
                out.append(f"| {key} | {fst[key]:.2f} | {lup[key]:.2f} | {fst[key] / lup[key]:.2f}x |")
        for key in ("h2d_pinned_1048576", "h2d_pinned_268435456", "d2h_pinned_1048576", "d2h_pinned_268435456",
                    "h2d_pageable_268435456", "d2h_pageable_268435456"):
            if key in lup and key in fst:
                out.append(f"| {key} (GB/s) | {fst[key]:.2f} | {lup[key]:.2f} | {fst[key] / lup[key]:.2f}x |")
    out.append("\n## Copy bandwidth (GB/s)\n")
    out.append("| copy | native (static) | ferry, static build | ferry, shared build | raw TCP stream | "
               "static / TCP | static / shared |")
    out.append("|---|---|---|---|---|---|---|")
    for k in sorted((k for k in fst if re.match(r"^(h2d|d2h)_(pinned|pageable)_[0-9]+$", k)),
                    key=lambda k: (k.split("_")[0], k.split("_")[1], int(k.rsplit("_", 1)[1]))):
        size = int(k.rsplit("_", 1)[1])
        t = tcp.get(f"tcp_stream_{size}")
        out.append(f"| {k} | {nat.get(k, 0):.2f} | {fst[k]:.2f} | {fsh.get(k, 0):.2f} | "
                   f"{t:.2f} | {fst[k] / t:.2f}x | {fst[k] / fsh[k]:.2f}x |" if t and fsh.get(k) else
                   f"| {k} | {nat.get(k, 0):.2f} | {fst[k]:.2f} | {fsh.get(k, 0):.2f} | | | |")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
