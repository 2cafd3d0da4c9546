"""Euclidean projections onto the probability simplex and the unit hypercube.

The "clip" step of calibrated least squares (docs/algorithms.md section 5.2, Algorithm 2, eq. 19):
multi-class predictions are projected onto the simplex {p >= 0, sum p = 1}, multi-label
predictions onto the hypercube [0, 1]^k. Both projections can only bring a prediction closer to
any target inside the set, so they never increase the squared error against one-hot (or
indicator) labels.
"""

from __future__ import annotations

import numbers

import numpy as np

from .base.validation import as_float_array

__all__ = ["project_simplex", "project_hypercube"]


def _as_rows(V, name):
    V = as_float_array(V, name, ensure_2d=False)
    if V.ndim not in (1, 2):
        raise ValueError(f"{name} must be a vector (k,) or a matrix (n, k) of rows, got shape {V.shape}.")
    if V.shape[-1] == 0:
        raise ValueError(f"{name} has no coordinates (shape {V.shape}); pass at least one column.")
    return V


def project_simplex(V, radius=1.0):
    """Euclidean projection of each row of V onto {p : p >= 0, sum(p) = radius}.

    The sort-based algorithm of Duchi et al. (2008), O(k log k) per row of length k: with u the
    row sorted in decreasing order and rho the largest j such that
    u_j > (sum_{i<=j} u_i - radius) / j, the projection is max(v - tau, 0) with
    tau = (sum_{i<=rho} u_i - radius) / rho. It keeps the order of the coordinates, so the
    argmax of a row is unchanged.

    Parameters
    ----------
    V : array of shape (k,) or (n, k)
        Points to project, one per row; float32 stays float32.
    radius : float > 0, default=1.0
        Sum of the coordinates of the projected points.

    Returns
    -------
    P : array of the shape and dtype of V.
    """
    if isinstance(radius, bool) or not isinstance(radius, numbers.Real) or not np.isfinite(radius) or radius <= 0:
        raise ValueError(f"radius must be a finite number > 0, got {radius!r}.")
    V = _as_rows(V, "V")
    return simplex_rows(V.reshape(-1, V.shape[-1]), radius).reshape(V.shape)


def simplex_rows(rows, radius=1.0):
    """:func:`project_simplex` of a float32/float64 matrix (n, k >= 1) without validating it
    (calibrated least squares projects its own predictions at every iteration, where the
    validation cost a quarter of the fit on 100-row data sets)."""
    k = rows.shape[1]
    # in float64 (a cumulative sum of k float32 values loses digits), and shifted so that each
    # row's maximum is 0: the projection does not change, the coordinates it keeps lie in
    # [-radius, 0], and so the threshold is exact to rounding however large V is (unshifted,
    # [1e17, 0] gave [5e16, 0])
    shifted = rows.astype(np.float64)
    with np.errstate(over="ignore"):  # a gap beyond the float64 range: -inf, projected to 0
        shifted -= shifted.max(axis=1, keepdims=True)
    u = -np.sort(-shifted, axis=1)
    css = np.cumsum(u, axis=1) - radius
    j = np.arange(1, k + 1, dtype=np.float64)
    positive = u * j > css
    # the condition holds on a prefix j = 1..rho (j = 1 always holds: 0 > -radius); take its last
    # index so a rounding blip inside the prefix cannot shorten it
    rho = k - np.argmax(positive[:, ::-1], axis=1)
    tau = css[np.arange(rows.shape[0]), rho - 1] / rho
    shifted -= tau[:, None]
    np.clip(shifted, 0, radius, out=shifted)
    return shifted.astype(rows.dtype, copy=False)


def project_hypercube(V):
    """Euclidean projection of V onto [0, 1]^k (coordinate-wise clipping), for multi-label
    predictions; float32 stays float32."""
    V = _as_rows(V, "V")
    return np.clip(V, 0, 1)
