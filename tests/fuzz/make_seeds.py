#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz harnesses into tests/fuzz/corpus/.

Calls and their wire ids come from protocol/calls.def, so the seeds follow
the table. Bodies are msgpack as ferry's codec packs them
(smallest integer forms, float32, strings with their NUL). Plain Python 3,
standard library only.

  python3 tests/fuzz/make_seeds.py          # rewrites corpus/{frames,decode,session,graph}
  python3 tests/fuzz/make_seeds.py --check  # exit 1 if the committed corpus is stale
"""
import filecmp
import os
import re
import shutil
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

MAGIC = 0x31595246
ARENA_BASE = 0x200000000000
ARENA_SIZE = 1 << 30
MAP_SIZE = 2 << 20  # the sim's granularity


def protocol_version():
    text = open(os.path.join(ROOT, "protocol", "wire.h")).read()
    return int(re.search(r"#define FERRY_PROTOCOL_VERSION (\d+)u", text).group(1))


def read_calls():
    """{name: (id, flags, [(type, field)], [(type, field)])} in table order"""
    text = open(os.path.join(ROOT, "protocol", "calls.def")).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    calls = {}
    for m in re.finditer(r"FERRY_CALL\(\s*(\d+)\s*,\s*(\w+)\s*,([^,]*),\s*ARGS\((.*?)\)\s*,"
                         r"\s*RETS\((.*?)\)\s*\)", text, flags=re.S):
        fields = lambda s: re.findall(r"F\(\s*(\w+)\s*,\s*(\w+)\s*\)", s)
        cid = int(m.group(1))
        assert cid < 128, "decode seeds pick the call in one byte (id << 1)"
        calls[m.group(2)] = (cid, m.group(3), fields(m.group(4)), fields(m.group(5)))
    return calls


CALLS = read_calls()
ID = {name: c[0] for name, c in CALLS.items()}


# ---- msgpack, packed the way msgpack-c's pack functions do ----
def p_uint(v):
    if v < 0x80:
        return bytes([v])
    if v < 1 << 8:
        return b"\xcc" + struct.pack(">B", v)
    if v < 1 << 16:
        return b"\xcd" + struct.pack(">H", v)
    if v < 1 << 32:
        return b"\xce" + struct.pack(">I", v)
    return b"\xcf" + struct.pack(">Q", v)


def p_int(v):
    if v >= 0:
        return p_uint(v)
    if v >= -32:
        return struct.pack(">b", v)
    if v >= -(1 << 7):
        return b"\xd0" + struct.pack(">b", v)
    if v >= -(1 << 15):
        return b"\xd1" + struct.pack(">h", v)
    return b"\xd2" + struct.pack(">i", v)


def p_str(s):
    if s is None:
        return b"\xc0"
    b = s.encode() + b"\0"
    n = len(b)
    if n < 32:
        return bytes([0xa0 | n]) + b
    if n < 1 << 8:
        return b"\xd9" + struct.pack(">B", n) + b
    return b"\xda" + struct.pack(">H", n) + b


def p_bin(b):
    n = len(b)
    if n < 1 << 8:
        return b"\xc4" + struct.pack(">B", n) + b
    if n < 1 << 16:
        return b"\xc5" + struct.pack(">H", n) + b
    return b"\xc6" + struct.pack(">I", n) + b


PACK = {"u32": p_uint, "u64": p_uint, "i32": p_int, "f32": lambda v: b"\xca" + struct.pack(">f", v),
        "str": p_str, "blob": p_bin}


def body(fields, values):
    out = bytes([0x90 | len(fields)]) if len(fields) < 16 else b"\xdc" + struct.pack(">H", len(fields))
    for typ, name in fields:
        out += PACK[typ](values.get(name, DEFAULT[typ]))
    return out


DEFAULT = {"u32": 0, "u64": 0, "i32": 0, "f32": 0.0, "str": None, "blob": b""}


def frame(kind, b=b"", bulk=b"", bulk_len=None):
    n = len(bulk) if bulk_len is None else bulk_len
    return struct.pack("<IHHiiIIQ", MAGIC, kind, 0, 0, 0, len(b), 0, n) + b + bulk


def call(call_name, bulk=b"", **values):
    # not `name`: module_function has an argument of that name
    return frame(ID[call_name], body(CALLS[call_name][2], values), bulk)


# ---- arguments that make sense to the sim, by field name ----
def sample_args(name, fields):
    """values for a call that the sim can run after the setup below"""
    v = {}
    for typ, f in fields:
        if typ == "str":
            v[f] = "x"
        elif typ == "blob":
            v[f] = b""
        elif f in ("addr", "dst", "src", "dev"):
            v[f] = ARENA_BASE + (4096 if f == "src" else 0)
        elif f in ("size", "width"):
            v[f] = 256
        elif f in ("height", "depth"):
            v[f] = 1
        elif f in ("pitch", "dpitch", "spitch", "dst_pitch", "src_pitch"):
            v[f] = 256
        elif f in ("dst_rows", "src_rows"):
            v[f] = 1
        elif f in ("stream",):
            v[f] = 16
        elif f in ("event", "start", "end"):
            v[f] = 16
        elif f in ("array",):
            v[f] = 1
        elif f in ("format",):
            v[f] = 0x08  # CU_AD_FORMAT_UNSIGNED_INT32
        elif f in ("channels",):
            v[f] = 1
        elif f in ("block_size",):
            v[f] = 128
        else:
            v[f] = 0
    if name.endswith("_create"):  # fresh ids (SETUP made the usual ones); objects view array 1
        fresh = {"stream": 17, "event": 17, "array": 1 if name in ("tex_create", "surf_create") else 2}
        v.update({f: fresh[f] for t, f in fields if f in fresh})
    if name in ("tex_destroy", "surf_destroy"):
        v["object"] = 1  # objects are the sim's pointers: this one ends the session
    if name == "module_load":
        v.update(module=1, func_names=b"k\0")
    if name in ("module_function", "module_global"):
        v.update(module=0, name="k")
    if name == "memset_wide":
        v.update(elem=4, width=64)
    if name == "mem_map":
        v.update(addr=ARENA_BASE + MAP_SIZE, size=MAP_SIZE)
    if name == "mem_unmap":
        v.update(addr=ARENA_BASE, size=MAP_SIZE)
    if name == "memcpy_dtoh_gather":
        v["ranges"] = struct.pack("<QQQQ", ARENA_BASE, 64, ARENA_BASE + 4096, 32)
    if name == "graph_instantiate":
        v["nodes"] = GRAPH_SIM
    if name == "tex_create":  # CU_RESOURCE_TYPE_ARRAY, a zeroed CUDA_TEXTURE_DESC
        v.update(res_type=0, tex=bytes(104))
    return v


def hello(token=None):
    return call("hello", version=protocol_version(), gpu=0, arena_base=ARENA_BASE, arena_size=ARENA_SIZE,
                client_pid=4242, token=token)


# a fat binary as far as the sim looks: a container header (magic, version,
# header_size, fat_size) whose sizes add up to the bytes sent
FATBIN = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 48) + bytes(48)

# state the sample calls refer to: memory at ARENA_BASE, stream 16, event
# 16, array 1, module 0
SETUP = (call("mem_map", addr=ARENA_BASE, size=MAP_SIZE)
         + call("stream_create", stream=16, flags=0, priority=0)
         + call("event_create", event=16, flags=0)
         + call("array_create", array=1, width=64, height=4, depth=0, format=0x03, channels=1,
                flags=0x02)  # CUDA_ARRAY3D_SURFACE_LDST
         + call("module_load", FATBIN, module=0, func_names=b"k\0", var_names=b""))

# issue 11: a hello with an empty body, and a mem_map asking for 537940569 elements
EMPTY_HELLO = bytes.fromhex("46525931") + bytes(28)
HUGE_COUNT = bytes.fromhex("465259310a00000000000000000000000600000000000000000000000000000092dd20105259")


# graph node blobs (protocol/graph.h): header, then nodes, little-endian
GNODE = {"empty": 0, "kernel": 1, "memset": 2, "memcpy": 3, "record": 4, "wait": 5}


def gnode(kind, deps=(), payload=b""):
    return struct.pack("<II", GNODE[kind], len(deps)) + b"".join(struct.pack("<I", d) for d in deps) + payload


def graph(*nodes):
    return struct.pack("<III", 0x48505247, 1, len(nodes)) + b"".join(nodes)


def g_kernel(func, deps=(), params=b"", attrs=b"", grid=(1, 1, 1), block=(64, 1, 1), shmem=0):
    return gnode("kernel", deps, struct.pack("<8I", func, *grid, *block, shmem)
                 + struct.pack("<I", len(params)) + params + struct.pack("<I", len(attrs)) + attrs)


def g_memset(dst, width, deps=(), value=0, elem=1, pitch=0, height=1):
    return gnode("memset", deps, struct.pack("<QQQQII", dst, pitch or width * elem, width, height, value, elem))


def g_memcpy(dst, src, width, deps=(), height=1, dpitch=0, spitch=0):
    return gnode("memcpy", deps, struct.pack("<6Q", dst, dpitch or width, src, spitch or width, width, height))


# what the sim runs after the setup (its module has no kernel): a memset,
# a copy after it, the event recorded after that and waited on
GRAPH_SIM = graph(g_memset(ARENA_BASE, 256, value=7), g_memcpy(ARENA_BASE + 4096, ARENA_BASE, 256, (0,)),
                  gnode("record", (1,), struct.pack("<I", 16)), gnode("wait", (2,), struct.pack("<I", 16)))

# one node of each type, on the setup's memory, kernel and event
GRAPH_ALL = graph(gnode("empty"), g_memset(ARENA_BASE, 256, (0,), value=7),
                  g_kernel(0, (1,)), g_memcpy(ARENA_BASE + 4096, ARENA_BASE, 256, (1, 2)),
                  gnode("record", (3,), struct.pack("<I", 16)), gnode("wait", (), struct.pack("<I", 16)))


def write(dirname, name, data):
    with open(os.path.join(dirname, name), "wb") as f:
        f.write(data)


HARNESSES = ("frames", "decode", "session", "graph")


def generate(corpus):
    dirs = {k: os.path.join(corpus, k) for k in HARNESSES}
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)

    session_seeds = {"hello": hello(), "hello_token": hello("secret"), "empty_hello": EMPTY_HELLO,
                     "huge_count": hello() + HUGE_COUNT, "setup": hello() + SETUP,
                     # a fat binary wrapper holds a pointer of the client's process: the
                     # server must refuse it unread (it followed the pointer, and crashed)
                     "module_load_wrapper": hello() + SETUP + call(
                         "module_load", struct.pack("<IIQQ", 0x466243B1, 1, 12, 0),
                         **sample_args("module_load", CALLS["module_load"][2]))}
    for name, (cid, flags, args, rets) in CALLS.items():
        if name == "hello":
            continue
        a = sample_args(name, args)
        bulk = (FATBIN if name == "module_load" else bytes(range(256))) if "BULK_IN" in flags else b""
        # the other graph calls need a graph: exec 0
        pre = call("graph_instantiate", exec=0, flags=0, nodes=GRAPH_SIM) if name.startswith("graph_") \
            and name != "graph_instantiate" else b""
        session_seeds["call_" + name] = hello() + SETUP + pre + call(name, bulk, **a)
        # decode: the first byte picks the call and the side
        write(dirs["decode"], "args_" + name, bytes([cid << 1]) + body(args, a))
        rv = {f: (b"\x01\x02\x03" if t == "blob" else "y" if t == "str" else 1) for t, f in rets}
        write(dirs["decode"], "rets_" + name, bytes([cid << 1 | 1]) + body(rets, rv))
    pick = ID["hello"] << 1  # hello's arguments; | 1: its results
    write(dirs["decode"], "args_hello",
          bytes([pick]) + body(CALLS["hello"][2], {"version": 1, "token": "t"}))
    write(dirs["decode"], "rets_hello",
          bytes([pick | 1]) + body(CALLS["hello"][3], {"name": "sim", "uuid": bytes(16)}))
    write(dirs["decode"], "empty_hello", bytes([0]))
    write(dirs["decode"], "huge_count", bytes([ID["mem_map"] << 1]) + HUGE_COUNT[32:])

    for k, v in session_seeds.items():
        write(dirs["session"], k, v)
        write(dirs["frames"], k, v)
    # the reader alone: a large bulk takes the path that bypasses its buffer
    big = bytes((i * 7) & 0xff for i in range(40000))
    # the graph blob walk alone
    write(dirs["graph"], "all_types", GRAPH_ALL)
    write(dirs["graph"], "header_only", graph())
    write(dirs["graph"], "chain", graph(*[gnode("empty", (i - 1,) if i else ()) for i in range(8)]))
    write(dirs["graph"], "kernel_params", graph(g_kernel(5, params=bytes(range(24)), attrs=bytes(16))))
    write(dirs["graph"], "truncated", GRAPH_ALL[:-3])
    write(dirs["frames"], "big_bulk", hello() + call("memcpy_htod", big, dst=ARENA_BASE, stream=0))


def stale(a, b):
    """files that differ between two corpus trees, or are in one only"""
    out = []
    for h in HARNESSES:
        c = filecmp.dircmp(os.path.join(a, h), os.path.join(b, h))
        out += [os.path.join(h, f) for f in c.left_only + c.right_only + c.diff_files]
        _, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files, shallow=False)
        out += [os.path.join(h, f) for f in mismatch + errors if os.path.join(h, f) not in out]
    return out


def main():
    corpus = os.path.join(HERE, "corpus")
    if sys.argv[1:] == ["--check"]:
        # a hello of an older shape never gets past the session's first
        # frame, so a stale corpus quietly fuzzes nothing but refusals
        with tempfile.TemporaryDirectory() as tmp:
            generate(tmp)
            bad = stale(tmp, corpus)
        if bad:
            print("tests/fuzz/corpus is stale (protocol/calls.def changed?); rerun "
                  "python3 tests/fuzz/make_seeds.py. Differs: " + " ".join(sorted(bad)))
            return 1
        return 0
    generate(corpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
