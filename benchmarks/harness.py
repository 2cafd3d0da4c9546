"""Common runner of the kernelscale benchmarks: timing, peak memory, result records, tables, plots.

A suite is a module of a subpackage (``benchmarks/papers/``, ``studies/``, ``perf/``) with
``SUITE = "<name>"`` and ``run(quick=False, out_dir=None) -> Path`` that measures with
:func:`measure` (or :func:`measure_many` to interleave competitors), collects records in a
:class:`Suite` and writes ``benchmarks/results/<name>.json`` in the schema documented in
``benchmarks/README.md``. :func:`scripts` lists every runnable module of the subpackages (suites
and tools) without importing them, :func:`find_script` resolves a short name (``slkl``,
``dsg-stream``, ``refactor_check``, a suite's name such as ``fused-matvec``) and
:func:`load_suite` imports a suite; ``python -m benchmarks NAME`` runs one.

Timings are medians of repeated runs; comparisons are ratios to a peer measured in the same run.
Peak memory is the process's resident set size (RSS) above its level at the start of a call, so
memory allocated by C libraries (LIBSVM, BLAS, VW) counts as well as numpy's.

Only the standard library is needed at import; numpy/scipy/scikit-learn versions, threadpoolctl
and matplotlib are looked up when present.
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import datetime as _dt
import gc
import importlib
import importlib.util
import json
import logging
import math
import multiprocessing as mp
import os
import platform
import statistics
import sys
import threading
import time
import traceback
import tracemalloc as _tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

logger = logging.getLogger("kernelscale.benchmarks")

#: benchmarks/ (this package), the results it writes and reads, and the repository around it
BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
ROOT = BENCH_DIR.parent
TESTS_DIR = ROOT / "tests"
#: the subpackages of runnable modules, in the order ``python -m benchmarks --list`` shows them
FOLDERS = ("papers", "studies", "perf", "tools")
SCHEMA_VERSION = 1
ROLES = ("ours", "peer", "paper")
TOP_LEVEL_KEYS = ("schema_version", "suite", "created", "quick", "machine", "records", "paper")
RECORD_KEYS = (
    "dataset", "method", "role", "params", "metrics", "time_median_s", "times_s",
    "peak_memory_bytes", "peer", "ratio_to_peer",
)
#: metrics in the order a table or plot prefers them as "the" metric of a record
MAIN_METRICS = ("test_error", "mse", "rmse", "error", "gflops", "accuracy")
ERROR_METRICS = ("test_error", "mse", "rmse", "error")


# ----------------------------------------------------------------------------------------------
# small numerics


def median(values):
    """Median of a non-empty sequence of numbers (mean of the two middle ones for even length)."""
    values = list(values)
    if not values:
        raise ValueError("median of an empty sequence; measure at least one repeat.")
    return float(statistics.median(values))


def ratio(ours, peer):
    """``ours / peer``, or None when either is missing, not finite, or the peer is zero."""
    try:
        ours, peer = float(ours), float(peer)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(ours) and math.isfinite(peer)) or peer == 0.0:
        return None
    return ours / peer


def gemm_flops(n, m, d, k=0):
    """Floating-point operations of an (n, d) x (d, m) product, plus an (n, m) x (m, k) one."""
    return 2.0 * n * m * d + 2.0 * n * m * k


def task_error(task, pred, y):
    """The error the studies score with: root mean squared error for ``task == "regression"``,
    the fraction misclassified otherwise."""
    import numpy as np

    if task == "regression":
        return float(np.sqrt(np.mean((np.asarray(pred, float).ravel() - y) ** 2)))
    return float(np.mean(np.asarray(pred) != y))


def error_ratio(task, err, peer_err, n_val):
    """``err / peer_err`` as the robustness goal reads it: for classification one point of
    ``n_val`` validation points of slack (an error within one point of a perfect peer is 0, any
    other error against a perfect peer infinity); None when ``err`` is None."""
    if err is None:
        return None
    if task == "classification":
        return (err - 1.0 / n_val) / peer_err if peer_err > 0 else (0.0 if err <= 1.0 / n_val else math.inf)
    return err / peer_err


# ----------------------------------------------------------------------------------------------
# memory


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _open_statm():
    try:
        return os.open("/proc/self/statm", os.O_RDONLY)
    except OSError:
        return None


def _ru_maxrss_bytes():
    """Lifetime peak RSS from getrusage (KiB on Linux, bytes on macOS), or None."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def current_rss(fd=None):
    """Resident set size of this process in bytes (from /proc/self/statm; getrusage fallback)."""
    close = False
    if fd is None:
        fd, close = _open_statm(), True
    if fd is not None:
        try:
            return int(os.pread(fd, 128, 0).split()[1]) * _PAGE_SIZE
        except (OSError, IndexError, ValueError):
            pass
        finally:
            if close:
                os.close(fd)
    # no procfs: the lifetime peak is the best available estimate
    return _ru_maxrss_bytes() or 0


