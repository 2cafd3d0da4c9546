"""Least squares revisited (ALGORITHMS.md section 5): generalized and calibrated least squares.

Multi-class GLM E[y | x] = g(W x + b), g = grad Phi, y one-hot (k classes).

- :func:`generalized_least_squares` (Algorithm 1, eq. 14): W <- W - (1/L) Sigma^{-1} E[(g(W x)
  - y) x^T], the weighted second-moment matrix factorised ONCE (see "Factorisation" below). With the softmax link
  it minimises the calibrated loss of eq. 13 (the multinomial logistic loss) and decreases it at
  every iteration (L = 1, or 1/2, majorises the Hessian); with the identity link it is ridge
  regression on the one-hot targets and converges in ONE step. By default the steps are
  accelerated (Nesterov momentum in the Sigma metric, restarted to stay monotone), the variant
  the paper's conclusion proposes: Algorithm 1 as printed (``solver="gls"``) is far from
  converged after 100 steps on MNIST.
- :func:`calibrated_least_squares` (Algorithm 2, eqs. 18-19): alternately fit the residual on x,
  refit y on a basis G of the current predictions (y, y^2, y^3 elementwise), then project each
  prediction onto the probability simplex (multi-label: the hypercube). The squared error never
  increases.

Conventions shared by both (documented here once):

- Intercept: the model is W x + b. Instead of appending a constant column to x, the features
  are centred by their weighted mean xbar; the second moment of [x - xbar, 1] is then
  block-diagonal diag(Cov, 1), so Sigma^{-1} of the paper splits into Cov^{-1} for W and a
  plain mean for b. This is the same update as with a constant column, better conditioned in
  float32. The intercept is not penalised.
- Ridge: ``alpha`` adds (alpha / 2) |W|_F^2 to the objective and alpha I to Sigma (Cov). It
  keeps Sigma invertible when features have zero variance or are collinear (their weights stay
  0); ``alpha=0`` with a singular Sigma raises a ValueError asking for alpha > 0. The default
  ``alpha="auto"`` is relative to the feature scale and, up to ``GCV_MAX_FEATURES`` (2048)
  features, chosen from the data: the ridge r * trace(Cov) / d, r in 1e-6 .. 1e3, with the
  smallest generalized cross-validation error of the ridge regression of the targets on the
  features (:func:`_gcv_alpha`: one d x d eigendecomposition, no n-sized work; n x n when n < d),
  times ``CLS_GCV_SCALE`` (10) for calibrated least squares, whose 10 refits of the residual
  shrink like one fit with a tenth of the ridge. Above 2048 features (an eigendecomposition of
  4000 x 4000 takes tens of seconds on 2 cores) it is ``AUTO_RIDGE`` (1e-6) times the mean
  weighted variance of the features, the value a validation split of MNIST's training set chose
  for 4000 and 8000 random Fourier features. Either way rescaling X does not change the
  predictions (1e-6 itself if every feature is constant). The fixed 1e-6 let 1024 random Fourier
  features interpolate a few hundred samples (breast_cancer: 11.2% test error for calibrated least
  squares, 6.3% with the GCV ridge; benchmarks/bench_robustness.py). An absolute ridge would not
  be scale-free: 1e-6 is 1e-5 of the variance of MNIST pixels in [0, 1] but about 7e-3 of that of
  4000 random Fourier features of scale sqrt(2 / D), where it took 44% of the converged softmax
  objective and cost 0.2-0.55 points of test error on MNIST (see the least-squares benchmark).
- Factorisation: Sigma is factorised once per fit. A float ``alpha`` (or "auto" above
  ``GCV_MAX_FEATURES``) uses its Cholesky factor. The GCV ridge has already paid for the
  eigendecomposition Cov = V diag(l) V^T, so Sigma^{-1} G = V diag(1 / (L l + alpha)) V^T G
  reuses it (two matrix products per step instead of a Cholesky factor and two triangular
  solves, which cost 14 ms per step on digits with 1024 features and 10 classes). With fewer
  rows than features (host arrays; e.g. 112 iris rows behind 1024 random Fourier features) the
  GCV ridge and the solves come from the n x n dual matrix A A^T of the weighted centred
  features A instead of the d x d covariance (its nonzero eigenvalues are the same; the solve is
  the Woodbury identity): O(n^2 d) instead of O(d^3). The three solves agree to rounding
  (tests/test_least_squares.py), so the fits do not depend on which one ran.
- Weights: sample weights are normalised to sum to 1 and replace the 1/n of every empirical
  mean, so an integer weight acts as repeating the sample.
- Memory: Sigma is built from row blocks of X sized by ``max_memory``; the estimate (Sigma, its
  factor, the n x k arrays of targets and predictions) is checked before anything is allocated.
- dtype: float32 X is kept float32 in every n-sized product; the d x d moment matrix and the
  small solves are float64 (accumulating X^T X over 60000 rows in float32 would lose digits).
"""

from __future__ import annotations

import logging
import warnings
from collections import namedtuple
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ..base.classifier import check_class_memory, encode_classes, one_hot
from ..base.estimator import INPUT_ATTRIBUTES, commit_fit, fit_weights, validate_fit_data
from ..linalg import factor_spd
from ..losses import softmax, softmax_loss
from ..base.monitor import IterationMonitor
from ..linalg import symmetric_eigh
from ..base.device import DeviceMixin
from ..base.params import DEVICE_CONSTRAINT, MEMORY_CONSTRAINT
from ..base.validation import as_float_array, check_finite_result, validate_data
from ..ops.lapack_threads import one_lapack_thread
from ..ops.memory import parse_memory, plan_rows
from ..ops.rows import HostRows, executor, is_dask, row_weights, total, weighted_sum
from ..simplex import project_simplex, simplex_rows

