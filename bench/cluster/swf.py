"""Read and write the Standard Workload Format (SWF, version 2.2).

SWF is the format of the Parallel Workloads Archive
(https://www.cs.huji.ac.il/labs/parallel/workload/swf.html): one job per
line, 18 whitespace-separated numeric fields, -1 for "unknown", and header
lines that start with ';' (e.g. "; MaxProcs: 400").

The 18 fields, and what the cluster simulation (bench/cluster/) makes of them.
"Processors" are GPUs here.

  #   SWF field                               used here as
  1   job number                              job id
  2   submit time (s)                         submit time
  3   wait time (s)                           -1 in a generated trace; the
                                              simulated wait in a trace the
                                              simulator writes back
  4   run time (s)                            native run time: seconds the
                                              job needs on local GPUs (input);
                                              the simulated run time in output
  5   number of allocated processors          GPUs
  6   average CPU time used (s)               not used (-1)
  7   used memory (KB per processor)          ferry: live GPU memory per GPU,
                                              KiB (what a migration copies)
  8   requested number of processors          GPUs (the simulator reads this,
                                              falling back to field 5)
  9   requested time (s)                      the wall-time limit the user
                                              asked for (EASY backfilling
                                              plans with it)
  10  requested memory (KB per processor)     not used (-1)
  11  status                                  1 (completed)
  12  user id                                 user (not used by the scheduler)
  13  group id                                not used (-1)
  14  executable (application) number         ferry: job class, 1 compute-bound,
                                              2 mixed, 3 data-heavy (sets the
                                              remote slowdown)
  15  queue number                            not used (-1)
  16  partition number                        not used (-1)
  17  preceding job number                    not used (-1)
  18  think time from preceding job (s)       not used (-1)

Values are kept as int where they are integral and float otherwise (SWF
allows floating point time fields).
"""

FIELDS = (
    "job", "submit", "wait", "run", "alloc_procs", "avg_cpu", "used_mem",
    "req_procs", "req_time", "req_mem", "status", "user", "group",
    "executable", "queue", "partition", "preceding_job", "think_time",
)
NFIELDS = len(FIELDS)  # 18


def _num(text):
    try:
        return int(text)
    except ValueError:
        v = float(text)
        return int(v) if v.is_integer() and abs(v) < 2**53 else v


def _fmt(v):
    if isinstance(v, float):
        if v.is_integer():
            return str(int(v))
        return repr(round(v, 3)) if abs(v - round(v, 3)) < 1e-9 else repr(v)
    return str(v)


def parse(lines):
    """(header, records) from an iterable of lines.

    header: the comment lines, without the leading ';' and surrounding
    blanks, in order. records: one dict per job, keyed by FIELDS. A line
    with other than 18 fields raises ValueError naming its line number.
    """
    header, records = [], []
    for lineno, line in enumerate(lines, 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith(";"):
            header.append(s[1:].strip())
            continue
        parts = s.split()
        if len(parts) != NFIELDS:
            raise ValueError(f"SWF line {lineno}: {len(parts)} fields, expected {NFIELDS}")
        records.append(dict(zip(FIELDS, (_num(p) for p in parts))))
    return header, records


def read(path):
    """(header, records) of an SWF file; see parse()."""
    with open(path) as f:
        return parse(f)


def header_value(header, key, default=None):
    """The value of a "Key: value" header line, as a string, or default."""
    prefix = key.lower() + ":"
    for h in header:
        if h.lower().startswith(prefix):
            return h[len(prefix):].strip()
    return default


def record(**kw):
    """A record with every field -1 except those given (by FIELDS name)."""
    r = {k: -1 for k in FIELDS}
    for k, v in kw.items():
        if k not in r:
            raise KeyError(f"unknown SWF field {k!r}")
        r[k] = v
    return r


def format_lines(records, header=()):
    out = [f"; {h}".rstrip() for h in header]
    for r in records:
        out.append(" ".join(_fmt(r[k]) for k in FIELDS))
    return out


def write(path, records, header=()):
    """Write header lines (each prefixed with '; ') and the records."""
    with open(path, "w") as f:
        for line in format_lines(records, header):
            f.write(line + "\n")
