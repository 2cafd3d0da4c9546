"""Robustness on data the defaults were not chosen on (issue #18, "Robust on data nobody tuned for").

Every benchmark before this one used the papers' datasets, and the defaults were chosen on them.
This suite fits EVERY estimator of the registry (``kernelscale.registry.ESTIMATORS``) at its
defaults on datasets nobody tuned for, next to exact kernel peers fitted in the same run on the
same split, and checks two goals.

Datasets (fixed seeded splits: 25% test for the bundled sets, 20% for the synthetic ones,
stratified for classification):

- scikit-learn's BUNDLED sets (no download): diabetes (regression, 442 x 10), breast_cancer
  (569 x 30, 2 classes), wine (178 x 13, 3 classes), iris (150 x 4, 3 classes), digits
  (1797 x 64, 10 classes);
- ``friedman1 y*1e-5`` / ``friedman1 y*1e5``: make_friedman1 (d = 10, noise 1) with the
  target multiplied by 1e-5 / 1e5 (target scale);
- ``mixed scales``: make_friedman1 (regression) and make_classification (2 classes, d = 10)
  with columns multiplied by 10^-3 .. 10^3 (a seeded permutation of 10 log-spaced scales) and
  NOT standardised: the raw, badly scaled features are the point;
- ``few features``: a smooth 2-d regression surface (sin(2 x1) cos(2 x2) + noise) and
  make_moons (d = 2, noise 0.3);
- ``many classes``: make_classification with 30 classes (d = 20, 10 informative);
- ``imbalanced``: make_classification with weights 95/5 (d = 10).

Features are standardised like a user would (StandardScaler fitted on the training part)
except on the "mixed scales" sets; targets are never rescaled.

Estimators, at their defaults with only ``random_state=0`` and ``kernel=GaussianKernel(sigma=
"median")`` set (where the estimator has those parameters): classifiers on the classification
sets, regressors on the regression sets. ``GeneralizedLeastSquaresClassifier`` and
``CalibratedLeastSquaresClassifier`` have no kernel (they are the linear GLMs of paper 5, used
on random features there), so they are fitted behind ``RandomFourierFeatures(GaussianKernel(
"median"), random_state=0)`` at its defaults (1024 features); the transformers
``RandomFourierFeatures`` and ``NystromFeatures`` are also fitted with a scikit-learn
``Ridge(alpha=1)`` head on regression and, Nystrom, with a GLS head on classification.
``PolynomialRandomFeatures`` is skipped: it approximates a polynomial kernel, not the Gaussian
one the goals compare against.

Peers (same run, same split, same bandwidth): scikit-learn ``KernelRidge(alpha=1, kernel="rbf",
gamma=1/(2 sigma^2))`` for regression and ``SVC(C=1, gamma=1/(2 sigma^2))`` for
classification, sigma the median heuristic of the training features
(``GaussianKernel("median").resolve(X_train, random_state=0)``).

Metrics, per (dataset, estimator): regression ``rmse`` (also ``nrmse`` = rmse / std(y_test) and
``r2``), classification ``test_error`` (fraction misclassified; also ``balanced_error``); the
fit time and the predict time (timed in a forked child killed after ``CAP_S``; a fit under
``REPEAT_BELOW_S`` (1 s) counts as a warm-up and the median of three more is recorded (of seven
under ``REPEAT_MORE_BELOW_S``, 0.1 s), since a single short fit on a shared machine varied by up
to 1.5x between runs; an untimed tiny fit of
every estimator in the parent first loads numba's compiled code), and the
failure, if any: the exception (type and first line of its message), NaN/inf predictions, or
the time cap. ``ratio_to_peer`` holds ours / peer for the error and the times.

Goals (``evaluate_goals``; printed as a PASS/FAIL table and stored in each record's
``goals``):

- ERROR: the error ratio to the exact peer is at most ``ERROR_FACTOR`` (1.5). Regression: the
  RMSE ratio (the same as the ratio of the normalised RMSEs, scale-free). Classification:
  ``test_error <= 1.5 * peer_test_error + 1 / n_test`` -- one test point of slack, so that a
  peer with zero or one mistake on 38 iris test points does not turn one extra mistake into an
  infinite ratio. A failed fit fails; a failed peer leaves the goal undecided ("n/a").
- TIME: the fit time is at most ``TIME_FACTOR`` (10) times the fastest successful kernelscale
  fit (any row of ours, pipelines included) on that dataset. A failed fit fails.

``--quick``: iris, friedman1 y*1e5 and imbalanced 95/5 at n = 400, cap 5 s; well under a minute. Full run: about 20-25
minutes on a 2-core machine (``results/robustness.json``).

Run: ``python -m benchmarks robustness [--quick]`` or ``kernelscale bench robustness``.

Runs (2 shared cores). First (2026-11-23, load average ~2.4; 796 s): error goal 84/104, time
goal 46/104. Second, after the scale-aware defaults of issue #18 (SLKL's relative sparsity,
RegularizedKernelRegressor's relative tol, LS-SVM's C=10 / whole-system blocks / tol, DSG's
"auto" iterations and blocks, stagewise's "auto" block and ridge, the least-squares GCV ridge;
154 s): error goal 97/104, time goal 61/104 (74/104 if every fit under 1 s counted as in time).
Third (session 10, quiet machine, 73 s), after LS-SVM's whole-system Cholesky, DSG's running
scores and OMP_WAIT_POLICY=PASSIVE for the parallel cosine, stagewise's smaller "auto" block
below 12288 samples, and the least-squares solves reusing the GCV eigendecomposition (the n x n
dual for fewer rows than features): error goal 98/104, time goal 85/104. The timed fits run in
forked children: the parent's warm-up keeps numba's parallel cosine unused (a child forked
after its OpenMP threads started computes np.cos) and each child loads it before timing.
Fourth (session 11, quiet machine, 121 s), after scipy's small factorizations on one thread of its
own OpenBLAS (``kernelscale.ops.lapack_threads``: stagewise at n = 4000 from 0.5-0.75 s to 0.15
s), the least-squares defaults (GLS tol 1e-4, CLS 10 stages), a divide-and-conquer
eigendecomposition for the GCV ridge, and fits under 1 s timed as the median of three after a
warm-up (the fastest fits, SLKL's and LS-SVM's, got faster warm: 0.025-0.04 s at n = 4000, which
tightens every limit): error goal 99/104, time goal 86/104 (one fit per estimator, as in the runs
before: 97/104, 55 s). Fifth (session 12, 150 s; this machine ran about twice slower than in
session 11: SLKL's fits 0.05 s where they took 0.025 s, which loosens the time limits), after
``RegularizedKernelClassifier``'s one-vs-one default and the compiled runs of kernel
coordinate-descent sweeps: error goal 100/104, time goal 99/104. Sixth (session 12, 127 s),
after the median heuristic's partition (the median of 500k distances no longer sorts them: about
25 ms off every fit with sigma="median", which makes the fastest fits, SLKL's, 0.032-0.045 s at
n = 4000, and so tightens every limit): error goal 100/104, time goal 89/104 (the 10x limit is
relative: nothing else got slower). Seventh (session 13, 2026-11-27), after the doubly
stochastic ``solver="auto"`` (the preconditioned solver from 2048 samples): error goal 103/104
(DSG on friedman1 0.67x, on 30 classes 0.179 against the limit 0.1825; only SLKL on 30 classes
fails, 0.214), time goal 88/104 (a slower day: exact kernel ridge 0.53 s at n = 4000 where
session 12 measured 0.41 s). Eighth (session 19), after ``SLKLClassifier(alpha=0.1)`` and the
regressor's full-batch DSG blocks of 2048 at n <= 8192: error goal 103/104 (SLKL on 30 classes
0.189 -> 0.185), time goal 80/104 (the DSG regressor's n = 4000 fits 0.45 -> 1.7-1.9 s). Ninth
(session 20), after ``SLKLClassifier``'s one-vs-one default (``multi_class="auto"``): error goal
104/104 (SLKL on 30 classes 0.185 -> 0.092, SVC 0.121, in 1.99 s: 7.9x the fastest fit there),
time goal 76/104 (a slower day again: the fastest fits 0.022-0.035 s at n = 4000; three rows
within 1.15x of the limit, none new in kind). The slowest fit of all 104 took 1.99 s. Tenth
(2026-11-28, issue #37 item 2, capacity that grows with n: SLKL's ``n_components``, LS-SVM's
``n_iter`` and ``batch_size``, stagewise's ``n_stages`` and the regularized solvers' ``max_iter``
"auto"), the tree before and after the change run one after the other: the same test error or
RMSE on all 104 rows (every new rule keeps its former value at n <= 4000), error goal 104/104
both, time goal 80/104 before (136 s) and 79/104 after (142 s); the rows that flipped are fits of
unchanged code near the 10x limit (RandomFourierFeatures pipelines, DSG, the LS-SVM whole system).
What still fails, from side checks (not part of the suite):

- many classes k=30 (until the ninth run): SLKL and DSG at 1.77-1.82x SVC's 0.121, but SVC is one-vs-ONE;
  scikit-learn ``OneVsRestClassifier(SVC)`` at the same C and gamma makes 0.195, level with
  theirs (0.21-0.22): the one-vs-rest decomposition, not the defaults. One-vs-one took
  ``RegularizedKernelClassifier`` from 0.200 to 0.119 (1.1 s). SLKL stays at 0.178-0.186 with
  a 100x smaller sparsity, alpha 0.1 and 512 columns; DSG's softmax loss makes 0.186 and its
  preconditioned solver 0.179 (one-hot kernel ridge at a smaller ridge reaches 0.143).
  Calibrated least squares passes since its 10 stages (0.168).
- DoublyStochasticRegressor on friedman1 (before the seventh run): 1.52x. Not the features
  (16000-32000 give 1.51-1.57x): plain SGD converges slowly there (256 / 512 iterations: 1.47x /
  1.41x), while ``solver="preconditioned"`` reaches 0.67x in 4 iterations; "auto" now picks it.
- time (18 rows in the fourth run): the fastest fits are 0.002-0.05 s (LS-SVM on the bundled
  sets, SLKL, the stagewise fit), so at n = 4000 the limit is 0.25-0.4 s: the exact solvers'
  O(n^3) Cholesky (exact kernel ridge 0.36 s, LS-SVM 0.32-0.34 s), DSG's two passes over 16000
  features (0.32-0.38 s), and random Fourier features + GLS / CLS (0.42-0.62 s: the 1024 x 1024
  GCV eigendecomposition, 0.15-0.2 s, and 14-57 steps of two passes over n x 1024 features) stay
  above it; on digits (the stagewise fit at 0.034 s) GLS takes 0.54 s; on wine two fits of
  0.026 s are 11x LS-SVM's 0.0023 s. In the fifth run 5 rows: GLS on digits (11.2x), GLS / CLS
  on moons and mixed scales (10.2x), SLKL on wine (0.059 s, 11.6x LS-SVM's 0.0051 s: its
  coordinate steps run in Python, 1400 of them) and DSG on iris (0.048 s, 13x: 128 iterations
  at least).
"""

