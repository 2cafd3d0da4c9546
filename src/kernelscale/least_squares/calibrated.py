"""Calibrated least squares: Algorithm 2 of paper 5 (docs/algorithms.md section 5.2, eqs. 18-19).

Every iteration alternately fits the residual on x, refits y on a basis G of the current
predictions (y, y^2, y^3 elementwise, :data:`BASIS_FUNCTIONS`), then projects each prediction
onto the probability simplex (multi-label: the hypercube). The weighted squared error never
increases. The model is not "proper": a prediction replays every stage
(:func:`calibrated_predict`).

Departures from the paper (section 5.4):

- the calibration (19) is computed as a ridge fit of the residual y - y~ on G(y~), plus an
  intercept (:func:`kernelscale.least_squares.ridge.ridge_fit`). With a basis that contains y,
  the models are those of (19), and the ridge shrinks towards "no change";
- multi-label targets are projected onto [0, 1]^k instead of the simplex;
- the fit on x shares the conventions of Algorithm 1 (:mod:`kernelscale.least_squares.generalized`:
  intercept by centring, normalised weights, Sigma factorised once). Its ``alpha="auto"`` is
  :data:`CLS_GCV_SCALE` (10) times the generalized cross-validation ridge of Algorithm 1: t
  refits of the residual with ridge a shrink a direction of variance l << a like ONE fit with
  ridge a / t, since 1 - (1 - l / a)^t ~ t l / a.

The passes over rows are stated against a row executor (:mod:`kernelscale.ops.rows`), so the same
code runs on numpy arrays and over the row chunks of dask arrays.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..base.monitor import IterationMonitor
from ..base.validation import as_float_array, check_finite_result
from ..ops.memory import default_memory_budget, plan_rows
from ..ops.rows import executor, is_dask, row_weights
from ..simplex import simplex_rows
from .generalized import check_design, gls_fixed_bytes, squared_error
from .ridge import factor_sigma, merge_moments, ridge_fit, shifted_moments

__all__ = [
    "calibrated_least_squares",
    "calibrated_predict",
    "calibrated_step",
    "check_basis",
    "BASIS_FUNCTIONS",
    "PROJECTIONS",
    "CLS_GCV_SCALE",
    "CLSResult",
    "cls_fixed_bytes",
]

#: calibration basis functions of Algorithm 2, applied elementwise to the k predictions
BASIS_FUNCTIONS = {"y": 1, "y2": 2, "y3": 3, "y4": 4}
PROJECTIONS = ("simplex", "hypercube")
#: ``alpha="auto"``: the GCV ridge of the fits on x times this, the estimator's default max_iter
#: (not max_iter itself, so that a warm start keeps the ridge)
CLS_GCV_SCALE = 10

CLSResult = namedtuple(
    "CLSResult", "coef intercept calibration calibration_intercept objective_history n_iter converged alpha"
)


def check_basis(basis):
    """``basis`` as a tuple of names from :data:`BASIS_FUNCTIONS`; a ValueError naming the fix otherwise."""
    if isinstance(basis, str) or not isinstance(basis, (tuple, list)) or len(basis) == 0:
        raise ValueError(
            f"basis must be a non-empty tuple of names from {tuple(BASIS_FUNCTIONS)}, e.g. "
            f"('y', 'y2', 'y3'); got {basis!r}."
        )
    unknown = [b for b in basis if not isinstance(b, str) or b not in BASIS_FUNCTIONS]
    if unknown:
        raise ValueError(
            f"basis contains unknown function(s) {unknown!r}; the available calibration functions "
            f"are {tuple(BASIS_FUNCTIONS)} (elementwise powers of the predictions)."
        )
    if len(set(basis)) != len(basis):
        raise ValueError(f"basis lists a function twice: {basis!r}; give each name once.")
    return tuple(basis)


def _expand(Yt, basis):
    """G(y~): the basis functions applied elementwise, side by side, (n, k * len(basis))."""
    return np.hstack([Yt if BASIS_FUNCTIONS[b] == 1 else Yt ** BASIS_FUNCTIONS[b] for b in basis])


def _project(V, projection):
    """V (n, k), float32 or float64, projected row by row (unvalidated: our own predictions)."""
    return simplex_rows(V) if projection == "simplex" else np.clip(V, 0, 1)


def calibrated_step(X, Yhat, coef, intercept, calibration, calibration_intercept, basis, projection):
    """One prediction step of eqs. 18-19 with fitted stage parameters: the predictions Yhat
    of the stages before it (n, k) -> this stage's (:func:`calibrated_predict` replays them)."""
    dtype = X.dtype
    Yt = Yhat + X @ coef.T.astype(dtype)
    Yt += intercept.astype(dtype)
    out = Yt + _expand(Yt, basis) @ calibration.astype(dtype)
    out += calibration_intercept.astype(dtype)
    return _project(check_finite_result(out, "calibrated scores"), projection)


