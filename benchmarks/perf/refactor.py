"""No speed regression across a refactor (issue #14): two source trees timed in one run.

    python -m benchmarks refactor --old /tmp/base/src --new src [--quick] [--repeats 3] [--only NAME ...]

``--old`` is the ``src`` of a checkout of the commit before the refactor (``git worktree add
/tmp/base 49b5fda``). Every measurement runs in a fresh subprocess (this script in worker mode)
whose ``sys.path`` starts at one tree's ``src``, so the trees never share a process; old and new
runs alternate (old, new, old, new, ...) so that drift on the machine hits both alike. The inputs
are prepared once, by the new tree, and read by every worker; each worker first fits the same
estimator on a small slice (numba caches, first-touch pages) outside the timing. Estimators are
written in today's vocabulary; ``refactor_check.RENAMES`` translates them for the old tree.

Measurements (``NAME``; settings of the suite named in brackets):

- ``stagewise``: MNIST 60000, ``StagewiseClassifier`` (calibrated, block 1024, PCA-50, the paper's
  bandwidth) [least-squares], seconds per stage between the first and the last stage callback.
- ``lssvm``: MNIST 60000, ``LSSVMClassifier`` matching pursuit, J = 2000, degree-4 polynomial
  kernel, float32, centred unit-norm images [lssvm], seconds per iteration as for stagewise.
- ``slkl``: adult, ``SLKLClassifier(n_components=1000)`` (the slkl suite's sparsity, ridge and
  tol; Gaussian kernel with LIBSVM's default gamma = 1/d as in fixed-point), fit seconds.
- ``regularized``: adult, ``RegularizedKernelClassifier`` hinge, coordinate descent, C = 1,
  tol = 1e-3, gamma = 1/d [fixed-point], fit seconds.
- ``dsg``: adult, ``DoublyStochasticClassifier(GaussianKernel(sqrt(10)), loss="hinge")``, fit and
  predict (the 16281 test rows) seconds.
- ``matvec``: ``kernel_matvec`` float32 20000 x 784 Gaussian, k = 1 [blocks], GFLOP/s
  (``kernelscale.ops`` in the new tree, ``kernelscale.blocks`` in the old one).

The slowdown of a row is new / old for seconds and old / new for GFLOP/s (medians of the
repeats), so above 1 is slower; rows above 1.05 are flagged. ``--quick``: 5000 MNIST / adult
rows, 4000 x 784 for matvec, 2 stages / iterations, DSG n_iter=20, 1 repeat. Results go to
``benchmarks/results/refactor-speed[-quick].json`` (old records role "peer", new ones "ours").
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import ROOT, Suite, compare, gemm_flops, measure

SUITE = "refactor-speed"
THRESHOLD = 1.05
SEED = 0
SIZES = {
    False: dict(mnist=60000, adult=None, steps=5, J=2000, matvec_n=20000, dsg_n_iter=None, repeats=3),
    # DSG's default 200 iterations cost the same on any n
    True: dict(mnist=5000, adult=5000, steps=2, J=1000, matvec_n=4000, dsg_n_iter=20, repeats=1),
}
#: name -> [(metric, unit)]; "s" metrics are seconds (lower is better), "GFLOP/s" higher is better
MEASUREMENTS = {
    "stagewise": [("seconds_per_stage", "s")],
    "lssvm": [("seconds_per_iteration", "s")],
    "slkl": [("fit_seconds", "s")],
    "regularized": [("fit_seconds", "s")],
    "dsg": [("fit_seconds", "s"), ("predict_seconds", "s")],
    "matvec": [("gflops", "GFLOP/s")],
}
WARM_ROWS = 2000


# ----------------------------------------------------------------------------------------------
# inputs, prepared once by the new tree


def prepare(data_dir, quick):
    """Write every measurement's arrays (``<name>.npz``) and settings (``settings.json``)."""
    from benchmarks.papers import fixed_point, least_squares, lssvm, slkl
    from benchmarks.perf import blocks
    from kernelscale.preprocessing import pca_fit, pca_transform

    size = SIZES[quick]
    data_dir = Path(data_dir)
    X, y, _, _ = least_squares.load(size["mnist"])
    sigma = least_squares.paper_sigma(pca_transform(X, *pca_fit(X, 50)))[0]
    np.savez(data_dir / "stagewise.npz", X=X, y=y)
    X, y, _, _ = lssvm.load(size["mnist"])
    np.savez(data_dir / "lssvm.npz", X=X, y=y)
    X, y, Xte, _ = fixed_point.load("adult", size["adult"])
    np.savez(data_dir / "adult.npz", X=X, y=y, Xte=Xte)
    adult_sigma = math.sqrt(X.shape[1] / 2.0)  # LIBSVM's default gamma = 1 / d
    X, Z, V1, _ = blocks.make_data(size["matvec_n"], blocks.D, np.float32, SEED)
    np.savez(data_dir / "matvec.npz", X=X, Z=Z, V=V1)
    settings = dict(size, stagewise_sigma=float(sigma), lssvm_C=lssvm.C,
                    adult_sigma=adult_sigma,
                    slkl=dict(sparsity=slkl.NU, alpha=slkl.LAM, tol=slkl.TOL),
                    matvec_sigma=math.sqrt(blocks.D))
    (data_dir / "settings.json").write_text(json.dumps(settings))


