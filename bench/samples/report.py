#!/usr/bin/env python3
"""Markdown table of a bench/samples/run_gpu.sh run.

usage: bench/samples/report.py OUTDIR > report.md

OUTDIR holds runs.txt (one line per run: NAME BUILD MODE rc=N wall_s=S
pass=yes|no|- ...), samples.txt (the manifest), NAME.BUILD.MODE.{out,err}
and ldd.txt. One row per sample and build: the result of each mode, whether
the output through ferry (and migrated) is the native output, the wall
times, and the first ferry message as the note. Standard library only.

Results: PASS = exit 0 and the sample's pass message; PASS(rc) = exit 0 for
a sample that prints none; FAIL(rc=N) / FAIL(no pass message) / TIMEOUT;
skip = not run (budget, or no kernel launches to migrate at). Outputs are
compared after dropping the lines that differ run to run anyway (timings,
bandwidths, rates, device names and properties, pids, addresses), as
docs/compatibility.md did; "same lines" means the same lines in another
order (e.g. device printf from different blocks).
"""
import os
import re
import sys

MODES = ("native", "ferry", "migrated")
BUILDS = ("shared", "static")

# Lines dropped before comparing outputs (case-insensitive search).
VOLATILE = re.compile(
    r"time|elapsed|\bms\b|msec|\bsec\b|seconds|\bus\b|usec|"
    r"GB/s|MB/s|GiB/s|bandwidth|throughput|G?flop|GFLOP|Mop|Gop|ops/s|/s\b|per second|"
    r"perf|speed|clock|latency|iterations while waiting|"
    r"NVIDIA|Tesla|H100|H200|A100|GPU Device|Device \d|Device:|device name|using device|"
    r"compute capability|multiprocessor|CUDA Driver|Runtime Version|driver version|\bSM \d|"
    r"\bpid\b|process|0x[0-9a-f]{6,}|"
    r"findModulePath|executable|^\s*ferry:",
    re.IGNORECASE)


def read(path, limit=2_000_000):
    try:
        with open(path, errors="replace") as f:
            return f.read(limit)
    except OSError:
        return ""


def normalise(text):
    out = []
    for line in text.splitlines():
        line = line.rstrip()
        if not line.strip() or VOLATILE.search(line):
            continue
        out.append(line)
    return out


def compare(a, b):
    """'identical', 'same lines' (other order) or 'DIFFERS'."""
    na, nb = normalise(a), normalise(b)
    if na == nb:
        return "identical"
    if sorted(na) == sorted(nb):
        return "same lines"
    return "DIFFERS"


def first_ferry_line(err):
    for line in err.splitlines():
        if "ferry:" not in line:
            continue
        msg = line[line.index("ferry:") + 6:].strip()
        if msg.startswith(("stats:", "migration stats:")):
            continue
        return msg[:200]
    return ""


def load_runs(outdir):
    runs = {}
    for line in read(os.path.join(outdir, "runs.txt")).splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        name, build, mode = parts[:3]
        kv = {}
        for p in parts[3:]:
            if "=" in p:
                k, v = p.split("=", 1)
                kv.setdefault(k, v)
        runs[(name, build, mode)] = kv
    return runs


def load_manifest(outdir):
    rows = []
    for line in read(os.path.join(outdir, "samples.txt")).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split("|", 4)
        f += [""] * (5 - len(f))
        rows.append(dict(name=f[0], kind=f[1], dir=f[2], args=f[3], regex=f[4]))
    return rows


def result(run):
    if run is None:
        return "-"
    rc = run.get("rc", "?")
    if rc == "skip":
        return "skip"
    if rc in ("124", "137") or "timeout" in run:
        return "TIMEOUT"
    if rc != "0":
        return f"FAIL(rc={rc})"
    p = run.get("pass", "-")
    if p == "yes":
        return "PASS"
    if p == "no":
        return "FAIL(no pass message)"
    return "PASS(rc)"


