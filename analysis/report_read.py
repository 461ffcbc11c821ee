"""Reading a vitkd timing log for analysis/report.py: the format ("vitkd-timing" v1),
the Run it loads (timing.h5 and result.json), and the number formats of the text.
"""

import json
import math
import os
import numpy as np


FORMAT_NAME = "vitkd-timing"
FORMAT_VERSION = 1

# Phases that are waiting, not work: excluded from a rank's busy time.
WAIT_PHASES = ("data_wait", "comm_wait", "all_gather")
# Occasional phases (done once per epoch or run, some by one rank only):
# also excluded from busy time, so that they do not mask the per-step balance.
OCCASIONAL_PHASES = ("checkpoint", "eval")

STRAGGLER_TOLERANCE = 0.10   # busy > (1 + this) x the median rank's busy
SPIKE_MADS = 5.0             # spike: step time > median + SPIKE_MADS * MAD
MAD_FLOOR = 1e-3             # MAD floored at this fraction of the median
DATA_WAIT_FLAG = 0.01        # flag ranks whose data_wait exceeds 1% of step time
PERIOD_MIN_STEPS = 8         # no period search on fewer steps
PERIOD_STRENGTH = 0.5        # autocorrelation at the period for a "periodic" verdict
PERIOD_WEAK = 0.3            # ... and for a "weak" one
PERIOD_SWING = 0.05          # cycle swing (max-min of the folded cycle / mean) to report
MAX_LISTED = 5               # spikes listed in the text

NA = "n/a"


class FormatError(Exception):
    """An input that is missing or not a vitkd-timing v1 file."""


# ---------------------------------------------------------------------------
# small helpers

def _str(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray) and v.shape == ():
        return _str(v[()])
    return str(v)


def _strs(v):
    if v is None:
        return None
    arr = np.atleast_1d(np.asarray(v, dtype=object))
    return [_str(x) for x in arr.ravel()]


def _num(v, default=None):
    if v is None:
        return default
    try:
        arr = np.asarray(v)
        if arr.size != 1:
            return default
        x = float(arr.ravel()[0])
    except (TypeError, ValueError):
        return default
    return x if math.isfinite(x) else default


def ok(x):
    return x is not None and isinstance(x, (int, float, np.integer, np.floating)) and math.isfinite(float(x))


def f(x, spec=".3f", suffix=""):
    """Formats a number, or n/a for None/NaN/inf."""
    if not ok(x):
        return NA
    return format(float(x), spec) + suffix


def pct(x, digits=1):
    return f(100.0 * x, f".{digits}f", "%") if ok(x) else NA


def si(x, unit=""):
    """Engineering notation: 1.23 G, 456 M ..."""
    if not ok(x):
        return NA
    x = float(x)
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return out


def safe_div(a, b):
    if not ok(a) or not ok(b) or b == 0:
        return None
    return float(a) / float(b)


# ---------------------------------------------------------------------------
# loading and validation

