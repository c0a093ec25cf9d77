#!/usr/bin/env python3
"""Unit tests for the policy of slurm/ferry-slurm-hook (no Slurm, no ferry).
usage: python3 tests/slurm/test_policy.py [-v]"""
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import unittest

HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "slurm",
                    "ferry-slurm-hook")
loader = importlib.machinery.SourceFileLoader("ferry_slurm_hook", HOOK)
spec = importlib.util.spec_from_loader("ferry_slurm_hook", loader)
hook = importlib.util.module_from_spec(spec)
loader.exec_module(hook)


def vgpu(index, backend="remote", launches=0, live=0, state="none", local_gpu=-1):
    return {"index": index, "backend": backend, "local_gpu": local_gpu, "helper_pid": 0,
            "where": "tcp://gpunode:7420/%d" % index, "records": 3, "regions": 2,
            "live_bytes": live, "launches": launches,
            "migration": {"state": state, "phase": None, "error": ""}}


def prog(pid, *vgpus):
    return {"pid": pid, "vgpus": list(vgpus), "socket": "/run/ferry/0/ferry-%d.sock" % pid}


class GpuList(unittest.TestCase):
    def test_forms(self):
        self.assertEqual(hook.parse_gpu_list(""), [])
        self.assertEqual(hook.parse_gpu_list("0"), [0])
        self.assertEqual(hook.parse_gpu_list("3,1,1,4-6"), [1, 3, 4, 5, 6])
        self.assertEqual(hook.parse_gpu_list(" 0 , 2 "), [0, 2])

    def test_bad(self):
        for bad in ("x", "1-", "-1", "3-1", "0,,a", "70000"):
            with self.assertRaises(hook.PolicyError, msg=bad):
                hook.parse_gpu_list(bad)


class Candidates(unittest.TestCase):
    def test_only_remote_vgpus(self):
        progs = [prog(10, vgpu(0), vgpu(1, "local", local_gpu=0), vgpu(2, "helper", local_gpu=1))]
        c = hook.candidates(progs, {10: 5.0}, now=10.0)
        self.assertEqual([(x["pid"], x["vgpu"]) for x in c], [(10, 0)])
        self.assertEqual(c[0]["age"], 5.0)
        self.assertEqual(c[0]["socket"], "/run/ferry/0/ferry-10.sock")

    def test_migrating_program_skipped(self):
        progs = [prog(10, vgpu(0, state="running"), vgpu(1)), prog(11, vgpu(0, state="failed"))]
        self.assertEqual([x["pid"] for x in hook.candidates(progs, now=0)], [11])

    def test_no_vgpus_yet_and_junk(self):
        progs = [prog(10), {"pid": "x"}, {"pid": -1, "vgpus": [vgpu(0)]}, 7, None,
                 {"pid": 12, "vgpus": "no"}, prog(13, {"index": "0", "backend": "remote"}),
                 prog(14, vgpu(0))]
        self.assertEqual([x["pid"] for x in hook.candidates(progs, now=0)], [14])
        self.assertEqual(hook.candidates({"not": "a list"}), [])

    def test_unknown_start_counts_as_now(self):
        c = hook.candidates([prog(10, vgpu(0))], {}, now=100.0)
        self.assertEqual((c[0]["start"], c[0]["age"]), (100.0, 0.0))


class Order(unittest.TestCase):
    progs = [prog(30, vgpu(0, launches=100, live=5 << 20)),
             prog(20, vgpu(0, launches=900, live=1 << 30), vgpu(1, launches=50, live=1 << 10)),
             prog(40, vgpu(0, launches=10, live=2 << 20))]
    starts = {30: 10.0, 20: 50.0, 40: 90.0}

    def ordered(self, policy):
        c = hook.candidates(self.progs, self.starts, now=100.0)
        return [(x["pid"], x["vgpu"]) for x in hook.order(c, policy)]

    def test_oldest(self):
        self.assertEqual(self.ordered("oldest"), [(30, 0), (20, 0), (20, 1), (40, 0)])

    def test_oldest_ties_by_pid(self):
        c = hook.candidates([prog(9, vgpu(0)), prog(7, vgpu(1), vgpu(0))], {9: 1.0, 7: 1.0}, now=2)
        self.assertEqual([(x["pid"], x["vgpu"]) for x in hook.order(c, "oldest")],
                         [(7, 0), (7, 1), (9, 0)])

    def test_busiest(self):
        # rates: 30: 100/90, 20.0: 900/50, 20.1: 50/50, 40: 10/10
        self.assertEqual(self.ordered("busiest"), [(20, 0), (30, 0), (20, 1), (40, 0)])

    def test_smallest(self):
        self.assertEqual(self.ordered("smallest"), [(20, 1), (40, 0), (30, 0), (20, 0)])

    def test_unknown(self):
        with self.assertRaises(hook.PolicyError):
            hook.order([], "newest")