__all__ = [
    "GeneralizedLeastSquaresClassifier",
    "CalibratedLeastSquaresClassifier",
    "generalized_least_squares",
    "calibrated_least_squares",
    "calibrated_predict",
    "BASIS_FUNCTIONS",
    "gls_fixed_bytes",
]

logger = logging.getLogger(__name__)

#: calibration basis functions of Algorithm 2, applied elementwise to the k predictions
BASIS_FUNCTIONS = {"y": 1, "y2": 2, "y3": 3, "y4": 4}
LINKS = ("softmax", "identity")
PROJECTIONS = ("simplex", "hypercube")

GLSResult = namedtuple("GLSResult", "coef intercept objective_history n_iter converged n_restarts alpha")
CLSResult = namedtuple(
    "CLSResult", "coef intercept calibration calibration_intercept objective_history n_iter converged alpha"
)
#: ``alpha="auto"``: the ridge relative to the mean feature variance (module docstring)
AUTO_RIDGE = 1e-6
#: ``alpha="auto"`` with at most this many features: the ridge of the grid below (relative to the
#: mean feature variance) with the smallest generalized cross-validation error (module docstring)
GCV_MAX_FEATURES = 2048
GCV_GRID = 10.0 ** np.arange(-6, 4)
#: calibrated least squares: the GCV ridge times this, its default max_iter (see the fit)
CLS_GCV_SCALE = 10


# ----------------------------------------------------------------------------------------------
# numerical helpers of Algorithms 1-2


def _check_XY(X, Y):
    """X as a float array, Y (n, k) in X's dtype."""
    X = as_float_array(X, "X")
    Y = np.asarray(Y, dtype=X.dtype)
    if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
        raise ValueError(f"Y must have shape ({X.shape[0]}, k), got {Y.shape}.")
    return X, Y


def _resolve_alpha(alpha, gram, mean):
    """The ridge to add to the centred, weighted Gram matrix ``gram`` of features with weighted
    ``mean``: ``alpha`` itself, or for "auto" AUTO_RIDGE times the mean variance trace(gram) / d
    (AUTO_RIDGE if the features are constant up to rounding)."""
    if isinstance(alpha, str):
        if alpha != "auto":
            raise ValueError(f'alpha must be a float >= 0 or "auto", got {alpha!r}.')
        variance = float(np.trace(gram)) / gram.shape[0]
        return AUTO_RIDGE * (1.0 if _constant(gram, mean) else variance)
    return float(alpha)


def _constant(gram, mean):
    """Whether every feature is constant up to rounding (trace(gram) / d tiny next to |mean|^2 / d)."""
    return _constant_trace(float(np.trace(gram)), gram.shape[0], mean)


def _constant_trace(trace, d, mean):
    """:func:`_constant` from trace(gram) and the number of features d."""
    variance = trace / d
    return variance <= 1e-12 * (variance + float(mean @ mean) / mean.size)


def _weighted_squares(A, w, center):
    """sum_i w_i |a_i - center|^2 in float64."""
    C = A.astype(np.float64) - center
    return float(w @ np.einsum("ik,ik->i", C, C))


def _gcv_alpha(M, cross, ybar, yy, n_eff, spare_bytes):
    """alpha="auto" for d <= GCV_MAX_FEATURES: the ridge a = r * trace(M) / d, r in GCV_GRID,
    minimising the generalized cross-validation error RSS(a) / (1 - df(a) / n_eff)^2 of the
    weighted ridge regression of Y (n, k) on the centred features with an intercept. From the
    eigendecomposition M = V diag(l) V^T of the weighted covariance and B = V^T cross
    (cross = the centred X^T W Y), with weights summing to 1, ybar = sum_i w_i y_i and
    yy = sum_i w_i |y_i - ybar|^2 (sums over rows, computed by the caller):
    RSS(a) = sum_i w_i |y_i - ybar|^2 - sum_j |B_j|^2 (l_j + 2a) / (l_j + a)^2,
    df(a) = 1 + sum_j l_j / (l_j + a) and n_eff the sum of the sample weights (n without them,
    so that integer weights act as repeated samples). Returns (alpha, l, V)."""
    lam, V = symmetric_eigh(M, spare_bytes)
    lam = np.maximum(lam, 0.0)
    b2 = np.einsum("jk,jk->j", *(2 * [V.T @ cross]))
    return _gcv_pick(lam, b2, float(np.trace(M)) / M.shape[0], yy, n_eff), lam, V


def _gcv_pick(lam, b2, variance, yy, n_eff):
    """The GCV ridge of :func:`_gcv_alpha` from the eigenvalues ``lam`` of the covariance and the
    squared projections ``b2`` of the centred cross moments on its eigenvectors (eigenvalues 0,
    whose projections are 0, may be left out)."""
    best, best_gcv = AUTO_RIDGE * variance, np.inf
    for a in GCV_GRID * variance:
        df = 1.0 + float(np.sum(lam / (lam + a)))
        if df >= n_eff:
            continue
        rss = max(yy - float(b2 @ ((lam + 2 * a) / (lam + a) ** 2)), 0.0)
        gcv = rss / (1.0 - df / n_eff) ** 2
        if gcv < best_gcv:
            best, best_gcv = float(a), gcv
    return best


class _CholeskySolve:
    """Sigma^{-1} G by the Cholesky factor of Sigma."""

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, G):
        with one_lapack_thread(G.shape[0]):
            return linalg.cho_solve(self.factor, G, check_finite=False)


class _EigenSolve:
    """Sigma^{-1} G = V diag(1 / (scale l + alpha)) V^T G from the eigendecomposition
    M = V diag(l) V^T that the GCV ridge already computed (two d x d x k products per solve,
    several times faster than the two triangular solves of a Cholesky factor)."""

    def __init__(self, lam, V, scale, alpha):
        self.V, self.inverse = V, 1.0 / (scale * lam + alpha)

    def __call__(self, G):
        return self.V @ (self.inverse[:, None] * (self.V.T @ G))


