"""Memory budgets: parsed once at the estimator boundary, planned here, taken as bytes inside.

A budget is given by the user as ``max_memory`` (bytes, or a string such as ``"2GB"`` /
``"512MiB"``; None means :func:`default_memory_budget`, half of the memory available now; inside
a dask worker, half of that worker's memory limit divided by its threads, see
:func:`dask_worker_memory`).
Estimators call :func:`parse_memory` once; everything below them takes a number of bytes. Every
public method of an estimator runs inside :func:`one_reading` (kernelscale.base.boundary), so
that ``max_memory=None`` is ONE reading of the free memory per call, however many solvers,
classes or pairs the call plans for: the budget cannot drift while a fit allocates.
:func:`rows_per_block` and :func:`plan_rows` are the only row-chunk planners: a block of rows is
as large as the budget allows, and never so large that it stops paying for itself.
The first call of an estimator's method in a process may load compiled code first
(:mod:`kernelscale.base.warmup`); what that adds to the resident set is taken off the budget for
the rest of the call through :func:`budget_cap`.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import sys

import numpy as np

from .context import ACTIVE_BACKEND

__all__ = [
    "DEFAULT_MEMORY_FRACTION",
    "PLAN_HEADROOM",
    "MAX_BLOCK_BYTES",
    "MAX_CHUNK_ROWS",
    "available_memory",
    "dask_worker_memory",
    "default_memory_budget",
    "one_reading",
    "parse_memory",
    "format_bytes",
    "rows_per_block",
    "plan_rows",
    "check_fits",
    "largest_fitting",
    "ufunc_workspace_bytes",
    "budget_cap",
    "resident_bytes",
    "release_freed",
]

DEFAULT_MEMORY_FRACTION = 0.5
#: a plan that would fill the budget with blocks to its last byte keeps this share of it free:
#: beside the arrays an estimate counts, the interpreter, the allocator and the BLAS keep memory
#: of their own
PLAN_HEADROOM = 0.1
#: temporary kernel blocks stay below this size even under a larger budget: bigger blocks gain
#: no GEMM efficiency but pay for fresh pages (seconds per GB on some virtual machines)
MAX_BLOCK_BYTES = 256 * 2**20
#: row chunks of feature work stop here: larger chunks only cost memory, the GEMMs are efficient
MAX_CHUNK_ROWS = 8192
_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}


def available_memory():
    """Bytes of memory available to this process now (MemAvailable on Linux); inside a dask
    worker, the worker's share per thread (:func:`dask_worker_memory`) instead."""
    worker = dask_worker_memory()
    if worker is not None:
        return worker
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4 * 2**30


def dask_worker_memory():
    """``memory_limit / nthreads`` of the dask worker running this thread, or None outside a worker
    (or for a worker without a memory limit).

    A worker shares the host with other workers and runs ``nthreads`` tasks at once, each of which
    may plan blocks: the host's free memory would promise each of them all of it. Looked up only
    when ``distributed`` is already imported (it always is in a worker); never imports it.
    """
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        worker = distributed.get_worker()
    except (ValueError, AttributeError):  # not running in a worker
        return None
    manager = getattr(worker, "memory_manager", None)  # distributed >= 2022.5; older: worker.memory_limit
    limit = getattr(manager, "memory_limit", None) if manager is not None else getattr(worker, "memory_limit", None)
    if not limit:
        return None
    state = getattr(worker, "state", None)
    nthreads = getattr(state, "nthreads", None) or getattr(worker, "nthreads", None) or 1
    return int(limit) // max(1, int(nthreads))


#: the readings of the free memory made inside :func:`one_reading`: backend -> budget (or None
#: outside one)
_READINGS = contextvars.ContextVar("kernelscale_memory_readings", default=None)


@contextlib.contextmanager
def one_reading():
    """Within the block, the default budget is read once per backend (at its first use) and kept;
    nested blocks share the outer block's readings."""
    if _READINGS.get() is not None:
        yield
        return
    token = _READINGS.set({})
    try:
        yield
    finally:
        _READINGS.reset(token)