# ----------------------------------------------------------------------------------------------
# worker: one measurement of one tree


def _warm(cls, params, X, y):
    """Fit on the first rows (numba caches, first-touch pages), outside the timing."""
    cls(**params).fit(X[:WARM_ROWS], y[:WARM_ROWS])


def _seconds_per_step(cls, params, small, X, y):
    """Warm up with ``params`` updated by ``small``, fit ``cls(**params)`` and return (seconds
    between its first and last iteration callback per step, the fit's measurement)."""
    _warm(cls, {**params, **small}, X, y)
    stamps = []
    est = cls(**params, callback=lambda info: stamps.append(time.perf_counter()))
    m = measure(lambda: est.fit(X, y), repeats=1, warmup=0)
    return (stamps[-1] - stamps[0]) / (len(stamps) - 1), m


def work(name, data_dir):
    """Time measurement ``name`` with the kernelscale first on ``sys.path``; returns its metrics."""
    import kernelscale
    from kernelscale.kernels import GaussianKernel, PolynomialKernel
    from benchmarks.tools.refactor_check import translate_renamed_parameters

    translate_renamed_parameters(kernelscale)
    s = json.loads((Path(data_dir) / "settings.json").read_text())
    d = np.load(Path(data_dir) / f"{'adult' if name in ('slkl', 'regularized', 'dsg') else name}.npz")
    out = {}
    if name == "stagewise":
        X, y = d["X"], d["y"]
        params = dict(kernel=GaussianKernel(sigma=s["stagewise_sigma"]), block_size=1024, n_stages=s["steps"],
                      update="calibrated", pca_components=50, random_state=SEED)
        out["seconds_per_stage"], m = _seconds_per_step(kernelscale.StagewiseClassifier, params, dict(n_stages=1), X, y)
    elif name == "lssvm":
        X, y = d["X"], d["y"]
        params = dict(kernel=PolynomialKernel(degree=4, gamma=1.0, coef0=0.0), C=s["lssvm_C"],
                      solver="matching_pursuit", batch_size=s["J"], n_iter=s["steps"], dtype=np.float32,
                      random_state=SEED)
        out["seconds_per_iteration"], m = _seconds_per_step(
            kernelscale.LSSVMClassifier, params, dict(n_iter=1, batch_size=min(s["J"], WARM_ROWS // 2)), X, y)
    elif name in ("slkl", "regularized", "dsg"):
        X, y = d["X"], d["y"]
        kernel = GaussianKernel(s["adult_sigma"])
        cls, params = {
            "slkl": (kernelscale.SLKLClassifier, dict(kernel=kernel, n_components=1000, **s["slkl"])),
            "regularized": (kernelscale.RegularizedKernelClassifier,
                            dict(kernel=kernel, loss="hinge", C=1.0, solver="coordinate_descent", tol=1e-3,
                                 max_iter=1000)),
            "dsg": (kernelscale.DoublyStochasticClassifier,
                    dict(kernel=GaussianKernel(sigma=math.sqrt(10.0)), loss="hinge")),
        }[name]
        params["random_state"] = SEED
        if name == "dsg" and s["dsg_n_iter"]:
            params["n_iter"] = s["dsg_n_iter"]
        _warm(cls, {**params, "n_iter": 2} if name == "dsg" else params, X, y)
        est = cls(**params)
        m = measure(lambda: est.fit(X, y), repeats=1, warmup=0)
        out["fit_seconds"] = m.median
        if name == "dsg":
            m = measure(lambda: est.predict(d["Xte"]), repeats=1, warmup=1)
            out["predict_seconds"] = m.median
    else:
        try:
            from kernelscale.ops import kernel_matvec
        except ImportError:
            from kernelscale.blocks import kernel_matvec
        X, Z, V = d["X"], d["Z"], d["V"]
        kernel = GaussianKernel(sigma=s["matvec_sigma"])
        m = measure(lambda: kernel_matvec(kernel, X, Z, V), repeats=1, warmup=1)
        out["gflops"] = gemm_flops(X.shape[0], Z.shape[0], X.shape[1], 1) / m.median / 1e9
    out["peak_memory_bytes"] = m.peak_memory_bytes
    out["kernelscale_file"] = kernelscale.__file__
    return out


# ----------------------------------------------------------------------------------------------
# driver


def _subprocess(args, src):
    """Run this module (``python -m``, in the root of the checkout that holds it, so that it
    finds ``benchmarks``) with ``args``, and ``src`` first on sys.path; return its last stdout
    line."""
    cmd = [sys.executable, "-m", __spec__.name, *args, "--src", str(src)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-4000:]}")
    return done.stdout.strip().splitlines()[-1]


def _commit(src):
    done = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None


def slowdown(unit, old, new):
    """Above 1 means the new tree is slower: new / old for seconds, old / new for throughput."""
    return new / old if unit == "s" else old / new


def run(quick=False, out_dir=None, old=None, new=None, repeats=None, only=None):
    """Time every measurement (or those in ``only``) of both trees; returns the JSON's path."""
    if old is None or new is None:
        raise ValueError("perf/refactor.py needs two source trees: --old OLD_CHECKOUT/src --new src.")
    names = list(only or MEASUREMENTS)
    repeats = SIZES[quick]["repeats"] if repeats is None else int(repeats)
    trees = {"old": Path(old).resolve(), "new": Path(new).resolve()}
    suite = Suite(SUITE, quick=quick, out_dir=out_dir)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kernelscale-refactor-") as data_dir:
        print(f"preparing inputs with {trees['new']} ...", flush=True)
        _subprocess(["--prepare", data_dir] + (["--quick"] if quick else []), trees["new"])
        settings = json.loads((Path(data_dir) / "settings.json").read_text())
        for name in names:
            runs = {"old": [], "new": []}
            for r in range(repeats):
                for tree in ("old", "new"):
                    runs[tree].append(json.loads(_subprocess(["--worker", name, data_dir], trees[tree])))
                    print(f"{name} {tree} #{r + 1}: {runs[tree][-1]}", flush=True)
            for metric, unit in MEASUREMENTS[name]:
                recs = {}
                for tree, role in (("old", "peer"), ("new", "ours")):
                    values = [o[metric] for o in runs[tree]]
                    timing = dict(time_median_s=statistics.median(values), times_s=values) if unit == "s" else {}
                    recs[tree] = suite.add(
                        name, f"{tree}: {name} {metric}", role=role,
                        params=dict(settings, src=str(trees[tree]), commit=_commit(trees[tree]), repeats=repeats,
                                    unit=unit),
                        metrics={metric: statistics.median(values), f"{metric}_values": values},
                        peak_memory_bytes=max(o["peak_memory_bytes"] or 0 for o in runs[tree]), **timing)
                compare(recs["new"], recs["old"], metrics=[metric, "peak_memory_bytes"])
                factor = slowdown(unit, recs["old"]["metrics"][metric], recs["new"]["metrics"][metric])
                recs["new"]["metrics"]["slowdown"] = factor
                recs["new"]["metrics"]["regression"] = factor > THRESHOLD
                rows.append((name, metric, unit, recs["old"]["metrics"][metric], recs["new"]["metrics"][metric],
                             factor))
    path = suite.write(plot=False)
    print_markdown(rows, repeats)
    return path


def print_markdown(rows, repeats):
    print(f"\n| measurement | old (median of {repeats}) | new (median of {repeats}) | slowdown | |")
    print("|---|---:|---:|---:|---|")
    for name, metric, unit, old, new, factor in rows:
        flag = f"**SLOWER than {THRESHOLD}**" if factor > THRESHOLD else "ok"
        print(f"| {name} {metric} | {old:.4g} {unit} | {new:.4g} {unit} | {factor:.3f} | {flag} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="src folder of the checkout before the refactor")
    parser.add_argument("--new", help="src folder of the refactored tree")
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat")
    parser.add_argument("--repeats", type=int, default=None, help="runs per tree (default 3, --quick 1)")
    parser.add_argument("--only", nargs="+", choices=list(MEASUREMENTS), help="run only these measurements")
    parser.add_argument("--out-dir", default=None, help="where results go (default benchmarks/results)")
    parser.add_argument("--src", help=argparse.SUPPRESS)  # worker and prepare modes: the tree to import
    parser.add_argument("--prepare", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--worker", nargs=2, metavar=("NAME", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.src:
        sys.path.insert(0, str(Path(args.src).resolve()))
    if args.prepare:
        prepare(args.prepare, args.quick)
        print("prepared")
    elif args.worker:
        print(json.dumps(work(*args.worker)))
    else:
        print(f"results: {run(args.quick, args.out_dir, args.old, args.new, args.repeats, args.only)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
