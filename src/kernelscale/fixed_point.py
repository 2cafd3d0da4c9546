"""Fixed-point (non-linear Jacobi) solver for regularized kernel methods (paper 3, section 3).

Problem (2): min_c F(c) = f(K c) + c^T K c / 2 with f(z) = sum_i C_i L(y_i, z_i). Theorem 1: a
solution satisfies c = -J_alpha(alpha K c - c) (eq. 7); the fixed-point iteration (eq. 10) is

    z = K c  (step 1),   v = alpha z - c  (step 2),   c <- -J_alpha(v)  (step 3),

which converges for 0 < alpha < 2 / ||K||_2 (eq. 11). It is proximal gradient descent, with step
alpha, on the dual D(c) = f^*(-c) + c^T K c / 2, so D decreases monotonically for such alpha:
a rise of D is how divergence is detected.

Step 1 is the only kernel work. :class:`~kernelscale.ops.row_cache.KernelRowCache` keeps as
many kernel rows as fit in ``max_memory`` (computed once, in batches, by the compute layer) and evaluates the
other columns of K c with blocked kernel products, using only the columns where c is non-zero
(the paper's remark on sparse c). The same cache serves coordinate descent (LRU rows).

An intercept is offered as a *regularised* one, as in LIBLINEAR: ``intercept_scaling = s > 0``
adds the constant s^2 to the kernel (an extra feature s for the linear kernel), i.e. the model is
g(x) = sum_i c_i k(x, x_i) + b with b = s^2 sum_i c_i and the penalty b^2 / (2 s^2) added to
problem (2). LIBSVM's bias is unregularised instead (the dual then has the equality constraint
sum_i c_i = 0); the two agree only as s -> infinity.
"""

from __future__ import annotations

import logging
import math
import numpy as np
from sklearn.utils import check_random_state

from ._monitor import IterationMonitor
from ._problem import (
    SolverResult,
    as_C,
    as_targets,
    check_intercept_scaling,
    check_linear_X,
    initial_coef,
    intercept,
    row_sq_norms,
    setup,
    vector_bytes,
)
from ._validation import as_float_array, check_positive
from .kernels import make_kernel
from .ops.kernel import KernelOperator, kernel_diag, kernel_matvec
from .losses import dual_objective, make_loss, primal_objective

__all__ = [
    "SolverResult",
    "FixedPointDivergenceError",
    "kernel_fixed_point",
    "linear_fixed_point",
    "estimate_spectral_norm",
    "kernel_objective",
]

logger = logging.getLogger(__name__)

POWER_MARGIN = 0.1  # step_size="power" uses 2 (1 - margin) / ||K||_2
DIVERGENCE_PATIENCE = 3
PRECISION_FLOOR = 100.0  # steps below this many eps(dtype) * max|z| (in z units) are rounding


class FixedPointDivergenceError(ValueError):
    """The fixed-point iteration diverged: alpha is too large for this kernel matrix."""


# ----------------------------------------------------------------------------------------------
# shared helpers


def kernel_objective(kernel, X, y, c, loss, C=1.0, *, intercept_scaling=0.0, max_memory=None):
    """F(c) = sum_i C_i L(y_i, (K c)_i + b) + c^T (K c + b) / 2 of problem (2), in blocks.

    ``C`` is a number or per-sample array; b = s^2 sum(c) with s = ``intercept_scaling``.
    """
    loss = make_loss(loss)
    X = as_float_array(X, "X")
    y = as_targets(y, X.shape[0])
    c = np.asarray(c, dtype=np.float64)
    z = kernel_matvec(make_kernel(kernel), X, None, c, max_memory=max_memory).astype(np.float64)
    z = z + intercept(c, check_intercept_scaling(intercept_scaling))
    return primal_objective(loss, y, z, c, as_C(C, y, np.float64))


def estimate_spectral_norm(matvec, n, *, n_iter=50, rtol=1e-3, random_state=None, dtype=np.float64):
    """||K||_2 of a PSD operator by power iteration (Rayleigh quotients; a lower estimate)."""
    rng = check_random_state(random_state)
    v = rng.standard_normal(n).astype(dtype)
    v /= np.linalg.norm(v)
    lam = 0.0
    for _ in range(n_iter):
        w = np.asarray(matvec(v), dtype=np.float64)
        new = float(v @ w)
        norm = float(np.linalg.norm(w))
        if norm == 0.0 or not math.isfinite(norm):
            return max(new, 0.0)
        v = (w / norm).astype(dtype)
        if abs(new - lam) <= rtol * abs(new):
            return new
        lam = new
    return lam