def calibrated_predict(X, coef, intercept, calibration, calibration_intercept, basis, projection="simplex"):
    """Predictions (n, k) of a model fitted by :func:`calibrated_least_squares`: the prediction
    recursion y^(t) = clip(y~ + G(y~) D_t + e_t), y~ = y^(t-1) + W_t x + b_t, from y^(0) = 0.

    The model is not "proper" (the paper's remark after Theorem 2): every stage's parameters
    are needed, and predictions are replayed through all of them.
    """
    X = as_float_array(X, "X", accept_sparse=True)
    basis = check_basis(basis)
    Yhat = np.zeros((X.shape[0], coef.shape[1]), dtype=X.dtype)
    for t in range(coef.shape[0]):
        Yhat = calibrated_step(X, Yhat, coef[t], intercept[t], calibration[t], calibration_intercept[t], basis,
                               projection)
    return Yhat


def cls_fixed_bytes(n, d, k, m, itemsize):
    """Bytes Algorithm 2 holds besides the row blocks: those of Algorithm 1
    (:func:`~kernelscale.least_squares.generalized.gls_fixed_bytes`), the n x m calibration basis
    (in X's dtype and float64) and the n x k predictions before and after calibration."""
    return gls_fixed_bytes(n, d, k, itemsize) + itemsize * n * (3 * m + 2 * k) + 8 * n * m + 16 * m * m


def _zero_rows(X, k):
    return np.zeros((X.shape[0], k), dtype=X.dtype)


def _residual_moments(X, Y, Yhat, w):
    """sum_i r_i and X^T R (float64) of the weighted residuals R = w (Y - Yhat), and the
    objective sum_i w_i |y_i - yhat_i|^2: one pass gives the objective of the predictions and
    the moments of the next iteration's fit on x."""
    R = (Y - Yhat) * w.astype(X.dtype)[:, None]
    return R.sum(axis=0, dtype=np.float64), np.asarray(X.T @ R, dtype=np.float64), squared_error(Y, Yhat, w)


def _linear_update(X, Yhat, W, b):
    Yt = Yhat + X @ W
    Yt += b
    return Yt


def _calibration_moments(Yt, Y, w, basis):
    """:func:`~kernelscale.least_squares.ridge.shifted_moments` of the basis G(y~) (float64) and
    of what y~ still misses, y - y~, for the calibration's ridge fit."""
    return shifted_moments(_expand(Yt, basis).astype(np.float64), Y - Yt, w)


def _calibrate(Yt, D, e, basis, projection):
    Yhat = Yt + _expand(Yt, basis) @ D
    Yhat += e
    return _project(check_finite_result(Yhat, "calibrated scores"), projection)


