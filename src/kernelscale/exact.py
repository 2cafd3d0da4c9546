"""Exact kernel ridge regression and exact LS-SVM: the dense Cholesky ground truth.

These are the only solvers in kernelscale that build the n x n kernel matrix (through
:func:`kernelscale.ops.kernel.kernel_matrix`, which refuses when it does not fit in ``max_memory``).
They exist so that the scalable methods can be tested against an exact answer, and as the
baseline "KRR on all n" of the benchmarks. A fit needs about ``n^2 * itemsize`` bytes (8 n^2 for
float64, 4 n^2 for float32): the matrix is regularised and factorised in place.

- :func:`kernel_ridge_dual` / :class:`ExactKernelRidge`: min_f sum_i w_i |y_i - f(x_i)|^2 +
  alpha |f|_H^2, i.e. dual coefficients (K + alpha W^{-1})^{-1} Y, as scikit-learn's KernelRidge.
- :func:`exact_lssvm`: the multi-class LS-SVM with bias, docs/algorithms.md section 4.1, eqs. 16-19.
- :func:`kernel_ridge_objective`: the ridge objective of given dual coefficients, for tests of
  the iterative solvers.
- :func:`kernel_predict`: K(X_test, X_fit) A + b, blocked under ``max_memory``.
"""

from __future__ import annotations

import logging
import warnings
from numbers import Real

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .base.boundary import BoundaryMixin
from .base.params import DEVICE_CONSTRAINT
from .base.estimator import FiniteR2Mixin, INPUT_ATTRIBUTES, commit_fit, resolve_kernel, validate_fit_data
from .base.validation import (
    as_float_array, check_finite_result, check_positive, check_sample_weight, validate_data,
)
from .ops.kernel import KernelOperator, kernel_matrix, kernel_matvec
from .ops.lapack_threads import one_lapack_thread
from .ops.memory import check_fits, parse_memory
from .linalg import one_norm
from .kernels import KERNEL_NAMES, Kernel, make_kernel

__all__ = [
    "ExactKernelRidge",
    "kernel_ridge_dual",
    "exact_lssvm",
    "kernel_predict",
    "kernel_ridge_objective",
]

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------
# dense solves


def _check_gram_memory(n, dtype, max_memory, what):
    """Fail before allocating when the n x n matrix alone exceeds the budget."""
    check_fits(n * n * np.dtype(dtype).itemsize, parse_memory(max_memory),
               f"{what}, which builds the full {n} x {n} kernel matrix",
               "increase max_memory, pass float32 data (halves it), fit on fewer samples, or use a scalable solver",
               exact_bytes=True)


def _solve_spd(build, B):
    """Solve H X = B for the symmetric matrix H returned by ``build()``, overwriting H.

    Cholesky first (H is SPD for a valid kernel and a positive ridge), in place. Fallbacks, each
    with a RuntimeWarning, after rebuilding H (the factorisation destroyed it; rebuilding keeps
    one n x n matrix alive instead of two):

    - Cholesky fails (H is indefinite, e.g. a polynomial "kernel" with a negative coef0): a
      symmetric indefinite LDL^T solve;
    - H is singular to working precision (reciprocal condition number below machine epsilon,
      from LAPACK ``pocon`` / ``sycon``, e.g. a linear kernel with a vanishing ridge): the
      minimum-norm least-squares solution (``gelsd``, which needs extra O(n^2) workspace).
    """
    H = build()
    B = np.asfortranarray(B, dtype=H.dtype)
    anorm = one_norm(H)  # not finite if an entry of H is not: no separate pass over H
    if not (np.isfinite(anorm) and np.all(np.isfinite(B))):
        raise ValueError(_UNSOLVABLE.format(why="the regularised kernel matrix or the targets overflowed"))
    eps = np.finfo(H.dtype).eps
    indefinite = False
    try:
        # H is symmetric, so its C-ordered buffer read as H.T is a Fortran array LAPACK can
        # factorise in place: no second n x n copy.
        with one_lapack_thread(H.shape[0]):
            factor = linalg.cho_factor(H.T, lower=True, overwrite_a=True, check_finite=False)
            (pocon,) = linalg.get_lapack_funcs(("pocon",), (factor[0],))
            rcond, info = pocon(factor[0], anorm, uplo="L")
            if info == 0 and rcond >= eps:
                return linalg.cho_solve(factor, B, overwrite_b=False, check_finite=False)
    except np.linalg.LinAlgError:
        indefinite = True
    H = factor = None  # release the destroyed matrix before rebuilding it
    if indefinite:
        warnings.warn(
            "The regularised kernel matrix is not positive definite (Cholesky failed; is the "
            "kernel positive semi-definite?); using a symmetric indefinite solve instead.",
            RuntimeWarning,
            stacklevel=3,
        )
        H = build()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", linalg.LinAlgWarning)
                return linalg.solve(H.T, B, assume_a="sym", overwrite_a=True, check_finite=False)
        except (np.linalg.LinAlgError, linalg.LinAlgWarning):
            H = None
    warnings.warn(
        "The regularised kernel matrix is singular to working precision; using the "
        "minimum-norm least-squares solution. Increase alpha (or 1/C), or use float64 data.",
        RuntimeWarning,
        stacklevel=3,
    )
    H = build()
    try:
        return linalg.lstsq(H.T, B, overwrite_a=True, check_finite=False)[0]
    except np.linalg.LinAlgError as err:  # "SVD did not converge": values at the ends of the float range
        raise ValueError(_UNSOLVABLE.format(why=f"the least-squares solve failed ({err})")) from err


