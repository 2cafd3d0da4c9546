"""Parallel efficiency of the distributed fits (issue #40 item 2): fit time at 1 and 2 workers, busy fraction.

Every estimator whose fit is distributed is fitted on the same data in one run, on a
``LocalCluster`` of one worker and then of two (one thread each, ``memory_limit`` 4 GB or
``--memory-limit``), each fit
after one warm-up fit of the same estimator on the same cluster (imports, numba). Recorded per
(estimator, workers): the fit's wall seconds, and the workers' busy fraction: the seconds of the
task stream (``distributed.get_task_stream``: the compute time of every task) divided by
workers x wall seconds. The speed-up is the 1-worker time over the 2-worker time.

Data: ``--n`` rows (default 100000) x ``--d`` features (default 30), float64, in 16 row chunks (synthetic: a
nonlinear function of four features; two classes for the classifiers); the fixed point's kernel
products are n^2 per iteration, so it uses ``n // 5`` rows. Iterations are capped (``CONFIGS``) so
that one fit takes seconds to a minute, and the sizes that follow the memory plan (SLKL's
n_components, the LS-SVM's batch_size) are fixed: "auto" resolves them within each worker's
room, which differs between one worker (holding all the rows) and two, and the fits would
differ in their work (measured at 250000 rows: J = 606 and 649, M = 1667 and 2000; after other
fits on the same cluster, J fell further at one worker and the LS-SVM "sped up" 0.8x). On a 2-core machine the speed-up is bounded by 2 and by
the client's own work (which shares the cores); run it alone (``flock`` on a shared machine).

Run::

    python -m benchmarks dask_efficiency [--n 100000] [--d 30] [--persisted] [--memory-limit 4GB] [--only NAME ...]

``--persisted`` persists X and y on the workers before the warm-up, so that the fit's time does
not include shipping the in-memory array in the graph (a record says which).

Writes ``benchmarks/results/dask_efficiency.json`` (a run of some estimators keeps the others):
per (estimator, workers) the measurement above, and in the results' common fields
(benchmarks/README.md) the 2-worker fit as "ours" beside the 1-worker fit as its peer, with the
speed-up as its metric, so that ``python -m benchmarks report`` puts them in RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parents[1] / "results" / "dask_efficiency.json"
D, CHUNKS = 30, 16
CONFIGS = {
    "GeneralizedLeastSquaresClassifier": {},
    "CalibratedLeastSquaresClassifier": {},
    "StagewiseClassifier": {"n_stages": 3, "random_state": 0},
    "StagewiseRegressor": {"n_stages": 3, "random_state": 0},
    "SLKLRegressor": {"n_components": 1500, "random_state": 0},
    "SLKLClassifier": {"n_components": 1500, "random_state": 0},
    "RegularizedKernelRegressor": {"solver": "fixed_point", "max_iter": 5},
    "RegularizedKernelClassifier": {"solver": "fixed_point", "max_iter": 5},
    "LSSVMRegressor": {"n_iter": 5, "batch_size": 512, "random_state": 0},
    "LSSVMClassifier": {"n_iter": 5, "batch_size": 512, "random_state": 0},
    "DoublyStochasticRegressor": {"n_iter": 20, "random_state": 0},
    "DoublyStochasticClassifier": {"n_iter": 20, "random_state": 0},
}


def _data(n, classify, d=D):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    f = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.5 * X[:, 3]
    return X, ((f > 0).astype(np.int64) if classify else f + 0.1 * rng.normal(size=n))


def _method(name, workers, params):
    params = ", ".join(f"{k}={v!r}" for k, v in params.items())
    return f"{name}({params}) dask LocalCluster {workers} worker{'s' if workers > 1 else ''} x 1 thread"


def _common_fields(record, peer):
    """The results' common fields of a record (dataset, method, role, metrics, time, peer)."""
    name, workers = record["estimator"], record["workers"]
    task = "2 classes" if name.endswith("Classifier") else "regression"
    where = ", X persisted on the workers" if record.get("persisted") else ""
    record.update(dataset=f"synthetic {record['n']}x{record['d']}, {task}, {record['row_chunks']} row chunks{where}",
                  method=_method(name, workers, record["params"]), role="ours" if workers == 2 else "peer",
                  time_median_s=record["seconds"], times_s=[record["seconds"]], peak_memory_bytes=None)
    metrics = {"busy_fraction": record["busy_fraction"]}
    if workers == 2 and peer is not None:
        record["speedup"] = round(peer["seconds"] / record["seconds"], 2)
        metrics = {"speedup": record["speedup"], **metrics}
        record.update(peer=peer["method"], ratio_to_peer={"time_median_s": round(record["seconds"] / peer["seconds"], 3)})
    else:
        record.update(peer=None, ratio_to_peer={})
    record["metrics"] = metrics
    return record