def _reset_hwm():
    """Reset the kernel's peak-RSS counter VmHWM (Linux >= 4.0); True when it worked."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _read_hwm():
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _release_free_memory(full=True):
    """Collect garbage and give freed heap pages back to the OS, so a call starts from a clean RSS.

    A full collection can take ~0.1 s in a process holding scikit-learn; ``full=False`` collects
    the young generations only (enough between calls of one measurement).
    """
    gc.collect() if full else gc.collect(1)
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass  # not glibc


class PeakMemory:
    """Context manager measuring the peak RSS of the process above its level on entry.

    Three sources, the largest wins: VmHWM after resetting it through /proc/self/clear_refs
    (exact, Linux), a background thread sampling /proc/self/statm every ``interval`` seconds
    (catches C allocations between samples only when they last longer than ``interval`` or hold
    no GIL), and getrusage's lifetime peak when the call raised it. ``use_hwm=False`` leaves the
    sampler alone (for testing it). ``peak_bytes`` is set on exit.
    """

    def __init__(self, interval=0.003, *, use_hwm=True):
        self.interval = float(interval)
        self.use_hwm = use_hwm
        self.baseline = 0
        self.peak_rss = 0
        self.peak_bytes = None
        self.method = None
        self._fd = None
        self._stop = threading.Event()
        self._thread = None

    def _sample_loop(self):
        while not self._stop.wait(self.interval):
            rss = current_rss(self._fd)
            if rss > self.peak_rss:
                self.peak_rss = rss

    def __enter__(self):
        self._fd = _open_statm()
        self._hwm = self.use_hwm and self._fd is not None and _reset_hwm()
        self._ru_before = _ru_maxrss_bytes()
        self.baseline = self.peak_rss = current_rss(self._fd)
        if self._fd is not None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._sample_loop, name="peak-rss", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        self.peak_rss = max(self.peak_rss, current_rss(self._fd))
        self.method = "statm-sampler" if self._fd is not None else "getrusage"
        if self._hwm:
            hwm = _read_hwm()
            if hwm is not None and hwm > self.peak_rss:
                self.peak_rss, self.method = hwm, "vmhwm"
        ru_after = _ru_maxrss_bytes()
        if ru_after is not None and self._ru_before is not None and ru_after > self._ru_before:
            self.peak_rss = max(self.peak_rss, ru_after)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.peak_bytes = max(0, int(self.peak_rss - self.baseline))
        return False


# ----------------------------------------------------------------------------------------------
# timing


@dataclass
class Measurement:
    """Timings of repeated calls: ``times`` (s, warmup excluded), their ``median``, the peak
    memory above the start of a call (max over all calls, warmup included, in bytes; None when
    not measured), the ``result`` of the last call, and the tracemalloc peak when asked for."""

    times: list
    median: float
    peak_memory_bytes: int | None
    result: Any = None
    tracemalloc_peak_bytes: int | None = None

    def record_fields(self):
        """The timing fields of a result record."""
        return {
            "time_median_s": self.median,
            "times_s": list(self.times),
            "peak_memory_bytes": self.peak_memory_bytes,
        }


class _Timer:
    """One competitor of a measurement: runs calls and accumulates times and memory peaks."""

    def __init__(self, fn, memory, tracemalloc, keep_result):
        self.fn, self.memory, self.tracemalloc, self.keep_result = fn, memory, tracemalloc, keep_result
        self.times, self.peak, self.tm_peak, self.result = [], None, None, None

    def call(self, timed, full_gc=False):
        self.result = None  # free the previous result before measuring the next call
        _release_free_memory(full_gc)
        tm_base = None
        if self.tracemalloc:
            if not _tracemalloc.is_tracing():
                _tracemalloc.start()
            _tracemalloc.reset_peak()
            tm_base = _tracemalloc.get_traced_memory()[0]
        sampler = PeakMemory() if self.memory else None
        if sampler is not None:
            sampler.__enter__()
        try:
            start = time.perf_counter()
            result = self.fn()
            elapsed = time.perf_counter() - start
        finally:
            if sampler is not None:
                sampler.__exit__(None, None, None)
        if sampler is not None:
            self.peak = max(self.peak or 0, sampler.peak_bytes)
        if tm_base is not None:
            self.tm_peak = max(self.tm_peak or 0, _tracemalloc.get_traced_memory()[1] - tm_base)
        if timed:
            self.times.append(elapsed)
        self.result = result if self.keep_result else None
        del result

    def measurement(self):
        return Measurement(list(self.times), median(self.times), self.peak, self.result, self.tm_peak)


def _check_counts(repeats, warmup):
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}.")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}.")


def measure(fn: Callable[[], Any], repeats=3, warmup=1, *, memory=True, tracemalloc=False,
            keep_result=True) -> Measurement:
    """Call ``fn()`` ``warmup`` times untimed, then ``repeats`` times timed.

    Returns a :class:`Measurement` with the wall-clock times, their median, the peak RSS above the
    start of a call (``memory=False`` skips it) and the last result. ``tracemalloc=True`` also
    records the peak of Python-level allocations (it slows Python code, so it is off by default).
    """
    _check_counts(repeats, warmup)
    timer = _Timer(fn, memory, tracemalloc, keep_result)
    for i in range(warmup + repeats):
        timer.call(timed=i >= warmup, full_gc=i == 0)
    return timer.measurement()


def measure_many(fns: dict, repeats=3, warmup=1, *, memory=True, tracemalloc=False,
                 keep_result=False) -> dict:
    """Measure several competitors in interleaved rounds, the order rotating each round
    (a, b, c, then b, c, a, then c, a, b, ...).

    Interleaving spreads background load and drift evenly over the competitors, and rotating
    the order keeps any one of them from always running after the same neighbour (on virtual
    machines the first large allocation after a quiet spell can cost seconds of page faults).
    Returns ``{name: Measurement}`` in the order of ``fns``.
    """
    _check_counts(repeats, warmup)
    timers = [(name, _Timer(fn, memory, tracemalloc, keep_result)) for name, fn in fns.items()]
    for i in range(warmup + repeats):
        shift = i % len(timers) if timers else 0
        for j, (name, timer) in enumerate(timers[shift:] + timers[:shift]):
            logger.debug("%s: call %d", name, i)
            timer.call(timed=i >= warmup, full_gc=i == 0 and j == 0)
    return {name: timer.measurement() for name, timer in timers}


# ----------------------------------------------------------------------------------------------
# machine description


def run_capped(fn, cap_s):
    """Run ``fn()`` in a forked child (the parent's arrays, copy-on-write) killed after ``cap_s``
    seconds; returns ("ok", result) | ("error", traceback text) | ("timeout", None)."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child():
        try:
            send.send(("ok", fn()))
        except BaseException:  # noqa: BLE001 - report anything to the parent
            send.send(("error", traceback.format_exc(limit=3)))
        finally:
            send.close()
            os._exit(0)

    proc = ctx.Process(target=child)
    proc.start()
    send.close()
    try:
        if recv.poll(cap_s):
            status, out = recv.recv()
        else:
            status, out = "timeout", None
    except EOFError:
        status, out = "error", "child died (out of memory?)"
    if proc.is_alive():
        proc.kill()
    proc.join(10)
    return status, out


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _total_memory():
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _version(dist):
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return None
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _blas_info():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    keys = ("user_api", "internal_api", "version", "num_threads", "threading_layer", "architecture")
    return [{k: info.get(k) for k in keys} for info in threadpool_info()]


def _load_average():
    """1, 5 and 15 minute load averages (other work on the machine skews timings), or None."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def machine_info():
    """What the results were measured on: CPU, cores, memory, library versions, BLAS."""
    try:
        n_usable = len(os.sched_getaffinity(0))
    except AttributeError:
        n_usable = os.cpu_count()
    return {
        "load_average": _load_average(),
        "cpu_model": _cpu_model(),
        "n_cores": os.cpu_count(),
        "n_cores_usable": n_usable,
        "memory_bytes": _total_memory(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "sklearn": _version("scikit-learn"),
        "kernelscale": _version("kernelscale"),
        "blas": _blas_info(),
    }


# ----------------------------------------------------------------------------------------------
# records and result files


def _clean(value):
    """JSON-safe copy: numpy scalars/arrays to Python, NaN/inf to None, paths to str."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _clean(value.tolist())  # numpy scalar or array
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "__float__"):
        return _clean(float(value))
    return str(value)


