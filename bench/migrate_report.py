#!/usr/bin/env python3
"""Turns one bench/run_migrate_gpu.sh run into the markdown of bench/results/.

usage: bench/migrate_report.py OUTDIR > bench/results/<date>-<machine>-migration.md

The paper's overhead models (record, replay, mem-sync, remote call) refit
on ferry's numbers, the targets of issue 3 checked, and the end-to-end runs
of the paper's Fig. 13. Every ratio compares numbers taken in the same run
on the same machine. Plain python: no numpy.
"""
import glob
import os
import re
import statistics
import sys

# the paper's coefficients (mrCUDA; its remote calls go through rCUDA)
PAPER = {
    "record_ns": 282.0,
    "replay_const_s": 1.24,
    "replay_per_record_us": 1.0,
    "memsync_gbs": 4.8,
    "remote_call_us": 50.0,
}
MiB = 1 << 20


def median(v):
    return statistics.median(v) if v else None


def fmt(x, spec=".2f", none="n/a"):
    return none if x is None else format(x, spec)


def lstsq(rows, ys, weights=None):
    """least squares of ys ~ rows . coef (normal equations, Gauss-Jordan);
    None when the system is singular"""
    k = len(rows[0])
    w = weights or [1.0] * len(ys)
    a = [[sum(wi * r[i] * r[j] for r, wi in zip(rows, w)) for j in range(k)] for i in range(k)]
    b = [sum(wi * r[i] * y for r, y, wi in zip(rows, ys, w)) for i in range(k)]
    for c in range(k):
        p = max(range(c, k), key=lambda i: abs(a[i][c]))
        if abs(a[p][c]) < 1e-300:
            return None
        a[c], a[p], b[c], b[p] = a[p], a[c], b[p], b[c]
        for i in range(k):
            if i != c:
                f = a[i][c] / a[c][c]
                a[i] = [x - f * y for x, y in zip(a[i], a[c])]
                b[i] -= f * b[c]
    coef = [b[i] / a[i][i] for i in range(k)]
    # a fit on as many points as unknowns says nothing
    return coef if len(ys) > k else None


def fit_line(xs, ys, relative=True):
    """y = c + b x; relative: weighted by 1/y^2, so small values count as much"""
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None and y > 0]
    if len(pts) < 3:
        return None
    w = [1.0 / (y * y) for _, y in pts] if relative else None
    return lstsq([[1.0, x] for x, _ in pts], [y for _, y in pts], w)


def metrics(path):
    """'metric value ...' lines -> {metric: [values]}"""
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path, errors="replace"):
        m = re.match(r"^([A-Za-z_][\w]*) (-?[0-9.]+(?:e[-+]?\d+)?)\b", line)
        if m:
            out.setdefault(m.group(1), []).append(float(m.group(2)))
    return out


