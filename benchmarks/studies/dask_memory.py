"""Distributed fits within the workers' memory_limit (issue #40 item 4): fit or refuse, never a restart.

Every estimator whose fit is distributed over dask row chunks is fitted on a two-worker
``LocalCluster`` (one thread per worker) with a small ``memory_limit`` (300 MB and 1 GB by
default), on a 24 MiB float64 dask array (104857 rows x 30 features in 8 row chunks, as in the
issue's report), each fit in a fresh process with a fresh cluster, killed after ``--cap``
seconds. Recorded per (estimator, memory_limit):

- ``outcome``: "fit" (finished), "refused" (a ValueError from the fit), "error" (any other
  exception, e.g. KilledWorker) or "timeout";
- ``tasks_before_outcome``: the scheduler's transition count from the start of the fit to its
  end (0 for a refusal means nothing was submitted);
- ``restarts``: worker processes that died during the fit (their pids, read before and after);
- ``peak_bytes``: each worker's peak resident memory during the fit, sampled every 5 ms by a
  thread in the worker (started with ``Client.run``, which is not a task), and ``peak_fraction``,
  the largest peak over the memory_limit (the nanny pauses a worker at 0.8 and kills it at 0.95);
- ``seconds`` and, for a refusal, the message.

The fixed-point solver's kernel products are n^2 per iteration, so its fits use the first 20000
rows (``FIXED_POINT_ROWS``); iterative fits are capped in iterations so that a fit takes seconds
(``CONFIGS``: the parameters that differ from the defaults). ``--issue`` runs the three cases of
the issue at their defaults (LSSVMRegressor at 1 GB, StagewiseClassifier at 500 MB, SLKLRegressor
at 300 MB).

Run (heavy: two worker processes per fit; hold the CPU lock on a shared machine)::

    python -m benchmarks dask_memory [--limit 300MB --limit 1GB] [--only NAME ...] [--issue] [--cap 150]

Writes ``benchmarks/results/dask_memory.json`` (a run of some estimators or limits keeps the
other records).
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parents[1] / "results" / "dask_memory.json"
N, D, CHUNKS = 24 * 2**20 // (8 * 30), 30, 8
FIXED_POINT_ROWS = 20000
LIMITS = ("300MB", "1GB")
#: estimator -> (task, parameters other than the defaults)
CONFIGS = {
    "GeneralizedLeastSquaresClassifier": ("classification", {}),
    "CalibratedLeastSquaresClassifier": ("classification", {}),
    "StagewiseClassifier": ("classification", {"n_stages": 3, "random_state": 0}),
    "StagewiseRegressor": ("regression", {"n_stages": 3, "random_state": 0}),
    "SLKLRegressor": ("regression", {"random_state": 0}),
    "SLKLClassifier": ("classification", {"random_state": 0}),
    "RegularizedKernelRegressor": ("regression", {"solver": "fixed_point", "max_iter": 5}),
    "RegularizedKernelClassifier": ("classification", {"solver": "fixed_point", "max_iter": 5}),
    "LSSVMRegressor": ("regression", {"n_iter": 5, "random_state": 0}),
    "LSSVMClassifier": ("classification", {"n_iter": 5, "random_state": 0}),
    "DoublyStochasticRegressor": ("regression", {"n_iter": 20, "random_state": 0}),
    "DoublyStochasticClassifier": ("classification", {"n_iter": 20, "random_state": 0}),
}
ISSUE = (("LSSVMRegressor", "1GB"), ("StagewiseClassifier", "500MB"), ("SLKLRegressor", "300MB"))


def _data(task, n):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, D))
    f = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.5 * X[:, 3]
    if task == "classification":
        return X, (f > 0).astype(np.int64)
    return X, f + 0.1 * rng.normal(size=n)


# -- worker side: the peak resident memory, sampled by a thread ---------------------------------

_PEAK = {}


def _start_sampler():
    import os
    import threading

    import psutil

    proc = psutil.Process()
    _PEAK.update(peak=proc.memory_info().rss, run=True)

    def sample():
        while _PEAK.get("run"):
            _PEAK["peak"] = max(_PEAK["peak"], proc.memory_info().rss)
            time.sleep(0.005)

    threading.Thread(target=sample, daemon=True).start()
    return os.getpid()


def _read_peak():
    import os

    _PEAK["run"] = False
    return os.getpid(), int(_PEAK.get("peak", 0))


def _transitions(dask_scheduler):
    return int(dask_scheduler.transition_counter)


def run_one(name, limit, overrides=None):
    """One fit in this process: a fresh two-worker cluster with ``memory_limit=limit``."""
    import dask.array as da
    import distributed

    import kernelscale

    task, params = CONFIGS[name]
    params = dict(params if overrides is None else overrides)
    n = FIXED_POINT_ROWS if params.get("solver") == "fixed_point" else N
    X, y = _data(task, n)
    rows = -(-n // CHUNKS)
    est = getattr(kernelscale, name)(**params)
    record = {"estimator": name, "memory_limit": limit, "n": n, "d": D, "row_chunks": CHUNKS, "params": params}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=limit,
                                  dashboard_address=None, silence_logs=getattr(logging, __import__("os").environ.get("KS_LOG", "CRITICAL"))) as cluster, \
            distributed.Client(cluster) as client:
        Xd, yd = da.from_array(X, chunks=(rows, D)), da.from_array(y, chunks=rows)
        pids = client.run(_start_sampler)
        before = client.run_on_scheduler(_transitions)
        start = time.perf_counter()
        try:
            est.fit(Xd, yd)
            record["outcome"] = "fit"
            record["train_score"] = float(est.score(Xd[:20000], yd[:20000]))
        except ValueError as exc:
            record["outcome"], record["message"] = "refused", str(exc)
        except Exception as exc:  # noqa: BLE001 (what a failed fit raised is the record)
            record["outcome"], record["message"] = "error", f"{type(exc).__name__}: {str(exc)[:500]}"
        record["seconds"] = round(time.perf_counter() - start, 2)
        record["tasks_before_outcome"] = client.run_on_scheduler(_transitions) - before
        after = client.run(_read_peak)
        alive = {pid for pid, _ in after.values()}
        record["restarts"] = len(set(pids.values()) - alive)
        limit_bytes = min(w["memory_limit"] for w in client.scheduler_info()["workers"].values())
        record["memory_limit_bytes"] = int(limit_bytes)
        record["peak_bytes"] = sorted(peak for pid, peak in after.values() if pid in set(pids.values()))
        record["peak_fraction"] = round(max(record["peak_bytes"] or [0]) / limit_bytes, 3)
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", action="append", help="a worker memory_limit (repeatable)")
    parser.add_argument("--only", action="append", help="an estimator name (repeatable)")
    parser.add_argument("--issue", action="store_true", help="the issue's three cases at their defaults")
    parser.add_argument("--cap", type=float, default=150.0, help="seconds before a fit's process is killed")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # NAME LIMIT: run in this process
    parser.add_argument("--defaults", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        record = run_one(*args.one, overrides={"random_state": 0} if args.defaults else None)
        print("RECORD " + json.dumps(record))
        return 0
    cases = [(name, limit, False) for limit in (args.limit or LIMITS) for name in (args.only or CONFIGS)]
    if args.issue:
        cases = [(name, limit, True) for name, limit in ISSUE]
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"records": []}
    records = {(r["estimator"], r["memory_limit"], r.get("issue_case", False)): r for r in old["records"]}
    for name, limit, issue in cases:
        cmd = [sys.executable, "-m", "benchmarks", "dask_memory", "--one", name, limit] + (["--defaults"] if issue
                                                                                         else [])
        start = time.perf_counter()
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.cap)
            line = next((x for x in out.stdout.splitlines() if x.startswith("RECORD ")), None)
            record = json.loads(line[7:]) if line else {"estimator": name, "memory_limit": limit,
                                                        "outcome": "error", "message": out.stderr[-800:]}
        except subprocess.TimeoutExpired:
            record = {"estimator": name, "memory_limit": limit, "outcome": "timeout",
                      "seconds": round(time.perf_counter() - start, 1)}
        record["issue_case"] = issue
        records[(name, limit, issue)] = record
        peak = record.get("peak_fraction")
        print(f"{name:36s} {limit:>6s} {record['outcome']:8s} {record.get('seconds', ''):>7} s "
              f"restarts={record.get('restarts', '?')} tasks={record.get('tasks_before_outcome', '?')} "
              f"peak/limit={peak}", flush=True)
        RESULTS.write_text(json.dumps({"study": "dask_memory", "safe_fraction_note": "see kernelscale.dask.memory",
                                       "records": sorted(records.values(), key=lambda r: (
                                           r.get("issue_case", False), r["memory_limit"], r["estimator"]))},
                                      indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