def make_record(dataset, method, *, role="ours", params=None, metrics=None, measurement=None,
                time_median_s=None, times_s=None, peak_memory_bytes=None, peer=None,
                ratio_to_peer=None, notes=None):
    """One result record (see benchmarks/README.md); timing fields come from ``measurement``
    unless given explicitly (paper records have none)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}.")
    if measurement is not None:
        fields_ = measurement.record_fields()
        time_median_s = fields_["time_median_s"] if time_median_s is None else time_median_s
        times_s = fields_["times_s"] if times_s is None else times_s
        peak_memory_bytes = fields_["peak_memory_bytes"] if peak_memory_bytes is None else peak_memory_bytes
    record = {
        "dataset": str(dataset),
        "method": str(method),
        "role": role,
        "params": dict(params or {}),
        "metrics": dict(metrics or {}),
        "time_median_s": time_median_s,
        "times_s": list(times_s or []),
        "peak_memory_bytes": peak_memory_bytes,
        "peer": peer,
        "ratio_to_peer": dict(ratio_to_peer or {}),
    }
    if notes:
        record["notes"] = str(notes)
    return record


def compare(record, peer_record, metrics=None):
    """Set ``record``'s peer and ``ratio_to_peer`` = ours / peer for each metric both records
    have, and for ``time_median_s`` and ``peak_memory_bytes``; returns the ratios."""
    names = metrics
    if names is None:
        names = [m for m in record["metrics"] if m in peer_record["metrics"]]
        names += ["time_median_s", "peak_memory_bytes"]
    ratios = {}
    for name in names:
        ours = record["metrics"].get(name, record.get(name))
        theirs = peer_record["metrics"].get(name, peer_record.get(name))
        value = ratio(ours, theirs)
        if value is not None:
            ratios[name] = value
    record["peer"] = peer_record["method"]
    record["ratio_to_peer"] = ratios
    return ratios


def validate_result(doc):
    """Raise ValueError naming what is missing or wrong in a result document; return it."""
    if not isinstance(doc, dict):
        raise ValueError(f"a result document is a JSON object, got {type(doc).__name__}.")
    missing = [k for k in TOP_LEVEL_KEYS if k not in doc]
    if missing:
        raise ValueError(f"result document lacks the keys {missing}.")
    if doc["schema_version"] != SCHEMA_VERSION:
        raise ValueError(f"schema_version {doc['schema_version']!r} is not {SCHEMA_VERSION}.")
    if not isinstance(doc["records"], list):
        raise ValueError("'records' must be a list.")
    for i, rec in enumerate(doc["records"]):
        missing = [k for k in RECORD_KEYS if k not in rec]
        if missing:
            raise ValueError(f"record {i} ({rec.get('method')!r}) lacks the keys {missing}.")
        if rec["role"] not in ROLES:
            raise ValueError(f"record {i} has role {rec['role']!r}; use one of {ROLES}.")
        for key in ("params", "metrics", "ratio_to_peer"):
            if not isinstance(rec[key], dict):
                raise ValueError(f"record {i}: {key!r} must be an object.")
    return doc


def read_result(path):
    """Load and validate a result JSON file."""
    with open(path) as fh:
        return validate_result(json.load(fh))


class Suite:
    """Collects the records of one benchmark suite and writes ``<out_dir>/<name>.json``
    (``<name>-quick.json`` when ``quick``).

    ``paper`` holds published numbers printed beside ours (free-form JSON object).
    """

    def __init__(self, name, quick=False, out_dir=None, paper=None):
        self.name = str(name)
        self.quick = bool(quick)
        self.out_dir = Path(out_dir) if out_dir is not None else RESULTS_DIR
        self.paper = dict(paper or {})
        self.records = []
        self.created = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
        self.load_at_start = _load_average()

    def add(self, dataset, method, **kwargs):
        """Append a record built by :func:`make_record` and return it."""
        record = make_record(dataset, method, **kwargs)
        self.records.append(record)
        return record

    compare = staticmethod(compare)

    def to_dict(self):
        machine = machine_info()
        machine["load_average_at_start"] = self.load_at_start
        return _clean({
            "schema_version": SCHEMA_VERSION,
            "suite": self.name,
            "created": self.created,
            "quick": self.quick,
            "machine": machine,
            "records": self.records,
            "paper": self.paper,
        })

    @property
    def stem(self):
        """``<name>``, or ``<name>-quick`` for quick runs (so they never overwrite a full run)."""
        return f"{self.name}-quick" if self.quick else self.name

    @property
    def path(self):
        return self.out_dir / f"{self.stem}.json"

    def write(self, plot=True):
        """Write the JSON (and, with ``plot``, the error-vs-time PNG when it applies)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        doc = validate_result(self.to_dict())
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "w") as fh:
            json.dump(doc, fh, indent=1, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, self.path)
        logger.info("wrote %s", self.path)
        if plot and any(main_metric(r, ERROR_METRICS) for r in self.records):
            plot_error_vs_time(self.records, self.out_dir / f"{self.stem}.png", title=self.stem)
        return self.path