from __future__ import annotations

import logging
import math
import sys
import time
import warnings
from typing import Callable

import numpy as np

from benchmarks.harness import Suite, cli_main, compare, measure, run_capped
from benchmarks.studies.common import DATASETS, SEED, Dataset, make_dataset, median_sigma, peer_factory

SUITE = "robustness"
ERROR_FACTOR = 1.5
TIME_FACTOR = 10.0
#: fits shorter than this are timed three more times, the first one a warm-up (median of three)
REPEAT_BELOW_S = 1.0
#: fits shorter than this are timed seven more times (median of seven): the fastest fit of a set
#: (often 0.03-0.05 s) sets every ratio of the time goal, and its median of three moved by 25%
#: between two runs (0.029 / 0.037 s), flipping rows near 10x
REPEAT_MORE_BELOW_S = 0.1
CAP_S = 60.0
QUICK_CAP_S = 5.0
#: the quick run's data sets and their total sizes (None: the whole bundled set)
QUICK = {"iris": None, "friedman1 y*1e5": 400, "imbalanced 95/5": 400}
logger = logging.getLogger("kernelscale.benchmarks.robustness")

PAPER = {
    "source": "issue #18: robust on data nobody tuned for (no paper numbers)",
    "goal_error": f"every estimator's error within {ERROR_FACTOR}x of the exact peer's at defaults "
                  "(regression: RMSE ratio to KernelRidge; classification: test_error <= "
                  f"{ERROR_FACTOR} * SVC's + 1/n_test)",
    "goal_time": f"no fit longer than {TIME_FACTOR}x the fastest kernelscale fit on the dataset",
    "peers": "sklearn KernelRidge(alpha=1, rbf) / SVC(C=1, rbf), gamma = 1/(2 sigma^2), sigma = median heuristic",
}


