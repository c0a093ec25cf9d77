#!/usr/bin/env python3
"""Migration rows of docs/compatibility.md from one GPU run.

usage: bench/compat_migration.py RUN_DIR
RUN_DIR holds apps.txt (own programs: launches, native/remote/m25/m50/m75 exit
codes and whether the vGPU moved), samples_migrate.txt (launch counts and the
launch each sample was migrated at) and compare_<run>.txt files written by
the samples' compare script (native against s_ferry, mig/m25, mig/m50, mig/m75).
Prints Markdown.
"""
import re
import sys


def compare(path):
    rows = {}
    for line in open(path):
        m = re.match(r"^([A-Za-z0-9_]+)\s+(\S+)\s+(\S+)\s+(\S+)", line)
        if m and m.group(1) not in ("SAMPLE", "samples"):
            rows[m.group(1)] = (m.group(3), m.group(4))
    return rows


def main(run):
    print("| program | launches | remote | migrated at 25 % | at 50 % | at 75 % |")
    print("|---|---:|---|---|---|---|")
    for line in open(f"{run}/apps.txt"):
        parts = line.split()
        name, launches = parts[0], parts[1].split("=")[1]
        cells = []
        remote = "pass" if "remote:rc=0" in line else "FAIL"
        for p in ("m25", "m50", "m75"):
            m = re.search(p + r"\(k=(\d+)\):rc=(\d+),moved=(\d+)", line)
            k, rc, moved = m.groups()
            state = "pass" if rc == "0" else f"FAIL(rc={rc})"
            cells.append(f"{state}, {'moved' if moved != '0' else 'stayed remote'} at {k}")
        print(f"| tests/apps/{name} | {launches} | {remote} | " + " | ".join(cells) + " |")
    print()
    remote = compare(f"{run}/compare_s_ferry.txt")
    mig = {p: compare(f"{run}/compare_mig_{p}.txt") for p in ("m25", "m50", "m75")}
    at = {}
    for line in open(f"{run}/samples_migrate.txt"):
        parts = line.split()
        if len(parts) < 2 or "=" not in parts[1]:
            continue
        at[parts[0]] = (parts[1].split("=")[1],
                        {p: re.search(p + r":k=(\d+),rc=(\d+),moved=(\d+)", line) for p in mig})
    print("| sample | launches | remote | migrated at 25 % | at 50 % | at 75 % |")
    print("|---|---:|---|---|---|---|")
    ok = {p: 0 for p in mig}
    for name in sorted(remote, key=str.lower):
        launches, ms = at.get(name, ("?", {}))
        cells = []
        for p in mig:
            state, output = mig[p].get(name, ("?", "?"))
            m = ms.get(p)
            moved = m and m.group(3) != "0"
            good = state.startswith("PASS") and output == "identical" and moved
            ok[p] += bool(good)
            where = f" (launch {m.group(1)})" if m else ""
            cells.append(("identical" if good else f"{state}, {output}") +
                         ("" if moved else ", stayed remote") + where)
        r = remote[name]
        print(f"| {name} | {launches} | {r[0]} {r[1]} | " + " | ".join(cells) + " |")
    print()
    n = len(remote)
    print("Moved and identical to native: " +
          ", ".join(f"{ok[p]}/{n} at {p[1:]} %" for p in mig) + ".")


if __name__ == "__main__":
    main(sys.argv[1])