# ----------------------------------------------------------------------------------------------
# tables and plots


def main_metric(record, preference=MAIN_METRICS):
    """``(name, value)`` of a record's headline metric, or None."""
    for name in preference:
        if record["metrics"].get(name) is not None:
            return name, record["metrics"][name]
    if preference is MAIN_METRICS:
        for name, value in record["metrics"].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return name, value
    return None


def _fmt(value, spec=".4g"):
    if value is None:
        return "-"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def format_bytes(n):
    if n is None:
        return "-"
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def format_table(records):
    """Plain-text table of records: dataset, method, role, main metric, time, memory, ratios."""
    header = ["dataset", "method", "role", "metric", "median s", "peak mem", "vs peer"]
    rows = []
    for rec in records:
        metric = main_metric(rec)
        ratios = ", ".join(f"{k} x{v:.3g}" for k, v in rec["ratio_to_peer"].items())
        rows.append([
            rec["dataset"], rec["method"], rec["role"],
            "-" if metric is None else f"{metric[0]}={_fmt(metric[1])}",
            _fmt(rec["time_median_s"]), format_bytes(rec["peak_memory_bytes"]),
            f"{ratios} ({rec['peer']})" if rec["peer"] else "-",
        ])
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def print_table(records, file=None):
    """Print :func:`format_table` to stdout (benchmarks are scripts: printing is their output)."""
    print(format_table(records), file=file or sys.stdout)


