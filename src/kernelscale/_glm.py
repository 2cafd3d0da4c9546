"""Small shared pieces of the least-squares family (least_squares, stagewise, doubly_stochastic):
the softmax and its loss, normalised sample weights, and the Cholesky factor with a conditioning
check (target codings and weight composition: :mod:`kernelscale.base.classifier`,
:mod:`kernelscale.base.estimator`). Nothing here is a pass over feature blocks (that is :mod:`ops`)."""

from __future__ import annotations

import numpy as np
from scipy import linalg

from .base.validation import as_float_array
from .ops.lapack_threads import one_lapack_thread


def normalized_weights(sample_weight, n):
    """float64 weights summing to 1 (uniform 1/n when None)."""
    if sample_weight is None:
        return np.full(n, 1.0 / n)
    w = as_float_array(sample_weight, "sample_weight", ensure_2d=False).astype(np.float64, copy=False)
    if w.shape != (n,) or np.any(w < 0):
        raise ValueError(f"sample_weight must be a non-negative array of shape ({n},), got shape {w.shape}.")
    total = w.sum()
    if not total > 0:
        raise ValueError("sample_weight sums to zero; give at least one sample a positive weight.")
    return w / total


def softmax(S):
    """Row-wise softmax of the scores S (n, k), computed stably in S's dtype."""
    P = S - S.max(axis=1, keepdims=True)
    np.exp(P, out=P)
    P /= P.sum(axis=1, keepdims=True)
    return P


def softmax_loss(S, Y, w):
    """Softmax probabilities P and the weighted calibrated loss sum_i w_i (lse(s_i) - y_i . s_i)
    (eq. 13 of the least-squares paper, the multinomial logistic loss), computed stably."""
    m = S.max(axis=1)
    P = S - m[:, None]
    np.exp(P, out=P)
    z = P.sum(axis=1)
    P /= z[:, None]
    lse = m.astype(np.float64) + np.log(z.astype(np.float64))
    loss = w @ (lse - np.einsum("ij,ij->i", Y, S).astype(np.float64))
    return P, float(loss)


def factor_spd(M, what, fix):
    """Cholesky factor of the symmetric matrix M (float64); a ValueError naming ``fix`` when it
    is singular to working precision."""
    eps = np.finfo(np.float64).eps
    anorm = float(np.abs(M).sum(axis=0).max()) if M.size else 0.0
    try:
        with one_lapack_thread(M.shape[0]):
            factor = linalg.cho_factor(M, lower=True, check_finite=False)
            (pocon,) = linalg.get_lapack_funcs(("pocon",), (factor[0],))
            rcond, info = pocon(factor[0], anorm, uplo="L")
        ok = info == 0 and rcond >= eps
    except (np.linalg.LinAlgError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{what} is singular to working precision; {fix}.")
    return factor
