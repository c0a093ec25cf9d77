#!/usr/bin/env python3
"""Trace-driven simulation of a GPU cluster scheduled as today and with ferry.

usage:
  simulate.py --full [--jobs 2] [--out bench/cluster] [--img docs/img]
      every load x seed x policy; writes results.md, results.csv and the PNGs
  simulate.py --trace FILE.swf [--policy today,ferry,...]
      one SWF trace (generated or any SWF log); prints the metrics

Model (bench/cluster/README.md has every parameter and its source):

- 100 nodes x 4 GPUs. A job asks for g GPUs. g <= 4: it runs on one node
  (its home node). g > 4: a multi-node job, it needs ceil(g/4) whole nodes,
  and ferry does not change that (it never borrows for them).
- Queue: FCFS by submit time, EASY backfilling: the first job that cannot
  start gets a reservation (the earliest time at which, by the requested
  times of the running jobs, enough GPUs free on one node, or enough whole
  nodes, and which nodes); a later job may start now if it does not touch
  the reserved GPUs: it ends (by its requested time) before the reservation,
  or it leaves enough GPUs on the reserved node(s). At most BF_DEPTH jobs
  behind the first blocked one are tried per pass (Slurm's event-driven pass
  considers default_queue_depth = 100 jobs).
- Placement: best fit, the node with the fewest free GPUs that has enough.
- (a) today: a job of g <= 4 starts only on a node with g free GPUs.
- (b) ferry: when no node has g free GPUs but the cluster has g free GPUs
  (respecting the reservation), the job starts at once: home = the node with
  the most free GPUs, which it takes, the rest on other nodes (fewest free
  first: fills holes, keeps emptier nodes for whole-node work). While any of
  its vGPUs is remote it progresses at 1/s of native speed (s = its class's
  remote slowdown), at native speed when all are home. Whenever a GPU of its
  home node is free, it migrates one remote vGPU there: the home GPU is taken
  at once, the job is paused (no progress) for pause = fixed + live memory /
  mem-sync bandwidth, then the remote GPU is freed. vGPUs move one at a time.
  Migrations come before queued jobs: a migration does not change the number
  of free GPUs, only where they are (after its pause).
- (b') ferry, capped: as (b), but a node lends at most `cap` of its GPUs to
  jobs homed elsewhere (cap 1 = 25 % of a node).
- (b'') ferry, no data-heavy borrowing: as (b), but data-heavy jobs (class 3)
  never start remotely; they wait as today.
- (b''') ferry, compute-bound only: only class 1 jobs start remotely.
- bound: (b) with every remote slowdown 1.0 (what ferry could give at best).
- A job that starts with remote vGPUs has its time limit, which EASY plans
  with, extended to requested time x its class's slowdown (the scheduler is
  taken to know the class, e.g. from the user; Slurm would kill it at the
  unextended limit otherwise). Limits are not enforced: no job is killed.

Metrics: wait (submit to start), response (submit to end), makespan (first
submit to last end), GPU utilisation (GPU-seconds held, remote and during
migration pauses included, / 400 x makespan), useful utilisation (native
GPU-seconds of work / 400 x makespan), the share of held GPU-time on remote
GPUs, migrations. p95: nearest rank.
"""
import argparse
import csv
import heapq
import math
import os
import statistics
import sys
import time
from bisect import bisect_left, insort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_trace  # noqa: E402
import swf  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))

# Migration pause, from bench/results/2026-11-21-h100-migration.md (H100,
# loopback TCP): replay constant 137.2 ms (setup 133.9 ms + modules 0.28 ms +
# 3.053 ms) + mem-sync constant 17.696 ms, and mem-sync at 3.90 GB/s (the
# fit; 3.45 GB/s for large regions). 512 MiB: 0.155 + 0.138 = 0.29 s, where
# the same file measured 258-353 ms for mig_iterative's 512 MiB.
PAUSE_FIXED_S = 0.1372 + 0.017696
MEMSYNC_BPS = 3.90e9