class Plan(unittest.TestCase):
    def test_gpus_taken_by_ferry_are_skipped(self):
        progs = [prog(10, vgpu(0, "local", local_gpu=1)), prog(11, vgpu(0))]
        steps = hook.plan(progs, [2, 1, 0, 2], "oldest", {11: 0.0}, now=1.0)
        self.assertEqual([g for g, _ in steps], [0, 2])
        self.assertEqual([c["pid"] for c in steps[0][1]], [11])

    def test_nothing_free(self):
        self.assertEqual(hook.plan([prog(1, vgpu(0))], [], "oldest", now=0), [])

    def test_nothing_to_move(self):
        self.assertEqual(hook.plan([], [0], "oldest", now=0), [(0, [])])


class Conf(unittest.TestCase):
    def test_hook_keys(self):
        with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
            f.write("# site\nserver tcp://gpu01:7420 gpus=0-3 slots=2\n"
                    "policy busiest   # trailing comment\nlocal_gpus 0,1\nmax_tries 5\n")
        try:
            conf = hook.read_conf(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(conf["policy"], "busiest")
        self.assertEqual(conf["local_gpus"], "0,1")
        self.assertEqual(conf["max_tries"], "5")
        self.assertEqual(conf["ferry"], "ferry")

    def test_missing(self):
        with self.assertRaises(hook.PolicyError):
            hook.read_conf("/nonexistent/ferry.conf")


class Run(unittest.TestCase):
    """run() with ferry stood in for by a script: decisions, fall-through to
    the next candidate after a failure, max_tries, dry runs."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.calls = os.path.join(self.dir, "calls")
        fake = os.path.join(self.dir, "ferry")
        progs = '[{"pid": 1, "socket": "/x/ferry-1.sock", "vgpus": [{"index": 0, "backend": "remote"}]},' \
                ' {"pid": 2, "socket": "/x/ferry-2.sock", "vgpus": [{"index": 0, "backend": "remote"}]}]'
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho \"$*\" >>%s\n"
                    "case $1 in ls) echo '%s' ;;\n"
                    "migrate) [ \"$3\" = \"$FAIL_PID\" ] && { echo 'ferry migrate: the local GPU is full' >&2; exit 1; }\n"
                    "  echo \"vgpu $4 now on local GPU $5 (1.0 ms)\" ;; esac\n" % (self.calls, progs))
        os.chmod(fake, 0o755)
        self.conf = dict(hook.DEFAULTS, ferry=fake)
        self.lines = []

    def tearDown(self):
        for n in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, n))
        os.rmdir(self.dir)

    def migrations(self):
        with open(self.calls) as f:
            return [l.split()[2] for l in f if l.startswith("migrate")]

    def test_first_fails_second_moves(self):
        os.environ["FAIL_PID"] = "1"
        try:
            self.assertEqual(hook.run(self.conf, "epilog", "0", False, self.lines.append), 0)
        finally:
            del os.environ["FAIL_PID"]
        self.assertEqual(self.migrations(), ["1", "2"])
        self.assertTrue(any("pid 1 vgpu 0 onto local GPU 0 failed, it goes on remotely: "
                            "ferry migrate: the local GPU is full" in l for l in self.lines))
        self.assertTrue(any("migrated pid 2 vgpu 0 onto local GPU 0" in l for l in self.lines))

    def test_max_tries(self):
        os.environ["FAIL_PID"] = "1"
        self.conf["max_tries"] = "1"
        try:
            hook.run(self.conf, "epilog", "0", False, self.lines.append)
        finally:
            del os.environ["FAIL_PID"]
        self.assertEqual(self.migrations(), ["1"])
        self.assertTrue(any("stays free" in l for l in self.lines))

    def test_two_gpus_two_programs(self):
        hook.run(self.conf, "epilog", "0,1", False, self.lines.append)
        with open(self.calls) as f:
            got = [l.split()[2:] for l in f if l.startswith("migrate")]
        self.assertEqual(sorted(got), [["1", "0", "0"], ["2", "0", "1"]])

    def test_dry_run_and_no_gpu(self):
        hook.run(self.conf, "epilog", "0", True, self.lines.append)
        self.assertEqual(self.migrations(), [])
        hook.run(self.conf, "epilog", "", False, self.lines.append)
        self.assertTrue(any("holding no local GPU" in l for l in self.lines))

    def test_bad_policy(self):
        self.conf["policy"] = "random"
        with self.assertRaises(hook.PolicyError):
            hook.run(self.conf, "epilog", "0", False, self.lines.append)


class Logging(unittest.TestCase):
    def test_program_text_is_inert(self):
        # a program's `where` reaches the log: no escape sequence survives
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "hook.log")
            log = hook.Log(path)
            saved, sys.stderr = sys.stderr, open(os.devnull, "w")
            try:
                log("picks pid 1 (\x1b]0;owned\x07caf\u00e9 \u202e\x9b1m \\x1b)")
            finally:
                sys.stderr.close()
                sys.stderr = saved
            with open(path) as f:
                text = f.read()
        self.assertIn("picks pid 1 (\\x1b]0;owned\\x07caf\u00e9 \\u202e\\x9b1m \\x1b)\n", text)
        self.assertFalse(any(not c.isprintable() for c in text.rstrip("\n")))


if __name__ == "__main__":
    unittest.main()