_UNSOLVABLE = ("The kernel system could not be solved: {why}. X, y or sample_weight hold values too large or too "
               "small for the arithmetic in this dtype; rescale X and y (e.g. sklearn.preprocessing.StandardScaler), "
               "scale sample_weight towards 1, use float64 data, or increase alpha (1/C).")


def _check_finite_result(X, what):
    if not np.all(np.isfinite(X)):
        raise ValueError(
            f"the {what} are not finite: the kernel matrix overflowed or is badly scaled; "
            f"rescale X or change the kernel parameters (e.g. a smaller polynomial degree/gamma)."
        )


def _as_targets(Y, n, dtype, name):
    Y = as_float_array(Y, name, ensure_2d=False)
    if Y.ndim not in (1, 2) or Y.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, k) to match X, got {Y.shape}.")
    return Y.astype(dtype, copy=False)


def kernel_ridge_dual(kernel, X, Y, alpha, sample_weight=None, max_memory=None):
    """Dual coefficients of weighted kernel ridge regression, by one in-place Cholesky.

    Minimises sum_i w_i |y_i - f(x_i)|^2 + alpha |f|_H^2 over f = sum_j k(., x_j) c_j, giving
    c = (K + alpha W^{-1})^{-1} Y. As in scikit-learn's KernelRidge it is solved in the scaled
    form c = S (S K S + alpha I)^{-1} S Y with S = diag(sqrt(w)), so zero weights are allowed
    (their coefficients are exactly zero).

    Parameters
    ----------
    kernel : Kernel or str
        A resolved kernel (no ``sigma="median"``; call ``kernel.resolve(X)`` first).
    X : array of shape (n, d)
    Y : array of shape (n,) or (n, k)
    alpha : float > 0
    sample_weight : array of shape (n,) with entries >= 0, or None
    max_memory : int, str or None
        Budget in bytes (or "2GB"); the kernel matrix, ``n^2 * itemsize`` bytes, must fit in it.

    Returns
    -------
    dual_coef : array of shape (n,) or (n, k), float32 only if X is float32.
    """
    kernel = make_kernel(kernel)
    check_positive(alpha, "alpha")
    X = as_float_array(X, "X", accept_sparse=True)
    n = X.shape[0]
    Y = _as_targets(Y, n, X.dtype, "Y")
    sw = None
    if sample_weight is not None:
        sample_weight = as_float_array(sample_weight, "sample_weight", ensure_2d=False)
        if sample_weight.shape != (n,) or np.any(sample_weight < 0):
            raise ValueError(
                f"sample_weight must be a non-negative array of shape ({n},), got shape "
                f"{sample_weight.shape} (min {sample_weight.min():g})."
            )
        sw = np.sqrt(sample_weight).astype(X.dtype, copy=False)
    _check_gram_memory(n, X.dtype, max_memory, "the exact kernel ridge solve")

    def build():
        H = kernel_matrix(kernel, X, max_memory=max_memory)
        if sw is not None:
            H *= sw[:, None]
            H *= sw
        H.reshape(-1)[:: n + 1] += alpha
        return H

    B = Y if sw is None else Y * (sw[:, None] if Y.ndim == 2 else sw)
    dual = _solve_spd(build, B)
    if sw is not None:
        dual *= sw[:, None] if dual.ndim == 2 else sw
    _check_finite_result(dual, "dual coefficients")
    return np.ascontiguousarray(dual)