BF_DEPTH = 100
SIZES = (1, 2, 4, 8)  # wait by job size (8: 8 GPUs or more)
LOADS = (0.5, 0.7, 0.85, 0.9, 0.95)
SEEDS = (1, 2, 3, 4, 5)
DAYS = 14

POLICIES = {
    # name: (ferry, GPUs a node may lend (None: all), classes that may
    #        borrow, remote slowdown of every class instead of the measured)
    "today": (False, 0, (), None),
    "ferry": (True, None, (1, 2, 3), None),
    "ferry-cap25": (True, 1, (1, 2, 3), None),
    "ferry-no-dh": (True, None, (1, 2), None),
    "ferry-cb": (True, None, (1,), None),
    "ferry-ideal": (True, None, (1, 2, 3), 1.0),
}
LABELS = {
    "today": "(a) today",
    "ferry": "(b) ferry",
    "ferry-cap25": "(b') ferry, lend <= 25 %",
    "ferry-no-dh": "(b'') ferry, data-heavy never remote",
    "ferry-cb": "(b''') ferry, compute-bound only remote",
    "ferry-ideal": "bound: ferry, remote as fast as local",
}

END, MIGDONE, ARRIVE = 0, 1, 2  # order of events at the same instant


class Job:
    __slots__ = ("id", "submit", "run", "gpus", "req", "cls", "mem", "slow",
                 "whole", "start", "end", "home", "place", "nremote", "work",
                 "rate", "last", "ver", "migrating", "exp_end", "migrations",
                 "pause", "remote_start", "remote_gpu_s")

    def __init__(self, d, slow, gpn):
        self.id = d["id"]
        self.submit = float(d["submit"])
        self.run = float(d["run"])
        self.gpus = int(d["gpus"])
        self.req = float(d["req"])
        self.cls = d["cls"]
        self.mem = d["mem_kib"] * 1024.0
        self.slow = slow
        self.whole = -(-self.gpus // gpn) if self.gpus > gpn else 0
        self.start = self.end = None
        self.home = None
        self.place = {}
        self.nremote = 0
        self.work = self.run
        self.rate = 0.0
        self.last = 0.0
        self.ver = 0
        self.migrating = False
        self.exp_end = 0.0
        self.migrations = 0
        self.pause = 0.0
        self.remote_start = False


class Reservation:
    __slots__ = ("t", "spare")

    def __init__(self, t, spare):
        self.t = t
        self.spare = spare  # node -> GPUs a job ending after t may still take


class Sim:
    def __init__(self, jobs, policy="today", nodes=100, gpn=4, slowdowns=None,
                 pause_fixed=PAUSE_FIXED_S, memsync_bps=MEMSYNC_BPS, bf_depth=BF_DEPTH,
                 trace=False):
        ferry, cap, borrow, same_slow = POLICIES[policy]
        self.ferry = ferry
        self.cap = gpn if cap is None else cap
        self.borrow = set(borrow)
        self.N, self.G = nodes, gpn
        self.pause_fixed, self.bps = pause_fixed, memsync_bps
        self.bf_depth = bf_depth
        slow = slowdowns or {1: 1.0, 2: 1.0, 3: 1.0}
        if same_slow is not None:
            slow = {c: same_slow for c in slow}
        self.jobs = [Job(d, slow[d["cls"]], gpn) for d in jobs]
        for j in self.jobs:
            if j.gpus > nodes * gpn:
                raise ValueError(f"job {j.id} asks for {j.gpus} GPUs, the cluster has {nodes * gpn}")
        self.byid = {j.id: j for j in self.jobs}
        self.free = [gpn] * nodes
        self.bucket = [set() for _ in range(gpn + 1)]
        self.bucket[gpn] = set(range(nodes))
        self.lent = [0] * nodes
        self.total_free = nodes * gpn
        self.nremote = 0
        self.running = []          # sorted [(exp_end, id)]
        self.home_wait = [[] for _ in range(nodes)]  # jobs with remote vGPUs, by home
        self.queue = []
        self.res = None
        self.ev = []
        self.seq = 0
        self.now = 0.0
        self.t_last = None
        self.busy_area = 0.0
        self.remote_area = 0.0
        self.log = [] if trace else None

    # ---------------------------------------------------------- bookkeeping
    def _push(self, t, kind, jid, ver=0):
        self.seq += 1
        heapq.heappush(self.ev, (t, kind, self.seq, jid, ver))

    def _setfree(self, n, d):
        f = self.free[n]
        self.bucket[f].discard(n)
        f += d
        assert 0 <= f <= self.G, (n, f)
        self.free[n] = f
        self.bucket[f].add(n)
        self.total_free += d

    def _advance(self, j):
        if j.rate > 0:
            j.work -= j.rate * (self.now - j.last)
            if j.work < 0:
                j.work = 0.0
        j.last = self.now

    def _set_rate(self, j, rate):
        self._advance(j)
        j.rate = rate
        j.ver += 1
        if rate > 0:
            self._push(self.now + j.work / rate, END, j.id, j.ver)

    def _note(self, *a):
        if self.log is not None:
            self.log.append((self.now,) + a)

    # ---------------------------------------------------------- reservation
    def _allowed(self, n, end):
        """GPUs of node n a job ending at `end` may take now."""
        r = self.res
        f = self.free[n]
        if r is None or end <= r.t or n not in r.spare:
            return f
        return max(0, min(f, r.spare[n]))

    def _consume(self, n, c, end):
        r = self.res
        if r is not None and end > r.t and n in r.spare:
            r.spare[n] -= c

    def _reserve(self, j):
        """EASY reservation for the blocked job j (from requested times)."""
        G = self.G
        need = G if j.whole else j.gpus
        nn = j.whole or 1
        avail = {}
        ok = [n for k in range(need, G + 1) for n in self.bucket[k]]
        okset = set(ok)
        if len(ok) >= nn:  # fits already (only a cap or a reservation kept it out)
            return None
        for exp, jid in self.running:
            for n, c in self.byid[jid].place.items():
                a = avail.get(n, self.free[n]) + c
                avail[n] = a
                if a >= need and n not in okset:
                    ok.append(n)
                    okset.add(n)
            if len(ok) >= nn:
                t = max(exp, self.now)
                return Reservation(t, {n: avail.get(n, self.free[n]) - need for n in ok[:nn]})
        return Reservation(math.inf, {})

    # ---------------------------------------------------------- placement
    def _start(self, j, place, home):
        j.start = self.now
        j.last = self.now
        j.home = home
        j.place = place
        remote = not j.whole and any(n != home for n in place)
        # The time limit the scheduler plans with: the requested time, times
        # the class's remote slowdown for a job that starts with remote
        # vGPUs (the limit must be extended so, or Slurm would kill it).
        j.exp_end = self.now + j.req * (j.slow if remote else 1.0)
        for n, c in place.items():
            self._setfree(n, -c)
            self._consume(n, c, j.exp_end)
            if n != home and not j.whole:
                self.lent[n] += c
                j.nremote += c
        self.nremote += j.nremote
        insort(self.running, (j.exp_end, j.id))
        if j.nremote:
            j.remote_start = True
            self.home_wait[home].append(j.id)
            self._set_rate(j, 1.0 / j.slow)
        else:
            self._set_rate(j, 1.0)
        self._note("start", j.id, dict(place), home)

    def _try_start(self, j):
        G = self.G
        end = self.now + j.req
        if j.whole:
            got = []
            for n in self.bucket[G]:
                if self._allowed(n, end) >= G:
                    got.append(n)
                    if len(got) == j.whole:
                        self._start(j, {n: G for n in got}, got[0])
                        return True
            return False
        g = j.gpus
        if self.total_free < g:
            return False
        for k in range(g, G + 1):            # best fit on one node
            for n in self.bucket[k]:
                if self._allowed(n, end) >= g:
                    self._start(j, {n: g}, n)
                    return True
        if not self.ferry or j.cls not in self.borrow:
            return False
        # ferry: home = the node with the most GPUs it may take now
        end = self.now + j.req * j.slow
        home, hl = None, 0
        for k in range(G, 0, -1):
            for n in self.bucket[k]:
                a = self._allowed(n, end)
                if a > hl:
                    home, hl = n, a
            if hl >= k:
                break
        if home is None:
            return False
        place = {home: min(hl, g)}
        need = g - place[home]
        for k in range(1, G + 1):            # remote: fewest free first
            for n in self.bucket[k]:
                if n == home:
                    continue
                c = min(self._allowed(n, end), self.cap - self.lent[n], need)
                if c > 0:
                    place[n] = c
                    need -= c
                    if need == 0:
                        break
            if need == 0:
                break
        if need:
            return False
        self._start(j, place, home)
        return True

    # ---------------------------------------------------------- migration
    def _migrate_into(self, n):
        """Start migrations onto free GPUs of node n, oldest job first."""
        for jid in self.home_wait[n]:
            if self.free[n] == 0:
                return
            j = self.byid[jid]
            if j.migrating or self._allowed(n, j.exp_end) < 1:
                continue
            self._set_rate(j, 0.0)
            self._setfree(n, -1)
            self._consume(n, 1, j.exp_end)
            j.place[n] = j.place.get(n, 0) + 1
            j.migrating = True
            p = self.pause_fixed + j.mem / self.bps
            j.migrations += 1
            j.pause += p
            self._push(self.now + p, MIGDONE, j.id)
            self._note("migrate", j.id, n)

    def _mig_done(self, j):
        m = min(n for n in j.place if n != j.home)
        j.place[m] -= 1
        if not j.place[m]:
            del j.place[m]
        self._setfree(m, 1)
        self.lent[m] -= 1
        j.nremote -= 1
        self.nremote -= 1
        j.migrating = False
        if j.nremote == 0:
            self.home_wait[j.home].remove(j.id)
            self._set_rate(j, 1.0)
        else:
            self._set_rate(j, 1.0 / j.slow)
        self._note("migrated", j.id, m)
        self._migrate_into(j.home)
        self._migrate_into(m)

    def _finish(self, j):
        j.end = self.now
        del self.running[bisect_left(self.running, (j.exp_end, j.id))]
        if j.nremote:
            self.home_wait[j.home].remove(j.id)
            self.nremote -= j.nremote
        for n, c in j.place.items():
            self._setfree(n, c)
            if n != j.home and not j.whole:
                self.lent[n] -= c
        self._note("end", j.id)
        for n in j.place:
            self._migrate_into(n)

    # ---------------------------------------------------------- scheduling
    def _schedule(self):
        q = self.queue
        self.res = None
        i = 0
        tried = 0
        blocked = False
        while i < len(q):
            if self.total_free == 0:
                break
            j = q[i]
            if blocked:
                tried += 1
                if tried > self.bf_depth:
                    break
            if self._try_start(j):
                del q[i]
                continue
            if not blocked:
                blocked = True
                self.res = self._reserve(j)
            i += 1

    def run(self):
        for j in self.jobs:
            self._push(j.submit, ARRIVE, j.id)
        while self.ev:
            t, kind, _, jid, ver = heapq.heappop(self.ev)
            if self.t_last is not None:
                dt = t - self.t_last
                self.busy_area += (self.N * self.G - self.total_free) * dt
                self.remote_area += self.nremote * dt
            self.t_last = t
            self.now = t
            j = self.byid[jid]
            if kind == END:
                if ver != j.ver:
                    continue
                self._advance(j)
                self._finish(j)
            elif kind == MIGDONE:
                self._mig_done(j)
            else:
                self.queue.append(j)
                if self.total_free == 0:
                    continue
            if self.queue:
                self._schedule()
        assert not self.queue and self.total_free == self.N * self.G
        return self

    # ---------------------------------------------------------- metrics
    def metrics(self):
        js = self.jobs
        waits = sorted(j.start - j.submit for j in js)
        resp = sorted(j.end - j.submit for j in js)
        t0 = min(j.submit for j in js)
        t1 = max(j.end for j in js)
        span = t1 - t0
        cap = self.N * self.G * span
        work = sum(j.gpus * j.run for j in js)
        ferry_started = [j for j in js if j.remote_start]
        by_size = {}
        for g in SIZES:
            w = [j.start - j.submit for j in js if (j.gpus == g if g < 8 else j.gpus >= 8)]
            by_size[f"wait_mean_h_g{g}"] = statistics.fmean(w) / 3600 if w else 0.0
        return dict(by_size, **{
            "jobs": len(js),
            "wait_mean_h": statistics.fmean(waits) / 3600,
            "wait_p95_h": p95(waits) / 3600,
            "resp_mean_h": statistics.fmean(resp) / 3600,
            "resp_p95_h": p95(resp) / 3600,
            "makespan_d": span / 86400,
            "util": self.busy_area / cap,
            "useful_util": work / cap,
            "remote_share": self.remote_area / self.busy_area if self.busy_area else 0.0,
            "started_remote": len(ferry_started) / len(js),
            "migrations": sum(j.migrations for j in js),
            "pause_mean_s": (statistics.fmean(j.pause / j.migrations for j in js if j.migrations)
                             if any(j.migrations for j in js) else 0.0),
            "stretch_remote": (statistics.fmean((j.end - j.start) / j.run for j in ferry_started)
                               if ferry_started else 1.0),
        })


def p95(sorted_xs):
    """Nearest-rank 95th percentile of a sorted list."""
    return sorted_xs[max(0, math.ceil(0.95 * len(sorted_xs)) - 1)]


def simulate(jobs, policy, slowdowns, **kw):
    return Sim(jobs, policy, slowdowns=slowdowns, **kw).run()


# ---------------------------------------------------------------- experiment
def _one(args):
    load, seed, days, policy, sd = args
    t = time.time()
    jobs = gen_trace.generate(load, seed, days)
    m = simulate(jobs, policy, sd).metrics()
    m.update(load=load, seed=seed, policy=policy, cpu_s=time.time() - t)
    return m


METRIC_COLS = ("jobs", "wait_mean_h", "wait_p95_h", "resp_mean_h", "resp_p95_h",
               "makespan_d", "util", "useful_util", "remote_share", "started_remote",
               "migrations", "pause_mean_s", "stretch_remote") + tuple(
                   f"wait_mean_h_g{g}" for g in SIZES)


def aggregate(rows):
    """Mean over seeds of every metric, keyed (load, policy); with min/max."""
    out = {}
    for r in rows:
        out.setdefault((r["load"], r["policy"]), []).append(r)
    agg = {}
    for k, rs in out.items():
        a = {"n": len(rs)}
        for c in METRIC_COLS:
            xs = [r[c] for r in rs]
            a[c] = statistics.fmean(xs)
            a[c + "_min"] = min(xs)
            a[c + "_max"] = max(xs)
        agg[k] = a
    return agg


def fmt_h(h):
    return f"{h * 60:.1f} min" if h < 1 else f"{h:.2f} h"


def write_results(rows, agg, out, img, command, slowdowns, loads, seeds, days, policies, wall):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        cols = ("load", "seed", "policy") + METRIC_COLS
        w.writerow(cols)
        for r in sorted(rows, key=lambda r: (r["load"], r["seed"], policies.index(r["policy"]))):
            w.writerow([f"{r[c]:.6g}" if isinstance(r[c], float) else r[c] for c in cols])
    L = []
    L.append("# Cluster simulation: scheduling as today against scheduling with ferry")
    L.append("")
    L.append("Made by (from the repository root, Debian's python3 and python3-matplotlib):")
    L.append("")
    L.append(f"    {command}")
    L.append("")
    L.append(f"{len(rows)} simulations ({len(loads)} loads x {len(seeds)} seeds x "
             f"{len(policies)} policies), {days} days of arrivals each, {wall:.0f} s wall time "
             f"on {os.cpu_count()} cores. The model, its parameters and their sources, and "
             "where it is optimistic: [README.md](README.md). Per-seed rows: "
             "[results.csv](results.csv).")
    L.append("")
    L.append("Cluster: 100 nodes x 4 GPUs. Offered load = GPU-work submitted / (400 GPUs x "
             f"{days} days). Every number is the mean over the seeds (seeds: "
             f"{', '.join(map(str, seeds))}); a trace of a given seed and load is the "
             "same for every policy. Wait: submit to start; response: submit to end "
             "(ferry jobs run slower while remote, so response is the fair comparison); "
             "p95: nearest-rank 95th percentile over the jobs of a run; utilisation: "
             "GPU-seconds held / (400 x makespan), remote and paused time included; "
             "useful: native GPU-seconds of work / (400 x makespan).")
    L.append("")
    L.append("Remote slowdown by class, derived from docs/compatibility.md (median ferry s / "
             "native s of the cuda-samples in the class; gen_trace.remote_slowdowns):")
    L.append("")
    L.append("| class | share of jobs | slowdown | samples (ratio) |")
    L.append("|---|---:|---:|---|")
    for c in sorted(slowdowns):
        v, xs = slowdowns[c]
        L.append(f"| {c} {gen_trace.CLASSES[c]} | {gen_trace.PARAMS['class_mix'][c]:.0%} | "
                 f"{v:.3f}x | " + ", ".join(f"{n} {r:.2f}" for n, r in xs) + " |")
    L.append("")
    L.append("Migration pause: %.1f ms + live memory / %.2f GB/s "
             "(bench/results/2026-11-21-h100-migration.md); live memory per GPU: log-normal, "
             "median %g GiB." % (PAUSE_FIXED_S * 1e3, MEMSYNC_BPS / 1e9,
                                gen_trace.PARAMS["mem_median_gib"]))
    L.append("")
    L.append("## Headline: (a) today against (b) ferry")
    L.append("")
    L.append("| load | policy | mean wait | p95 wait | mean response | p95 response | "
             "makespan (d) | GPU util | useful util |")
    L.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for load in loads:
        for p in ("today", "ferry"):
            a = agg[(load, p)]
            L.append(f"| {load} | {LABELS[p]} | {fmt_h(a['wait_mean_h'])} | {fmt_h(a['wait_p95_h'])} | "
                     f"{fmt_h(a['resp_mean_h'])} | {fmt_h(a['resp_p95_h'])} | "
                     f"{a['makespan_d']:.2f} | {a['util']:.1%} | {a['useful_util']:.1%} |")
    L.append("")
    L.append("## All policies")
    L.append("")
    L.append("*remote GPU-time*: share of held GPU-time on GPUs of another node; "
             "*started remote*: jobs that started with at least one remote vGPU; "
             "*stretch*: mean (run time / native run time) of those jobs; "
             "*migrations*: per run (mean pause in parentheses).")
    L.append("")
    L.append("| load | policy | jobs | mean wait | p95 wait | mean resp. | p95 resp. | "
             "makespan (d) | util | useful | remote GPU-time | started remote | stretch | migrations |")
    L.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for load in loads:
        for p in policies:
            a = agg[(load, p)]
            mig = f"{a['migrations']:.1f} ({a['pause_mean_s']:.2f} s)" if a["migrations"] else "0"
            L.append(f"| {load} | {LABELS[p]} | {a['jobs']:.0f} | {fmt_h(a['wait_mean_h'])} | "
                     f"{fmt_h(a['wait_p95_h'])} | {fmt_h(a['resp_mean_h'])} | "
                     f"{fmt_h(a['resp_p95_h'])} | {a['makespan_d']:.2f} | {a['util']:.1%} | "
                     f"{a['useful_util']:.1%} | {a['remote_share']:.2%} | "
                     f"{a['started_remote']:.1%} | {a['stretch_remote']:.2f} | {mig} |")
    L.append("")
    L.append(f"Mean wait by job size at load {loads[-1]} (minutes): ferry hands scattered GPUs "
             "to the multi-GPU job at the head of the queue, which today's EASY backfilling "
             "gives to 1-GPU jobs behind it:")
    L.append("")
    L.append("| policy | " + " | ".join(f"{g} GPU{'s' if g > 1 else ''}" for g in SIZES) + " |")
    L.append("|---|" + "---:|" * len(SIZES))
    for p in policies:
        a = agg[(loads[-1], p)]
        L.append(f"| {LABELS[p]} | " + " | ".join(f"{a[f'wait_mean_h_g{g}'] * 60:.1f}" for g in SIZES) + " |")
    L.append("")
    L.append("Spread over seeds (min-max) of the mean wait, hours:")
    L.append("")
    L.append("| load | " + " | ".join(LABELS[p] for p in policies) + " |")
    L.append("|---:|" + "---:|" * len(policies))
    for load in loads:
        L.append(f"| {load} | " + " | ".join(
            f"{agg[(load, p)]['wait_mean_h_min']:.2f}-{agg[(load, p)]['wait_mean_h_max']:.2f}"
            for p in policies) + " |")
    L.append("")
    if img:
        L.append("## Plots")
        L.append("")
        for name, what in (("cluster-wait.png", "wait time against load (mean: line; bar: up to p95)"),
                           ("cluster-response.png", "response time against load (mean: line; bar: up to p95)"),
                           ("cluster-util.png", "GPU utilisation against load (held and useful)")):
            rel = os.path.relpath(os.path.join(img, name), out)
            L.append(f"- {what}: [{rel}]({rel})")
            L.append("")
            L.append(f"  ![{what}]({rel})")
            L.append("")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(L).rstrip() + "\n")