# ----------------------------------------------------------------------------------------------
# estimators


def _set_defaults(est):
    """``random_state=0`` and ``kernel=GaussianKernel(sigma="median")`` where ``est`` has them."""
    from kernelscale.kernels import GaussianKernel

    params = est.get_params(deep=False)
    new = {}
    if "random_state" in params:
        new["random_state"] = SEED
    if "kernel" in params:
        new["kernel"] = GaussianKernel(sigma="median")
    return est.set_params(**new)


def _pipeline(transformer_cls, head):
    from sklearn.pipeline import make_pipeline

    def make():
        return make_pipeline(_set_defaults(transformer_cls()), head())
    return make


def estimator_factories():
    """``{name: (task, factory)}`` for every registry estimator (and feature-map pipeline)."""
    from sklearn.linear_model import Ridge

    from kernelscale.features import NystromFeatures, RandomFourierFeatures
    from kernelscale.least_squares.estimators import (
        CalibratedLeastSquaresClassifier, GeneralizedLeastSquaresClassifier,
    )
    from kernelscale.registry import ESTIMATORS

    out = {}
    for entry in ESTIMATORS:
        if entry.kind == "transformer":
            continue
        task = "regression" if entry.kind == "regressor" else "classification"
        if entry.cls in (GeneralizedLeastSquaresClassifier, CalibratedLeastSquaresClassifier):
            out[f"RandomFourierFeatures+{entry.name}"] = (task, _pipeline(RandomFourierFeatures, entry.cls))
        else:
            out[entry.name] = (task, (lambda cls: lambda: _set_defaults(cls()))(entry.cls))
    out["RandomFourierFeatures+Ridge"] = ("regression", _pipeline(RandomFourierFeatures, lambda: Ridge(alpha=1.0)))
    out["NystromFeatures+Ridge"] = ("regression", _pipeline(NystromFeatures, lambda: Ridge(alpha=1.0)))
    out["NystromFeatures+GeneralizedLeastSquaresClassifier"] = (
        "classification", _pipeline(NystromFeatures, GeneralizedLeastSquaresClassifier))
    return out