class _DualSolve:
    """Sigma^{-1} G for n < d rows: with A (n, d) the centred features scaled by sqrt(w),
    Sigma = scale A^T A + alpha I and A A^T = U diag(l) U^T, the Woodbury identity gives
    Sigma^{-1} G = (G - B diag(scale / (alpha + scale l)) B^T G) / alpha with B = A^T U (d, n):
    n x d x k work per solve, nothing d x d."""

    def __init__(self, A, lam, U, scale, alpha):
        self.B = A.T @ U
        self.c = scale / (alpha + scale * lam)
        self.alpha = alpha

    def __call__(self, G):
        out = G - self.B @ (self.c[:, None] * (self.B.T @ G))
        out /= self.alpha
        return out


#: smallest ridge, relative to the mean feature variance, solved on the n x n dual (_dual_sigma)
DUAL_MIN_RIDGE = 1e-2


def _dual_sigma(X, w, mean, scale, Y, sample_weight, gcv_scale):
    """:func:`_factor_sigma` with alpha="auto" for host X with fewer rows than features: the GCV
    ridge and the solver from the n x n matrix A A^T (A = sqrt(w) (X - mean)), whose nonzero
    eigenvalues are those of the d x d covariance A^T A, and whose eigenvectors U give the
    covariance's as A^T U / sqrt(l); so the squared projections of the cross moments
    A^T sqrt(w) Y are l |U^T sqrt(w) Y|^2. Same ridge as the d x d eigendecomposition up to
    rounding, at O(n^2 d) instead of O(d^3). None when the features are constant, or when the
    ridge is below DUAL_MIN_RIDGE times the mean feature variance: the Woodbury solve divides the
    part of G outside the rows' span, rounding errors included, by alpha, and with an
    interpolating ridge that amplifies rounding past what the d x d solve loses (a weighted fit
    would then differ from the fit on repeated rows)."""
    d = X.shape[1]
    sw = np.sqrt(w)
    A = X.astype(np.float64) - mean
    A *= sw[:, None]
    K = A @ A.T
    trace = float(np.trace(K))
    if _constant_trace(trace, d, mean):
        return None
    lam, U = symmetric_eigh(K)
    lam = np.maximum(lam, 0.0)
    Y = np.asarray(Y, dtype=np.float64)
    ybar = w @ Y
    yy = _weighted_squares(Y, w, ybar)
    b2 = lam * np.einsum("jk,jk->j", *(2 * [U.T @ (sw[:, None] * Y)]))
    n_eff = X.shape[0] if sample_weight is None else float(np.sum(sample_weight))
    alpha = gcv_scale * _gcv_pick(lam, b2, trace / d, yy, n_eff)
    if alpha < DUAL_MIN_RIDGE * trace / d:
        return None
    return _DualSolve(A, lam, U, scale, alpha), alpha


def _factor_sigma(op, X, w, scale, alpha, Y=None, sample_weight=None, gcv_scale=1.0):
    """The weighted mean of X, a solver G -> Sigma^{-1} G with Sigma = scale * Cov + alpha I
    (the Sigma of Algorithms 1-2 for the centred features), the moments computed over row
    chunks by the row executor ``op`` (:mod:`kernelscale.ops.rows`), and the ridge alpha used
    (``"auto"`` resolved on Cov, by generalized cross-validation on the targets Y, times
    ``gcv_scale``, when Y is given and d <= GCV_MAX_FEATURES; ``sample_weight`` are the weights
    before normalisation).

    Sigma is factorised once: by Cholesky, or, when the GCV ridge has already paid for an
    eigendecomposition, by that eigendecomposition (:class:`_EigenSolve`); with fewer rows
    than features (host arrays, when the dual holds no more memory than the d x d path and the
    ridge is not an interpolating one) both come from the n x n dual matrix instead of the
    d x d covariance (:func:`_dual_sigma`, :class:`_DualSolve`)."""
    mean = op.weighted_mean(X, w)
    auto = isinstance(alpha, str) and alpha == "auto"
    n, d = X.shape
    # the dual holds A (n x d), A A^T, its eigenvectors and B (d x n): no more than the d x d path
    dual_fits = 2 * n * d + 3 * n * n <= 3 * d * d
    if auto and Y is not None and d <= GCV_MAX_FEATURES and n < d and dual_fits and not (is_dask(X) or is_dask(Y)):
        dual = _dual_sigma(X, w, mean, scale, Y, sample_weight, gcv_scale)
        if dual is not None:
            return mean, dual[0], dual[1]
    M = op.weighted_gram(X, w, center=mean)
    gcv = Y is not None and M.shape[0] <= GCV_MAX_FEATURES and not _constant(M, mean)
    if auto and gcv:
        ybar = op.sum(weighted_sum, Y, w)
        cross = op.weighted_gram(X, w, Y) - np.outer(mean, ybar)
        yy = op.sum(_weighted_squares, Y, w, center=ybar)
        n_eff = X.shape[0] if sample_weight is None else total(op, sample_weight)
        gcv_alpha, lam, V = _gcv_alpha(M, cross, ybar, yy, n_eff, op.budget)
        alpha = gcv_scale * gcv_alpha
        return mean, _EigenSolve(lam, V, scale, alpha), alpha
    alpha = _resolve_alpha(alpha, M, mean)
    if scale != 1.0:
        M *= scale
    M[np.diag_indices_from(M)] += alpha
    factor = factor_spd(
        M, "Sigma (the second moment of the features)",
        "some features have zero variance or are collinear: use alpha > 0 or alpha=\"auto\", which "
        "keeps their weights at 0",
    )
    return mean, _CholeskySolve(factor), alpha