def calibrated_least_squares(
    X,
    Y,
    *,
    basis=("y", "y2", "y3"),
    alpha="auto",
    max_iter=10,
    tol=1e-4,
    sample_weight=None,
    projection="simplex",
    init=None,
    budget=None,
    monitor=None,
):
    """Algorithm 2 (calibrated least squares, eqs. 18-19) on X (n, d) and targets Y (n, k).

    Starting from y^(0) = 0, every iteration

    1. fits the residual: (W_t, b_t) = ridge fit of y - y^(t-1) on x, y~ = y^(t-1) + W_t x + b_t;
    2. calibrates: the paper's refit of y on G(y~) (k x |G| weights), solved as a ridge fit of the
       residual y - y~ on G(y~) (weights D_t, e_t) so the ridge shrinks towards y~ itself;
    3. projects y^(t) = clip(y~ + G(y~) D_t + e_t) onto the simplex (``projection="simplex"``,
       one-hot y) or the hypercube (``"hypercube"``, multi-label indicator y).

    Each of the three steps can only lower sum_i w_i |y_i - y_i^(t)|^2 (steps 1-2 because "no
    change" is feasible, step 3 because y lies in the convex set), so the objective history is
    non-increasing. Stops when the relative decrease is at most ``tol``, after ``max_iter``
    iterations in total (counting those of ``init``), or when ``monitor.update`` returns True.

    Parameters
    ----------
    init : tuple (coef, intercept, calibration, calibration_intercept) or None
        Stages of an earlier fit on the same data to continue from (warm start).

    ``alpha`` is the ridge of both fits; "auto" is relative to the scale of what each fits (x in
    step 1, G(y~) in step 2; see :mod:`kernelscale.least_squares.ridge` and the module
    docstring). ``budget``: the bytes the fit may hold (an int; None:
    :func:`kernelscale.ops.memory.default_memory_budget`).

    Returns
    -------
    CLSResult(coef (T, k, d), intercept (T, k), calibration (T, k |G|, k), calibration_intercept
    (T, k), objective_history (T + 1,), n_iter = T, converged, alpha (the ridge of step 1)),
    arrays float64.
    """
    basis = check_basis(basis)
    if projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}, got {projection!r}.")
    X, Y = check_design(X, Y)
    (n, d), k, dtype = X.shape, Y.shape[1], X.dtype
    m = k * len(basis)
    rows_n = max(X.chunks[0]) if is_dask(X) else n  # rows one task holds at once
    fixed = cls_fixed_bytes(rows_n, d, k, m, dtype.itemsize)
    budget = default_memory_budget() if budget is None else int(budget)
    plan_rows(
        rows_n, 8 * d, fixed, budget,
        "calibrated least squares (Sigma is d x d float64; predictions and the calibration "
        "basis are n x k and n x k|G|)",
        "increase max_memory, or reduce the number of features or the basis",
    )
    op = executor(budget - fixed, X)
    w = row_weights(op, X, sample_weight, n)
    # "auto": the GCV ridge times CLS_GCV_SCALE (module docstring)
    mean, solve, sigma_alpha = factor_sigma(op, X, w, 1.0, alpha, Y, sample_weight, gcv_scale=CLS_GCV_SCALE)
    stages = [[], [], [], []]
    Yhat = op.map(_zero_rows, X, k=k, width=k, dtype=dtype)
    if init is not None:
        for t in range(init[0].shape[0]):
            for store, value in zip(stages, init):
                store.append(np.asarray(value[t], dtype=np.float64))
            params = dict(zip(("coef", "intercept", "calibration", "calibration_intercept"), (s[-1] for s in stages)))
            Yhat = op.map(calibrated_step, X, Yhat, **params, basis=basis, projection=projection, width=k, dtype=dtype)

    def measured(P):
        """The objective of the predictions P and, while another iteration follows, the moments
        of its fit on x (None otherwise), in one pass over the rows."""
        if len(stages[0]) >= max_iter:
            return op.sum(squared_error, Y, P, w), None
        grad_b, XR, f = op.sum(_residual_moments, X, Y, P, w)
        return f, (grad_b, XR)

    f, moments = measured(Yhat)
    history = [f]
    converged = False
    monitor = monitor if monitor is not None else IterationMonitor()
    while moments is not None:
        # 1. fit the residual on x (eq. 18)
        grad_b, XR = moments
        W = solve(XR - np.outer(mean, grad_b))
        b = grad_b - mean @ W
        Yt = op.map(_linear_update, X, Yhat, W=W.astype(dtype), b=b.astype(dtype), width=k, dtype=dtype)
        # 2. calibrate on G(y~) (eq. 19), as a ridge fit of what y~ still misses
        D, e = ridge_fit(op.reduce(_calibration_moments, Yt, Y, w, basis=basis, combine=merge_moments), alpha)
        # 3. project
        Yhat = op.map(_calibrate, Yt, D=D.astype(dtype), e=e.astype(dtype), basis=basis, projection=projection,
                      width=k, dtype=dtype)
        for store, value in zip(stages, (W.T.copy(), b, D, e)):
            store.append(value)
        f, moments = measured(Yhat)
        previous = history[-1]
        history.append(f)
        if monitor.update(objective=f):
            break
        # a separable problem drives f to 0 geometrically: its relative decrease never drops
        if previous - f <= tol * previous or f <= 1e-12 * history[0]:
            converged = True
            break
    arrays = [np.asarray(s) if s else np.zeros((0,) + shape) for s, shape in zip(stages, [(k, d), (k,), (m, k), (k,)])]
    return CLSResult(*arrays, np.asarray(history), len(stages[0]), converged, sigma_alpha)

