"""The study behind ``DoublyStochastic*``'s "auto" n_iter / block_size (issues #17 item 2, #18).

TRAINING data only: every set is the training part of its benchmark split, cut again into a
fit part and a held-out validation part; nothing here reads a test set. Parts ``small``, ``adult``
and ``qm7`` study the sgd solver (named: "auto" would run the preconditioned one from 2048 samples).

Part ``small`` (the robustness sets, studies/common.py, issue #18): the training part
of each set split 75 / 25 (stratified for classification); the exact peer of that suite
(KernelRidge(alpha=1) / SVC(C=1), median bandwidth) is fitted on the fit part and scored on the
validation part, beside ours at explicit (n_iter, block_size) configurations, all other
parameters at their defaults (sgd, batch 256, the "auto" steps, nu = 1e-5). A configuration is
named by its rule: ``passes`` over the fit part (n_iter = ceil(passes * n / batch), at least
``min_iter``) and a total number of features ``features`` (block_size = ceil(features / n_iter),
at most 256). Recorded: validation error, its ratio to the peer's, fit seconds.

Part ``adult`` (issue #17 item 2): adult's training set (32561) split 26048 fit / 6513
held out (seeded), ``DoublyStochasticClassifier(GaussianKernel(sqrt(10)), loss="hinge",
random_state=0)`` with batch_size / block_size configurations, continued with ``warm_start``
pass by pass (the sgd schedule depends on the iteration count only, so the curve is the one of
single fits of those lengths up to the batch order); recorded: validation error and cumulative
fit seconds after each pass.

Part ``qm7`` (the squared loss on the paper's regression set): QM7's training part cut 80 / 20,
validation MAE at (n_iter, block_size) configurations.

Part ``solver`` (the "auto" solver): sgd against the preconditioned solver, each with every
other parameter at its default, on the fit / validation parts of the sets of part ``small``,
of adult (the hinge and the logistic loss), of MNIST (its training part cut 80 / 20, pixels
scaled to [0, 1], the median bandwidth) and of cadata (no official split: all rows cut 80 / 20,
targets standardised with the fit part's mean and std, the median bandwidth): validation error,
its ratio to the exact peer's on the small sets, and fit seconds, against the number of fit rows n.

Part ``t0`` (the preconditioned solver's step decay): the same splits, the preconditioned solver
with t0 = 1 (its "auto"), 4 and 1e4 passes over the fit part. Larger t0 did not help a fit's
four passes: adult hinge 16.66 / 17.49 / 18.32%, adult logistic 15.77 / 15.99 / 16.49%, 30
classes 19.6 / 21.0 / 21.5%, MNIST 3.20 / 3.20 / 3.17%, cadata RMSE 85.5k / 98.5k / 127k
(session 14; a stream of fresh virtual digits is another matter: benchmarks/papers/dsg_stream.py,
"Choosing settings").

Part ``damping`` (the preconditioned solver's step and ridge): the same splits with at least
2048 fit rows, the preconditioned solver at the (step_size, precond_ridge) of DAMPING_GRID. For
the classification losses (0.5, 1e-2) was the best or within noise of it everywhere (adult hinge
15.60% against 16.66% at the former (1, 1e-3), MNIST 2.97% against 3.20%, 30 classes 16.6%
against 19.6%): the classifier's defaults since session 15. The squared loss lost 1.2-3.7x its
RMSE at step 0.5 on three of four sets and keeps (1, 1e-3) (benchmarks/studies/doubly_stochastic.md).

Part ``blocks`` (the preconditioned solver's block and batch, issue #17 item 2): the same splits
with at least BLOCKS_MIN_ROWS fit rows, the preconditioned solver at the (block_size,
batch_size) of BLOCKS_GRID, four passes as its "auto". On a stream of virtual digits the
authors' blocks of 8192 with batches of 32768 had cut the error per example seen by a quarter
(benchmarks/papers/dsg_stream.py); on 2 cores a block's covariance costs batch x block^2 a step.

Part ``small-blocks`` (issue #18's time goal): the splits with 2048 to BLOCKS_MIN_ROWS - 1 fit
rows (QM7's parts included), the preconditioned solver at the (block_size, batch_size) of
SMALL_BLOCKS_GRID: blocks of 256 and 512 fitted 3x faster than 1024 and were worse on every set
but one; blocks of 2048 (session 19; with batches of 8192, four full-batch steps) cut QM7's MAE
from 18.8 to 13.6 and were within 3% or better on the other regression sets, worse on three of
the four classification sets: the regressor's "auto" block since (benchmarks/studies/doubly_stochastic.md).

Part ``passes`` (the preconditioned solver's length, issue #17 item 2): the same splits with at
least 2048 fit rows, and QM7's fit / validation parts (part ``qm7``'s, its targets in kcal/mol as
a user passes them: validation MAE), the preconditioned solver at PASSES_GRID passes (4 is its
"auto"), t0 one pass as in its "auto".

Part ``intercept`` (the regressor's ``fit_intercept``, issue #18): the regression sets of part
``solver`` and QM7's parts, ``DoublyStochasticRegressor`` at its defaults with fit_intercept
False and True.

Run: ``python -m benchmarks dsg_defaults [--quick]
[--part small|adult|qm7|solver|t0|damping|blocks|small-blocks|passes|intercept ...]`` (under
``flock /tmp/kernelscale-heavy.lock`` on a shared machine). Results: results/dsg_defaults.json.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time

import numpy as np

from benchmarks.harness import Suite, cli_main, error_ratio, task_error
from benchmarks.studies import common

SUITE = "dsg_defaults"
SEED = 0
PARTS = ("small", "adult", "qm7", "solver", "t0", "damping", "blocks", "small-blocks", "passes", "intercept")
#: part "t0": the preconditioned solver's t0 in passes over the fit part (1 is its "auto")
T0_PASSES = (1, 4, 1e4)
logger = logging.getLogger("kernelscale.benchmarks.dsg_defaults")

#: (passes, min_iter, features) configurations of part "small"
SMALL_GRID = ([(p, m, f) for p in (2, 4, 8) for m in (16, 32, 64) for f in (1024, 2048, 4096, 8192)]
              + [(2, m, f) for m in (128, 200) for f in (512, 1024, 2048, 4096)]
              + [(2, 128, 8192), (2, 128, 16384)])
#: the former default, for reference
FORMER = (None, 200, 51200)
#: part "damping": (step_size, precond_ridge) of the preconditioned solver ((1, 1e-3) was its "auto")
DAMPING_GRID = [(step, ridge) for step in (1.0, 0.5) for ridge in (1e-3, 1e-2, 0.1, 0.3)]
#: part "blocks": (block_size, batch_size) of the preconditioned solver ((1024, 4096) is its "auto"),
#: on the fit parts of at least BLOCKS_MIN_ROWS rows
BLOCKS_GRID = [(1024, 4096), (2048, 8192), (4096, 16384)]
BLOCKS_MIN_ROWS = 16384
#: part "small-blocks": (block_size, batch_size) on the fit parts of 2048 .. BLOCKS_MIN_ROWS rows
SMALL_BLOCKS_GRID = [(256, 1024), (512, 2048), (1024, 4096), (2048, 8192), (4096, 16384)]
#: part "passes": passes of the preconditioned solver over the fit part (4 is its "auto")
PASSES_GRID = (4, 8, 16)
#: (batch_size, block_size, passes) of part "adult"
ADULT_GRID = [(256, 256, 3), (256, 128, 2), (512, 128, 5), (1024, 128, 6), (1024, 256, 5)]
#: (n_iter, block_size) of part "qm7" (squared loss)
QM7_GRID = [(64, 128), (128, 64), (200, 41), (128, 90), (128, 180), (200, 256), (256, 128)]


def _resolve(n, batch, passes, min_iter, features):
    b = min(batch, n)
    if passes is None:
        T = min_iter
    else:
        T = max(min_iter, math.ceil(passes * n / b))
    D = max(1, min(256, math.ceil(features / T)))
    return T, D


def run_small(suite, quick=False, datasets=None, grid=None):
    from sklearn.model_selection import train_test_split

    from kernelscale.doubly_stochastic.estimators import DoublyStochasticClassifier, DoublyStochasticRegressor
    from kernelscale.kernels import GaussianKernel

    names = datasets or list(common.DATASETS)
    grid = grid or (SMALL_GRID if not quick else [(4, 32, 2048), (4, 64, 4096)])
    for name in names:
        data = common.make_dataset(name, 1000 if quick else None)
        task = data.task
        X, y = data.X_train, data.y_train
        Xf, Xv, yf, yv = train_test_split(X, y, test_size=0.25, random_state=SEED,
                                          stratify=y if task == "classification" else None)
        sigma = common.median_sigma(Xf)
        _, _, peer = common.peer_factory(task, sigma)
        t = time.perf_counter()
        p = peer().fit(Xf, yf)
        peer_s = time.perf_counter() - t
        peer_err = task_error(task, p.predict(Xv), yv)
        ds = f"{name} ({Xf.shape[0]}/{Xv.shape[0]} of train)"
        suite.add(ds, "exact peer", role="peer", metrics={"val_error": peer_err, "fit_s": peer_s},
                  params={"sigma": sigma, "n_fit": int(Xf.shape[0]), "d": int(Xf.shape[1]), "task": task})
        cls = DoublyStochasticRegressor if task == "regression" else DoublyStochasticClassifier
        rows = []
        for passes, min_iter, features in grid:
            T, D = _resolve(Xf.shape[0], 256, passes, min_iter, features)
            est = cls(GaussianKernel(sigma=sigma), solver="sgd", n_iter=T, block_size=D, random_state=SEED)
            t = time.perf_counter()
            try:
                est.fit(Xf, yf)
                fit_s = time.perf_counter() - t
                err = task_error(task, est.predict(Xv), yv)
            except ValueError as exc:
                fit_s, err = time.perf_counter() - t, None
                logger.info("  %s failed: %s", (passes, min_iter, features), exc)
            rows.append([passes, min_iter, features, T, D, err, error_ratio(task, err, peer_err, len(yv)), fit_s])
            logger.info("%-34s P=%s m=%s F=%s T=%d D=%d: err %.4g (peer %.4g) %.3f s", name, passes, min_iter,
                        features, T, D, err if err is not None else float("nan"), peer_err, fit_s)
        suite.add(ds, "DSG grid", metrics=_best(rows), params={
            "n_fit": int(Xf.shape[0]), "task": task, "grid": rows, "grid_fields": GRID_FIELDS})


GRID_FIELDS = ["passes", "min_iter", "features", "n_iter", "block_size", "val_error", "error_ratio", "fit_s"]


def _best(rows):
    ok = [r for r in rows if r[5] is not None]
    best = min(ok, key=lambda r: r[5]) if ok else None
    return {"best_val_error": None if best is None else best[5],
            "best_config": None if best is None else best[:5]}


def run_adult(suite, quick=False):
    from kernelscale import DoublyStochasticClassifier, GaussianKernel, load_dataset

    d = load_dataset("adult")
    X, y = d.X_train.astype(np.float64), d.y_train
    perm = np.random.RandomState(SEED).permutation(X.shape[0])
    n_val = X.shape[0] // 5
    if quick:
        perm = perm[:5000]
        n_val = 1000
    Xv, yv = X[perm[:n_val]], y[perm[:n_val]]
    Xf, yf = X[perm[n_val:]], y[perm[n_val:]]
    n = Xf.shape[0]
    grid = ADULT_GRID if not quick else [(256, 256, 2), (512, 128, 2)]
    for batch, block, passes in grid:
        est = DoublyStochasticClassifier(GaussianKernel(sigma=math.sqrt(10.0)), loss="hinge", solver="sgd",
                                         random_state=SEED,
                                         batch_size=batch, block_size=block, warm_start=True)
        per_pass = n / batch
        curve = []
        fit_s = 0.0
        for k in range(1, passes + 1):
            est.set_params(n_iter=math.ceil(k * per_pass))
            t = time.perf_counter()
            est.fit(Xf, yf)
            fit_s += time.perf_counter() - t
            err = float(np.mean(est.predict(Xv) != yv))
            curve.append([fit_s, err, int(est.n_iter_), k, int(est.n_iter_ * block)])
            logger.info("adult b=%d D=%d pass %d: T=%d M=%d err %.4f fit %.1f s", batch, block, k, est.n_iter_,
                        est.n_iter_ * block, err, fit_s)
        suite.add(f"adult ({n}/{n_val} of train)", f"DSG hinge batch={batch} block={block}",
                  metrics={"val_error": curve[-1][1], "fit_s": fit_s},
                  params={"batch_size": batch, "block_size": block, "passes": passes, "n_fit": n,
                          "curve": curve, "curve_fields": ["fit_s", "val_error", "n_iter", "passes", "features"]})


def _qm7_parts():
    """QM7's training part (papers/dsg.py's seeded 80 / 20 split; the upper triangles of the Coulomb
    matrices, float32) cut again 80 / 20: (X fit, y fit, X validation, y validation, the median
    bandwidth of the fit part); targets in kcal/mol."""
    from benchmarks.papers.dsg import qm7_split
    from kernelscale import GaussianKernel

    C, y, tr, _ = qm7_split()
    iu = np.triu_indices(23)
    X = C[:, iu[0], iu[1]].astype(np.float32)[tr]
    y = y[tr]
    perm = np.random.default_rng(SEED + 1).permutation(len(tr))
    n_val = len(tr) // 5
    Xf = X[perm[n_val:]]
    sigma = GaussianKernel("median").resolve(Xf, random_state=SEED).sigma
    return Xf, y[perm[n_val:]], X[perm[:n_val]], y[perm[:n_val]], sigma


def run_qm7(suite, quick=False):
    """QM7's training part (papers/dsg.py's seeded 80 / 20 split) cut again 80 / 20: the squared loss
    at (n_iter, block_size) configurations, validation MAE in kcal/mol (targets standardised
    with the fit part's mean and std)."""
    from kernelscale import DoublyStochasticRegressor, GaussianKernel

    Xf, yf, Xv, yv, sigma = _qm7_parts()
    n_val = len(yv)
    mu, sd = float(yf.mean()), float(yf.std())
    for T, D in (QM7_GRID if not quick else QM7_GRID[:2]):
        est = DoublyStochasticRegressor(GaussianKernel(sigma), solver="sgd", n_iter=T, block_size=D, random_state=SEED)
        t = time.perf_counter()
        est.fit(Xf, (yf - mu) / sd)
        fit_s = time.perf_counter() - t
        mae = float(np.mean(np.abs(est.predict(Xv) * sd + mu - yv)))
        logger.info("qm7 T=%d D=%d: val MAE %.1f fit %.2f s", T, D, mae, fit_s)
        suite.add(f"qm7 ({len(yf)}/{n_val} of train)", f"DSG squared n_iter={T} block={D}",
                  metrics={"val_mae": mae, "fit_s": fit_s},
                  params={"n_iter": T, "block_size": D, "features": T * D, "sigma": float(sigma)})


def _fit_row(suite, dataset, method, est, task, Xf, yf, Xv, yv, peer_err, score, params):
    """Fit ``est`` on the fit part, score it on the validation part, add the record."""
    score = score or (lambda e: task_error(task, e.predict(Xv), yv))
    t = time.perf_counter()
    est.fit(Xf, yf)
    fit_s = time.perf_counter() - t
    err = score(est)
    metrics = {"val_error": err, "fit_s": fit_s, "n_iter": int(est.n_iter_)}
    if peer_err is not None:
        metrics["error_ratio"] = error_ratio(task, err, peer_err, len(yv))
    logger.info("%-40s %-30s n=%d: err %.4g%s %.2f s", dataset, method, Xf.shape[0], err,
                "" if peer_err is None else f" (x{metrics['error_ratio']:.2f} the peer's)", fit_s)
    suite.add(dataset, method, metrics=metrics, params=dict(params, n_fit=int(Xf.shape[0]), task=task))


def _solver_rows(suite, dataset, task, make, Xf, yf, Xv, yv, peer_err=None, score=None):
    """sgd and the preconditioned solver at their defaults on one fit / validation split."""
    for solver in ("sgd", "preconditioned"):
        _fit_row(suite, f"solver: {dataset}", f"DSG {solver}", make(solver), task, Xf, yf, Xv, yv, peer_err,
                 score, {"solver": solver})


def _t0_rows(suite, dataset, task, make, Xf, yf, Xv, yv, peer_err=None, score=None):
    """The preconditioned solver with t0 = T0_PASSES passes over the fit part, the rest at its
    defaults, on one fit / validation split."""
    from kernelscale.doubly_stochastic.defaults import dsg_auto_sizes

    loss = "squared" if task == "regression" else None
    n = Xf.shape[0]
    one_pass = math.ceil(n / min(dsg_auto_sizes(n, "preconditioned", loss=loss)[1], n))
    for passes in T0_PASSES:
        est = make("preconditioned").set_params(t0=passes * one_pass)
        _fit_row(suite, f"t0: {dataset}", f"DSG preconditioned, t0 = {passes:g} passes", est, task, Xf, yf,
                 Xv, yv, peer_err, score, {"t0_passes": passes, "t0": passes * one_pass})


def _preconditioned_grid(suite, part, dataset, task, make, Xf, yf, Xv, yv, peer_err, score, settings):
    """The preconditioned solver at each of ``settings`` ((name, its parameters)), the rest at its defaults."""
    for name, params in settings:
        _fit_row(suite, f"{part}: {dataset}", f"DSG preconditioned, {name}", make("preconditioned").set_params(**params),
                 task, Xf, yf, Xv, yv, peer_err, score, params)


def _damping_rows(suite, dataset, task, make, Xf, yf, Xv, yv, peer_err=None, score=None):
    """The preconditioned solver at the (step_size, precond_ridge) of DAMPING_GRID, the rest at
    its defaults, on one fit / validation split of at least 2048 fit rows (where "auto" runs it)."""
    from kernelscale.doubly_stochastic.defaults import AUTO_PRECONDITIONED_ROWS

    if Xf.shape[0] >= AUTO_PRECONDITIONED_ROWS:
        _preconditioned_grid(suite, "damping", dataset, task, make, Xf, yf, Xv, yv, peer_err, score,
                             [(f"step {step:g}, ridge {ridge:g}", {"step_size": step, "precond_ridge": ridge})
                              for step, ridge in DAMPING_GRID])


def _blocks_rows(suite, dataset, task, make, Xf, yf, Xv, yv, peer_err=None, score=None):
    """The preconditioned solver at the (block_size, batch_size) of BLOCKS_GRID, the rest at its
    defaults (four passes), on one fit / validation split of at least BLOCKS_MIN_ROWS fit rows."""
    if Xf.shape[0] >= BLOCKS_MIN_ROWS:
        _preconditioned_grid(suite, "blocks", dataset, task, make, Xf, yf, Xv, yv, peer_err, score,
                             [(f"block {block}, batch {batch}", {"block_size": block, "batch_size": batch})
                              for block, batch in BLOCKS_GRID])


def _small_blocks_rows(suite, dataset, task, make, Xf, yf, Xv, yv, peer_err=None, score=None):
    """The preconditioned solver at the (block_size, batch_size) of SMALL_BLOCKS_GRID, the rest
    at its defaults (four passes), on one fit / validation split of 2048 .. BLOCKS_MIN_ROWS fit
    rows (where "auto" runs it and part ``blocks`` does not)."""
    from kernelscale.doubly_stochastic.defaults import AUTO_PRECONDITIONED_ROWS

    if AUTO_PRECONDITIONED_ROWS <= Xf.shape[0] < BLOCKS_MIN_ROWS:
        _preconditioned_grid(suite, "small-blocks", dataset, task, make, Xf, yf, Xv, yv, peer_err, score,
                             [(f"block {block}, batch {batch}", {"block_size": block, "batch_size": batch})
                              for block, batch in SMALL_BLOCKS_GRID])


def _passes_rows(suite, dataset, task, make, Xf, yf, Xv, yv, peer_err=None, score=None):
    """The preconditioned solver at PASSES_GRID passes over the fit part (n_iter = ceil(passes n
    / batch), "auto"'s rule; t0 stays one pass, so the step decays to 1 / passes), the rest at
    its defaults, on one fit / validation split of at least 2048 fit rows."""
    from kernelscale.doubly_stochastic.defaults import AUTO_PRECONDITIONED_ROWS, dsg_auto_sizes

    n = Xf.shape[0]
    if n >= AUTO_PRECONDITIONED_ROWS:
        _, batch, block = dsg_auto_sizes(n, "preconditioned", loss="squared" if task == "regression" else None)
        sizes = {"batch_size": batch, "block_size": block}  # "auto"'s, which an explicit n_iter would not take
        _preconditioned_grid(suite, "passes", dataset, task, make, Xf, yf, Xv, yv, peer_err, score,
                             [(f"{p} passes", {"n_iter": math.ceil(p * n / min(batch, n)), **sizes})
                              for p in PASSES_GRID])


def _intercept_rows(suite, dataset, task, make, Xf, yf, Xv, yv, peer_err=None, score=None):
    """The regressor at its defaults with fit_intercept False and True, on one fit / validation
    split of a regression set."""
    if task == "regression":
        for fit_intercept in (False, True):
            _fit_row(suite, f"intercept: {dataset}", f"DSG, fit_intercept={fit_intercept}",
                     make("auto").set_params(fit_intercept=fit_intercept), task, Xf, yf, Xv, yv, peer_err, score,
                     {"fit_intercept": fit_intercept})


def run_solver(suite, quick=False, datasets=None, rows=_solver_rows):
    from sklearn.model_selection import train_test_split

    from kernelscale import DoublyStochasticClassifier, DoublyStochasticRegressor, GaussianKernel, load_dataset

    for name in datasets or list(common.DATASETS):
        data = common.make_dataset(name, 1000 if quick else None)
        task = data.task
        Xf, Xv, yf, yv = train_test_split(data.X_train, data.y_train, test_size=0.25, random_state=SEED,
                                          stratify=data.y_train if task == "classification" else None)
        sigma = common.median_sigma(Xf)
        peer_err = task_error(task, common.peer_factory(task, sigma)[2]().fit(Xf, yf).predict(Xv), yv)
        cls = DoublyStochasticRegressor if task == "regression" else DoublyStochasticClassifier
        rows(suite, name, task, lambda solver: cls(GaussianKernel(sigma=sigma), solver=solver,
                                                           random_state=SEED), Xf, yf, Xv, yv, peer_err)
    if quick:
        return
    d = load_dataset("adult")
    X, y = d.X_train.astype(np.float64), d.y_train
    perm = np.random.RandomState(SEED).permutation(X.shape[0])
    n_val = X.shape[0] // 5
    for loss in ("hinge", "logistic"):
        rows(suite, f"adult {loss}", "classification", lambda solver: DoublyStochasticClassifier(
            GaussianKernel(sigma=math.sqrt(10.0)), loss=loss, solver=solver, random_state=SEED),
            X[perm[n_val:]], y[perm[n_val:]], X[perm[:n_val]], y[perm[:n_val]])
    d = load_dataset("mnist")
    X, y = d.X_train.astype(np.float32) / 255, d.y_train
    perm = np.random.RandomState(SEED).permutation(X.shape[0])
    n_val = X.shape[0] // 5
    rows(suite, "mnist", "classification", lambda solver: DoublyStochasticClassifier(
        GaussianKernel(sigma="median"), solver=solver, random_state=SEED),
        X[perm[n_val:]], y[perm[n_val:]], X[perm[:n_val]], y[perm[:n_val]])
    d = load_dataset("cadata")
    X, y = d.X.astype(np.float64), d.y.astype(np.float64)  # no official split: 80 / 20 of all rows
    perm = np.random.RandomState(SEED).permutation(X.shape[0])
    n_val = X.shape[0] // 5
    Xv, yv, Xf, yf = X[perm[:n_val]], y[perm[:n_val]], X[perm[n_val:]], y[perm[n_val:]]
    mu, sd = float(yf.mean()), float(yf.std())
    sigma = GaussianKernel("median").resolve(Xf, random_state=SEED).sigma
    rows(suite, "cadata", "regression", lambda solver: DoublyStochasticRegressor(
        GaussianKernel(sigma), solver=solver, random_state=SEED), Xf, (yf - mu) / sd, Xv, yv,
        score=lambda est: float(np.sqrt(np.mean((est.predict(Xv) * sd + mu - yv) ** 2))))
    Xf, yf, Xv, yv, sigma = _qm7_parts()  # the targets as they are (the regressor scales them itself)
    rows(suite, "qm7", "regression", lambda solver: DoublyStochasticRegressor(
        GaussianKernel(sigma), solver=solver, random_state=SEED), Xf, yf, Xv, yv,
        score=lambda est: float(np.mean(np.abs(est.predict(Xv) - yv))))


def run(quick=False, out_dir=None, parts=None, datasets=None):
    from threadpoolctl import threadpool_limits

    parts = parts or list(PARTS)
    suite = Suite(SUITE, quick=quick, out_dir=out_dir, paper={
        "source": "issues #17 item 2 (adult hinge <= 15.3% within 60 s at defaults) and #18 (fit <= 10x "
                  "the fastest kernelscale fit, error <= 1.5x the exact peer's); training data only"})
    keep = []
    if out_dir is None and set(parts) != set(PARTS) and suite.path.exists():
        old = json.loads(suite.path.read_text())
        def part(r):
            return next((p for p in PARTS[1:] if r["dataset"].startswith(p)), "small")
        keep = [r for r in old["records"] if part(r) not in parts]
    suite.records.extend(keep)
    with threadpool_limits(limits=2):
        if "small" in parts:
            run_small(suite, quick, datasets)
        if "adult" in parts:
            run_adult(suite, quick)
        if "qm7" in parts:
            run_qm7(suite, quick)
        # the parts over the splits of part "solver", each with its rows per split
        for name, rows in (("solver", _solver_rows), ("t0", _t0_rows), ("damping", _damping_rows),
                           ("blocks", _blocks_rows), ("small-blocks", _small_blocks_rows), ("passes", _passes_rows),
                           ("intercept", _intercept_rows)):
            if name in parts:
                run_solver(suite, quick, datasets, rows=rows)
    return suite.write(plot=False)


def main(argv=None):
    return cli_main(run, argv, __doc__.splitlines()[0], parts=PARTS)


if __name__ == "__main__":
    sys.exit(main())
