#!/usr/bin/env python3
"""Tables of bench/run_libs_gpu.sh OUTDIR: the cuBLAS and cuFFT loops natively,
through ferry and through Lupine (time, ratio to native, result checksum
against native), and the cuBLAS + own kernels program migrated at 25, 50 and
75 % of its launches. Markdown on stdout; exit 1 when a checksum differs
from native's."""
import os
import re
import sys

TIME = re.compile(r"^(sgemm|fft|mixed) .*seconds=([0-9.]+)(?: (tflops|gbps)=([0-9.]+))?", re.M)
SUM = re.compile(r"^checksum ([0-9a-f]+)$", re.M)
MOVE = re.compile(r"now runs on local GPU.*?: (\d+) records replayed, ([0-9.]+) MiB copied, "
                  r"([0-9.]+) ms \(paused ([0-9.]+) ms\)")


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def run(outdir, name):
    out, err = read(os.path.join(outdir, name + ".out")), read(os.path.join(outdir, name + ".err"))
    t, s = TIME.search(out), SUM.search(out)
    why = ""
    if not t:
        lines = [l for l in (err + out).splitlines() if l.strip() and "stats:" not in l]
        why = lines[0][:140] if lines else "no output"
    return {"s": float(t.group(2)) if t else None, "rate": t.group(4) if t and t.group(4) else None,
            "unit": t.group(3) if t else None, "sum": s.group(1) if s else None, "why": why,
            "move": MOVE.search(err), "present": bool(out or err)}


def main(outdir):
    bad = 0
    print(read(os.path.join(outdir, "machine.txt")).strip().replace("\n", "  \n"))
    print()
    print("| program | build | native s | ferry s | ferry / native | Lupine s | Lupine / native "
          "| result (ferry, Lupine) |")
    print("|---|---|---|---|---|---|---|---|")
    for what in ("sgemm", "fft", "mixed"):
        for build in ("shared", "static"):
            nat = run(outdir, f"{what}.{build}.native")
            if not nat["present"]:
                continue
            cells, results = [], []
            for peer in ("ferry", "lupine"):
                r = run(outdir, f"{what}.{build}.{peer}")
                if not r["present"]:
                    cells += ["-", "-"]
                    results.append("not run")
                    continue
                if r["s"] is None:
                    cells += ["FAIL", "-"]
                    results.append(f"failed: {r['why']}")
                    continue
                ratio = r["s"] / nat["s"] if nat["s"] else float("nan")
                cells += [f"{r['s']:.4f}", f"{ratio:.2f}x"]
                same = r["sum"] is not None and r["sum"] == nat["sum"]
                if peer == "ferry" and not same:
                    bad = 1
                results.append("as native" if same else "DIFFERS")
            ns = f"{nat['s']:.4f}" if nat["s"] is not None else "FAIL"
            print(f"| {what} | {build} | {ns} | {' | '.join(cells)} | {'; '.join(results)} |")
    for build in ("shared", "static"):
        nc, fe = run(outdir, f"mixed.{build}.ferry_nocache"), run(outdir, f"mixed.{build}.ferry")
        if nc["s"] and fe["s"]:
            print(f"\nmixed, {build}: without the query cache (FERRY_NO_QUERY_CACHE=1) "
                  f"{nc['s']:.4f} s, with it {fe['s']:.4f} s ({nc['s'] / fe['s']:.2f}x)")
    print()
    print("Migrated onto the local GPU (in-process) at K launches:\n")
    print("| build | at | result | records replayed | MiB copied | pause ms |")
    print("|---|---|---|---|---|---|")
    for build in ("shared", "static"):
        nat = run(outdir, f"mixed.{build}.native")
        for pct in (25, 50, 75):
            r = run(outdir, f"mixed.{build}.migrated{pct}")
            if not r["present"]:
                continue
            same = r["sum"] is not None and r["sum"] == nat["sum"]
            bad |= not same
            m = r["move"]
            moved = [m.group(1), m.group(2), m.group(4)] if m else ["did not move", "-", "-"]
            print(f"| {build} | {pct} % | {'as native' if same else 'DIFFERS'} | {' | '.join(moved)} |")
    return bad


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: libs_report.py OUTDIR")
    sys.exit(main(sys.argv[1]))