def main(outdir):
    runs = load_runs(outdir)
    manifest = load_manifest(outdir)
    missing = {}
    for line in read(os.path.join(outdir, "ldd.txt")).splitlines():
        key, _, rest = line.partition(": missing: ")
        if rest:
            missing[key] = rest.strip()
    kinds = {m["name"]: m["kind"] for m in manifest}
    names = [m["name"] for m in manifest]
    names += sorted({k[0] for k in runs} - set(names), key=str.lower)

    head = read(os.path.join(outdir, "machine.txt")).strip()
    print("# cuda-samples through ferry: native, ferry, migrated at 50 % of the launches\n")
    if head:
        print("```\n" + head + "\n```\n")
    print("| sample | kind | build | native | ferry | migrated | output (ferry / migrated) "
          "| native s | ferry s | migrated s | K | notes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    stats = {}
    for name in names:
        for build in BUILDS:
            r = {m: runs.get((name, build, m)) for m in MODES}
            if all(v is None for v in r.values()):
                continue
            res = {m: result(r[m]) for m in MODES}
            base = os.path.join(outdir, f"{name}.{build}")
            nat = read(base + ".native.out")
            outputs = []
            for m in ("ferry", "migrated"):
                if r[m] is None or r[m].get("rc") == "skip" or r["native"] is None:
                    outputs.append("-")
                else:
                    outputs.append(compare(nat, read(f"{base}.{m}.out")))
            note = first_ferry_line(read(base + ".ferry.err"))
            if not note:
                m_note = first_ferry_line(read(base + ".migrated.err"))
                if m_note:
                    note = "migrated: " + m_note
            if not note and r["ferry"] and r["ferry"].get("rc") not in ("0", "skip", None):
                errs = [l for l in read(base + ".ferry.err").splitlines() + read(base + ".ferry.out").splitlines()
                        if "error" in l.lower()]
                note = errs[-1][:160] if errs else ""
            for pct in (25, 75):  # MIGRATE_PCTS beside 50 (run_gpu.sh)
                extra = runs.get((name, build, f"migrated{pct}"))
                if extra:
                    out_x = read(base + f".migrated{pct}.out")
                    same = compare(read(base + ".native.out"), out_x)
                    moved = "moved" if extra.get("moved", "0") != "0" else "did not move"
                    note = (note + "; " if note else "") + \
                        f"at {pct} %: {result(extra)}, {same}, {moved}"
            if r["migrated"] and r["migrated"].get("note"):
                note = (note + "; " if note else "") + "not migrated: " + r["migrated"]["note"]
            elif r["migrated"] and r["migrated"].get("moved") == "0" and r["migrated"].get("rc") != "skip":
                why = first_ferry_line(read(base + ".migrated.err"))
                note = (note + "; " if note else "") + "migrated run did not move" + (f" ({why})" if why else "")
            if f"{name}.{build}" in missing:
                note = f"missing libraries: {missing[name + '.' + build]}" + ("; " + note if note else "")
            k = ""
            if r["migrated"]:
                mk = r["migrated"].get("FERRY_MIGRATE_AT", "")
                k = mk.rsplit("=", 1)[-1] if mk else ""
            times = [r[m].get("wall_s", "") if r[m] and r[m].get("rc") != "skip" else "" for m in MODES]
            note = note.replace("|", "\\|")
            print(f"| {name} | {kinds.get(name, '')} | {build} | {res['native']} | {res['ferry']} | "
                  f"{res['migrated']} | {outputs[0]} / {outputs[1]} | {times[0]} | {times[1]} | "
                  f"{times[2]} | {k} | {note} |")
            for m, o in zip(MODES, (None,) + tuple(outputs)):
                s = stats.setdefault((build, m), dict(n=0, ok=0, same=0, skip=0))
                s["n"] += 1
                if res[m] == "skip":
                    s["skip"] += 1
                elif res[m].startswith("PASS"):
                    s["ok"] += 1
                    if m == "native" or o in ("identical", "same lines"):
                        s["same"] += 1

    print("\n## Summary\n")
    print("| build | mode | samples | pass (exit 0, and the pass message where there is one) "
          "| pass with output as native | not run |")
    print("|---|---|---|---|---|---|")
    for build in BUILDS:
        for m in MODES:
            s = stats.get((build, m))
            if not s:
                continue
            same = "-" if m == "native" else str(s["same"])
            print(f"| {build} | {m} | {s['n']} | {s['ok']} | {same} | {s['skip']} |")
    print()
    for build in BUILDS:
        line = []
        for m in MODES:
            s = stats.get((build, m))
            if s:
                extra = "" if m == "native" else f" ({s['same']} with output as native)"
                line.append(f"{m} {s['ok']}/{s['n']} pass{extra}")
        if line:
            print(f"- **{build}**: " + ", ".join(line))
    moves_table(outdir, runs, names)


def moves_table(outdir, runs, names):
    """Per build and migration point: the runs that moved once, twice or
    more (ROUND_TRIP=1 moves in and out again), and of those that moved
    every time asked, how many passed with the native output."""
    rows = []
    for build in BUILDS:
        for pct, mode in ((25, "migrated25"), (50, "migrated"), (75, "migrated75")):
            c = dict(n=0, once=0, twice=0, ok=0)
            for name in names:
                run = runs.get((name, build, mode))
                if not run or run.get("rc") == "skip":
                    continue
                c["n"] += 1
                moved = int(run.get("moved", "0") or 0)
                asked = run.get("FERRY_MIGRATE_AT", "").count(",") + 1
                c["once"] += moved == 1
                c["twice"] += moved >= 2
                base = os.path.join(outdir, f"{name}.{build}")
                same = compare(read(base + ".native.out"), read(f"{base}.{mode}.out"))
                if moved >= asked and result(run).startswith("PASS") and same != "DIFFERS":
                    c["ok"] += 1
            if c["n"]:
                rows.append((build, pct, c))
    if not rows:
        return
    print("\n## Moves\n")
    print("| build | at | runs | moved once | moved twice or more | moved every time asked, pass, output as native |")
    print("|---|---|---|---|---|---|")
    for build, pct, c in rows:
        print(f"| {build} | {pct} % | {c['n']} | {c['once']} | {c['twice']} | {c['ok']} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