def plot_error_vs_time(records, path, metric=None, title=None):
    """Scatter the error metric against the median time (log scale), one panel per dataset.

    Saved as PNG with matplotlib's Agg backend; returns the path, or None (logged) when
    matplotlib is missing or no record has an error metric and a time.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.info("matplotlib is not installed: skipping the plot %s (pip install matplotlib)", path)
        return None
    points = []
    for rec in records:
        found = main_metric(rec, (metric,) if metric else ERROR_METRICS)
        if found and rec["time_median_s"]:
            points.append((rec["dataset"], rec["method"], rec["role"], found[0], found[1], rec["time_median_s"]))
    if not points:
        logger.info("no record has an error metric and a time: skipping the plot %s", path)
        return None
    datasets = sorted({p[0] for p in points})
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4), squeeze=False)
    markers = {"ours": "o", "peer": "s", "paper": "^"}
    for ax, dataset in zip(axes[0], datasets):
        for _, method, role, name, value, seconds in (p for p in points if p[0] == dataset):
            ax.scatter(seconds, value, marker=markers[role], label=f"{method} ({role})")
            ax.set_ylabel(name)
        ax.set_xscale("log")
        ax.set_xlabel("median time (s)")
        ax.set_title(dataset)
        ax.legend(fontsize="x-small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    logger.info("wrote %s", path)
    return path


# ----------------------------------------------------------------------------------------------
# suites


@dataclass(frozen=True)
class Script:
    """A runnable file of a subpackage, read without importing it: a module with a ``main`` (a
    tool) or with ``SUITE`` and ``run`` (a suite; it has a ``main`` too), or a shell script."""

    name: str  #: the file name without its suffix: ``python -m benchmarks NAME``
    folder: str  #: one of FOLDERS
    path: Path
    suite: str | None  #: the module's SUITE (the results file's stem) when it is a suite
    summary: str  #: the first line of its docstring (of its first comment for a shell script)

    @property
    def module(self):
        """Dotted module name (``benchmarks.papers.slkl``); None for a shell script."""
        return f"benchmarks.{self.folder}.{self.name}" if self.path.suffix == ".py" else None


def _read_script(folder, path):
    """The :class:`Script` of ``path``, or None when it is not runnable (a shared module)."""
    if path.suffix == ".sh":
        comments = [line.lstrip("#").strip() for line in path.read_text(encoding="utf-8").splitlines()[1:]
                    if line.startswith("#")]
        return Script(path.stem, folder, path, None, next((c for c in comments if c), "").rstrip(",:"))
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    suite, names = None, set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SUITE" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                suite = node.value.value
    if "main" not in names and not (suite and "run" in names):
        return None
    doc = (ast.get_docstring(tree) or "").strip()
    summary = doc.splitlines()[0].rstrip(",:") if doc else ""
    return Script(path.stem, folder, path, suite if "run" in names else None, summary)


def scripts(folders=FOLDERS):
    """Every runnable file of the subpackages ``folders`` of benchmarks/, in folder order then
    by name. Nothing is imported: the files are parsed."""
    out = []
    for folder in folders:
        if not (BENCH_DIR / folder).is_dir():
            continue
        for path in sorted((BENCH_DIR / folder).iterdir()):
            if path.suffix in (".py", ".sh") and not path.name.startswith("_"):
                script = _read_script(folder, path)
                if script is not None:
                    out.append(script)
    return out


def _key(name):
    return str(name).strip().lower().replace("-", "_")


def find_script(name, suites_only=False):
    """The :class:`Script` called ``name``: its file name (``slkl``, ``dsg_stream``, ``gpu_run``),
    ``-`` and ``_`` alike, optionally with its folder (``papers.slkl``, ``papers/slkl.py``) or the
    former ``bench_`` prefix, or the name of its suite (``fused-matvec``, ``refactor-speed``).
    Raises ValueError listing the known names when there is none."""
    candidates = [s for s in scripts() if s.suite or not suites_only]
    key = _key(name)
    for suffix in (".py", ".sh"):
        key = key[: -len(suffix)] if key.endswith(suffix) else key
    folder, _, key = key.replace("/", ".").rpartition(".")
    if folder.startswith("benchmarks"):
        folder = folder[len("benchmarks"):].lstrip(".")
    for pick in (lambda s: _key(s.name) == key,
                 lambda s: s.suite is not None and _key(s.suite) == key,
                 lambda s: key.startswith("bench_") and _key(s.name) == key[len("bench_"):]):
        found = [s for s in candidates if pick(s) and (not folder or s.folder == folder)]
        if found:
            return found[0]
    known = ", ".join(s.name for s in candidates)
    kind = "benchmark suite" if suites_only else "benchmark script"
    raise ValueError(f"no {kind} {name!r} in {BENCH_DIR} (known: {known}).")


def list_suites():
    """The suites' short names (their file names), in folder order."""
    return [s.name for s in scripts() if s.suite]