def _choose_step(step_size, diag, keep, matvec, n, dtype, random_state):
    """The step of eq. (10): 1/trace(K), 2 (1 - margin) / ||K||_2 by power iteration, or the
    user's value, refused when it provably violates eq. (11)."""
    trace = float(diag[keep].sum())
    if step_size is None or (isinstance(step_size, str) and step_size == "trace"):
        return 1.0 / trace
    if isinstance(step_size, str):
        if step_size != "power":
            raise ValueError(f"step_size must be 'trace', 'power' or a number in (0, 2/||K||_2), got {step_size!r}.")
        norm = estimate_spectral_norm(matvec, n, random_state=random_state, dtype=dtype)
        return max(1.0 / trace, 2.0 * (1.0 - POWER_MARGIN) / norm) if norm > 0 else 1.0 / trace
    check_positive(step_size, "step_size")
    ones = keep.astype(dtype)
    lower = max(float(diag.max()), float(ones @ np.asarray(matvec(ones), dtype=np.float64)) / max(int(keep.sum()), 1))
    if step_size >= 2.0 / lower:
        raise ValueError(
            f"step_size={step_size!r} is outside (0, 2/||K||_2) (eq. 11): ||K||_2 >= {lower:.6g} here, so "
            f"step_size must be below {2.0 / lower:.6g}; pass a smaller step_size, or step_size='trace' (always "
            f"safe) or step_size='power'."
        )
    return float(step_size)


# ----------------------------------------------------------------------------------------------
# the iteration


def _fixed_point_core(matvec, diag, keep, y, loss, C, alpha, *, tol, max_iter, c0, dtype, monitor):
    """Iterate eq. (10) with the given K c product; see :func:`kernel_fixed_point`."""
    shape = y.shape
    kbar = float(diag[keep].mean())
    scale = alpha * kbar  # |Delta c| / (alpha kbar) is comparable to a coordinate-descent step
    c = initial_coef(c0, shape, dtype, keep)
    eps = float(np.finfo(dtype).eps)
    primal, dual = [], []
    best = math.inf
    rises = 0
    converged = False
    it = 0
    z = None
    for it in range(1, max_iter + 1):
        z = np.asarray(matvec(c))
        if not np.all(np.isfinite(z)):
            raise _diverged(alpha, it, "K c is not finite")
        p, d = primal_objective(loss, y, z, c, C), dual_objective(loss, y, z, c, C)
        primal.append(p)
        dual.append(d)
        if d > best + 1e3 * eps * (abs(best) + abs(p) + 1.0):
            rises += 1
            if rises >= DIVERGENCE_PATIENCE:
                raise _diverged(alpha, it, f"the dual objective rose from {best:.6g} to {d:.6g}")
        else:
            rises = 0
        best = min(best, d)
        v = alpha * z.astype(np.float64) - c
        new = loss._neg_resolvent(v, y, alpha, C)
        new[~keep] = 0.0
        if not np.all(np.isfinite(new)):
            raise _diverged(alpha, it, "the coefficients are not finite")
        change = float(np.max(np.abs(new - c))) / scale if new.size else 0.0
        c = new.astype(dtype)
        if monitor.update(objective=p, dual_objective=d, duality_gap=p + d, max_change=change):
            break
        # working precision: the step moves c by less than alpha times the rounding of z (a tol
        # below float32 resolution is met there instead of spinning to max_iter)
        at_precision = change * kbar < PRECISION_FLOOR * eps * max(1.0, float(np.max(np.abs(z), initial=0.0)))
        if change < tol or at_precision:
            converged = True
            break
    z = np.asarray(matvec(c))
    primal.append(primal_objective(loss, y, z, c, C))
    dual.append(dual_objective(loss, y, z, c, C))
    return c, z.astype(dtype, copy=False), it, converged, np.array(primal), np.array(dual)


def _diverged(alpha, it, what):
    return FixedPointDivergenceError(
        f"the fixed-point iteration diverged at iteration {it} ({what}): step_size={alpha:.6g} is too "
        f"large for this kernel matrix (eq. 11 needs 0 < step_size < 2/||K||_2); pass a smaller step_size, "
        f"e.g. step_size='trace' (1/trace(K), always safe) or step_size='power'."
    )


def _run(matvec, diag, y, loss, C, *, step_size, tol, max_iter, c0, dtype, s, verbose, callback, random_state, what):
    check_positive(tol, "tol")
    check_positive(max_iter, "max_iter", integer=True)
    keep = diag > 0
    dropped = np.flatnonzero(~keep)
    if dropped.size:
        logger.info("%d point(s) have a zero kernel diagonal; their coefficients are fixed at 0", dropped.size)
    n = diag.shape[0]
    if not keep.any():
        zeros = np.zeros(y.shape, dtype=dtype)
        hist = np.array([primal_objective(loss, y, zeros, zeros, C)])
        return SolverResult(zeros, zeros, intercept(zeros, s), 0, True, hist,
                            np.array([dual_objective(loss, y, zeros, zeros, C)]), dropped, None)
    if s:
        plain = matvec

        def matvec(c):  # K + s^2 1 1^T
            return np.asarray(plain(c)) + intercept(c, s)

    step = _choose_step(step_size, diag, keep, matvec, n, dtype, random_state)
    with IterationMonitor(verbose, callback, total=max_iter, desc=what) as monitor:
        c, z, it, converged, primal, dual = _fixed_point_core(
            matvec, diag, keep, y, loss, C, step, tol=tol, max_iter=max_iter, c0=c0, dtype=dtype, monitor=monitor
        )
        stopped = monitor.stopped_by_callback
    return SolverResult(c, z, intercept(c, s), it, converged, primal, dual, dropped, step,
                        stopped_by_callback=stopped)


