"""Leave-one-out residuals of kernel ridge regression for many ridges from one
eigendecomposition (the front door's search, :mod:`kernelscale.auto.search`).

With K = U diag(s) U^T and shrink(alpha) = alpha / (s + alpha),

    r_loo(alpha) = U (shrink * U^T Y) / (U o U) shrink                           (LOO)

row by row: the ridge residual Y - K (K + alpha I)^{-1} Y over 1 - diag of the hat matrix, both
formed from shrink directly rather than as differences, so that they keep their relative
precision where the fit interpolates. One O(m^3) eigendecomposition, then O(m^2 k) per ridge.
This is the exact solvers' world: K is the m x m Gram matrix the caller asked for.

:func:`loo_and_predictions` adds, from the same decomposition, the ridge's predictions on rows
outside the fit, K_out (K + alpha I)^{-1} Y = K_out U diag(1 / (s + alpha)) U^T Y: with both,
the leave-one-out error of a vote of several ridges fitted on overlapping subsets of the rows
(one-vs-one classification) is exact, since leaving a row out changes only the fits it is in.
"""

from __future__ import annotations

import numpy as np

from .lapack_threads import one_blas_thread, one_eigh_thread
from .memory import check_fits

__all__ = ["LOO_SQUARES", "loo_bytes", "loo_residuals", "loo_and_predictions", "residual_squares"]

#: m x m float64 arrays held at once (K, the eigensolver's copy and workspace, U, U o U)
LOO_SQUARES = 6


def loo_bytes(m, k, ridges=1):
    """Bytes :func:`loo_residuals` holds for m rows, k target columns and a block of ``ridges``
    ridges: the m x m arrays (LOO_SQUARES), and per ridge the stacked right-hand side, the product
    and the residuals (m x k each), the shrink factors and denominators (m each), and the caller's
    two arrays of this block and the last."""
    return 8 * m * (LOO_SQUARES * m + ridges * (7 * k + 2))


def loo_residuals(K, Y, alphas, budget=None):
    """The (m, k) leave-one-out residuals of kernel ridge (K + alpha I) A = Y for every ridge of
    ``alphas`` (equation LOO of the module docstring), as an iterator of consecutive (j, m, k)
    blocks, each holding the next j ridges: all of them at once from two matrix products, in as
    few blocks as ``budget`` allows (checked here, before anything is computed). Y (m, k) is
    centred by the caller (the intercept's own leave-one-out effect, O(1/m), is ignored)."""
    m, k = Y.shape
    alphas = np.asarray(alphas, dtype=np.float64)
    squares, per_ridge = loo_bytes(m, k, 0), loo_bytes(m, k, 1) - loo_bytes(m, k, 0)
    if budget is not None:
        check_fits(loo_bytes(m, k), budget, f"the leave-one-out errors of a {m} x {m} kernel matrix",
                   "increase max_memory")
    step = alphas.size if budget is None else int(min(alphas.size, (budget - squares) // per_ridge))
    return _residual_blocks(K, Y, alphas, max(step, 1))


def _residual_blocks(K, Y, alphas, step):
    if alphas.size == 0:
        return
    # the products on one thread, and numpy's eigensolver (divide and conquer) where one thread
    # is faster or safer (kernelscale.ops.lapack_threads.one_eigh_thread). Held only while
    # computing, so that the caller's work between blocks keeps its threads.
    with one_eigh_thread(K.shape[0]):
        s, U, U2, UtY = _decompose(K, Y)
    for start in range(0, alphas.size, step):
        with one_blas_thread():
            block = _residuals(U, U2, s, UtY, alphas[start:start + step])
        yield block


def residual_squares(R):
    """The sum of squares of each (m, k) block of residuals R (j, m, k): (j,)."""
    return np.einsum("jmk,jmk->j", R, R)


def loo_and_predictions(K, y, K_out, alphas, budget=None):
    """For one centred target column y (m,) and every ridge of ``alphas`` at once: the (m, r)
    leave-one-out residuals of :func:`loo_residuals` and the (q, r) predictions
    K_out (K + alpha I)^{-1} y at q other rows, K_out (q, m) their kernel values with the fitted
    rows (see the module docstring); column j for ``alphas[j]``."""
    m, q, r = K.shape[0], K_out.shape[0], len(alphas)
    if budget is not None:
        check_fits(LOO_SQUARES * 8 * m * m + 8 * 3 * (m + q) * r, budget,
                   f"the leave-one-out errors of a {m} x {m} kernel matrix", "increase max_memory")
    alphas = np.asarray(alphas, dtype=np.float64)
    with one_blas_thread():
        s, U, U2, Uty = _decompose(K, np.reshape(y, (m, 1)))
        residuals = _residuals(U, U2, s, Uty, alphas)[:, :, 0].T  # (m, r)
        inverse = 1.0 / (s[:, None] + alphas[None, :])  # (m, r)
        predictions = np.asarray(K_out, dtype=np.float64) @ (U @ (inverse * Uty))
    return residuals, predictions


def _decompose(K, Y):
    s, U = np.linalg.eigh(np.asarray(K, dtype=np.float64))
    return np.maximum(s, 0.0), U, U * U, U.T @ Y


def _residuals(U, U2, s, UtY, alphas):
    """(j, m, k) residuals of equation LOO for the j ridges ``alphas``: U times the shrunk
    U^T Y of every ridge side by side (one product), over (U o U) shrink (another)."""
    m, k = UtY.shape
    shrink = alphas[None, :] / (s[:, None] + alphas[None, :])  # (m, j)
    numerator = U @ (shrink[:, :, None] * UtY[:, None, :]).reshape(m, -1)
    denominator = np.maximum(U2 @ shrink, np.finfo(float).tiny)
    return (numerator.reshape(m, alphas.size, k) / denominator[:, :, None]).transpose(1, 0, 2)
