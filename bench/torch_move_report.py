"""Table and plot of bench/run_torch_move_gpu.sh: each move's pause and
copied bytes (FERRY_STATS' migration stats), the losses at common steps
against native, and the step-time curve around the moves (PNG).
  python3 bench/torch_move_report.py OUTDIR
"""
import re
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out = sys.argv[1]


def steps(path):
    rows = []
    for line in open(path):
        m = re.match(r"step (\d+) ([\d.]+) ([\d.]+)", line)
        if m:
            rows.append((int(m[1]), float(m[2]), float(m[3])))
    return rows


def losses(path):
    return {int(m[1]): m[2] for m in (re.match(r"loss (\d+) (\S+)", line) for line in open(path)) if m}


moved = steps(f"{out}/moved.txt")
native = steps(f"{out}/native.txt")
remote = steps(f"{out}/remote.txt")
stats = [dict(kv.split("=") for kv in line.split("migration stats: ")[1].split())
         for line in open(f"{out}/moved.err") if "migration stats:" in line]
ln, lm = losses(f"{out}/native.txt"), losses(f"{out}/moved.txt")
common = sorted(set(ln) & set(lm))
same = all(ln[k] == lm[k] for k in common)
med = lambda r: sorted(x[1] for x in r[5:])[len(r[5:]) // 2] if len(r) > 5 else 0  # noqa: E731
print("| move | pause ms | drain ms | memsync ms | bytes in pause | bytes ahead | total ms |")
print("|---|---|---|---|---|---|---|")
for name, s in zip(["remote → local", "local → server"], stats):
    print(f"| {name} | {float(s['pause_ms']):.1f} | {float(s['drain_ms']):.1f} | {float(s['memsync_ms']):.1f} | "
          f"{int(s['bytes']) / 2**20:.0f} MiB | {int(s['bytes_precopied']) / 2**20:.0f} MiB | {float(s['total_ms']):.0f} |")
print(f"\nmedian step: native {med(native):.2f} ms, remote {med(remote):.2f} ms, moved run {med(moved):.2f} ms")
print(f"losses at {len(common)} common steps (every 50th) equal to native: {same}")
plt.figure(figsize=(8, 3.5))
plt.plot([r[2] for r in moved], [r[1] for r in moved], ".", ms=2, label="through ferry, moved twice")
if native:
    plt.axhline(med(native), color="g", lw=0.8, label=f"native median {med(native):.1f} ms")
plt.yscale("log")
plt.xlabel("time since start (s)")
plt.ylabel("step time (ms)")
plt.title("PyTorch training step around remote→local and local→remote moves")
plt.legend()
plt.tight_layout()
plt.savefig(f"{out}/torch_move.png", dpi=120)