def kernel_fixed_point(kernel, X, y, loss="squared", C=1.0, *, step_size="trace", tol=1e-4, max_iter=1000, c0=None,
                       intercept_scaling=0.0, epsilon=0.1, max_memory=None, random_state=None, verbose=0,
                       callback=None, cache=None):
    """Solve problem (2) by the fixed-point iteration (10) on blocked kernel products.

    Parameters
    ----------
    kernel : Kernel or str
        A resolved kernel (no ``sigma="median"``).
    X : array of shape (n, d)
    y : array of shape (n,) or (n, k)
        Targets (+-1 for classification losses); k columns are k independent problems solved
        together (one kernel product per iteration for all of them).
    loss : str or Loss
    C : float or array of shape (n,)
        Per-point weight C_i = C w_i of the loss (= 1/lam_i); 0 removes a point.
    step_size : "trace", "power" or float, default="trace"
        Step of eq. (10). "trace": 1/trace(K), always inside (0, 2/||K||_2) (trace >= norm).
        "power": 2 (1 - 0.1) / ||K||_2 with the norm estimated by power iteration (blocked
        products; faster convergence). A number is REFUSED (ValueError) when it provably
        violates eq. (11), i.e. alpha >= 2/max(max_i k_ii, 1^T K 1 / n) (lower bounds of
        ||K||_2, one extra product); a value that passes this check but still exceeds 2/||K||_2
        makes the dual objective rise, which raises :class:`FixedPointDivergenceError`.
    tol : float
        Stop when max_i |c_i^{new} - c_i| / (alpha mean_i k_ii) < tol, the size a coordinate
        step (alpha_i = 1/k_ii) would have, so ``tol`` means the same as for coordinate descent.
    max_iter : int
    c0 : array or None
        Warm start.
    intercept_scaling : float >= 0
        s > 0 adds a regularised intercept b = s^2 sum(c) (kernel K + s^2; see the module notes).
    epsilon : float
        For loss="epsilon_insensitive".
    max_memory : int, str or None
        Budget for kernel rows (cached: as many as fit) and blocked products.
    random_state : for the power iteration.
    verbose, callback : progress bar / per-iteration callback (kernelscale._monitor).
    cache : kernelscale.ops.row_cache.KernelRowCache or None
        Reuse rows computed by an earlier solve on the same kernel and X.

    Returns
    -------
    SolverResult
    """
    kernel = make_kernel(kernel)
    X = as_float_array(X, "X")
    n, dtype = X.shape[0], X.dtype
    loss, y, C, s = setup(X, y, loss, C, intercept_scaling, epsilon)
    diag = np.maximum(kernel_diag(kernel, X).astype(np.float64), 0.0) + s * s
    keep = diag > 0
    if cache is None:
        k = 1 if y.ndim == 1 else y.shape[1]
        cache = KernelOperator(kernel, X, max_memory).row_cache(reserved_bytes=vector_bytes(n, k, dtype),
                                                                max_rows=int(keep.sum()))
    # static fill: the first rows that fit (all of them when the budget allows)
    cache.fetch(np.flatnonzero(keep)[: cache.capacity])
    result = _run(cache.matvec, diag, y, loss, C, step_size=step_size, tol=tol, max_iter=max_iter, c0=c0, dtype=dtype, s=s,
                  verbose=verbose, callback=callback, random_state=random_state, what="fixed point")
    result.info.update(rows_computed=cache.n_computed, cache_rows=cache.capacity)
    return result


def linear_fixed_point(X, y, loss="squared", C=1.0, *, step_size="trace", tol=1e-4, max_iter=1000, c0=None,
                       intercept_scaling=0.0, epsilon=0.1, random_state=None, verbose=0, callback=None):
    """Fixed-point iteration (10) for the linear kernel K = X X^T, with K c = X (X^T c) (O(nnz)).

    X may be dense or scipy.sparse. Same parameters as :func:`kernel_fixed_point`; the result
    also carries w = X^T c.
    """
    X = check_linear_X(X)
    dtype = X.dtype
    loss, y, C, s = setup(X, y, loss, C, intercept_scaling, epsilon)
    diag = row_sq_norms(X) + s * s

    def matvec(c):
        return np.asarray(X @ np.asarray(X.T @ c), dtype=dtype)

    result = _run(matvec, diag, y, loss, C, step_size=step_size, tol=tol, max_iter=max_iter, c0=c0, dtype=dtype, s=s,
                  verbose=verbose, callback=callback, random_state=random_state, what="fixed point (linear)")
    result.w = np.asarray(X.T @ result.coef, dtype=dtype).T
    return result