def _describe(est):
    """Short, JSON-safe view of an estimator's parameters (non-default values are what matter)."""
    try:
        params = est.get_params(deep=False)
    except Exception:  # noqa: BLE001
        return {}
    if "steps" in params:  # pipeline
        return {name: _describe(step) for name, step in params["steps"]}
    return {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)) for k, v in params.items()
            if k not in ("callback", "verbose")}


# ----------------------------------------------------------------------------------------------
# one fit


def _first_line(exc):
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def fit_job(factory: Callable, data: Dataset, cap_s=None):
    """Fit (a short fit four times: ``REPEAT_BELOW_S``, when four fit well within the cap) and
    predict, in a forked child: times, predictions, or the failure."""
    from kernelscale.ops import fast_cos

    fast_cos.load()  # untimed, as the parent's warm-up loads the rest

    def fit():
        return factory().fit(data.X_train, data.y_train)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            m = measure(fit, repeats=1, warmup=0)
            if m.median < REPEAT_BELOW_S and (cap_s is None or 8 * m.median < cap_s):  # warm-up, then median of 3
                m = measure(fit, repeats=7 if m.median < REPEAT_MORE_BELOW_S else 3, warmup=0)
        except Exception as exc:  # noqa: BLE001 - the failure is the result
            return {"failure": _first_line(exc), "stage": "fit"}
        est = m.result
        try:
            t0 = time.perf_counter()
            pred = est.predict(data.X_test)
            predict_s = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001
            return {"failure": _first_line(exc), "stage": "predict", "fields": m.record_fields()}
    warns = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}" for w in caught})
    return {"failure": None, "fields": m.record_fields(), "predict_s": predict_s, "pred": np.asarray(pred),
            "warnings": warns[:5], "params": _describe(est)}