def exact_lssvm(kernel, X, Y, C, max_memory=None):
    """Exact LS-SVM with bias (docs/algorithms.md section 4.1, eqs. 16-19), for k outputs at once.

    Solves the saddle system ``[[0, 1^T], [1, K + I/C]] [b; A] = [0; Y]`` (C is the paper's
    gamma) without factorising it: with H = K + I/C (SPD), one Cholesky gives H eta = 1 and
    H nu = Y, then b = 1^T nu / 1^T eta and A = nu - eta b. Memory: ``n^2 * itemsize`` bytes.

    Parameters
    ----------
    kernel : Kernel or str
        A resolved kernel.
    X : array of shape (n, d)
    Y : array of shape (n,) or (n, k)
        Targets, e.g. one-hot (or +-1) class codes.
    C : float > 0
        Regularisation (the paper's gamma; the ridge on K is 1/C).
    max_memory : int, str or None

    Returns
    -------
    intercept : array of shape (k,) (a 0-d array when Y is 1-d)
    dual_coef : array of shape (n, k) (shape (n,) when Y is 1-d)
    """
    kernel = make_kernel(kernel)
    check_positive(C, "C")
    X = as_float_array(X, "X", accept_sparse=True)
    n = X.shape[0]
    Y = _as_targets(Y, n, X.dtype, "Y")
    _check_gram_memory(n, X.dtype, max_memory, "the exact LS-SVM solve")
    ridge = 1.0 / C

    def build():
        H = kernel_matrix(kernel, X, max_memory=max_memory)
        H.reshape(-1)[:: n + 1] += ridge
        return H

    Y2 = Y.reshape(n, -1)
    rhs = np.empty((n, Y2.shape[1] + 1), dtype=X.dtype, order="F")
    rhs[:, 0] = 1.0
    rhs[:, 1:] = Y2
    sol = _solve_spd(build, rhs)
    eta, nu = sol[:, 0], sol[:, 1:]
    intercept = nu.sum(axis=0) / eta.sum()
    dual = nu - eta[:, None] * intercept
    _check_finite_result(dual, "LS-SVM coefficients")
    if Y.ndim == 1:
        return intercept.reshape(()), np.ascontiguousarray(dual[:, 0])
    return intercept, np.ascontiguousarray(dual)


def kernel_predict(kernel, X, X_fit, dual_coef, intercept=None, max_memory=None):
    """Return K(X, X_fit) @ dual_coef + intercept, in row blocks that fit ``max_memory``."""
    dual_coef = as_float_array(dual_coef, "dual_coef", ensure_2d=False)
    out = KernelOperator(kernel, X_fit, max_memory, name="X_fit").predict(X, dual_coef)
    if intercept is not None:
        out += np.asarray(intercept, dtype=out.dtype)
    return out


