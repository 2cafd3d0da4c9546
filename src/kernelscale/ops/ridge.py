"""The host ridge solve shared by the backends: (C + ridge I)^{-1} G for a small (D, D) C."""

from __future__ import annotations

import numpy as np
from scipy import linalg

from .lapack_threads import one_lapack_thread

__all__ = ["RIDGE_RETRIES", "ridge_solve"]

#: a ridge that does not make C + ridge I positive definite grows tenfold, at most this often
RIDGE_RETRIES = 8


def ridge_solve(C, G, ridge):
    """(C + ridge I)^{-1} G in float64 by Cholesky on the host. A covariance accumulated in
    float32 can be indefinite at the level of its rounding; then the ridge grows tenfold (at most
    RIDGE_RETRIES times) before least squares (much slower). Non-finite C: a NaN solution."""
    if not np.all(np.isfinite(C)):
        return np.full(G.shape, np.nan)
    D = C.shape[0]
    for _ in range(RIDGE_RETRIES + 1):
        A = C.copy()
        A.flat[:: D + 1] += ridge
        try:
            with one_lapack_thread(D):
                return linalg.cho_solve(linalg.cho_factor(A, check_finite=False), G, check_finite=False)
        except np.linalg.LinAlgError:
            ridge *= 10.0
    return linalg.lstsq(A, G, check_finite=False)[0]