class Run:
    """One run's timing log, validated; optional data is None when absent."""

    def __init__(self, run_dir):
        self.arg = run_dir
        if os.path.isfile(run_dir):
            self.path = run_dir
            self.dir = os.path.dirname(os.path.abspath(run_dir))
        else:
            self.dir = run_dir
            self.path = os.path.join(run_dir, "timing.h5")
        self.notes = []
        self._load()
        self.result = self._load_result()

    def _load(self):
        path = self.path
        if not os.path.isfile(path):
            raise FormatError(f"{path}: no such file (expected a vitkd timing log)")
        import h5py
        try:
            h5 = h5py.File(path, "r")
        except OSError as e:
            msg = " ".join(str(e).split())
            raise FormatError(f"{path}: not a readable HDF5 file ({msg})")
        with h5:
            a = h5.attrs
            fmt = _str(a["format"]) if "format" in a else None
            if fmt != FORMAT_NAME:
                raise FormatError(f"{path}: format attribute is {fmt!r}, expected {FORMAT_NAME!r}")
            ver = _num(a.get("format_version"))
            if ver is None or int(ver) != FORMAT_VERSION:
                raise FormatError(f"{path}: format_version is {a.get('format_version')!r}, "
                                  f"expected {FORMAT_VERSION}")
            self.attrs = {k: a[k] for k in a.keys()}
            self.mode = _str(a["mode"]) if "mode" in a else NA
            self.model = _str(a["model"]) if "model" in a else NA
            self.parameters = _num(a.get("parameters"))
            self.teacher_parameters = _num(a.get("teacher_parameters"))
            self.flops_per_sample = _num(a.get("flops_per_sample"))
            self.bytes_per_rank = _num(a.get("bytes_per_rank"))
            # The MFU ceiling in the precision the run computed in (attribute
            # compute); files before 0.4.0 have only the bf16 name.
            self.gemm_ceiling = _num(a.get("gemm_flops_per_core", a.get("gemm_bf16_flops_per_core")))
            self.compute = _str(a["compute"]) if "compute" in a else "bf16"
            self.threads = _num(a.get("threads_per_rank"))
            ws_attr = _num(a.get("world_size"))

            def ds(name, ndim, dtype=float):
                if name not in h5 or not isinstance(h5[name], h5py.Dataset):
                    return None
                d = h5[name]
                if d.ndim != ndim:
                    raise FormatError(f"{path}: /{name.lstrip('/')} has {d.ndim} dimensions, expected {ndim}")
                return np.asarray(d[()], dtype=dtype)

            st = ds("step_seconds", 3)
            if st is not None:
                phases = _strs(h5["step_seconds"].attrs.get("phases"))
                if phases is None:
                    phases = [f"phase{i}" for i in range(st.shape[2])]
                    self.notes.append("/step_seconds has no `phases` attribute; phases are numbered.")
                if len(phases) != st.shape[2]:
                    raise FormatError(f"{path}: /step_seconds has {st.shape[2]} phases but its "
                                      f"`phases` attribute names {len(phases)}")
            else:
                phases = []
                self.notes.append("/step_seconds is missing: no per-phase statistics.")
                r = int(ws_attr) if ws_attr else 1
                st = np.zeros((0, r, 0))
            self.step_seconds = st
            self.phases = phases
            self.steps, self.ranks = st.shape[0], st.shape[1]
            if ws_attr is not None and int(ws_attr) != self.ranks:
                self.notes.append(f"world_size attribute is {int(ws_attr)} but /step_seconds has "
                                  f"{self.ranks} ranks; using {self.ranks}.")
            self.world_size = self.ranks
            hosts = _strs(a.get("hostnames"))
            if hosts is None or len(hosts) != self.ranks:
                hosts = (hosts or []) + ["?"] * self.ranks
            self.hosts = hosts[:self.ranks]

            def ranked(name):
                d = ds(name, 2)
                if d is None:
                    return None
                if d.shape != (self.steps, self.ranks):
                    self.notes.append(f"/{name} has shape {d.shape}, expected "
                                      f"{(self.steps, self.ranks)}; ignored.")
                    return None
                return d

            wall = ranked("step_wall_seconds")
            if wall is None:
                self.notes.append("/step_wall_seconds missing: step wall time taken as the sum of the phases.")
                wall = st.sum(axis=2)
            self.wall = wall
            self.cpu_user = ranked("cpu_user_seconds")
            self.cpu_system = ranked("cpu_system_seconds")

            def group(gname, keys):
                out = {}
                for k in keys:
                    d = ds(f"{gname}/{k}", 1)
                    out[k] = d if d is not None and d.size > 0 else None
                return out

            self.metrics = group("metrics", ("step", "epoch", "loss", "lr", "kept_fraction",
                                             "images_per_second", "samples_seen",
                                             "samples_trained", "teacher_forwards"))
            self.eval = group("eval", ("step", "epoch", "test_top1"))

        ms = self.metrics.get("step")
        if ms is not None and len(ms) == self.steps:
            self.step_numbers = ms.astype(np.int64)
        else:
            self.step_numbers = np.arange(1, self.steps + 1, dtype=np.int64)

    def _load_result(self):
        p = os.path.join(self.dir, "result.json")
        if not os.path.isfile(p):
            return None
        try:
            with open(p) as fh:
                return json.load(fh)
        except (OSError, ValueError) as e:
            self.notes.append(f"{p} unreadable ({e}); ignored.")
            return None

    def phase_index(self, name):
        return self.phases.index(name) if name in self.phases else None


# ---------------------------------------------------------------------------
# analysis
