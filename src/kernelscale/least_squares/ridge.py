"""Sigma, its ridge and its factorisation: the linear algebra Algorithms 1 and 2 share
(docs/algorithms.md sections 5.2 and 5.4, "Ridge").

Both algorithms solve systems in Sigma, the weighted second moment of the features. The features
are centred by their weighted mean, which leaves Sigma = Cov, the weighted covariance. The ridge
alpha adds (alpha / 2) |W|_F^2 to the objective and alpha I to Sigma. This keeps Sigma invertible
when features have zero variance or are collinear, and their weights then stay 0. ``alpha=0``
with a singular Sigma raises a ValueError asking for alpha > 0.

``alpha="auto"`` is relative to the feature scale, so rescaling X does not change the
predictions:

- up to :data:`GCV_MAX_FEATURES` features, the ridge r * trace(Cov) / d, r in :data:`GCV_GRID`
  (1e-6 .. 1e3), with the smallest generalized cross-validation error of the ridge regression of
  the targets on the features (:func:`_gcv_alpha`). This takes one d x d eigendecomposition and
  no n-sized work beyond the moments (n x n when n < d, :func:`_dual_sigma`). Calibrated least
  squares scales it by its own factor (``gcv_scale``);
- above, :data:`AUTO_RIDGE` times the mean weighted variance of the features, because an
  eigendecomposition of that size costs more than the fit;
- :data:`AUTO_RIDGE` itself when every feature is constant.

An absolute ridge would not be scale-free: the same 1e-6 is negligible for pixels in [0, 1] but
a large part of the variance of thousands of random Fourier features of scale sqrt(2 / D)
(section 5.3). The measurements behind these choices are in
``benchmarks/studies/least_squares.md`` ("The auto ridge").

:func:`factor_sigma` factorises Sigma once per fit and returns a solver G -> Sigma^{-1} G:

- a float ``alpha`` (or "auto" above ``GCV_MAX_FEATURES``): the Cholesky factor
  (:class:`_CholeskySolve`);
- the GCV ridge: the eigendecomposition Cov = V diag(l) V^T the GCV choice has already paid for,
  Sigma^{-1} G = V diag(1 / (L l + alpha)) V^T G (:class:`_EigenSolve`). This costs two matrix
  products per step instead of two triangular solves;
- with fewer rows than features (host arrays): the GCV ridge and the solves come from the n x n
  dual matrix A A^T of the weighted centred features A instead of the d x d covariance. Its
  nonzero eigenvalues are the same, and the solve is the Woodbury identity
  (:class:`_DualSolve`), at O(n^2 d) instead of O(d^3).

The three solves agree to rounding (tests/test_least_squares.py), so a fit does not depend on
which one ran. Sigma is built from row chunks by a row executor (:mod:`kernelscale.ops.rows`).
The d x d moments and the small solves are float64, because accumulating X^T X over 60000 rows
in float32 would lose digits.

:func:`ridge_fit` is the small weighted ridge fit with an intercept of calibrated least squares'
calibration step, on the few columns of the calibration basis, from moments that one pass over
the row chunks gathers (:func:`shifted_moments`, merged by :func:`merge_moments`; the stagewise
stages gather theirs the same way).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ..linalg import factor_spd, symmetric_eigh
from ..ops.lapack_threads import one_lapack_thread
from ..ops.rows import is_dask, total, weighted_sum

__all__ = ["AUTO_RIDGE", "GCV_MAX_FEATURES", "GCV_GRID", "DUAL_MIN_RIDGE", "SHIFT_ROWS", "centred_moments",
           "factor_sigma", "merge_moments", "ridge_fit", "shifted_moments"]

#: ``alpha="auto"``: the ridge relative to the mean feature variance, above GCV_MAX_FEATURES
#: features (a validation split of MNIST chose it; benchmarks/studies/least_squares.md)
AUTO_RIDGE = 1e-6
#: ``alpha="auto"`` with at most this many features: the ridge of the grid below (relative to the
#: mean feature variance) with the smallest generalized cross-validation error
GCV_MAX_FEATURES = 2048
GCV_GRID = 10.0 ** np.arange(-6, 4)
#: smallest ridge, relative to the mean feature variance, solved on the n x n dual (_dual_sigma)
DUAL_MIN_RIDGE = 1e-2


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


def _dual_sigma(X, w, mean, scale, Y, sample_weight, gcv_scale):
    """:func:`factor_sigma` with alpha="auto" for host X with fewer rows than features: the GCV
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