class Run:
    """one log of run_migrate_gpu.sh's go()"""

    def __init__(self, path):
        self.path = path
        self.name = os.path.splitext(os.path.basename(path))[0]
        self.text = open(path, errors="replace").read()
        self.skipped = self.text.startswith("# skipped")
        m = re.search(r"^# how: (\S+)", self.text, re.M)
        self.how = m.group(1) if m else None
        m = re.search(r"^# env: (.*)$", self.text, re.M)
        self.env = dict(kv.split("=", 1) for kv in (m.group(1).split() if m else []) if "=" in kv)
        m = re.search(r"^# rc=(-?\d+) wall_s=([0-9.]+)", self.text, re.M)
        self.rc = int(m.group(1)) if m else None
        self.wall_s = float(m.group(2)) if m else None
        m = re.search(r"ferry: migration stats: (.*)$", self.text, re.M)
        self.stats = {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", m.group(1))} if m else None
        m = re.search(r"ferry: stats: device=\d+ launches=(\d+) backend=(\w+)", self.text)
        self.launches_seen = int(m.group(1)) if m else None
        self.backend = m.group(2) if m else ("native" if self.how == "native" else None)
        self.failed_migration = re.search(r"ferry: migration of device .* failed: (.*)$", self.text, re.M)
        self.values = {}
        for line in self.text.splitlines():
            m = re.match(r"^([a-z_][\w]*) (-?[0-9.]+(?:e[-+]?\d+)?)\b", line)
            if m:
                self.values[m.group(1)] = float(m.group(2))
        m = re.search(r"mig_regions: R=(\d+) S=(\d+) streams=(\d+) events=(\d+) gap=(\d+) .* (OK|FAIL)", self.text)
        self.regions = None
        if m:
            self.regions = dict(R=int(m.group(1)), S=int(m.group(2)), streams=int(m.group(3)),
                                events=int(m.group(4)), gap=int(m.group(5)), ok=m.group(6) == "OK")
        m = re.search(r"^checksum (\S+)", self.text, re.M)
        self.checksum = m.group(1) if m else None

    @property
    def ok(self):
        return self.rc == 0 and not self.skipped

    def migrated(self):
        return self.stats is not None and self.backend == "local"


# Since issue 13 a migration replays the log and copies the live regions
# before the hold (FERRY_PRECOPY, on by default); the pause replays the
# journal and copies again what changed. These give the whole migration's
# replay and copy, ahead and in the pause together.
def replay_whole(st):
    return (st.get("ahead_module_ms", 0) + st["replay_module_ms"],
            st.get("ahead_other_ms", 0) + st["replay_other_ms"],
            st.get("records_ahead", 0) + st["records"])


def copy_whole(st):
    """(ms, bytes) of copying every live region: ahead if it was, else in the pause"""
    if st.get("bytes_precopied", 0) > 0:
        return st["precopy_ms"], st["bytes_precopied"]
    return st["memsync_ms"], st["bytes"]


def runs(d, sub, pattern="*.log"):
    return [Run(p) for p in sorted(glob.glob(os.path.join(d, sub, pattern)))]


def size_name(s):
    if s >= 1 << 30 and s % (1 << 30) == 0:
        return f"{s >> 30} GiB"
    if s >= MiB and s % MiB == 0:
        return f"{s >> 20} MiB"
    if s >= 1024 and s % 1024 == 0:
        return f"{s >> 10} KiB"
    return f"{s} B"


def check(ok):
    return "yes" if ok else "**no**"


# ---------------------------------------------------------------------------

def record_section(d, out, model):
    m = metrics(os.path.join(d, "record_bench.txt"))
    out.append("## Record: what the replay log costs a recorded call\n")
    if not m:
        out.append("record_bench.txt is missing or empty.\n")
        return
    out.append("`ferry-bench-record` (bench/record_bench.c) calls `ferry_record()` as the shim does "
               "after each state-building call; a create and its destroy count as two records. "
               "Medians over the trials; *1024 live*: beside a log that holds 1024 other records.\n")
    out.append("| recorded calls | ns/record, empty log | ns/record, 1024 live | target |")
    out.append("|---|---:|---:|---|")
    kinds = [("map_pair", "cudaMalloc/cudaFree (mem_map + mem_unmap)"),
             ("stream_pair", "stream create + destroy"), ("event_pair", "event create + destroy"),
             ("func_attr", "cudaFuncSetAttribute (replaces its record)"),
             ("module_pair", "module load + unload (with names and variables)")]
    for key, label in kinds:
        e = median(m.get(f"record_ns_{key}_empty", []))
        l = median(m.get(f"record_ns_{key}_live1024", []))
        target = ""
        if key != "module_pair" and e is not None and l is not None:
            target = f"<= 30 ns: {check(max(e, l) <= 30)}"
        out.append(f"| {label} | {fmt(e, '.1f')} | {fmt(l, '.1f')} | {target} |")
    out.append("")
    xs, ym, yx = [], [], []
    for k, v in m.items():
        g = re.match(r"record_build_(map|mixed)_(\d+)$", k)
        if g:
            n = int(g.group(2))
            (ym if g.group(1) == "map" else yx).append((n, median(v)))
    ym.sort()
    yx.sort()
    if ym:
        out.append("A log built from nothing, n records (ns for the whole log; its first allocations "
                   "are the constant):\n")
        out.append("| n | mem_map log (ns) | ns/record | mixed log (ns) | ns/record |")
        out.append("|---:|---:|---:|---:|---:|")
        mixed = dict(yx)
        for n, t in ym:
            x = mixed.get(n)
            out.append(f"| {n} | {t:.0f} | {t / n:.1f} | {fmt(x, '.0f')} | "
                       f"{fmt(x / n if x else None, '.1f')} |")
        out.append("")
    fm = fit_line([n for n, _ in ym], [t for _, t in ym])
    fx = fit_line([n for n, _ in yx], [t for _, t in yx])
    if fm:
        out.append(f"Fit (least squares, relative errors), mem_map log: **{fm[0]:.0f} ns + "
                   f"{fm[1]:.1f} ns/record**" + (f"; mixed log (allocations, streams, events, "
                   f"settings, modules): **{fx[0]:.0f} ns + {fx[1]:.1f} ns/record**" if fx else "") + ".\n")
    flag = median(m.get("record_not_recorded_flag", []))
    loop = median(m.get("record_not_recorded_loop", []))
    call = median(m.get("record_not_recorded_call", []))
    lock = median(m.get("record_mutex_pair", []))
    out.append(f"A call that is not recorded pays the flag test in `ferry_call()`: "
               f"{fmt(flag)} ns per call against {fmt(loop)} ns for the loop alone "
               f"(so {fmt(flag - loop if flag is not None and loop is not None else None)} ns); "
               f"calling `ferry_record()` for it would cost {fmt(call)} ns. For reference, an "
               f"uncontended mutex lock and unlock (every record takes one): {fmt(lock)} ns.\n")
    steady = median(m.get("record_ns_map_pair_live1024", []))
    model["record_ns"] = steady
    model["record_fit"] = fx or fm


def replay_section(d, out, model):
    rs = [r for r in runs(d, "replay") if not r.skipped]
    out.append("## Replay: rebuilding the log on the local GPU\n")
    good = [r for r in rs if r.ok and r.migrated()]
    if not good:
        out.append("No successful replay run.\n")
        return
    out.append("`mig_regions 1 4096 --streams K --events K`, migrated at launch 2: the log holds "
               "the module, the allocation and K streams and K events. From `FERRY_STATS`: "
               "*setup* opens the local GPU (context, arena reservation at the same address), "
               "*module* is the module loads of the replay, *other* the rest of the replay.\n")
    out.append("Replay runs before the hold now (copying ahead); the pause replays only what "
               "the program changed since (here nothing: `FERRY_MIGRATE_AT` moves inside the "
               "program's launch). *module*, *other*: the whole replay; *pause*: the replay in "
               "the pause and the whole pause.\n")
    out.append("| K | records | setup ms | replay: module ms | replay: other ms | "
               "other µs/record | replay in the pause ms | pause ms |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    by_k = {}
    for r in good:
        by_k.setdefault(r.regions["streams"] if r.regions else -1, []).append(r)
    for k in sorted(by_k):
        g = by_k[k]
        rec = median([replay_whole(r.stats)[2] for r in g])
        other = median([replay_whole(r.stats)[1] for r in g])
        nonmod = rec - median([r.stats["modules"] for r in g]) - 1  # the module load
        out.append(f"| {k} | {rec:.0f} | {median([r.stats['setup_ms'] for r in g]):.1f} | "
                   f"{median([replay_whole(r.stats)[0] for r in g]):.2f} | {other:.2f} | "
                   f"{fmt(other * 1e3 / nonmod if nonmod > 0 else None)} | "
                   f"{median([r.stats['replay_ms'] for r in g]):.3f} | "
                   f"{median([r.stats['pause_ms'] for r in g]):.2f} |")
    out.append("")
    xs = [replay_whole(r.stats)[2] for r in good]
    ys = [replay_whole(r.stats)[1] for r in good]
    f = fit_line(xs, ys, relative=False)
    fp = fit_line(xs, [r.stats["pause_ms"] for r in good], relative=False)
    if fp:
        out.append(f"The pause against the log's records: {fp[0]:.3f} ms + {fp[1] * 1e3:.4f} "
                   f"µs/record: the log is no longer replayed in the pause.\n")
        model["pause_replay_const_ms"] = fp[0]
        model["pause_replay_per_record_us"] = fp[1] * 1e3
    setup = median([r.stats["setup_ms"] - r.stats.get("ahead_ms", 0) for r in good])
    module = median([replay_whole(r.stats)[0] for r in good])
    if f:
        const_ms = setup + module + f[0]
        out.append(f"Fit of the replay's *other* time against its records (least squares): "
                   f"{f[0]:.3f} ms + **{f[1] * 1e3:.3f} µs/record**. The constant of the model is "
                   f"setup {setup:.1f} ms (context and arena) + module loads {module:.2f} ms + "
                   f"{f[0]:.3f} ms = **{const_ms:.1f} ms**.\n")
        model["replay_const_ms"] = const_ms
        model["replay_setup_ms"] = setup
        model["replay_module_ms"] = module
        model["replay_per_record_us"] = f[1] * 1e3
    bad = [r.name for r in rs if not (r.ok and r.migrated())]
    if bad:
        out.append(f"Runs that failed or did not migrate: {', '.join(bad)}.\n")


def baselines(d):
    tcp = metrics(os.path.join(d, "tcp.txt"))
    h2d, how = {}, None
    for p in sorted(glob.glob(os.path.join(d, "h2d_*.log"))):
        r = Run(p)
        if r.skipped:
            continue
        how = r.how
        for k, v in r.values.items():
            h2d.setdefault(k, []).append(v)
    return tcp, {k: median(v) for k, v in h2d.items()}, how


def memsync_section(d, out, model):
    rs = [r for r in runs(d, "memsync") if not r.skipped]
    out.append("## Mem-sync: copying every live region, remote to local (the paper's Fig. 10)\n")
    good = [r for r in rs if r.ok and r.migrated() and r.regions and r.regions["ok"]]
    bad = [r.name for r in rs if r not in good]
    if not good:
        out.append("No successful mem-sync run.\n")
        return
    out.append("`mig_regions R S`: R regions of S bytes filled by one kernel on the remote GPU, "
               "migrated at launch 2, then every word checked on the local GPU (all runs below "
               "checked OK). Time: `memsync_ms` of `FERRY_STATS`; throughput: bytes copied / that "
               "time. Medians where a case ran more than once.\n")
    cases = {}
    for r in good:
        key = (r.regions["S"], r.regions["R"], r.regions["gap"])
        cases.setdefault(key, []).append(r)

    def case(s, n, gap=0):
        g = cases.get((s, n, gap))
        if not g:
            return None
        return dict(ms=median([copy_whole(r.stats)[0] for r in g]),
                    bytes=median([copy_whole(r.stats)[1] for r in g]),
                    pause=median([r.stats["memsync_ms"] for r in g]),
                    ranges=median([r.stats["ranges"] for r in g]),
                    requests=median([r.stats["requests"] for r in g]),
                    total=median([r.stats["total_ms"] for r in g]), n=len(g))

    sizes = sorted({s for s, _, gap in cases if gap == 0})
    counts = sorted({n for _, n, gap in cases if gap == 0})
    out.append("The copy runs before the hold now (copying ahead, while the program runs); in the "
               "pause mem-sync hashes every range on both GPUs and copies again what differs "
               "(here nothing: the program waits in its launch).\n")
    for title, val in (("Copy time (ms)", lambda c: f"{c['ms']:.2f}"),
                       ("Copy throughput (GB/s)", lambda c: f"{c['bytes'] / c['ms'] / 1e6:.2f}"),
                       ("In the pause: hashing and copying again (ms)", lambda c: f"{c['pause']:.2f}")):
        out.append(f"{title}, regions (rows) x region size (columns):\n")
        out.append("| regions | " + " | ".join(size_name(s) for s in sizes) + " |")
        out.append("|---:|" + "---:|" * len(sizes))
        for n in counts:
            cells = []
            for s in sizes:
                c = case(s, n)
                cells.append(val(c) if c else "")
            out.append(f"| {n} | " + " | ".join(cells) + " |")
        out.append("")
    gaps = sorted(k for k in cases if k[2])
    if gaps:
        out.append("Regions kept apart (a freed gap after each, so none merge): one range each, "
                   "all in one gather request per batch:\n")
        out.append("| regions | size | gap | ranges | requests | ms | GB/s | same without gap, ms |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for s, n, gap in gaps:
            c = case(s, n, gap)
            c0 = case(s, n)
            out.append(f"| {n} | {size_name(s)} | {size_name(gap)} | {c['ranges']:.0f} | "
                       f"{c['requests']:.0f} | {c['ms']:.2f} | {c['bytes'] / c['ms'] / 1e6:.2f} | "
                       f"{fmt(c0['ms'] if c0 else None)} |")
        out.append("")

    # the model: ms = a + bytes / B + c * ranges
    # (copied ahead, the ranges are not counted: the regions stand in for them)
    pts = [(copy_whole(r.stats)[1], r.stats["ranges"] or r.regions["R"], copy_whole(r.stats)[0])
           for r in good if copy_whole(r.stats)[0] > 0]
    f = lstsq([[1.0, b, n] for b, n, _ in pts], [y for _, _, y in pts],
              [1.0 / (y * y) for _, _, y in pts]) if len(pts) > 3 else None
    if f and f[1] > 0:
        out.append(f"Fit (least squares, relative errors): mem-sync ms = {f[0]:.3f} ms + bytes / "
                   f"**{1 / f[1] / 1e6:.2f} GB/s** + {f[2] * 1e3:.2f} µs per region.\n")
        model["memsync_fit_gbs"] = 1 / f[1] / 1e6
        model["memsync_fit_const_ms"] = f[0]

    # targets
    tcp, h2d, how = baselines(d)
    tcp16 = median(tcp.get("tcp_stream_16777216", []))
    h2d_keys = [k for k in h2d if re.match(r"h2d_pinned_(sync|async)_\d+$", k)]
    h2d_size = max((int(k.rsplit("_", 1)[1]) for k in h2d_keys), default=None)
    h2d_best = max((h2d[k] for k in h2d_keys if k.endswith(f"_{h2d_size}")), default=None)
    big_bytes = max(c["bytes"] for c in (case(*k) for k in cases))
    threshold = min(256 * MiB, big_bytes)
    large = [r for r in good if copy_whole(r.stats)[1] >= threshold and r.regions["gap"] == 0]
    large_gbs = median([copy_whole(r.stats)[1] / copy_whole(r.stats)[0] / 1e6 for r in large])
    model["memsync_large_gbs"] = large_gbs
    out.append("### Targets\n")
    out.append(f"Baselines of the same run: raw TCP one-way stream in 16 MiB chunks (mem-sync's "
               f"batch) {fmt(tcp16)} GB/s (median of {len(tcp.get('tcp_stream_16777216', []))}); "
               f"pinned host-to-device copies of {size_name(h2d_size) if h2d_size else '?'} "
               f"{fmt(h2d_best)} GB/s (the faster of synchronous and back-to-back asynchronous"
               f"{'; **measured through ferry on the simulation, not natively**' if how != 'native' else ', native'}).\n")
    out.append("| target | measured | limit | met |")
    out.append("|---|---:|---:|---|")
    base = min(x for x in (tcp16, h2d_best) if x is not None) if (tcp16 or h2d_best) else None
    if large_gbs is not None and base:
        out.append(f"| large regions (>= {size_name(int(threshold))} copied, {len(large)} runs): "
                   f"throughput / min(raw TCP, H2D) | {large_gbs:.2f} GB/s = {large_gbs / base:.2f}x "
                   f"| >= 0.9x of {base:.2f} GB/s | {check(large_gbs / base >= 0.9)} |")
    a, b = case(4096, 1024), case(4 * MiB, 1)
    if a and b:
        out.append(f"| 1024 regions of 4 KiB against one of 4 MiB | {a['ms']:.2f} ms / {b['ms']:.2f} ms "
                   f"= {a['ms'] / b['ms']:.2f}x | <= 2x | {check(a['ms'] <= 2 * b['ms'])} |")
    ag = case(4096, 1024, 131072)
    if ag and b:
        out.append(f"| the same, regions kept apart (1024 ranges) | {ag['ms']:.2f} ms / {b['ms']:.2f} ms "
                   f"= {ag['ms'] / b['ms']:.2f}x | <= 2x | {check(ag['ms'] <= 2 * b['ms'])} |")
    out.append("")
    if bad:
        out.append(f"Runs that failed, did not migrate or did not check OK: {', '.join(bad)}.\n")


def calls_section(d, out, model):
    rs = [r for r in runs(d, "calls") if not r.skipped]
    if not rs:
        return
    out.append("## One call: native, remote (through ferry-server), local (after a migration)\n")
    out.append("`mig_regions --calls N`: a `cudaStreamQuery` (no GPU work), a 4-byte "
               "`cudaMemcpy` device to host, and an empty kernel launch (back to back, then one "
               "synchronize), µs per call, medians of the rounds. *local*: migrated at launch 1, "
               "so every call goes to the in-process executor.\n")
    by = {}
    for r in rs:
        if not r.ok:
            continue
        mode = r.name.rsplit("_", 1)[0]
        if mode == "local" and not r.migrated():
            continue
        for k, v in r.values.items():
            by.setdefault((mode, k), []).append(v)
    out.append("| call | native µs | remote µs | local µs | remote - native | local - native |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for k, label in (("calls_query_us", "cudaStreamQuery"), ("calls_d2h_4B_us", "cudaMemcpy D2H 4 B"),
                     ("calls_launch_us", "empty launch (throughput)")):
        n, r_, l = (median(by.get((m, k), [])) for m in ("native", "remote", "local"))
        out.append(f"| {label} | {fmt(n, '.3f')} | {fmt(r_, '.3f')} | {fmt(l, '.3f')} | "
                   f"{fmt(r_ - n if n is not None and r_ is not None else None, '.3f')} | "
                   f"{fmt(l - n if n is not None and l is not None else None, '.3f')} |")
        if k == "calls_d2h_4B_us":
            model["remote_call_us"] = r_ - n if n is not None and r_ is not None else None
            model["remote_call_total_us"] = r_
            model["local_call_us"] = l - n if n is not None and l is not None else None
    out.append("")


def fig13_section(d, out, model):
    rs = {r.name: r for r in runs(d, "fig13")}
    plan = open(os.path.join(d, "fig13", "plan.txt")).read().strip() if os.path.exists(
        os.path.join(d, "fig13", "plan.txt")) else ""
    out.append("## End to end: one iterative program (the paper's Fig. 13)\n")
    out.append(f"`mig_iterative` (bench/apps/mig_iterative.cu): Jacobi on an N x N grid, one "
               f"kernel per iteration, a convergence test (kernel + 4-byte copy back) every "
               f"CHECK iterations. Plan: `{plan}`. *loop* is the iterations (a migration after "
               f"launch 1 happens inside it); *setup* the allocations and the first kernel (where "
               f"a migration at launch 1 happens, with the local GPU's context creation); *wall* "
               f"the whole process.\n")

    def pick(names):
        g = [rs[n] for n in names if n in rs and rs[n].ok]
        return g

    rows = [("native", pick(["native_1", "native_2"]), None),
            ("remote (no migration)", pick(["remote"]), None)]
    for p in (25, 50, 75):
        rows.append((f"migrated at {p} % of launches", pick([f"at{p}"]), p))
    rows.append(("migrated at launch 1 (local mode)", pick(["local_1", "local_2"]), 0))
    native = median([r.values.get("loop_s") for r in rows[0][1] if "loop_s" in r.values])
    remote = median([r.values.get("loop_s") for r in rows[1][1] if "loop_s" in r.values])
    local = median([r.values.get("loop_s") for r in rows[-1][1] if "loop_s" in r.values])
    ref = rows[0][1] or rows[1][1]
    ref_sum = ref[0].checksum if ref else None
    out.append("| run | migrated at launch | loop s | setup s | wall s | loop / native | "
               "migration ms (pause ms) | model s | result |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for label, g, p in rows:
        if not g:
            out.append(f"| {label} | | | | | | | | not run |")
            continue
        loop = median([r.values.get("loop_s", 0) for r in g])
        setup = median([r.values.get("setup_s", 0) for r in g])
        wall = median([r.wall_s or 0 for r in g])
        at = g[0].env.get("FERRY_MIGRATE_AT", "").rsplit("=", 1)[-1]
        mig = [r for r in g if r.migrated()]
        mig_ms = median([r.stats["total_ms"] for r in mig])
        ms_ms = median([r.stats["pause_ms"] for r in mig])
        # the model: the remote part at remote speed, the migration, the rest at native speed
        model_s = None
        if p and remote is not None and native is not None and mig_ms is not None:
            model_s = p / 100 * remote + mig_ms / 1e3 + (1 - p / 100) * (local or native)
        sums = {r.checksum for r in g}
        same = ref_sum is not None and sums == {ref_sum}
        expect_local = p is not None
        where_ok = all((r.backend == "local") == expect_local for r in g if r.how == "ferry")
        result = ("same checksum" if same else "**checksum differs**") + (
            "" if where_ok else ", **did not run where expected**")
        out.append(f"| {label} | {at} | {loop:.3f} | {setup:.3f} | {wall:.2f} | "
                   f"{fmt(loop / native if native else None)} | "
                   f"{fmt(mig_ms, '.1f', '')}{' (' + fmt(ms_ms, '.1f') + ')' if ms_ms is not None else ''} | "
                   f"{fmt(model_s, '.3f', '')} | {result} |")
    out.append("")
    if native and local:
        out.append(f"Local mode's overhead (loop time migrated at launch 1 / native, medians of "
                   f"two runs each): **{local / native:.3f}x** (target <= 1.02x: "
                   f"{check(local / native <= 1.02)}).\n")
    elif not native:
        out.append("No native run: the local-mode ratio cannot be computed here.\n")
    if native and remote:
        out.append(f"Remote without migration: {remote / native:.3f}x native.\n")
    model["local_ratio"] = local / native if native and local else None
    model["remote_ratio"] = remote / native if native and remote else None


def model_table(out, m):
    out.append("## The paper's overhead models, refit on ferry\n")
    out.append("| model | paper (mrCUDA over rCUDA) | ferry (this run) | ferry / paper |")
    out.append("|---|---:|---:|---:|")

    def ratio(a, b):
        return fmt(a / b if a is not None and b else None, ".3f")

    rec = m.get("record_ns")
    fit = m.get("record_fit")
    out.append(f"| record, per recorded call | {PAPER['record_ns']:.0f} ns | {fmt(rec, '.1f')} ns "
               f"(steady state, 1024 live){'; fit ' + format(fit[1], '.1f') + ' ns/record' if fit else ''} | "
               f"{ratio(rec, PAPER['record_ns'])} |")
    out.append(f"| record, constant | - | {fmt(fit[0] if fit else None, '.0f')} ns (first allocations) | |")
    c = m.get("replay_const_ms")
    out.append(f"| replay, constant | {PAPER['replay_const_s']:.2f} s | "
               f"{fmt(c / 1e3 if c is not None else None, '.3f')} s (setup {fmt(m.get('replay_setup_ms'), '.1f')} ms "
               f"+ modules {fmt(m.get('replay_module_ms'), '.2f')} ms + rest) | "
               f"{ratio(c / 1e3 if c is not None else None, PAPER['replay_const_s'])} |")
    p = m.get("replay_per_record_us")
    out.append(f"| replay, per record | {PAPER['replay_per_record_us']:.0f} µs | {fmt(p, '.3f')} µs "
               f"(before the hold) | {ratio(p, PAPER['replay_per_record_us'])} |")
    pc, pp = m.get("pause_replay_const_ms"), m.get("pause_replay_per_record_us")
    out.append(f"| the pause against the log's records | (all of the replay) | {fmt(pc, '.2f')} ms + "
               f"{fmt(pp, '.4f')} µs/record | |")
    g = m.get("memsync_fit_gbs")
    lg = m.get("memsync_large_gbs")
    out.append(f"| mem-sync throughput | {PAPER['memsync_gbs']:.1f} GB/s | {fmt(g)} GB/s (fit); "
               f"{fmt(lg)} GB/s (large regions); before the hold | {ratio(g, PAPER['memsync_gbs'])} |")
    r = m.get("remote_call_us")
    out.append(f"| remote call: added to a synchronous call | +{PAPER['remote_call_us']:.0f} µs | "
               f"+{fmt(r, '.1f')} µs (4-byte cudaMemcpy, remote - native, loopback TCP) | "
               f"{ratio(r, PAPER['remote_call_us'])} |")
    lc = m.get("local_call_us")
    out.append(f"| local mode: added to a call | (native) | {fmt(lc * 1e3 if lc is not None else None, '.0f')} ns "
               f"(4-byte cudaMemcpy, local - native); whole program {fmt(m.get('local_ratio'), '.3f')}x native | |")
    out.append("")


def main(d):
    out = []
    machine = open(os.path.join(d, "machine.txt")).read().strip() if os.path.exists(
        os.path.join(d, "machine.txt")) else "(machine.txt missing)"
    out.append("Machine:\n\n```\n" + machine + "\n```\n")
    if "mode: sim" in machine:
        out.append("**This run used the CPU simulation (FERRY_BENCH_SIM=1): its times say nothing "
                   "about GPUs; it only shows that the scripts work.**\n")
    model = {}
    body = []
    record_section(d, body, model)
    replay_section(d, body, model)
    memsync_section(d, body, model)
    calls_section(d, body, model)
    fig13_section(d, body, model)
    model_table(out, model)
    out.extend(body)
    skipped = [os.path.relpath(p, d) for p in glob.glob(os.path.join(d, "**", "*.log"), recursive=True)
               if open(p, errors="replace").read().startswith("# skipped: time")]
    if skipped:
        out.append(f"Skipped for time: {', '.join(sorted(skipped))}.\n")
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: migrate_report.py OUTDIR")
    main(sys.argv[1])