def _ridge_fit(op, F, R, w, alpha):
    """Weighted ridge fit of R (n, k) on the columns of F (n, p) with an unpenalised intercept.

    Minimises sum_i w_i |r_i - A^T f_i - c|^2 + alpha |A|^2 (weights summing to 1; "auto" is
    relative to the mean variance of the columns of F). Returns (A (p, k), c (k,)) in float64,
    solved by Cholesky of the centred weighted Gram + alpha I.
    """
    mean = op.weighted_mean(F, w)
    # float64 (p is small): the calibration basis y, y^2, y^3 is nearly collinear, and a
    # float32 Gram matrix's rounding can exceed the "auto" ridge and make it indefinite
    op = HostRows.wrap(op)
    Fc = op.map(_centered64, F, center=mean, width=F.shape[1], dtype=np.float64)
    gram = op.weighted_gram(Fc, w)
    gram = 0.5 * (gram + gram.T)
    gram[np.diag_indices_from(gram)] += _resolve_alpha(alpha, gram, mean)
    cross = op.weighted_gram(Fc, w, R)
    factor = factor_spd(gram, "the calibration Gram matrix", "use alpha > 0")
    with one_lapack_thread(gram.shape[0]):
        A = linalg.cho_solve(factor, cross, check_finite=False)
    c = op.sum(weighted_sum, R, w) - mean @ A
    return A, c


def _centered64(F, center):
    return F.astype(np.float64) - center


# ----------------------------------------------------------------------------------------------
# Algorithm 1: its passes over rows, one row chunk at a time (the whole arrays on numpy input)


def _check_rows_XY(X, Y):
    """``_check_XY`` for host arrays; dask arrays (validated chunk by chunk by the caller, see
    :mod:`kernelscale.dask.fit`) are checked for shapes and row chunks only."""
    if not (is_dask(X) or is_dask(Y)):
        return _check_XY(X, Y)
    if not (is_dask(X) and is_dask(Y)) or Y.ndim != 2 or Y.shape[0] != X.shape[0] or Y.chunks[0] != X.chunks[0]:
        raise ValueError(f"Y must be a dask array of shape ({X.shape[0]}, k) with the row chunks of X.")
    if X.dtype not in (np.float32, np.float64) or Y.dtype != X.dtype:
        raise ValueError(f"dask X and Y must be float32 or float64 of one dtype, got {X.dtype} and {Y.dtype}.")
    return X, Y


def _gls_scores(X, offset, W, c):
    S = X @ W
    S += c
    if offset is not None:
        S += offset
    return S


def _squared_error(Y, P, w):
    """sum_i w_i |y_i - p_i|^2 in float64 (one row chunk's part of it)."""
    diff = Y - P
    return float(w @ np.einsum("ij,ij->i", diff, diff).astype(np.float64))


def _gls_loss(S, Y, w, link):
    if link == "softmax":
        return softmax_loss(S, Y, w)[1]
    return 0.5 * _squared_error(Y, S, w)


def _gls_gradient(X, S, Y, w, link):
    """sum_i r_i and X^T R (float64) for the weighted residuals R = w (g(S) - Y)."""
    R = softmax(S) if link == "softmax" else S.copy()
    R -= Y
    R *= w.astype(S.dtype)[:, None]
    return R.sum(axis=0, dtype=np.float64), np.dot(X.T, R).astype(np.float64)


def _extrapolate(S, S_previous, beta):
    """S + beta (S - S_previous), the scores of the extrapolated point (linear in the weights)."""
    Sy = S - S_previous
    Sy *= beta
    Sy += S
    return Sy


SOLVERS = ("accelerated", "gls")


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
    max_memory=None,
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
    the Hessian: the softmax curvature p (1 - p) is far below L once predictions are confident,
    and on MNIST 100 steps leave the loss 40% above its minimum. ``solver="accelerated"`` (the
    default) is the accelerated variant the paper's conclusion proposes: Nesterov's momentum
    with the same Sigma-metric step taken from the extrapolated point y = x + beta (x - x_prev)
    (FISTA), made monotone by a restart: a trial point that would raise f is discarded and the
    plain eq. 14 step is taken from x instead. Both cost two passes over X per step (the
    extrapolated scores are combined from stored ones); f decreases at every iteration for
    both. The identity link takes plain steps (one suffices).

    Stops when the guaranteed decrease g^T M^{-1} g / 2 of a step from the gradient point is
    at most ``tol * |f|``, after ``max_iter`` steps, or when ``monitor.update`` returns True.

    ``alpha``: a float, or "auto" (relative to the feature scale, see the module docstring).

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
    X, Y = _check_rows_XY(X, Y)
    (n, d), k, dtype = X.shape, Y.shape[1], X.dtype
    if offset is not None and not is_dask(offset):
        offset = np.asarray(offset, dtype=dtype)
    if offset is not None and offset.shape != (n, k):
        raise ValueError(f"offset must have shape ({n}, {k}), got {offset.shape}.")
    rows_n = max(X.chunks[0]) if is_dask(X) else n  # rows one task holds at once
    budget, fixed = parse_memory(max_memory), gls_fixed_bytes(rows_n, d, k, dtype.itemsize, offset is not None)
    plan_rows(
        rows_n, 8 * d, fixed, budget,
        "generalized least squares (Sigma is d x d float64, targets and predictions n x k)",
        "increase max_memory, or reduce the number of features (PCA, or a stagewise fit with a "
        "smaller block_size)",
    )
    rows = executor(budget - fixed, X)
    w = row_weights(rows, X, sample_weight, n)
    mean, solve, alpha = _factor_sigma(rows, X, w, L, alpha, Y, sample_weight)
    W = np.zeros((d, k)) if coef_init is None else np.array(coef_init, dtype=np.float64).T.copy()
    b = np.zeros(k) if intercept_init is None else np.array(intercept_init, dtype=np.float64).copy()
    if W.shape != (d, k) or b.shape != (k,):
        raise ValueError(f"coef_init must have shape ({k}, {d}) and intercept_init ({k},).")
    momentum = solver == "accelerated" and link == "softmax"

    def scores(W, b_centered):
        """Scores of the (centred-intercept) iterate, per row (on the workers for dask input)."""
        return rows.map(_gls_scores, X, offset, W=W.astype(dtype), c=(b_centered - mean @ W).astype(dtype),
                        width=k, dtype=dtype)

    def objective(S, W):
        return rows.sum(_gls_loss, S, Y, w, link=link) + 0.5 * alpha * float(np.sum(W * W))

    def step(S, W):
        """The eq. 14 step from the point with scores S and weights W, and its decrement."""
        grad_b, XR = rows.sum(_gls_gradient, X, S, Y, w, link=link)
        grad_W = XR - np.outer(mean, grad_b) + alpha * W
        step_W = solve(grad_W)
        step_b = grad_b / L
        return step_W, step_b, float(np.sum(grad_W * step_W) + grad_b @ step_b)

    b_c = b + mean @ W  # intercept of the centred features x - mean
    S = scores(W, b_c)
    f = objective(S, W)
    history = [f]
    previous = None  # (W, b_c, S) of the previous iterate while momentum is on
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
            Sy = rows.map(_extrapolate, S, previous[2], beta=dtype.type(beta), width=k, dtype=dtype)
        else:
            Wy, by, Sy = W, b_c, S
        step_W, step_b, decrement = step(Sy, Wy)
        del Sy
        small = 0.5 * decrement <= tol * max(abs(f), tiny)
        if small and beta == 0:
            converged = True
            break
        if n_iter == max_iter:
            converged = small
            break
        Wz, bz = Wy - step_W, by - step_b
        Sz = scores(Wz, bz)
        fz = objective(Sz, Wz)
        if fz > f:
            if beta == 0:  # a majorisation step cannot raise f: only rounding can, so stop here
                converged = True
                break
            # restart: discard the extrapolated trial point, take a plain step from x next
            previous, t = None, 1.0
            n_restarts += 1
            continue
        if momentum:
            previous, t = (W, b_c, S), t_next
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