def _key(record):
    """A record's place in the results: (estimator, workers, d, X persisted)."""
    return record["estimator"], record["workers"], record["d"], record.get("persisted", False)


def _fit(client, name, X, y, persisted=False):
    import dask.array as da
    import distributed

    import kernelscale

    rows = -(-X.shape[0] // CHUNKS)
    Xd, yd = da.from_array(X, chunks=(rows, X.shape[1])), da.from_array(y, chunks=rows)
    if persisted:  # the data on the workers before the clock starts, as a loaded dataset is
        Xd, yd = client.persist([Xd, yd])
        distributed.wait([Xd, yd])
    with client.as_current():
        getattr(kernelscale, name)(**CONFIGS[name]).fit(Xd[: 4 * rows], yd[: 4 * rows])  # warm-up
        with distributed.get_task_stream(client) as stream:
            start = time.perf_counter()
            getattr(kernelscale, name)(**CONFIGS[name]).fit(Xd, yd)
            wall = time.perf_counter() - start
    busy = sum(s["stop"] - s["start"] for t in stream.data for s in t.get("startstops", ())
               if s.get("action") == "compute")
    return wall, busy


def main(argv=None):
    import distributed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--only", action="append")
    parser.add_argument("--d", type=int, default=D,
                        help="features (30; 784, MNIST's width, gives the least-squares fits per-row work "
                             "that outweighs a pass's round trip)")
    parser.add_argument("--memory-limit", default="4GB",
                        help="each worker's memory_limit (4GB; at d = 784 give it 8GB: one worker of 4 GB holding "
                             "all of a 250000-row X is past dask's spill fraction with it, and its fits slow down)")
    parser.add_argument("--persisted", action="store_true",
                        help="persist X and y on the workers before the fits (otherwise each fit ships the "
                             "in-memory array in its graph: 600 MB at d = 784)")
    args = parser.parse_args(argv)
    names = args.only or list(CONFIGS)
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"records": []}
    records = {_key(r): r for r in old["records"]}
    for workers in (1, 2):
        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                      memory_limit=args.memory_limit,
                                      dashboard_address=None, silence_logs=logging.CRITICAL) as cluster, \
                distributed.Client(cluster) as client:
            for name in names:
                n = args.n // 5 if CONFIGS[name].get("solver") == "fixed_point" else args.n
                X, y = _data(n, name.endswith("Classifier"), args.d)
                wall, busy = _fit(client, name, X, y, args.persisted)
                record = {"estimator": name, "workers": workers, "n": n, "d": args.d, "persisted": args.persisted,
                          "row_chunks": CHUNKS, "params": CONFIGS[name], "memory_limit": args.memory_limit,
                                            "seconds": round(wall, 2), "busy_fraction": round(busy / (workers * wall), 3),
                          "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                records[_key(record)] = record
                print(f"{name:36s} workers={workers} {wall:7.2f} s busy={busy / (workers * wall):.2f}", flush=True)
    for key in sorted(records, key=lambda key: key[1]):  # the 1-worker peers first
        name, workers, d, persisted = key
        _common_fields(records[key], records.get((name, 1, d, persisted)) if workers == 2 else None)
    from benchmarks.harness import machine_info

    RESULTS.write_text(json.dumps({
        "benchmark": "dask_efficiency", "suite": "dask_efficiency", "schema_version": 1, "quick": False,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine_info(),
        "paper": {"source": "issue #40 item 2: two workers at least 1.8x one, for every distributed estimator"},
        "records": sorted(records.values(), key=lambda r: (r["estimator"], r["d"], r.get("persisted", False),
                                                           r["workers"]))}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
