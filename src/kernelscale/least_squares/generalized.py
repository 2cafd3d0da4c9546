"""Generalized least squares: Algorithm 1 of paper 5 (docs/algorithms.md section 5.2, eq. 14).

Multi-class GLM E[y | x] = g(W x + b), g = grad Phi, y one-hot (k classes). Each step is

    W <- W - (1/L) Sigma^{-1} E[(g(W x + b) - y) x^T],

with Sigma the weighted second moment of the features, factorised ONCE per fit
(:func:`kernelscale.least_squares.ridge.factor_sigma`). With the softmax link this minimises the
calibrated loss of eq. 13 (the multinomial logistic loss) and decreases it at every iteration
(L = 1, or 1/2, majorises the Hessian). With the identity link it is ridge regression on the
one-hot targets and converges in ONE step.

Departures from the paper (section 5.4):

- the steps are accelerated by default (Nesterov momentum in the Sigma metric, restarted to stay
  monotone), the variant the paper's conclusion proposes. Algorithm 1 as printed
  (``solver="gls"``) is slow once predictions are confident (section 5.3);
- the intercept: the model is W x + b. Instead of appending a constant column to x, the
  features are centred by their weighted mean xbar. The second moment of [x - xbar, 1] is then
  block-diagonal diag(Cov, 1), so Sigma^{-1} of the paper splits into Cov^{-1} for W and a plain
  mean for b. This is the same update as with a constant column, better conditioned in float32.
  The intercept is not penalised;
- the ridge ``alpha`` adds (alpha / 2) |W|_F^2 to the objective and alpha I to Sigma;
  ``"auto"`` is relative to the feature scale (:mod:`kernelscale.least_squares.ridge`);
- sample weights are normalised to sum to 1 and replace the 1/n of every empirical mean, so an
  integer weight acts as repeating the sample.

The passes over rows are stated against a row executor (:mod:`kernelscale.ops.rows`), so the
same code runs on numpy arrays and over the row chunks of dask arrays. float32 X stays float32
in every n-sized product. The d x d moments and the small solves are float64. The memory
estimate (Sigma, its factor, the n x k arrays of targets and predictions) is checked against
the budget before anything is allocated.
"""

from __future__ import annotations

import logging
from collections import namedtuple

import numpy as np

from ..base.monitor import IterationMonitor
from ..base.validation import as_float_array
from ..losses import softmax, softmax_loss
from ..ops.memory import default_memory_budget, plan_rows
from ..ops.rows import executor, is_dask, row_weights
from .ridge import factor_sigma

__all__ = [
    "generalized_least_squares",
    "gls_fixed_bytes",
    "squared_error",
    "check_design",
    "GLSResult",
    "LINKS",
    "SOLVERS",
]

logger = logging.getLogger(__name__)

LINKS = ("softmax", "identity")
SOLVERS = ("accelerated", "gls")

GLSResult = namedtuple("GLSResult", "coef intercept objective_history n_iter converged n_restarts alpha")


def _check_XY(X, Y):
    """X as a float array, Y (n, k) in X's dtype."""
    X = as_float_array(X, "X", accept_sparse=True)
    Y = np.asarray(Y, dtype=X.dtype)
    if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
        raise ValueError(f"Y must have shape ({X.shape[0]}, k), got {Y.shape}.")
    return X, Y


def check_design(X, Y):
    """The design matrix X and targets Y (n, k) as the solvers of this package take them: for
    host arrays X as a float array and Y in X's dtype; dask arrays (validated chunk by chunk by
    the caller, see :mod:`kernelscale.dask.fit`) are checked for shapes and row chunks only."""
    if not (is_dask(X) or is_dask(Y)):
        return _check_XY(X, Y)
    if not (is_dask(X) and is_dask(Y)) or Y.ndim != 2 or Y.shape[0] != X.shape[0] or Y.chunks[0] != X.chunks[0]:
        raise ValueError(f"Y must be a dask array of shape ({X.shape[0]}, k) with the row chunks of X.")
    if X.dtype not in (np.float32, np.float64) or Y.dtype != X.dtype:
        raise ValueError(f"dask X and Y must be float32 or float64 of one dtype, got {X.dtype} and {Y.dtype}.")
    return X, Y


# ----------------------------------------------------------------------------------------------
# the passes over rows, one row chunk at a time (the whole arrays on numpy input)


def _gls_scores(X, offset, W, c):
    S = X @ W
    S += c
    if offset is not None:
        S += offset
    return S


def squared_error(Y, P, w):
    """sum_i w_i |y_i - p_i|^2 in float64 (one row chunk's part of it): the objective of
    Algorithms 2 and 3, twice the identity link's loss here."""
    diff = Y - P
    return float(w @ np.einsum("ij,ij->i", diff, diff).astype(np.float64))


def _gls_loss(S, Y, w, link):
    if link == "softmax":
        return softmax_loss(S, Y, w)[1]
    return 0.5 * squared_error(Y, S, w)