def load_suite(name):
    """Import the suite called ``name`` (see :func:`find_script`) and return the module."""
    script = find_script(name, suites_only=True)
    module = importlib.import_module(script.module)
    if not callable(getattr(module, "run", None)) or not hasattr(module, "SUITE"):
        raise ValueError(f"{script.path} is not a benchmark suite: it needs SUITE and run(quick, out_dir).")
    return module


def run_suite(name, quick=False, out_dir=None):
    """Run suite ``name`` and return the path of the JSON it wrote."""
    return Path(load_suite(name).run(quick=quick, out_dir=out_dir))


def load_test_module(name):
    """The module ``tests/<name>.py`` of this checkout (``estimator_list``, ``estimator_fuzzing``,
    ``model_fuzzing``), imported by its path under its own name, as pytest imports it; a module of
    that name already imported is returned as is. tests/ is not a package and never goes on
    ``sys.path``: a test module importing another (``estimator_fuzzing`` imports
    ``estimator_list``) finds it in ``sys.modules``, so load that one first."""
    if name in sys.modules:
        return sys.modules[name]
    path = TESTS_DIR / f"{name}.py"
    if not path.is_file():
        raise ValueError(f"no test module {path}: the tools that use it run in a source checkout.")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up there
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def cli_main(run, argv=None, description=None, parts=None):
    """``python -m benchmarks NAME [--quick] [--out-dir DIR]``, plus ``[--part P]...`` for a
    suite made of ``parts`` (its ``run`` then takes ``parts=``, None meaning all of them)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes and fewer repeats")
    parser.add_argument("--out-dir", default=None, help=f"where results go (default {RESULTS_DIR})")
    if parts:
        parser.add_argument("--part", action="append", choices=parts,
                            help="run only these parts (repeatable), keeping the other parts' records")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    extra = {"parts": args.part} if parts else {}
    path = run(quick=args.quick, out_dir=args.out_dir, **extra)
    print(f"results: {path}")
    return 0
