"""Problem (2) of paper 3, min_c f(K c) + c^T K c / 2 with f(z) = sum_i C_i L(y_i, z_i): the
validation and state shared by its fixed-point (:mod:`kernelscale.regularized.fixed_point`) and
coordinate-descent (:mod:`kernelscale.regularized.coordinate_descent`) solvers, and their result type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..base.validation import as_float_array, check_positive, check_sparse
from ..losses import make_loss

__all__ = [
    "SolverResult",
    "setup",
    "as_targets",
    "as_C",
    "check_intercept_scaling",
    "initial_coef",
    "intercept",
    "check_linear_X",
    "row_sq_norms",
    "vector_bytes",
]


def setup(X, y, loss, C, intercept_scaling, epsilon, *, one_output=False):
    """The loss, float64 targets, per-entry C and intercept scale s of problem (2) for the
    validated X (targets checked against the loss; ``one_output`` refuses a 2-d y)."""
    loss = make_loss(loss, epsilon)
    y = as_targets(y, X.shape[0])
    if one_output and y.ndim != 1:
        raise ValueError(f"y must be 1-d here, got shape {y.shape}; solve one column at a time.")
    loss.check_targets(y)
    return loss, y, as_C(C, y, X.dtype), check_intercept_scaling(intercept_scaling)


@dataclass
class SolverResult:
    """What the fixed-point and coordinate-descent solvers return.

    coef : (n,) or (n, k) dual coefficients c (zero for dropped and zero-weight points)
    z : (n,) or (n, k) K c + intercept at ``coef``: the training scores
    intercept : float or (k,) array, b = s^2 sum_i c_i (0 without intercept)
    n_iter : iterations (fixed point) or sweeps (coordinate descent) run
    converged : True when the stopping rule was met (not by max_iter or the callback)
    objective_history : F(c) of problem (2) after each iteration/sweep (the first entry: at c0)
    dual_history : D(c) after each iteration/sweep; F + D is the duality gap
    dropped : indices of points whose kernel diagonal is zero (their row of K is zero; the
        paper removes it: c_i = 0)
    step_size : the fixed-point step alpha used (None for coordinate descent)
    w : (d,) or (k, d) primal weights X^T c of the linear path (None otherwise)
    """

    coef: np.ndarray
    z: np.ndarray
    intercept: float | np.ndarray
    n_iter: int
    converged: bool
    objective_history: np.ndarray
    dual_history: np.ndarray
    dropped: np.ndarray
    step_size: float | None = None
    w: np.ndarray | None = None
    stopped_by_callback: bool = False
    info: dict = field(default_factory=dict)

    @property
    def duality_gap(self):
        return float(self.objective_history[-1] + self.dual_history[-1])


def vector_bytes(n, k, dtype):
    """Rough bytes of the O(n) solver state: c, z, targets, C and scratch, plus Python lists."""
    return int(n * k * (8 * np.dtype(dtype).itemsize + 4 * 8) + n * 64)


def as_targets(y, n, name="y"):
    y = as_float_array(y, name, ensure_2d=False)
    if y.ndim not in (1, 2) or y.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, k) to match X, got {y.shape}.")
    return y.astype(np.float64)


def as_C(C, y, dtype):
    """Per-entry C_i broadcast to y's shape, rounded to the working dtype (so that coefficients
    clipped at C stay inside the dual domain after the cast)."""
    C = np.asarray(C, dtype=np.float64)
    if C.ndim == 1 and y.ndim == 2:
        C = C[:, None]
    try:
        C = np.broadcast_to(C, y.shape)
    except ValueError:
        raise ValueError(f"C must be a number or an array of shape ({y.shape[0]},), got shape {C.shape}.") from None
    if not np.all(np.isfinite(C)) or np.any(C < 0):
        raise ValueError("C (times sample_weight) must be finite and >= 0 for every point.")
    return np.ascontiguousarray(C.astype(dtype).astype(np.float64))


def check_intercept_scaling(s):
    if s is None or s == 0:
        return 0.0
    return float(check_positive(s, "intercept_scaling"))


def initial_coef(c0, shape, dtype, keep):
    if c0 is None:
        return np.zeros(shape, dtype=dtype)
    c = np.array(c0, dtype=dtype)  # a copy
    if c.shape != shape or not np.all(np.isfinite(c)):
        raise ValueError(f"c0 must be a finite array of shape {shape}, got {c.shape}; pass c0=None to start at 0.")
    c[~keep] = 0
    return c


def intercept(c, s):
    return (s * s) * np.sum(c, axis=0) if s else 0.0


def check_linear_X(X):
    if sp.issparse(X):
        X = sp.csr_matrix(check_sparse(X))  # before any conversion or compiled loop reads its indices
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        if not np.all(np.isfinite(X.data)):
            raise ValueError("X contains NaN or infinity; drop or impute those entries before passing X.")
        return X
    return as_float_array(X, "X")


def row_sq_norms(X):
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
    return np.einsum("ij,ij->i", X, X, dtype=np.float64)