def factor_sigma(op, X, w, scale, alpha, Y=None, sample_weight=None, gcv_scale=1.0):
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


#: rows of a chunk whose mean is its shift in :func:`shifted_moments`
SHIFT_ROWS = 1024


def shifted_moments(C, R, w):
    """One row chunk's weighted moments of the float64 columns C (n, p) and the residuals R
    (n, k) about a shift s of the chunk's own (the mean of its first SHIFT_ROWS rows): the tuple
    (sum_i w_i, s, sum_i w_i (c_i - s), sum_i w_i (c_i - s)(c_i - s)^T, sum_i w_i (c_i - s) r_i^T,
    sum_i w_i r_i), float64. Close to the chunk's mean, s keeps the centred moments free of
    cancellation; :func:`merge_moments` adds chunks' moments, :func:`centred_moments` centres them."""
    shift = C[:SHIFT_ROWS].mean(axis=0) if C.shape[0] else np.zeros(C.shape[1])
    C = C - shift
    R = R.astype(np.float64)
    w = w.astype(np.float64)
    Cw = C * w[:, None]
    return float(w.sum()), shift, w @ C, Cw.T @ C, Cw.T @ R, w @ R


def merge_moments(*parts):
    """:func:`shifted_moments` of several row chunks as the moments of all their rows about the
    shift of the first one that has rows (c - s = (c - s_j) + (s_j - s))."""
    parts = sorted(parts, key=lambda part: part[0] == 0)  # stable: a chunk with weight first
    total, shift, first, gram, cross, r_sum = (x.copy() if isinstance(x, np.ndarray) else x for x in parts[0])
    for t_j, s_j, m_j, g_j, x_j, r_j in parts[1:]:
        d = s_j - shift
        gram += g_j + np.outer(m_j, d) + np.outer(d, m_j) + t_j * np.outer(d, d)
        first += m_j + t_j * d
        cross += x_j + np.outer(d, r_j)
        r_sum += r_j
        total += t_j
    return total, shift, first, gram, cross, r_sum


def centred_moments(moments):
    """(the weighted mean of C, the moments of C about it: gram and cross with R, sum_i w_i r_i)
    from :func:`shifted_moments` (merged)."""
    total, shift, first, gram, cross, r_sum = moments
    offset = first / total  # mean - shift
    return shift + offset, gram - np.outer(first, offset), cross - np.outer(offset, r_sum), r_sum


def ridge_fit(moments, alpha):
    """Weighted ridge fit of R (n, k) on the columns of C (n, p) with an unpenalised intercept,
    from their :func:`shifted_moments` merged over the row chunks (weights summing to 1).

    Minimises sum_i w_i |r_i - A^T c_i - e|^2 + alpha |A|^2 ("auto" is relative to the mean
    variance of the columns of C). Returns (A (p, k), e (k,)) in float64, solved by Cholesky of
    the centred weighted Gram + alpha I. C is float64: the calibration basis y, y^2, y^3 is
    nearly collinear, and a float32 Gram matrix's rounding can exceed the "auto" ridge and make
    it indefinite.
    """
    mean, gram, cross, r_sum = centred_moments(moments)
    gram = 0.5 * (gram + gram.T)
    gram[np.diag_indices_from(gram)] += _resolve_alpha(alpha, gram, mean)
    factor = factor_spd(gram, "the calibration Gram matrix", "use alpha > 0")
    with one_lapack_thread(gram.shape[0]):
        A = linalg.cho_solve(factor, cross, check_finite=False)
    return A, r_sum - mean @ A