def resident_bytes():
    """This process's resident set in bytes now (Linux ``/proc/self/statm``; elsewhere the
    lifetime peak from getrusage, or 0 where neither exists)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import resource
    except ImportError:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) * (1 if sys.platform == "darwin" else 1024)


_TRIM = None  # glibc's malloc_trim, False where the C library has none


def release_freed():
    """Give the heap's free pages back to the system (glibc's ``malloc_trim(0)``; nothing
    elsewhere). glibc keeps up to twice its largest recently freed block (64 MiB at most) of
    free heap resident, so a loop whose temporaries change size between iterations holds more
    than its live arrays. An iterative fit calls this between iterations. It changes no allocator
    setting: a process-wide ``mallopt`` would slow every other fit (measurements:
    benchmarks/studies/compute_layer.md, "Memory of the first fit")."""
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes

            _TRIM = ctypes.CDLL(None).malloc_trim
            _TRIM.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError, TypeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


def default_memory_budget():
    """The budget used when ``max_memory=None``: half of the memory available now to the
    backend in use (host memory, or a GPU's free memory; in a dask worker, the worker's memory
    limit divided by its threads); inside :func:`one_reading`, the first such reading."""
    backend = ACTIVE_BACKEND.get()
    if getattr(backend, "device", None) is None:
        backend = None  # numpy: host memory
    readings = _READINGS.get()
    if readings is not None and backend in readings:
        return readings[backend]
    budget = int(DEFAULT_MEMORY_FRACTION * (available_memory() if backend is None else backend.available_memory()))
    if readings is not None:
        readings[backend] = budget
    return budget


#: the most bytes a budget may be in this context (None: no cap), set by :func:`budget_cap`
_CAP = contextvars.ContextVar("kernelscale_memory_cap", default=None)


@contextlib.contextmanager
def budget_cap(nbytes):
    """Within the block, every budget :func:`parse_memory` gives is at most ``nbytes`` (nested caps:
    the smallest): a distributed fit plans its tasks within a share of the workers' memory_limit
    (kernelscale.dask.memory); a first call takes off what loading its compiled code took
    (kernelscale.base.warmup)."""
    outer = _CAP.get()
    token = _CAP.set(int(nbytes) if outer is None else min(outer, int(nbytes)))
    try:
        yield
    finally:
        _CAP.reset(token)


def parse_memory(max_memory, name="max_memory"):
    """Bytes for a budget given as a number of bytes, a string like "2GB" / "512MiB", or None;
    at most the cap of :func:`budget_cap` inside one."""
    value = _parse_memory(max_memory, name)
    cap = _CAP.get()
    return value if cap is None else min(value, cap)


def _parse_memory(max_memory, name):
    if max_memory is None:
        return default_memory_budget()
    if isinstance(max_memory, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", max_memory)
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _UNITS:
            raise ValueError(
                f"{name}={max_memory!r} is not a memory size; use bytes (e.g. 2e9) or a string "
                f"such as '2GB', '512MB' or '1.5GiB'."
            )
        value = float(match.group(1)) * _UNITS[unit]
    elif isinstance(max_memory, (int, float, np.integer, np.floating)) and not isinstance(max_memory, bool):
        value = float(max_memory)
    else:
        raise TypeError(f"{name} must be a number of bytes, a string like '2GB', or None; got {max_memory!r}.")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive memory size, got {max_memory!r}.")
    return int(value)


def format_bytes(n):
    """``n`` bytes in human units (B, KiB, MiB, GiB, TiB)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def rows_per_block(n_rows, bytes_per_row, budget, *, fixed_bytes=0, what="kernel block", fix="increase max_memory"):
    """Largest number of rows (<= n_rows) whose blocks fit in ``budget - fixed_bytes`` bytes.

    Raises a ValueError saying how much is needed when not even one row fits.
    """
    room = budget - fixed_bytes
    if room < bytes_per_row:
        need = fixed_bytes + bytes_per_row
        raise ValueError(
            f"max_memory={format_bytes(budget)} is too small for one row of the {what}, which "
            f"needs {format_bytes(need)}; {fix} (to at least {need} bytes)."
        )
    return int(max(1, min(n_rows, room // bytes_per_row)))


def plan_rows(n, per_row, fixed, budget, what, fix, *, max_rows=MAX_CHUNK_ROWS):
    """Rows per chunk (at most ``max_rows``) so that ``fixed + rows * per_row`` bytes fit in
    ``budget`` (bytes, or anything :func:`parse_memory` takes); raises a ValueError naming
    ``fix`` when not even one row fits."""
    budget = parse_memory(budget)
    if fixed + per_row > budget:
        raise ValueError(
            f"max_memory={format_bytes(budget)} is too small for {what}, which needs at least "
            f"{format_bytes(fixed + per_row)} ({fixed + per_row} bytes); {fix}."
        )
    return min(max_rows, rows_per_block(n, per_row, budget, fixed_bytes=fixed, what=what, fix=fix))


def largest_fitting(fits, upper):
    """The largest size s in [0, upper] with ``fits(s)``, for a ``fits`` that holds up to some
    size and fails beyond it (memory grows with the size): 0 when not even 1 fits. Bisection,
    O(log upper) calls."""
    lo, hi = 0, int(upper)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def check_fits(need, budget, what, fix, *, exact_bytes=False):
    """Return ``need`` (bytes of one array about to be allocated) when it fits in ``budget``
    bytes; else a ValueError, before anything is allocated: "max_memory=<budget> is too small for
    <what> (<need>); <fix>." (``exact_bytes``: <need> also in bytes)."""
    if need > budget:
        size = f"{format_bytes(need)}, {need} bytes" if exact_bytes else format_bytes(need)
        raise ValueError(f"max_memory={format_bytes(budget)} is too small for {what} ({size}); {fix}.")
    return need


def ufunc_workspace_bytes():
    """Constant scratch numpy's ufuncs may allocate (buffered casts and strided outputs)."""
    return 4 * np.getbufsize() * 8
