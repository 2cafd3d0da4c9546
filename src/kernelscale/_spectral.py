"""Eigendecomposition of symmetric matrices whose entries may span the whole float64 range."""

from __future__ import annotations

import numpy as np
from scipy import linalg


#: entries of magnitude in [2^-SAFE_EXPONENT, 2^SAFE_EXPONENT] are decomposed as they are
SAFE_EXPONENT = 500


def symmetric_eigh(M):
    """``(eigenvalues, eigenvectors)`` of the symmetric matrix M (ascending, as ``linalg.eigh``).

    A matrix whose largest entry is beyond 2^±500 (a covariance of features of order 1e150 has
    entries near 1e300) sent LAPACK's own rescaling into a loop that did not return; such a
    matrix is first scaled by a power of 2 (exact in binary arithmetic, into a Fortran array
    LAPACK overwrites: no further copy) and the eigenvalues scaled back. Any other matrix goes
    to ``linalg.eigh`` as it is. A ValueError names the fix when M is not finite or LAPACK does
    not converge."""
    M = np.asarray(M)
    if not np.all(np.isfinite(M)):
        raise ValueError(_TOO_LARGE.format(why="it overflowed"))
    top = float(np.abs(M).max()) if M.size else 0.0
    shift = np.frexp(top)[1] if top > 0 and abs(np.frexp(top)[1]) > SAFE_EXPONENT else 0
    try:
        if shift == 0:
            return linalg.eigh(M, check_finite=False)
        scaled = np.ldexp(M, -shift, out=np.empty(M.shape, order="F"))
        values, vectors = linalg.eigh(scaled, overwrite_a=True, check_finite=False)
    except np.linalg.LinAlgError as err:  # "Eigenvalues did not converge"
        raise ValueError(_TOO_LARGE.format(why=f"its eigendecomposition failed ({err})")) from err
    return np.ldexp(values, shift), vectors


_TOO_LARGE = ("The symmetric matrix built from X (a covariance or a kernel matrix) could not be decomposed: {why}. "
              "X holds values too large or too small, or columns of wildly different scales; rescale X "
              "(e.g. sklearn.preprocessing.StandardScaler).")
