"""Capacity that grows with n (issue #37 item 2): every estimator at its defaults at 5k and 50k rows.

Every estimator of the registry (the front door and the transformers aside) is fitted at its
defaults (``random_state=0`` only) on training sets of ``SIZES`` rows of one synthetic source per
task, 30 features, and scored on the same 10000 held-out rows of that source:

- classification: ``make_classification(n, 30 features, 15 informative, 5 redundant, 2 classes,
  4 clusters per class, class_sep=1, flip_y=0.01)`` -- nonlinear (eight Gaussian clusters);
- regression: ``make_friedman1(n, 30 features, noise=1)`` -- five informative features, the
  target nonlinear in them.

Rows 0..9999 are the test part; the training part of size n is rows 10000..10000+n, so the 5k
set is a subset of the 50k one. Features are standardised with the training part's statistics.
``GeneralizedLeastSquaresClassifier`` and ``CalibratedLeastSquaresClassifier`` (the linear GLMs
of paper 5, no kernel of their own) are fitted on the raw 30 features as a user calling them at
their defaults would.

Each fit runs in a fresh subprocess whose ``sys.path`` starts at one source tree (``--tree
NAME=PATH``, e.g. ``old=/tmp/ks/capacity-base/src`` for the commit before the change and
``new=src``), killed after ``--cap`` seconds (90 by default): a runaway default is a record
with ``failure`` "timeout", not a blocked run. The worker first fits the same estimator on 500
rows outside the timing (numba's compiled code, first-touch pages). Recorded per (size,
estimator, tree): fit seconds (one fit), predict seconds on the 10000 test rows, test error
(classification) or RMSE (regression), and the capacity the fit resolved (``n_components_``,
``n_stages_``, ``n_iter_``, ``batch_size_``... whatever the estimator exposes).

The held-out rows are draws of the same synthetic generators, so they are a validation set, not
a benchmark's test set: the constants of the "auto" rules (issue #37) were chosen on probes
against them (``benchmarks/studies/*.md``, "Capacity that grows with n"); no real data set's test
part was used to choose them.

Records: dataset ``"<task> n=<size>"``, method ``"<estimator> [<tree>]"``; the tree named
``new`` is role "ours", the others "peer", and ``ratio_to_peer`` holds new / old for the error
and the fit time. A run of some sizes, estimators or trees keeps the other records of
``results/capacity.json``.

Run (the numbers of ``benchmarks/studies/*.md``, "Capacity that grows with n")::

    git worktree add --detach /tmp/ks/capacity-base <commit before the change>
    python -m benchmarks capacity --tree old=/tmp/ks/capacity-base/src --tree new=src \\
        [--size 5000 --size 50000] [--only LSSVMClassifier ...] [--cap 90]

About 2 x 15 fits per size and tree; the 50k fits of the defaults before the change take up to
the cap each (split the run with ``--only`` to keep each part short).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SUITE = "capacity"
SEED = 0
N_TEST = 10000
SIZES = (5000, 50000)
CAP_S = 90.0
D = 30
WARM_ROWS = 500
#: estimators of the registry left out: the front door (it chooses capacity itself) and the
#: transformers (they have no target)
SKIP = ("AutoKernelClassifier", "AutoKernelRegressor")
#: fitted attributes recorded when the estimator has them (the capacity a fit resolved)
CAPACITY_ATTRIBUTES = ("n_components_", "n_stages_", "n_iter_", "batch_size_", "block_size_", "n_active_",
                       "solver_", "columns_used_", "multi_class_", "n_features_total_", "n_support_")
logger = logging.getLogger("kernelscale.benchmarks.capacity")


def source(task, n_train):
    """(X_train, y_train, X_test, y_test) of ``task`` with ``n_train`` training rows, standardised."""
    total = N_TEST + max(SIZES + (n_train,))
    if task == "classification":
        from sklearn.datasets import make_classification

        X, y = make_classification(n_samples=total, n_features=D, n_informative=15, n_redundant=5, n_classes=2,
                                   n_clusters_per_class=4, class_sep=1.0, flip_y=0.01, random_state=SEED)
    else:
        from sklearn.datasets import make_friedman1

        X, y = make_friedman1(n_samples=total, n_features=D, noise=1.0, random_state=SEED)
    Xte, yte = X[:N_TEST], y[:N_TEST]
    Xtr, ytr = X[N_TEST:N_TEST + n_train], y[N_TEST:N_TEST + n_train]
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd[sd == 0] = 1.0
    return (Xtr - mu) / sd, ytr, (Xte - mu) / sd, yte


def estimator_names():
    """``{name: task}`` of every registry estimator the study fits (run in the newest tree)."""
    from kernelscale.registry import ESTIMATORS

    return {e.name: ("regression" if e.kind == "regressor" else "classification")
            for e in ESTIMATORS if e.kind != "transformer" and e.name not in SKIP}


# ----------------------------------------------------------------------------------------------
# worker: one fit in a fresh process of one tree


def worker(spec):
    """Fit ``spec["estimator"]`` at its defaults on ``spec["data"]`` (an .npz); print one JSON line."""
    import warnings

    import kernelscale

    data = np.load(spec["data"])
    Xtr, ytr, Xte, yte = data["X_train"], data["y_train"], data["X_test"], data["y_test"]
    cls = getattr(kernelscale, spec["estimator"])

    def make():
        est = cls()
        if "random_state" in est.get_params(deep=False):
            est.set_params(random_state=SEED)
        return est

    out = {"failure": None}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            make().fit(Xtr[:WARM_ROWS], ytr[:WARM_ROWS])
        except Exception:  # noqa: BLE001 - the timed fit reports it
            pass
        t0 = time.perf_counter()
        try:
            est = make().fit(Xtr, ytr)
        except Exception as exc:  # noqa: BLE001 - the failure is the result
            out["failure"] = f"fit: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            out["fit_s"] = time.perf_counter() - t0
            print(json.dumps(out))
            return
        out["fit_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        pred = np.asarray(est.predict(Xte))
        out["predict_s"] = time.perf_counter() - t0
    if spec["task"] == "regression":
        out["rmse"] = float(np.sqrt(np.mean((pred.astype(np.float64).ravel() - yte) ** 2)))
    else:
        out["test_error"] = float(np.mean(pred != yte))
    cap = {}
    for name in CAPACITY_ATTRIBUTES:
        value = getattr(est, name, None)
        if isinstance(value, (int, float, str, np.integer, np.floating)):
            cap[name] = value.item() if isinstance(value, np.generic) else value
        elif isinstance(value, np.ndarray) and value.size <= 64:
            cap[name] = value.tolist()
    out["capacity"] = cap
    out["warnings"] = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:120]}" for w in caught})[:3]
    print(json.dumps(out))


def run_one(tree_src, estimator, task, data_path, cap_s):
    spec = {"estimator": estimator, "task": task, "data": str(data_path)}
    env = dict(os.environ, PYTHONPATH=str(tree_src))
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], env=env, timeout=cap_s,
                              capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return {"failure": f"timeout: no fit + predict within the cap of {cap_s:g} s (killed)",
                "wall_s": time.perf_counter() - start}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return {"failure": f"worker error: {tail[0][:300]}", "wall_s": time.perf_counter() - start}
    out = json.loads(lines[-1])
    out["wall_s"] = time.perf_counter() - start
    return out


# ----------------------------------------------------------------------------------------------
# the suite


def _key(record):
    return record["dataset"], record["method"]


def run(quick=False, out_dir=None, trees=None, sizes=None, only=None, cap_s=CAP_S):
    from benchmarks.harness import Suite, compare

    trees = trees or {"new": str(Path(__file__).resolve().parents[2] / "src")}
    sizes = sizes or ((500, 2000) if quick else SIZES)
    names = estimator_names()
    if only:
        unknown = set(only) - set(names)
        if unknown:
            raise ValueError(f"unknown estimators {sorted(unknown)}; known: {sorted(names)}")
        names = {k: v for k, v in names.items() if k in only}
    suite = Suite(SUITE, quick=quick, out_dir=out_dir, paper={
        "source": "issue #37 item 2: capacity that grows with n; every default fit on 50k x 30 within a minute",
        "cap_s": cap_s, "trees": trees})
    done = []
    with tempfile.TemporaryDirectory(prefix="ks-capacity-") as tmp:
        for n in sizes:
            for task in ("classification", "regression"):
                Xtr, ytr, Xte, yte = source(task, n)
                path = Path(tmp) / f"{task}-{n}.npz"
                np.savez(path, X_train=Xtr, y_train=ytr, X_test=Xte, y_test=yte)
                dataset = f"{task} n={n}"
                for est, est_task in names.items():
                    if est_task != task:
                        continue
                    recs = {}
                    for tree, src in trees.items():
                        out = run_one(src, est, task, path, cap_s)
                        metric = "rmse" if task == "regression" else "test_error"
                        rec = suite.add(dataset, f"{est} [{tree}]", role="ours" if tree == "new" else "peer",
                                        params={"n_train": n, "n_test": N_TEST, "d": D, "tree": tree,
                                                "src": src, "capacity": out.get("capacity", {})},
                                        metrics={metric: out.get(metric), "predict_s": out.get("predict_s"),
                                                 "fit_s": out.get("fit_s")},
                                        time_median_s=None if out["failure"] else out.get("fit_s"),
                                        times_s=[] if out["failure"] else [out["fit_s"]],
                                        notes="; ".join(out.get("warnings") or []) or None)
                        rec["failure"] = out["failure"]
                        rec["wall_s"] = out["wall_s"]
                        recs[tree] = rec
                        logger.info("%-24s %-40s %s=%s fit=%s s %s %s", dataset, rec["method"], metric,
                                    _f(out.get(metric)), _f(out.get("fit_s")), out.get("capacity", {}),
                                    f"FAILED {out['failure']}" if out["failure"] else "")
                    if "new" in recs:
                        for tree, rec in recs.items():
                            if tree != "new":
                                compare(recs["new"], rec, [metric, "time_median_s"])
                    done.extend(recs.values())
    if suite.path.exists():  # keep the records of what this run did not measure
        ran = {_key(r) for r in done}
        old = json.loads(suite.path.read_text())
        suite.records[:0] = [r for r in old["records"] if _key(r) not in ran]
        suite.paper = dict(old.get("paper", {}), **suite.paper)
    suite.records.sort(key=lambda r: (r["dataset"].split(" n=")[0], int(r["dataset"].split("n=")[1]), r["method"]))
    return suite.write(plot=False)


def _f(v, spec=".4g"):
    return "-" if v is None else format(v, spec)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes 500 and 2000")
    parser.add_argument("--out-dir", default=None)
    parser.add_argument("--tree", action="append", default=None, metavar="NAME=SRC",
                        help="a source tree's src folder (repeatable; the one named 'new' is role 'ours')")
    parser.add_argument("--size", action="append", type=int, default=None, help="training rows (repeatable)")
    parser.add_argument("--only", action="append", default=None, help="estimator name (repeatable)")
    parser.add_argument("--cap", type=float, default=CAP_S, help="seconds before a fit is killed")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(json.loads(args.worker))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    trees = dict(t.split("=", 1) for t in args.tree) if args.tree else None
    path = run(quick=args.quick, out_dir=args.out_dir, trees=trees,
               sizes=tuple(args.size) if args.size else None, only=args.only, cap_s=args.cap)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
