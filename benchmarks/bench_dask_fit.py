"""Distributed fits over dask row chunks against the numpy fit (issue #15, second slice).

For GeneralizedLeastSquaresClassifier and StagewiseClassifier on synthetic data: the fit on a
numpy array, on a dask array with the synchronous scheduler, and on a LocalCluster of two
single-thread worker processes; the time of each (median of ``--repeat`` runs), the largest
relative difference of the coefficients from numpy's, and the task count of one pass.

    python benchmarks/bench_dask_fit.py [--n 100000] [--chunk 10000] [--repeat 3]

Writes benchmarks/results/dask_fit.json.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np


def _median_time(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "dask_fit.json"))
    args = parser.parse_args(argv)

    import dask
    import dask.array as da
    import distributed
    from sklearn.base import clone
    from sklearn.datasets import make_classification

    import kernelscale as ks

    X, y = make_classification(n_samples=args.n, n_features=args.d, n_informative=args.d // 2, n_classes=5,
                               random_state=0)
    Xd, yd = da.from_array(X, chunks=(args.chunk, args.d)), da.from_array(y, chunks=args.chunk)
    estimators = {
        "GeneralizedLeastSquaresClassifier(max_iter=20, tol=0)": ks.GeneralizedLeastSquaresClassifier(max_iter=20, tol=0),
        "StagewiseClassifier(block_size=256, n_stages=4)": ks.StagewiseClassifier(
            block_size=256, n_stages=4, pca_components=None, random_state=0),
    }
    results = {"n": args.n, "d": args.d, "chunk_rows": args.chunk, "row_chunks": len(Xd.chunks[0]),
               "repeat": args.repeat, "runs": []}
    warnings.simplefilter("ignore")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster, set_as_default=False) as client:
        for name, est in estimators.items():
            t_np, ref = _median_time(lambda: clone(est).fit(X, y), args.repeat)
            with dask.config.set(scheduler="synchronous"):
                t_sync, got_sync = _median_time(lambda: clone(est).fit(Xd, yd), args.repeat)
            with client.as_current():
                t_cluster, got_cluster = _median_time(lambda: clone(est).fit(Xd, yd), args.repeat)

            def rel(got):
                return float(np.abs(got.coef_ - ref.coef_).max() / np.abs(ref.coef_).max())

            run = {"estimator": name, "numpy_s": t_np, "dask_sync_s": t_sync, "local_cluster_2x1_s": t_cluster,
                   "coef_rel_diff_sync": rel(got_sync), "coef_rel_diff_cluster": rel(got_cluster),
                   "n_iter": int(ref.n_iter_)}
            results["runs"].append(run)
            print(json.dumps(run))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