def _gls_gradient(X, S, Y, w, link):
    """sum_i r_i and X^T R (float64) for the weighted residuals R = w (g(S) - Y)."""
    R = softmax(S) if link == "softmax" else S.copy()
    R -= Y
    R *= w.astype(S.dtype)[:, None]
    return R.sum(axis=0, dtype=np.float64), np.asarray(X.T @ R, dtype=np.float64)


def _loss_and_gradient(X, S, S_previous, Y, w, link, beta):
    """The loss at the scores S and :func:`_gls_gradient` at S + beta (S - S_previous) (at S
    without S_previous): an iterate's objective and the next step's gradient in one pass."""
    at = S if S_previous is None else _extrapolate(S, S_previous, beta)
    return (_gls_loss(S, Y, w, link), *_gls_gradient(X, at, Y, w, link))


def _extrapolate(S, S_previous, beta):
    """S + beta (S - S_previous), the scores of the extrapolated point (linear in the weights)."""
    Sy = S - S_previous
    Sy *= beta
    Sy += S
    return Sy


# ----------------------------------------------------------------------------------------------
# Algorithm 1


def gls_fixed_bytes(n, d, k, itemsize, with_offset=False):
    """Bytes Algorithm 1 holds besides the row blocks: Cov and its factor (float64), d x d in
    X's dtype (a block product), and the n x k targets, scores (current, previous, extrapolated
    and trial iterates) and residuals."""
    return 2 * 8 * d * d + itemsize * d * d + itemsize * n * k * (7 + with_offset) + 16 * n + 96 * d * k