def score(task, pred, y):
    """Error metrics of predictions (regression: rmse, nrmse, r2; classification: test_error,
    balanced_error); ``None`` values when the predictions are not finite."""
    y = np.asarray(y)
    if task == "regression":
        pred = np.asarray(pred, dtype=np.float64).ravel()
        if not np.all(np.isfinite(pred)):
            return None
        rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
        sd = float(np.std(y))
        return {"rmse": rmse, "nrmse": rmse / sd if sd > 0 else None,
                "r2": 1.0 - rmse ** 2 / sd ** 2 if sd > 0 else None}
    pred = np.asarray(pred)
    if pred.dtype.kind == "f" and not np.all(np.isfinite(pred)):
        return None
    per_class = [float(np.mean(pred[y == c] != c)) for c in np.unique(y)]
    return {"test_error": float(np.mean(pred != y)), "balanced_error": float(np.mean(per_class))}


def run_one(suite, data, method, factory, role, cap_s, params=None):
    """Fit ``factory()`` on ``data`` in a capped child and add its record (failure in ``failure``)."""
    start = time.perf_counter()
    status, out = run_capped(lambda: fit_job(factory, data, cap_s), cap_s)
    wall = time.perf_counter() - start
    p = dict(params or {}, **data.params, time_cap_s=cap_s)
    failure, metrics, fields, predict_s, notes = None, {}, {}, None, None
    if status == "timeout":
        failure = f"timeout: no fit + predict within the cap of {cap_s:g} s (killed)"
    elif status == "error":
        failure = "child error: " + str(out).strip().splitlines()[-1]
    elif out["failure"] is not None:
        failure = f"{out['stage']}: {out['failure']}"
        fields = out.get("fields") or {}
    else:
        fields, predict_s = out["fields"], out["predict_s"]
        if out.get("params"):
            p["estimator"] = out["params"]
        metrics = score(data.task, out["pred"], data.y_test)
        if metrics is None:
            failure = "non-finite predictions (NaN or inf)"
            metrics = {}
        if out.get("warnings"):
            notes = "warnings: " + " | ".join(out["warnings"])
    if not metrics:
        metrics = {"rmse": None} if data.task == "regression" else {"test_error": None}
    metrics["predict_s"] = predict_s
    rec = suite.add(data.name, method, role=role, params=p, metrics=metrics,
                    time_median_s=fields.get("time_median_s"), times_s=fields.get("times_s"),
                    peak_memory_bytes=fields.get("peak_memory_bytes"), notes=notes)
    rec["task"] = data.task
    rec["failure"] = failure
    rec["wall_s"] = wall
    main = "rmse" if data.task == "regression" else "test_error"
    logger.info("%-32s %-52s %s=%s fit=%s predict=%s%s", data.name, method, main, _f(rec["metrics"].get(main)),
                _f(rec["time_median_s"]), _f(predict_s), f"  FAILED {failure}" if failure else "")
    return rec