def plot(agg, loads, policies, img):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(img, exist_ok=True)
    styles = {"today": ("C3", "o"), "ferry": ("C0", "s"),
              "ferry-cap25": ("C2", "^"), "ferry-no-dh": ("C1", "D"),
              "ferry-cb": ("C4", "v"), "ferry-ideal": ("C7", "x")}

    def timeplot(key, title, fname, unit, scale, symlog):
        """Grouped bars per load: mean; a whisker up to the p95 (both means
        over the seeds)."""
        fig, ax = plt.subplots(figsize=(9, 4.8))
        n = len(policies)
        w = 0.8 / n
        for i, p in enumerate(policies):
            c, m = styles.get(p, ("k", "x"))
            xs = [k + (i - (n - 1) / 2) * w for k in range(len(loads))]
            mean = [agg[(x, p)][key + "_mean_h"] * scale for x in loads]
            hi = [agg[(x, p)][key + "_p95_h"] * scale for x in loads]
            ax.bar(xs, mean, width=w * 0.9, color=c, alpha=0.8, label=LABELS[p])
            ax.vlines(xs, mean, hi, color=c, lw=1.2)
            ax.plot(xs, hi, color=c, marker=m, ms=5, ls="none")
        if symlog:
            ax.set_yscale("symlog", linthresh=1.0)
        ax.set_xticks(range(len(loads)), [str(x) for x in loads])
        ax.set_xlabel("offered load")
        ax.set_ylabel(f"{unit}" + (" (linear below 1, log above)" if symlog else ""))
        ax.set_title(title + " - bar: mean, marker: p95")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        fig.legend(*ax.get_legend_handles_labels(), fontsize=8, loc="lower center", ncol=3)
        fig.tight_layout(rect=(0, 0.12, 1, 1))
        fig.savefig(os.path.join(img, fname), dpi=110)
        plt.close(fig)

    timeplot("wait", "Wait (submit to start)", "cluster-wait.png", "minutes", 60, True)
    timeplot("resp", "Response (submit to end)", "cluster-response.png", "hours", 1, False)

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.8))
    for p in policies:
        c, m = styles.get(p, ("k", "x"))
        ax.plot(loads, [100 * agg[(x, p)]["util"] for x in loads], color=c, marker=m,
                label=LABELS[p])
        ax2.plot(loads, [100 * (agg[(x, p)]["util"] - agg[(x, p)]["useful_util"]) for x in loads],
                 color=c, marker=m)
    ax.plot(loads, [100 * agg[(x, policies[0])]["useful_util"] for x in loads], color="k",
            ls="--", label="useful (native GPU-time), " + LABELS[policies[0]])
    ax.set_xlabel("offered load")
    ax.set_ylabel("GPU-time held / (400 GPUs x makespan), %")
    ax.set_title("GPU utilisation over the makespan")
    ax2.set_xlabel("offered load")
    ax2.set_ylabel("held - useful, percentage points")
    ax2.set_title("GPU-time lost to remote slowdown and pauses")
    for a_ in (ax, ax2):
        a_.set_xticks(loads)
        a_.grid(True, alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), fontsize=8, loc="lower center", ncol=4)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(os.path.join(img, "cluster-util.png"), dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description="ferry cluster simulation (see the module docstring)")
    ap.add_argument("--full", action="store_true", help="every load x seed x policy, with tables and plots")
    ap.add_argument("--trace", help="simulate one SWF trace and print its metrics")
    ap.add_argument("--loads", default=",".join(map(str, LOADS)))
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument("--days", type=float, default=DAYS)
    ap.add_argument("--policy", default=",".join(POLICIES))
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "cluster"))
    ap.add_argument("--img", default=os.path.join(REPO, "docs", "img"))
    ap.add_argument("--no-plots", action="store_true")
    a = ap.parse_args(argv)
    policies = a.policy.split(",")
    for p in policies:
        if p not in POLICIES:
            ap.error(f"unknown policy {p} (have {', '.join(POLICIES)})")
    sd_full = gen_trace.default_slowdowns()
    sd = {c: v for c, (v, _) in sd_full.items()}

    if a.trace:
        header, recs = swf.read(a.trace)
        jobs = gen_trace.from_records(recs)
        maxprocs = swf.header_value(header, "MaxProcs")
        print(f"{a.trace}: {len(jobs)} jobs (MaxProcs {maxprocs}); simulated on 100 x 4 GPUs")
        for p in policies:
            m = simulate(jobs, p, sd).metrics()
            print(p, " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in m.items()))
        return
    if not a.full:
        ap.error("give --full or --trace FILE")

    loads = [float(x) for x in a.loads.split(",")]
    seeds = [int(x) for x in a.seeds.split(",")]
    tasks = [(load, seed, a.days, p, sd) for load in loads for seed in seeds for p in policies]
    tasks.sort(key=lambda t: -t[0])  # the slowest (highest load) first
    t0 = time.time()
    if a.jobs > 1:
        import multiprocessing
        with multiprocessing.Pool(a.jobs) as pool:
            rows = pool.map(_one, tasks, chunksize=1)
    else:
        rows = [_one(t) for t in tasks]
    wall = time.time() - t0
    agg = aggregate(rows)
    argv_s = " ".join(sys.argv[1:]) if argv is None else " ".join(argv)
    command = f"/usr/bin/python3 bench/cluster/simulate.py {argv_s}".rstrip()
    img = None if a.no_plots else a.img
    if img:
        plot(agg, loads, policies, img)
    write_results(rows, agg, a.out, img, command, sd_full, loads, seeds, a.days, policies, wall)
    print(f"{len(rows)} runs in {wall:.1f} s; wrote {a.out}/results.md, results.csv"
          + (f", {img}/cluster-*.png" if img else ""))


if __name__ == "__main__":
    main()