def kernel_ridge_objective(kernel, X, Y, dual_coef, alpha, sample_weight=None, max_memory=None):
    """The objective of :func:`kernel_ridge_dual` at ``dual_coef`` (blocked, no n x n matrix):

    sum_i w_i |y_i - (K c)_i|^2 + alpha tr(c^T K c).

    docs/algorithms.md section 3.1 with the squared loss (y - z)^2 / 2 and lam = alpha minimises this
    objective divided by 2 alpha, so both have the same minimiser.
    """
    check_positive(alpha, "alpha")
    X = as_float_array(X, "X", accept_sparse=True)
    Y = as_float_array(Y, "Y", ensure_2d=False)
    c = as_float_array(dual_coef, "dual_coef", ensure_2d=False)
    if c.shape != Y.shape or Y.shape[0] != X.shape[0]:
        raise ValueError(f"Y {Y.shape} and dual_coef {c.shape} must have the same shape, with {X.shape[0]} rows.")
    Kc = kernel_matvec(kernel, X, None, c, max_memory=max_memory)
    sq = ((Y - Kc) ** 2).reshape(X.shape[0], -1).sum(axis=1)
    if sample_weight is not None:
        sq = sq * np.asarray(sample_weight, dtype=sq.dtype)
    return float(sq.sum() + alpha * np.sum(c * Kc))


# ----------------------------------------------------------------------------------------------
# estimator


class ExactKernelRidge(MultiOutputMixin, FiniteR2Mixin, RegressorMixin, BoundaryMixin, BaseEstimator):
    """Kernel ridge regression solved exactly by Cholesky (the ground truth for tests).

    Minimises sum_i w_i |y_i - f(x_i)|^2 + alpha |f|_H^2; the same model as scikit-learn's
    ``KernelRidge`` (to rounding), with kernelscale kernels and a memory budget. Builds the n x n
    kernel matrix: ``fit`` needs about ``n^2 * itemsize`` bytes (float32 input halves it) and
    refuses at once, naming ``max_memory``, when that exceeds the budget. ``predict`` works in
    row blocks of K(X_test, X_fit) under the same budget. If Cholesky fails (the regularised
    matrix is not numerically positive definite) it warns and falls back to a symmetric
    indefinite solve, then to least squares.

    Parameters
    ----------
    kernel : Kernel or str, default="gaussian"
        A kernel object or one of ``KERNEL_NAMES``. ``sigma="median"`` is resolved in ``fit``
        from the samples with positive weight; the resolved kernel is ``kernel_``.
    alpha : float > 0, default=1.0
        Ridge regularisation.
    max_memory : int, str or None, default=None
        Memory budget in bytes or as "2GB"; None means half of the available memory.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (docs/gpus.md): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
    random_state : int, RandomState or None, default=None
        Seeds the subsample of the median heuristic (used when n > 1000).

    Attributes
    ----------
    kernel_ : Kernel
        The kernel with its bandwidth resolved (a copy; ``kernel`` is never modified).
    X_fit_ : ndarray of shape (n_samples, n_features)
    dual_coef_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "kernel": [Kernel, StrOptions(set(KERNEL_NAMES))],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "max_memory": [Interval(Real, 0, None, closed="neither"), str, None],
        "device": DEVICE_CONSTRAINT,
        "random_state": ["random_state"],
    }

    def __init__(self, kernel="gaussian", *, alpha=1.0, max_memory=None, device=None, random_state=None):
        self.kernel = kernel
        self.alpha = alpha
        self.max_memory = max_memory
        self.device = device
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the model on X (n, d) and y (n,) or (n, k), with optional sample weights."""
        X, y, fitted = validate_fit_data(
            self, X, y, dtype=[np.float64, np.float32], multi_output=True, y_numeric=True
        )
        y = np.asarray(y, dtype=X.dtype)
        if sample_weight is not None:
            sample_weight = check_sample_weight(
                sample_weight, X, dtype=X.dtype, ensure_non_negative=True
            )
        kernel = resolve_kernel(self.kernel, X, check_random_state(self.random_state), sample_weight)
        dual_coef = kernel_ridge_dual(kernel, X, y, self.alpha, sample_weight, max_memory=self.max_memory)
        fitted.update(kernel_=kernel, dual_coef_=dual_coef, X_fit_=X)
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def predict(self, X):
        """Predict K(X, X_fit_) @ dual_coef_, in blocks under ``max_memory``; a ValueError naming
        X when they overflow (X far larger than the training data)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        pred = kernel_predict(self.kernel_, X, self.X_fit_, self.dual_coef_, max_memory=self.max_memory)
        return check_finite_result(pred, "predictions")