# ----------------------------------------------------------------------------------------------
# Algorithm 2


def _check_basis(basis):
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


def _calibrated_step(X, Yhat, coef, intercept, calibration, calibration_intercept, basis, projection):
    """One prediction step of eqs. 18-19 with fitted stage parameters."""
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
    X = as_float_array(X, "X")
    basis = _check_basis(basis)
    Yhat = np.zeros((X.shape[0], coef.shape[1]), dtype=X.dtype)
    for t in range(coef.shape[0]):
        Yhat = _calibrated_step(X, Yhat, coef[t], intercept[t], calibration[t], calibration_intercept[t], basis, projection)
    return Yhat


def _zero_rows(X, k):
    return np.zeros((X.shape[0], k), dtype=X.dtype)


def _residual_moments(X, Y, Yhat, w):
    """sum_i r_i and X^T R (float64) of the weighted residuals R = w (Y - Yhat)."""
    R = (Y - Yhat) * w.astype(X.dtype)[:, None]
    return R.sum(axis=0, dtype=np.float64), np.dot(X.T, R).astype(np.float64)


def _linear_update(X, Yhat, W, b):
    Yt = Yhat + X @ W
    Yt += b
    return Yt


def _difference(A, B):
    return A - B


def _calibrate(Yt, G, D, e, projection):
    Yhat = Yt + G @ D
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
    max_memory=None,
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
    step 1, G(y~) in step 2; see the module docstring).

    Returns
    -------
    CLSResult(coef (T, k, d), intercept (T, k), calibration (T, k |G|, k), calibration_intercept
    (T, k), objective_history (T + 1,), n_iter = T, converged, alpha (the ridge of step 1)),
    arrays float64.
    """
    basis = _check_basis(basis)
    if projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}, got {projection!r}.")
    X, Y = _check_rows_XY(X, Y)
    (n, d), k, dtype = X.shape, Y.shape[1], X.dtype
    m = k * len(basis)
    rows_n = max(X.chunks[0]) if is_dask(X) else n  # rows one task holds at once
    fixed = (gls_fixed_bytes(rows_n, d, k, dtype.itemsize) + dtype.itemsize * rows_n * (3 * m + 2 * k)
             + 8 * rows_n * m + 16 * m * m)
    budget = parse_memory(max_memory)
    plan_rows(
        rows_n, 8 * d, fixed, budget,
        "calibrated least squares (Sigma is d x d float64; predictions and the calibration "
        "basis are n x k and n x k|G|)",
        "increase max_memory, or reduce the number of features or the basis",
    )
    op = executor(budget - fixed, X)
    w = row_weights(op, X, sample_weight, n)
    # t refits of the residual with ridge a shrink a direction of variance l << a like ONE fit
    # with ridge a / t (1 - (1 - l / a)^t ~ t l / a): "auto" scales the GCV ridge by the default
    # number of iterations (not by max_iter, so that a warm start keeps the ridge)
    mean, solve, sigma_alpha = _factor_sigma(op, X, w, 1.0, alpha, Y, sample_weight, gcv_scale=CLS_GCV_SCALE)
    stages = [[], [], [], []]
    Yhat = op.map(_zero_rows, X, k=k, width=k, dtype=dtype)
    if init is not None:
        for t in range(init[0].shape[0]):
            for store, value in zip(stages, init):
                store.append(np.asarray(value[t], dtype=np.float64))
            params = dict(zip(("coef", "intercept", "calibration", "calibration_intercept"), (s[-1] for s in stages)))
            Yhat = op.map(_calibrated_step, X, Yhat, **params, basis=basis, projection=projection, width=k, dtype=dtype)

    def objective(P):
        return op.sum(_squared_error, Y, P, w)

    history = [objective(Yhat)]
    converged = False
    monitor = monitor if monitor is not None else IterationMonitor()
    while len(stages[0]) < max_iter:
        # 1. fit the residual on x (eq. 18)
        grad_b, XR = op.sum(_residual_moments, X, Y, Yhat, w)
        W = solve(XR - np.outer(mean, grad_b))
        b = grad_b - mean @ W
        Yt = op.map(_linear_update, X, Yhat, W=W.astype(dtype), b=b.astype(dtype), width=k, dtype=dtype)
        # 2. calibrate on G(y~) (eq. 19), as a ridge fit of what y~ still misses
        G = op.map(_expand, Yt, basis=basis, width=m, dtype=dtype)
        D, e = _ridge_fit(op, G, op.map(_difference, Y, Yt, width=k, dtype=dtype), w, alpha)
        # 3. project
        Yhat = op.map(_calibrate, Yt, G, D=D.astype(dtype), e=e.astype(dtype), projection=projection,
                      width=k, dtype=dtype)
        for store, value in zip(stages, (W.T.copy(), b, D, e)):
            store.append(value)
        f = objective(Yhat)
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


# ----------------------------------------------------------------------------------------------
# estimators


class _LeastSquaresClassifierBase(ClassifierMixin, DeviceMixin, BaseEstimator):
    """Parameters and validation shared by the two classifiers."""

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "warm_start": ["boolean"],
        "max_memory": MEMORY_CONSTRAINT,
        "device": DEVICE_CONSTRAINT,
        "verbose": ["verbose"],
        "callback": [callable, None],
    }

    def _set_common_params(self, alpha, max_iter, tol, class_weight, warm_start, max_memory, device, verbose, callback):
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.max_memory = max_memory
        self.device = device
        self.verbose = verbose
        self.callback = callback

    def _validate_fit_data(self, X, y, sample_weight, allow_multilabel=False):
        """X, y, the targets Y (n, k), classes, weights, whether y is multi-label, and the
        attributes validation would set (for :func:`commit_fit`); the estimator is not touched."""
        X, y, fitted = validate_fit_data(
            self, X, y, dtype=[np.float64, np.float32], multi_output=allow_multilabel,
        )
        multilabel = False
        if allow_multilabel and y.ndim == 2:
            if y.shape[1] == 1:
                y = column_or_1d(y, warn=True)
            else:
                kind = type_of_target(y, input_name="y")
                if kind != "multilabel-indicator":
                    raise ValueError(
                        f"2-d y must be a multi-label indicator matrix of 0/1 (got type {kind!r}); "
                        f"pass a 1-d array of class labels for multi-class problems."
                    )
                multilabel = True
        if multilabel:
            if self.class_weight is not None:
                raise ValueError(
                    "class_weight is not supported for multi-label targets; pass per-sample "
                    "weights as sample_weight instead."
                )
            classes = np.arange(y.shape[1])
            Y = np.asarray(y, dtype=X.dtype)
            sw = fit_weights(sample_weight, None, X)
        else:
            classes, codes = encode_classes(y)
            # the n x k targets, scores and residuals that gls_fixed_bytes counts (with the rest, later)
            check_class_memory(7 * X.dtype.itemsize * X.shape[0] * classes.size, self.max_memory, classes.size,
                               "the one-hot targets, scores and residuals")
            Y = one_hot(codes, classes.size, X.dtype)
            sw = fit_weights(sample_weight, self.class_weight, X, codes, classes)
        return X, y, Y, classes, sw, multilabel, fitted

    def _check_warm_start(self, X, classes):
        if not (self.warm_start and hasattr(self, "classes_")):
            return False
        if self.coef_.shape[-1] != X.shape[1] or not np.array_equal(self.classes_, classes):
            raise ValueError(
                "warm_start=True continues the previous fit, but X or y changed (number of "
                "features or classes); set warm_start=False to fit from scratch."
            )
        return True

    def _warn_not_converged(self):
        warnings.warn(
            f"{type(self).__name__} did not converge in max_iter={self.max_iter} iterations "
            f"(tol={self.tol}); increase max_iter or tol.",
            ConvergenceWarning,
            stacklevel=3,
        )


class GeneralizedLeastSquaresClassifier(_LeastSquaresClassifierBase):
    """Multi-class GLM fitted by generalized least squares (paper 5, Algorithm 1, eq. 14).

    Iterates W <- W - (1/L) Sigma^{-1} E[(g(W x + b) - y) x^T] with g the link, Sigma the
    weighted second moment of the (centred) features plus ``alpha`` I, factorised once; by
    default with Nesterov momentum in the Sigma metric (``solver="accelerated"``, the paper's
    suggested accelerated variant; see :func:`generalized_least_squares`). The softmax link
    minimises the multinomial logistic loss (the calibrated loss of eq. 13) plus
    (alpha/2)|W|^2, decreasing it at every iteration for any L >= 1/2; the identity link is
    ridge regression on one-hot targets, reached in ONE iteration. The intercept is fitted
    unpenalised (see :mod:`kernelscale.least_squares.estimators`).

    Parameters
    ----------
    link : {"softmax", "identity"}, default="softmax"
    L : float, default=1.0
        Lipschitz constant of the link (the inverse step size). 1 is valid for both links; 1/2
        is still valid for softmax (paper footnote 3) and takes longer steps. Smaller values
        (below 1/2 for softmax, 1 for identity) raise a ValueError.
    alpha : float >= 0 or "auto", default="auto"
        Ridge added to Sigma (and (alpha/2)|W|^2 to the objective). Keeps Sigma invertible when
        features have zero variance or are collinear; alpha=0 then raises a ValueError. "auto":
        up to 2048 features, the ridge (relative to the mean feature variance) with the smallest
        generalized cross-validation error of the ridge regression of the one-hot targets;
        above, 1e-6 times the mean feature variance (module docstring). Either way the fit does
        not depend on the scale of X; a float is an absolute ridge. The resolved value is ``alpha_``. On separable training
        data (e.g. MNIST with 4000 random Fourier features) the softmax loss has no
        unpenalised minimiser: the weights grow until the small ridge balances them, and the
        fit may stop at ``max_iter`` (a ConvergenceWarning says so). The paper's
        parameter-free Algorithm 1 is a fixed number of plain steps: ``solver="gls", tol=0,
        max_iter=...``.
    max_iter : int, default=500
    tol : float >= 0, default=1e-4
        Stop when the guaranteed decrease of a step is at most tol * objective. This bounds
        the objective gap only from below (the gap can be 100x larger when the loss is flat,
        as for confident predictions). The default stops 3-7x sooner than 1e-6 at a test error
        0.06-0.22 points higher on MNIST (pixels 8.07% / 7.85%, 4000 and 8000 random Fourier
        features 1.76% / 1.70% and 1.54% / 1.32%; ``benchmarks/bench_least_squares.py``) and
        equal on the robustness benchmark's datasets; pass 1e-6 to optimise further.
    solver : {"accelerated", "gls"}, default="accelerated"
        "gls": eq. 14 as printed (Algorithm 1). "accelerated": the same step from a
        Nesterov-extrapolated point, restarted whenever it would raise the loss; same cost per
        iteration, far fewer iterations (on MNIST pixels 100 steps of "gls" leave the loss 40%
        above its minimum, "accelerated" 5%).
    class_weight : "balanced", dict or None
    warm_start : bool, default=False
        Start from the previous ``coef_`` / ``intercept_`` (same features and classes); the
        momentum of "accelerated" starts afresh.
    max_memory : int, str or None
        Budget for Sigma, its factor and the n x k work arrays; checked before allocating.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (README, "GPUs"): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
    verbose : int, default=0
    callback : callable or None
        Receives {"iteration", "objective", "decrement"} after every iteration; returning True
        stops the fit.

    Attributes
    ----------
    classes_ : (k,); coef_ : (k, d); intercept_ : (k,) (in X's dtype; binary problems keep both
    softmax rows); n_iter_ : int; objective_history_ : (n_iter_ + 1,) objective at every iterate;
    alpha_ : float, the ridge used; n_features_in_ : int.
    """

    _parameter_constraints: dict = {
        **_LeastSquaresClassifierBase._parameter_constraints,
        "link": [StrOptions(set(LINKS))],
        "L": [Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions(set(SOLVERS))],
    }

    def __init__(
        self, link="softmax", *, L=1.0, alpha="auto", max_iter=500, tol=1e-4, solver="accelerated",
        class_weight=None, warm_start=False, max_memory=None, device=None, verbose=0, callback=None,
    ):
        self.link = link
        self.L = L
        self.solver = solver
        self._set_common_params(alpha, max_iter, tol, class_weight, warm_start, max_memory, device, verbose, callback)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and class labels y (n,), with optional sample weights."""
        X, y, Y, classes, sw, _, fitted = self._validate_fit_data(X, y, sample_weight)
        return self._fit_prepared(X, Y, classes, sw, fitted)

    def _fit_prepared(self, X, Y, classes, sw, fitted):
        """The fit on validated X, one-hot targets Y (n, k) and weights sw: numpy arrays, or dask
        arrays with the same row chunks (:mod:`kernelscale.dask.fit`), fitted over them."""
        warm = self._check_warm_start(X, classes)
        with IterationMonitor(self.verbose, self.callback, total=self.max_iter, desc="GLS") as monitor:
            result = generalized_least_squares(
                X, Y, link=self.link, L=self.L, alpha=self.alpha, max_iter=self.max_iter, tol=self.tol,
                solver=self.solver, sample_weight=sw, coef_init=self.coef_ if warm else None,
                intercept_init=self.intercept_ if warm else None, max_memory=self.max_memory,
                monitor=monitor,
            )
        if not result.converged and not monitor.stopped_by_callback:
            self._warn_not_converged()
        fitted.update(classes_=classes, coef_=result.coef.astype(X.dtype), intercept_=result.intercept.astype(X.dtype),
                      n_iter_=result.n_iter, objective_history_=result.objective_history, alpha_=result.alpha)
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def _scores(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        S = X @ self.coef_.T.astype(X.dtype)
        S += self.intercept_.astype(X.dtype)
        return check_finite_result(S, "decision values")

    def decision_function(self, X):
        """Scores W x + b, (n, k); for two classes the 1-d difference s_1 - s_0."""
        S = self._scores(X)
        if S.shape[1] != 2:
            return S
        with np.errstate(over="ignore"):
            return check_finite_result(S[:, 1] - S[:, 0], "decision values")  # the difference may overflow

    def predict_proba(self, X):
        """softmax(W x + b), or for the identity link W x + b projected onto the simplex (which
        keeps the argmax, so ``predict`` is the argmax of these probabilities)."""
        S = self._scores(X)
        return softmax(S) if self.link == "softmax" else project_simplex(S)

    def predict(self, X):
        S = self._scores(X)
        return self.classes_[np.argmax(S, axis=1)]


class CalibratedLeastSquaresClassifier(_LeastSquaresClassifierBase):
    """Classifier that learns the link function too: calibrated least squares (paper 5,
    Algorithm 2, eqs. 18-19).

    Each iteration fits the residual on x by least squares (Sigma factorised once), refits y on
    the basis ``basis`` of the current predictions, and projects the predictions onto the
    probability simplex (1-d class labels) or onto the hypercube [0, 1]^k (a 2-d multi-label
    indicator y). The weighted squared error never increases (see
    :func:`calibrated_least_squares`). Predictions replay all stages, so the model holds
    ``n_iter_`` weight matrices (d x k each).

    Parameters
    ----------
    basis : tuple of str, default=("y", "y2", "y3")
        Calibration functions, applied elementwise to the k predictions; names from
        ``BASIS_FUNCTIONS`` ("y", "y2", "y3", "y4").
    alpha : float >= 0 or "auto", default="auto"
        Ridge of both least-squares fits (it keeps Sigma invertible with zero-variance or
        collinear features). "auto": for the fits on X, 10 (``CLS_GCV_SCALE``) times the generalized
        cross-validation ridge of GeneralizedLeastSquaresClassifier (up to 2048 features; above,
        1e-6 times the mean feature variance; module docstring); for the calibration fits, 1e-6
        times the mean variance of the basis. The fit does not depend on the scale of X; a
        float is an absolute ridge. ``alpha_`` is the ridge of the fits on X.
    max_iter : int, default=10
        Total number of iterations (with ``warm_start``, including earlier ones). Each
        iteration adds a linear model and a calibration, like a boosting stage, and the training
        error keeps falling: the relative-decrease rule of ``tol`` rarely fires, and flexible
        features overfit as iterations go on (MNIST with 4000 random Fourier features: test
        error lowest after 7-9 iterations, 1.68% after 10, 1.80% after 100), while raw pixels
        gain slowly up to 100 (8.8% after 10, 8.6% after 100).
    tol : float >= 0, default=1e-4
        Stop when the squared error decreases by at most ``tol`` times its value, or falls below
        1e-12 times its initial value (separable data). Reaching ``max_iter`` does not warn.
    class_weight : "balanced", dict or None
        Not available with multi-label targets.
    warm_start : bool, default=False
        Keep the stages of the previous fit (on the same data) and add iterations until
        ``max_iter`` in total, like boosting.
    max_memory, verbose, callback : as GeneralizedLeastSquaresClassifier.

    Attributes
    ----------
    classes_ : (k,) (``arange(k)`` for multi-label); coef_ (n_iter_, k, d), intercept_
    (n_iter_, k), calibration_ (n_iter_, k |basis|, k), calibration_intercept_ (n_iter_, k);
    n_iter_; objective_history_ (n_iter_ + 1,) weighted squared error after every iteration;
    alpha_ : float; multilabel_ : bool; n_features_in_.

    Multi-label probabilities are clipped to [0, 1] and can be exactly 0 or 1, which
    scikit-learn's multi-label output check forbids (it wants (0, 1)); the estimator therefore
    does not set the ``multi_label`` tag, although it fits multi-label indicator targets.
    """

    _parameter_constraints: dict = {
        **_LeastSquaresClassifierBase._parameter_constraints,
        "basis": [tuple, list],
    }

    def __init__(
        self, basis=("y", "y2", "y3"), *, alpha="auto", max_iter=10, tol=1e-4, class_weight=None,
        warm_start=False, max_memory=None, device=None, verbose=0, callback=None,
    ):
        self.basis = basis
        self._set_common_params(alpha, max_iter, tol, class_weight, warm_start, max_memory, device, verbose, callback)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and class labels y (n,) or a multi-label indicator y (n, k)."""
        basis = _check_basis(self.basis)
        X, y, Y, classes, sw, multilabel, fitted = self._validate_fit_data(X, y, sample_weight, allow_multilabel=True)
        return self._fit_prepared(X, Y, classes, sw, fitted, multilabel)

    def _fit_prepared(self, X, Y, classes, sw, fitted, multilabel=False):
        """The fit on validated X, targets Y (n, k) and weights sw: numpy arrays, or dask
        arrays with the same row chunks (:mod:`kernelscale.dask.fit`), fitted over them."""
        basis = _check_basis(self.basis)
        init, history = None, []
        if self._check_warm_start(X, classes):
            if self.multilabel_ != multilabel or tuple(self.basis_) != basis:
                raise ValueError("warm_start=True but the target type or basis changed; set warm_start=False.")
            if self.n_iter_ > self.max_iter:
                raise ValueError(
                    f"max_iter={self.max_iter} must be >= n_iter_={self.n_iter_} (iterations already "
                    f"fitted) when warm_start=True."
                )
            init = (self.coef_, self.intercept_, self.calibration_, self.calibration_intercept_)
            history = list(self.objective_history_[:-1])
        with IterationMonitor(self.verbose, self.callback, total=self.max_iter, desc="calibrated LS") as monitor:
            result = calibrated_least_squares(
                X, Y, basis=basis, alpha=self.alpha, max_iter=self.max_iter, tol=self.tol,
                sample_weight=sw, projection="hypercube" if multilabel else "simplex", init=init,
                max_memory=self.max_memory, monitor=monitor,
            )
        # no ConvergenceWarning at max_iter: it counts stages (the model's size), see its docstring
        fitted.update(
            classes_=classes, multilabel_=multilabel, basis_=basis, coef_=result.coef.astype(X.dtype),
            intercept_=result.intercept.astype(X.dtype), calibration_=result.calibration.astype(X.dtype),
            calibration_intercept_=result.calibration_intercept.astype(X.dtype), n_iter_=result.n_iter,
            objective_history_=np.asarray(history + list(result.objective_history)), alpha_=result.alpha,
        )
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def predict_proba(self, X):
        """The projected predictions: class probabilities on the simplex (n, k), or for
        multi-label targets the probability of each label, in [0, 1]."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        k, m = self.coef_.shape[1], self.calibration_.shape[1]
        per_row = X.dtype.itemsize * (4 * k + 2 * m) + 16 * k
        chunk = plan_rows(
            X.shape[0], per_row, 0, parse_memory(self.max_memory), "calibrated least-squares predictions",
            "increase max_memory",
        )
        out = np.empty((X.shape[0], k), dtype=X.dtype)
        for s in range(0, X.shape[0], chunk):
            out[s : s + chunk] = calibrated_predict(
                X[s : s + chunk], self.coef_, self.intercept_, self.calibration_,
                self.calibration_intercept_, self.basis_, "hypercube" if self.multilabel_ else "simplex",
            )
        return out

    def predict(self, X):
        """Class labels, or for multi-label targets the indicator matrix predict_proba > 0.5."""
        P = self.predict_proba(X)
        if self.multilabel_:
            return (P > 0.5).astype(int)
        return self.classes_[np.argmax(P, axis=1)]
