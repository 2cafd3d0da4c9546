"""Distributed fits over dask row chunks against the numpy fit (issue #15, second slice).

For GeneralizedLeastSquaresClassifier and StagewiseClassifier on synthetic data: the fit on a
numpy array, on a dask array with the synchronous scheduler, and on a LocalCluster of two
single-thread worker processes; the time of each (median of ``--repeat`` runs), the largest
relative difference of the coefficients from numpy's, and the task count of one pass.

    python -m benchmarks dask_fit [--quick]

Writes benchmarks/results/dask-fit.json.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from benchmarks.harness import Suite, cli_main, compare, measure, print_table

SUITE = "dask-fit"


def run(quick=False, out_dir=None, *, n=None, d=32, chunk=None, repeats=None):
    """One run of the suite (module docstring); ``--quick``: 20000 rows in 4 chunks, 1 repeat."""
    import dask
    import dask.array as da
    import distributed
    from sklearn.base import clone
    from sklearn.datasets import make_classification

    import kernelscale as ks

    n = n or (20_000 if quick else 100_000)
    chunk = chunk or n // (4 if quick else 10)
    repeats = repeats or (1 if quick else 3)
    X, y = make_classification(n_samples=n, n_features=d, n_informative=d // 2, n_classes=5, random_state=0)
    Xd, yd = da.from_array(X, chunks=(chunk, d)), da.from_array(y, chunks=chunk)
    dataset = f"make_classification {n}x{d}, 5 classes, {len(Xd.chunks[0])} row chunks"
    estimators = {
        "GeneralizedLeastSquaresClassifier(max_iter=20, tol=0)": ks.GeneralizedLeastSquaresClassifier(max_iter=20, tol=0),
        "StagewiseClassifier(block_size=256, n_stages=4)": ks.StagewiseClassifier(
            block_size=256, n_stages=4, pca_components=None, random_state=0),
    }
    suite = Suite(SUITE, quick=quick, out_dir=out_dir, paper={
        "source": "issue #15: the same estimators on Dask; fits over row chunks equal numpy's to 1e-8"})
    warnings.simplefilter("ignore")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster, set_as_default=False) as client:
        for name, est in estimators.items():
            m = measure(lambda: clone(est).fit(X, y), repeats=repeats, warmup=0, keep_result=True)
            ref = m.result
            peer = suite.add(dataset, f"{name} numpy", role="peer", measurement=m)

            def rel(got):
                return float(np.abs(got.coef_ - ref.coef_).max() / np.abs(ref.coef_).max())

            for label, context in (("dask synchronous", dask.config.set(scheduler="synchronous")),
                                   ("dask LocalCluster 2 workers x 1 thread", client.as_current())):
                with context:
                    m = measure(lambda: clone(est).fit(Xd, yd), repeats=repeats, warmup=0, keep_result=True)
                rec = suite.add(dataset, f"{name} {label}", role="ours", measurement=m,
                                params={"n": n, "d": d, "chunk_rows": chunk, "n_iter": int(ref.n_iter_)},
                                metrics={"coef_rel_diff_to_numpy": rel(m.result)})
                compare(rec, peer, ["time_median_s"])
    path = suite.write(plot=False)
    print_table(suite.records)
    return path


def main(argv=None):
    return cli_main(run, argv, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
