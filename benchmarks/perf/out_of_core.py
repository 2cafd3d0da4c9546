"""A fit on data larger than its memory budget, on one machine (issue #15, "out of core").

X (float64, ``--rows`` x 64, about 1.1 GB by default) and its labels are written to ``.npy`` files
in a temporary directory. A child process fits ``GeneralizedLeastSquaresClassifier(max_iter=5,
tol=0, max_memory=BUDGET)`` on a dask array whose row chunks (50000 rows, 26 MB) are read from
the file by each task (``np.fromfile`` at the chunk's offset: anonymous memory, freed after the
task, unlike a memmap whose pages count in the resident set while mapped), with dask's
synchronous scheduler. Without a distributed client the distributed fit keeps X in this
process only within ``max_memory`` (:mod:`kernelscale.dask.fit`), so every pass reads the file
again, one chunk at a time. The child's peak resident set (VmHWM: the interpreter and its libraries
included; a child that only imports them and loads y gives the baseline) is the
measurement; goal: below the budget, with X at least twice the budget (``--quick`` is a smoke run:
its 96 MB budget is below the baseline). Another child fits the same model on the whole array in memory (numpy); the
coefficients must agree to 1e-8 relative (only the order of the sums differs).

Run: ``python -m benchmarks out_of_core [--quick]`` (``--quick``: 300000 rows, a 96 MB budget).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

from benchmarks.harness import Suite, cli_main, print_table

SUITE = "out-of-core"
D, CHUNK = 64, 50_000

CHILD = textwrap.dedent("""
    import json, sys, time, warnings
    import numpy as np
    warnings.simplefilter("ignore")
    mode, folder, n, d, chunk, budget = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
    import kernelscale as ks
    est = ks.GeneralizedLeastSquaresClassifier(max_iter=5, tol=0.0, max_memory=budget)
    y = np.load(folder + "/y.npy")
    import dask, dask.array as da  # in every mode, so that the baseline counts the same libraries
    start = time.perf_counter()
    if mode == "baseline":
        pass
    elif mode == "numpy":
        est.fit(np.load(folder + "/X.npy"), y)
    else:
        header = 128  # np.save's header for this array (checked by the parent)

        def read(s, e):
            with open(folder + "/X.npy", "rb") as fh:
                return np.fromfile(fh, dtype=np.float64, count=(e - s) * d, offset=header + s * d * 8).reshape(e - s, d)

        parts = [da.from_delayed(dask.delayed(read)(s, min(s + chunk, n)), (min(s + chunk, n) - s, d), np.float64)
                 for s in range(0, n, chunk)]
        with dask.config.set(scheduler="synchronous"):
            est.fit(da.concatenate(parts), da.from_array(y, chunks=chunk))
    seconds = time.perf_counter() - start
    # VmHWM: the peak resident set of this program (ru_maxrss would keep the parent's from the fork)
    with open("/proc/self/status") as fh:
        peak = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))
    if mode != "baseline":
        np.save(folder + f"/coef-{mode}.npy", np.concatenate([est.coef_.ravel(), est.intercept_]))
    print(json.dumps({"seconds": seconds, "peak_rss_bytes": peak}))
""")


def _child(mode, folder, n, budget):
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(folder), str(n), str(D), str(CHUNK), str(budget)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick=False, out_dir=None, *, rows=None, budget=None):
    n = rows or (300_000 if quick else 2_200_000)
    budget = budget or (96 if quick else 512) * 2**20
    suite = Suite(SUITE, quick=quick, out_dir=out_dir, paper={
        "source": "issue #15: a fit on a memmap/zarr array at least 2x larger than the memory budget, "
                  "peak RSS under the budget, the same result as the in-memory fit"})
    with tempfile.TemporaryDirectory() as folder:
        rng = np.random.default_rng(0)
        X = np.lib.format.open_memmap(f"{folder}/X.npy", mode="w+", dtype=np.float64, shape=(n, D))
        y = np.empty(n, dtype=np.int64)
        w = rng.normal(size=D)
        for s in range(0, n, CHUNK):
            block = rng.normal(size=(min(CHUNK, n - s), D))
            X[s:s + len(block)] = block
            y[s:s + len(block)] = (block @ w + rng.normal(size=len(block)) > 0).astype(np.int64)
        X.flush()
        offset = X.offset
        del X
        assert offset == 128, f"unexpected .npy header of {offset} bytes"
        np.save(f"{folder}/y.npy", y)
        x_bytes = n * D * 8
        dataset = f"normal {n}x{D} float64 ({x_bytes / 2**30:.2f} GiB on disk), 2 classes"
        res = {}
        for mode in ("baseline", "numpy", "dask"):
            res[mode] = _child(mode, folder, n, budget if mode == "dask" else 4 * x_bytes)
        a, b = np.load(f"{folder}/coef-numpy.npy"), np.load(f"{folder}/coef-dask.npy")
        rel = float(np.abs(a - b).max() / np.abs(a).max())
    peer = suite.add(dataset, "GLS fit in memory (numpy)", role="peer",
                     metrics={"peak_rss_bytes": res["numpy"]["peak_rss_bytes"], "fit_s": res["numpy"]["seconds"]})
    rec = suite.add(dataset, "GLS fit over dask chunks read from disk", role="ours",
                    params={"max_memory": budget, "x_bytes": x_bytes, "chunk_rows": CHUNK, "max_iter": 5},
                    metrics={"peak_rss_bytes": res["dask"]["peak_rss_bytes"], "fit_s": res["dask"]["seconds"],
                             "x_over_budget": x_bytes / budget, "peak_rss_over_budget":
                             res["dask"]["peak_rss_bytes"] / budget, "coef_rel_diff_to_numpy": rel,
                             "baseline_rss_bytes": res["baseline"]["peak_rss_bytes"]})
    rec["ratio_to_peer"] = {"peak_rss_bytes": res["dask"]["peak_rss_bytes"] / peer["metrics"]["peak_rss_bytes"]}
    path = suite.write(plot=False)
    print_table(suite.records)
    ok = res["dask"]["peak_rss_bytes"] < budget and x_bytes >= 2 * budget and rel < 1e-8
    print(f"X {x_bytes / 2**20:.0f} MiB = {x_bytes / budget:.1f}x the budget {budget / 2**20:.0f} MiB; peak RSS "
          f"{res['dask']['peak_rss_bytes'] / 2**20:.0f} MiB ({'PASS' if ok else 'FAIL'}; the interpreter and "
          f"libraries alone {res['baseline']['peak_rss_bytes'] / 2**20:.0f} MiB); in memory "
          f"{res['numpy']['peak_rss_bytes'] / 2**20:.0f} MiB; coefficients differ by {rel:.1e}")
    return path


def main(argv=None):
    return cli_main(run, argv, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