def _f(v, spec=".3g"):
    return "-" if v is None else format(v, spec)


def warm_up(factories):
    """Untimed tiny fit of every estimator in this process (numba's compiled code is loaded
    before the forked, timed fits); failures here are ignored (the real fit reports them).
    The parallel cosine stays unused here: a child forked after it started its OpenMP threads
    would fall back to np.cos (kernelscale.ops.fast_cos); each timed child loads it instead."""
    from kernelscale.ops import fast_cos

    rng = np.random.RandomState(SEED)
    X = rng.normal(size=(80, 3))
    ys = {"regression": X[:, 0] + 0.1 * rng.normal(size=80), "classification": (X[:, 0] > 0).astype(int)}
    min_size, fast_cos.MIN_SIZE = fast_cos.MIN_SIZE, sys.maxsize
    try:
        for name, (task, factory) in factories.items():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    factory().fit(X, ys[task]).predict(X)
            except Exception as exc:  # noqa: BLE001
                logger.info("warm-up of %s failed: %s", name, _first_line(exc))
    finally:
        fast_cos.MIN_SIZE = min_size


# ----------------------------------------------------------------------------------------------
# goals


def evaluate_goals(records, error_factor=ERROR_FACTOR, time_factor=TIME_FACTOR):
    """Decide the two goals for every record of role "ours" (sets ``record["goals"]``) and return
    the rows ``{"dataset", "method", "error": PASS|FAIL|n/a, "time": PASS|FAIL, "error_ratio",
    "time_ratio_to_fastest", "reasons"}``.

    error: regression ``rmse <= error_factor * peer rmse``; classification ``test_error <=
    error_factor * peer test_error + 1/n_test``; n/a when the peer failed. time: fit time <=
    time_factor * the fastest successful fit of role "ours" on the dataset. A failed record
    fails both.
    """
    by_dataset = {}
    for rec in records:
        by_dataset.setdefault(rec["dataset"], []).append(rec)
    rows = []
    for dataset, recs in by_dataset.items():
        peer = next((r for r in recs if r["role"] == "peer"), None)
        ours = [r for r in recs if r["role"] == "ours"]
        ok_times = [r["time_median_s"] for r in ours if not r.get("failure") and r["time_median_s"] is not None]
        fastest = min(ok_times) if ok_times else None
        for rec in ours:
            reasons = []
            task = rec.get("task") or ("regression" if "rmse" in rec["metrics"] else "classification")
            metric = "rmse" if task == "regression" else "test_error"
            ours_err = rec["metrics"].get(metric)
            peer_err = None if peer is None or peer.get("failure") else peer["metrics"].get(metric)
            err_ratio = None
            if rec.get("failure") or ours_err is None:
                error = "FAIL"
                reasons.append(rec.get("failure") or "no error measured")
            elif peer_err is None:
                error = "n/a"
                reasons.append("peer failed")
            else:
                err_ratio = ours_err / peer_err if peer_err > 0 else (1.0 if ours_err == 0 else math.inf)
                if task == "regression":
                    bound = error_factor * peer_err
                else:
                    bound = error_factor * peer_err + 1.0 / rec["params"]["n_test"]
                error = "PASS" if ours_err <= bound else "FAIL"
                if error == "FAIL":
                    reasons.append(f"{metric} {ours_err:.4g} > {bound:.4g}")
            t = rec["time_median_s"]
            t_ratio = t / fastest if (t is not None and fastest) else None
            if rec.get("failure") or t_ratio is None:
                timing = "FAIL"
                if not rec.get("failure"):
                    reasons.append("no fit time")
            else:
                timing = "PASS" if t_ratio <= time_factor else "FAIL"
                if timing == "FAIL":
                    reasons.append(f"fit {t:.3g} s = {t_ratio:.1f}x the fastest ({fastest:.3g} s)")
            rec["goals"] = {"error": error, "time": timing, "error_ratio": err_ratio,
                            "time_ratio_to_fastest": t_ratio}
            rows.append({"dataset": dataset, "method": rec["method"], "error": error, "time": timing,
                         "error_ratio": err_ratio, "time_ratio_to_fastest": t_ratio,
                         "fit_s": t, "predict_s": rec["metrics"].get("predict_s"),
                         "reasons": "; ".join(dict.fromkeys(reasons))})
    return rows