def generalized_least_squares(
    X,
    Y,
    *,
    link="softmax",
    L=1.0,
    alpha="auto",
    max_iter=500,
    tol=1e-4,
    solver="accelerated",
    sample_weight=None,
    offset=None,
    coef_init=None,
    intercept_init=None,
    budget=None,
    monitor=None,
):
    """Algorithm 1 (generalized least squares, eq. 14) on X (n, d) and targets Y (n, k).

    Minimises f(W, b) = sum_i w_i l(W x_i + b + o_i; y_i) + (alpha / 2) |W|_F^2, with l the
    calibrated loss of ``link`` (softmax: lse(s) - y . s, eq. 13; identity: |s - y|^2 / 2) and
    o the optional fixed ``offset`` (n, k) (the current predictions of a stagewise stage). The
    step of eq. 14 is W <- W - (L Cov + alpha I)^{-1} grad_W f, b <- b - grad_b f / L: a
    majorisation step (L Sigma bounds the Hessian block-wise), so f never increases. With the
    identity link and L = 1 the first step lands on the ridge solution.

    ``solver="gls"`` iterates eq. 14 as printed. Its rate is set by how loosely L Sigma bounds
    the Hessian: the softmax curvature p (1 - p) is far below L once predictions are confident
    (section 5.3). ``solver="accelerated"`` (the default) is the accelerated variant the
    paper's conclusion proposes: Nesterov's momentum with the same Sigma-metric step taken from
    the extrapolated point y = x + beta (x - x_prev) (FISTA), made monotone by a restart: a trial
    point that would raise f is discarded and the plain eq. 14 step is taken from x instead.
    Both cost two passes over X per step: the scores of the trial point, then ONE pass for its
    objective and the gradient at the point the next step starts from (the trial point, or its
    extrapolation, combined from stored scores), so a step waits for one sum over the rows (a
    restart pays a pass of its own for the gradient at x); f decreases at every iteration for
    both. The identity link takes plain steps (one suffices).

    Stops when the guaranteed decrease g^T M^{-1} g / 2 of a step from the gradient point is
    at most ``tol * |f|``, after ``max_iter`` steps, or when ``monitor.update`` returns True.

    ``alpha``: a float, or "auto" (relative to the feature scale, see
    :mod:`kernelscale.least_squares.ridge`). ``budget``: the bytes the fit may hold (an int,
    e.g. the estimator's ``max_memory`` parsed by :func:`kernelscale.ops.memory.parse_memory`;
    None: :func:`kernelscale.ops.memory.default_memory_budget`).

    Returns
    -------
    GLSResult(coef (k, d) float64, intercept (k,) float64, objective_history (n_iter + 1,)
    with f at every iterate, n_iter, converged, n_restarts, alpha (the ridge used)). A plain step
    that raises f (by rounding only, at the precision floor) ends the fit as converged without
    being taken.
    """
    if link not in LINKS:
        raise ValueError(f"link must be one of {LINKS}, got {link!r}.")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}.")
    lowest = 1.0 if link == "identity" else 0.5
    if not L >= lowest:
        raise ValueError(
            f"L={L!r} is below the Lipschitz constant of the {link} link ({lowest:g}), so the "
            f"steps would not decrease the loss; pass L >= {lowest:g} (L=1 is always valid)."
        )
    X, Y = check_design(X, Y)
    (n, d), k, dtype = X.shape, Y.shape[1], X.dtype
    if offset is not None and not is_dask(offset):
        offset = np.asarray(offset, dtype=dtype)
    if offset is not None and offset.shape != (n, k):
        raise ValueError(f"offset must have shape ({n}, {k}), got {offset.shape}.")
    rows_n = max(X.chunks[0]) if is_dask(X) else n  # rows one task holds at once
    budget = default_memory_budget() if budget is None else int(budget)
    fixed = gls_fixed_bytes(rows_n, d, k, dtype.itemsize, offset is not None)
    plan_rows(
        rows_n, 8 * d, fixed, budget,
        "generalized least squares (Sigma is d x d float64, targets and predictions n x k)",
        "increase max_memory, or reduce the number of features (PCA, or a stagewise fit with a "
        "smaller block_size)",
    )
    rows = executor(budget - fixed, X)
    w = row_weights(rows, X, sample_weight, n)
    mean, solve, alpha = factor_sigma(rows, X, w, L, alpha, Y, sample_weight)
    W = np.zeros((d, k)) if coef_init is None else np.array(coef_init, dtype=np.float64).T.copy()
    b = np.zeros(k) if intercept_init is None else np.array(intercept_init, dtype=np.float64).copy()
    if W.shape != (d, k) or b.shape != (k,):
        raise ValueError(f"coef_init must have shape ({k}, {d}) and intercept_init ({k},).")
    momentum = solver == "accelerated" and link == "softmax"

    def scores(W, b_centered):
        """Scores of the (centred-intercept) iterate, per row (on the workers for dask input)."""
        return rows.map(_gls_scores, X, offset, W=W.astype(dtype), c=(b_centered - mean @ W).astype(dtype),
                        width=k, dtype=dtype)

    def penalty(W):
        return 0.5 * alpha * float(np.sum(W * W))

    def gradient(S):
        """grad_b and X^T R at the point with scores S: a pass of its own (after a restart)."""
        return rows.sum(_gls_gradient, X, S, Y, w, link=link)

    def measured(Sz, S, beta):
        """The loss at Sz and the gradient moments at the point the next step starts from,
        Sz + beta (Sz - S), in one pass over the rows."""
        loss, grad_b, XR = rows.sum(_loss_and_gradient, X, Sz, S if beta > 0 else None, Y, w, link=link,
                                    beta=dtype.type(beta))
        return loss, (grad_b, XR)

    def step(moments, W):
        """The eq. 14 step from the point with gradient ``moments`` and weights W, and its decrement."""
        grad_b, XR = moments
        grad_W = XR - np.outer(mean, grad_b) + alpha * W
        step_W = solve(grad_W)
        step_b = grad_b / L
        return step_W, step_b, float(np.sum(grad_W * step_W) + grad_b @ step_b)

    def next_beta(t):
        return (t - 1.0) / (0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t)))

    b_c = b + mean @ W  # intercept of the centred features x - mean
    S = scores(W, b_c)
    f, ahead = measured(S, None, 0.0)
    f += penalty(W)
    history = [f]
    previous = None  # (W, b_c) of the previous iterate while momentum is on
    t = 1.0
    tiny = np.finfo(np.float64).tiny
    converged = False
    n_iter = 0
    n_restarts = 0
    monitor = monitor if monitor is not None else IterationMonitor()
    while True:
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        beta = 0.0 if previous is None else (t - 1.0) / t_next
        if beta > 0:
            Wy = W + beta * (W - previous[0])
            by = b_c + beta * (b_c - previous[1])
        else:
            Wy, by = W, b_c
        # the gradient at (Wy, by) came with the objective of W, unless a restart dropped it
        step_W, step_b, decrement = step(ahead if ahead is not None else gradient(S), Wy)
        small = 0.5 * decrement <= tol * max(abs(f), tiny)
        if small and beta == 0:
            converged = True
            break
        if n_iter == max_iter:
            converged = small
            break
        Wz, bz = Wy - step_W, by - step_b
        Sz = scores(Wz, bz)
        # the next step starts from an extrapolation of z and x when z is kept with momentum
        beta_z = next_beta(t_next) if momentum else 0.0
        fz, ahead = measured(Sz, S, beta_z)
        fz += penalty(Wz)
        if fz > f:
            if beta == 0:  # a majorisation step cannot raise f: only rounding can, so stop here
                converged = True
                break
            # restart: discard the extrapolated trial point, take a plain step from x next
            previous, t, ahead = None, 1.0, None
            n_restarts += 1
            continue
        if momentum:
            previous, t = (W, b_c), t_next
        W, b_c, S, f = Wz, bz, Sz, fz
        n_iter += 1
        history.append(f)
        # the objective of iterate `n_iter` is reported after step `n_iter` (none before the first)
        if monitor.update(objective=f, decrement=decrement):
            break
        if small:
            converged = True
            break
    logger.debug(
        "generalized least squares (%s): %d iterations, %d restarts, objective %.6g, converged=%s",
        solver, n_iter, n_restarts, f, converged,
    )
    intercept = b_c - mean @ W
    return GLSResult(W.T.copy(), intercept, np.asarray(history), n_iter, converged, n_restarts, alpha)