def format_goals(rows):
    header = ["dataset", "method", "err ratio", "error", "fit s", "pred s", "x fastest", "time", "why"]
    body = [[r["dataset"], r["method"], _f(r["error_ratio"]), r["error"], _f(r["fit_s"]), _f(r["predict_s"], ".2g"),
             _f(r["time_ratio_to_fastest"]), r["time"], r["reasons"]] for r in rows]
    widths = [max(len(str(row[i])) for row in [header] + body) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    n_err = sum(r["error"] == "FAIL" for r in rows)
    n_time = sum(r["time"] == "FAIL" for r in rows)
    lines.append("")
    lines.append(f"goal error (<= {ERROR_FACTOR}x the exact peer): {len(rows) - n_err}/{len(rows)} pass"
                 f" ({sum(r['error'] == 'n/a' for r in rows)} n/a)")
    lines.append(f"goal time (<= {TIME_FACTOR:g}x the fastest kernelscale fit): {len(rows) - n_time}/{len(rows)} pass")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# the suite


def run(quick=False, out_dir=None, datasets=None, estimators=None, sizes=None, cap_s=None):
    """Run the suite; ``datasets`` (names of :data:`DATASETS`), ``estimators`` (names of
    :func:`estimator_factories`), ``sizes`` ({dataset: n}) and ``cap_s`` narrow it (tests)."""
    t_start = time.perf_counter()
    if datasets is None:
        datasets = list(QUICK) if quick else list(DATASETS)
    if sizes is None:
        sizes = QUICK if quick else {}
    cap_s = cap_s if cap_s is not None else (QUICK_CAP_S if quick else CAP_S)
    factories = estimator_factories()
    if estimators is not None:
        unknown = set(estimators) - set(factories)
        if unknown:
            raise ValueError(f"unknown estimators {sorted(unknown)}; known: {sorted(factories)}")
        factories = {k: v for k, v in factories.items() if k in estimators}
    paper = dict(PAPER, cap_s=cap_s, datasets=list(datasets))
    suite = Suite(SUITE, quick=quick, out_dir=out_dir, paper=paper)
    warm_up(factories)
    for name in datasets:
        data = make_dataset(name, sizes.get(name))
        sigma = median_sigma(data.X_train)
        label, peer_params, peer = peer_factory(data.task, sigma)
        peer_rec = run_one(suite, data, label, peer, "peer", cap_s, dict(peer_params, sigma=sigma))
        for method, (task, factory) in factories.items():
            if task != data.task:
                continue
            rec = run_one(suite, data, method, factory, "ours", cap_s, {"median_sigma": sigma})
            if not peer_rec.get("failure"):
                main = "rmse" if data.task == "regression" else "test_error"
                compare(rec, peer_rec, [main, "time_median_s"])
    rows = evaluate_goals(suite.records)
    total = time.perf_counter() - t_start
    suite.paper["goals"] = {
        "error_fail": [f"{r['dataset']} / {r['method']}" for r in rows if r["error"] == "FAIL"],
        "time_fail": [f"{r['dataset']} / {r['method']}" for r in rows if r["time"] == "FAIL"],
        "n_rows": len(rows),
    }
    suite.paper["total_wall_s"] = total
    print(format_goals(rows))
    print(f"total wall time {total:.0f} s")
    return suite.write()


def main(argv=None):
    return cli_main(run, argv, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
