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

Every pass over the rows goes through a row executor (:mod:`kernelscale.ops.rows`): on numpy
arrays one call on the whole arrays; on a dask X (:func:`kernel_fixed_point`) one task per row
chunk, with step 1 one task per pair of row chunks, c and K c persisted in X's row chunks.

An intercept is offered as a *regularised* one, as in LIBLINEAR: ``intercept_scaling = s > 0``
adds the constant s^2 to the kernel (an extra feature s for the linear kernel), i.e. the model is
g(x) = sum_i c_i k(x, x_i) + b with b = s^2 sum_i c_i and the penalty b^2 / (2 s^2) added to
problem (2). LIBSVM's bias is unregularised instead (the dual then has the equality constraint
sum_i c_i = 0); the two agree only as s -> infinity.
"""

from __future__ import annotations

import logging
import math
from functools import partial

import numpy as np
from sklearn.utils import check_random_state

from ..base.monitor import IterationMonitor
from .problem import (
    SolverResult, as_C, as_targets, check_intercept_scaling, check_linear_X, initial_coef, intercept,
    row_sq_norms, setup, vector_bytes,
)
from ..base.validation import as_float_array, check_positive
from ..kernels import make_kernel
from ..ops.kernel import KernelOperator, kernel_diag, kernel_matvec
from ..ops.memory import parse_memory
from ..ops.rows import DaskRows, HostRows, is_dask
from ..losses import dual_objective, make_loss, primal_objective

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
    X = as_float_array(X, "X", accept_sparse=True)
    y = as_targets(y, X.shape[0])
    c = np.asarray(c, dtype=np.float64)
    z = kernel_matvec(make_kernel(kernel), X, None, c, max_memory=max_memory).astype(np.float64)
    z = z + intercept(c, check_intercept_scaling(intercept_scaling))
    return primal_objective(loss, y, z, c, as_C(C, y, np.float64))


def estimate_spectral_norm(matvec, n, *, n_iter=50, rtol=1e-3, random_state=None, dtype=np.float64, rows=None):
    """||K||_2 of a PSD operator by power iteration (Rayleigh quotients; a lower estimate).
    ``rows``: the row executor of the vectors (:mod:`kernelscale.ops.rows`; host arrays by default)."""
    rng = check_random_state(random_state)
    rows = HostRows(0) if rows is None else rows
    v = rows.standard_normal(rng, n, dtype)
    v = rows.map(_divide, v, by=np.sqrt(rows.sum(_square, v)), dtype=dtype)
    lam = 0.0
    for _ in range(n_iter):
        w = matvec(v)
        new, ww = rows.sum(_rayleigh, v, w)
        new, norm = float(new), float(np.sqrt(ww))
        if norm == 0.0 or not math.isfinite(norm):
            return max(new, 0.0)
        v = rows.map(_divide, w, by=norm, to=dtype, dtype=dtype)
        if abs(new - lam) <= rtol * abs(new):
            return new
        lam = new
    return lam


def _choose_step(step_size, rows, diag, stats, matvec, n, dtype, random_state):
    """The step of eq. (10): 1/trace(K), 2 (1 - margin) / ||K||_2 by power iteration, or the
    user's value, refused when it provably violates eq. (11)."""
    trace, count, largest = stats
    if step_size is None or (isinstance(step_size, str) and step_size == "trace"):
        return 1.0 / trace
    if isinstance(step_size, str):
        if step_size != "power":
            raise ValueError(f"step_size must be 'trace', 'power' or a number in (0, 2/||K||_2), got {step_size!r}.")
        norm = estimate_spectral_norm(matvec, n, random_state=random_state, dtype=dtype, rows=rows)
        return max(1.0 / trace, 2.0 * (1.0 - POWER_MARGIN) / norm) if norm > 0 else 1.0 / trace
    check_positive(step_size, "step_size")
    ones = rows.map(_kept_ones, diag, to=dtype, dtype=dtype)
    lower = max(largest, rows.sum(_dot64, ones, matvec(ones)) / max(count, 1))
    if step_size >= 2.0 / lower:
        raise ValueError(
            f"step_size={step_size!r} is outside (0, 2/||K||_2) (eq. 11): ||K||_2 >= {lower:.6g} here, so "
            f"step_size must be below {2.0 / lower:.6g}; pass a smaller step_size, or step_size='trace' (always "
            f"safe) or step_size='power'."
        )
    return float(step_size)


# -- per-row work, one call per row chunk (kernelscale.ops.rows; on host arrays one call) ------


def _square(v):
    """v^T v in v's dtype."""
    return v @ v


def _dot64(a, b):
    """a^T b with b in float64."""
    return float(a @ np.asarray(b, dtype=np.float64))


def _rayleigh(v, w):
    """(v^T w, w^T w) with w in float64: the Rayleigh quotient and the squared norm of K v."""
    w = np.asarray(w, dtype=np.float64)
    return float(v @ w), float(w @ w)


def _divide(v, *, by, to=None):
    return (v / by) if to is None else (np.asarray(v, dtype=np.float64) / by).astype(to)


def _kept_ones(diag, *, to):
    return (diag > 0).astype(to)


def _diag_stats(diag, index):
    """(sum of the positive k_ii, their number, the largest k_ii) and the indices of the zero k_ii."""
    keep = diag > 0
    return np.array([diag[keep].sum(), keep.sum(), diag.max(initial=-np.inf)]), index[~keep]


def _merge_diag_stats(*parts):
    stats = np.array([p[0] for p in parts])
    return (np.array([stats[:, 0].sum(), stats[:, 1].sum(), stats[:, 2].max()]),
            np.concatenate([p[1] for p in parts]))


def _start(y, c0, diag, *, to):
    """The starting coefficients: 0, or c0 with the dropped points at 0."""
    return initial_coef(c0, y.shape, to, diag > 0)


def _score_stats(y, z, c, C, *, loss):
    """(K c not finite, F, D, max |K c|) of problem (2) at c, z = K c."""
    if not np.all(np.isfinite(z)):
        return np.array([1.0, np.nan, np.nan, np.inf])
    return np.array([0.0, primal_objective(loss, y, z, c, C), dual_objective(loss, y, z, c, C),
                     float(np.max(np.abs(z), initial=0.0))])


def _merge_score_stats(*parts):
    parts = np.array(parts)
    return np.array([parts[:, 0].max(), parts[:, 1].sum(), parts[:, 2].sum(), parts[:, 3].max()])


def _step(z, c, y, C, diag, *, alpha, loss):
    """Steps 2-3 of eq. (10): c_new = -J_alpha(alpha z - c), 0 at the dropped points (float64)."""
    with np.errstate(over="ignore", invalid="ignore"):  # a non-finite K c or step is refused after it
        v = alpha * z.astype(np.float64) - c
        new = loss._neg_resolvent(v, y, alpha, C)
    new[~(diag > 0)] = 0.0
    return new


def _change_stats(new, c):
    """(c_new not finite, max |c_new - c|)."""
    return np.array([float(not np.all(np.isfinite(new))), float(np.max(np.abs(new - c), initial=0.0))])


def _maximum(*parts):
    return np.max(parts, axis=0)


def _cast(a, *, to):
    return a.astype(to, copy=False)


def _plus(z, *, b):
    return np.asarray(z) + b


def _intercept(rows, c, s):
    """b = s^2 sum_i c_i (0 without intercept): :func:`kernelscale.regularized.problem.intercept` summed over rows."""
    return rows.sum(intercept, c, s=s) if s else 0.0


def _diag(X, *, kernel, s):
    """k_ii + s^2 (negative rounding of k_ii clipped at 0)."""
    return np.maximum(kernel_diag(kernel, X).astype(np.float64), 0.0) + s * s


def _width(a):
    return None if a.ndim == 1 else a.shape[1]


# ----------------------------------------------------------------------------------------------
# the iteration


def _fixed_point_core(rows, matvec, diag, stats, y, loss, C, alpha, *, tol, max_iter, c0, dtype, monitor):
    """Iterate eq. (10) with the given K c product; see :func:`kernel_fixed_point`. Every pass
    over the rows goes through ``rows``: per-row arrays (c, z) stay where they are, and only
    the scalars of the stopping and divergence tests come back."""
    kbar = stats[0] / stats[1]
    scale = alpha * kbar  # |Delta c| / (alpha kbar) is comparable to a coordinate-descent step
    width = _width(y)
    c = rows.map(_start, y, c0, diag, to=dtype, width=width, dtype=dtype)
    eps = float(np.finfo(dtype).eps)
    primal, dual = [], []
    best = math.inf
    rises = 0
    converged = False
    it = 0
    z = None
    for it in range(1, max_iter + 1):
        z = matvec(c)
        # steps 2-3 are taken with the tests of this iteration's K c: one round trip per iteration
        new = rows.map(_step, z, c, y, C, diag, alpha=alpha, loss=loss, width=width, dtype=np.float64, persist=False)
        scores, changes, c = rows.persist(
            rows.reduce(_score_stats, y, z, c, C, loss=loss, combine=_merge_score_stats, persist=False),
            rows.reduce(_change_stats, new, c, combine=_maximum, persist=False),
            rows.map(_cast, new, to=dtype, width=width, dtype=dtype, persist=False))
        (bad, p, d, zmax), (bad_new, change) = rows.value(scores, changes)
        if bad:
            raise _diverged(alpha, it, "K c is not finite")
        p, d = float(p), float(d)
        primal.append(p)
        dual.append(d)
        if d > best + 1e3 * eps * (abs(best) + abs(p) + 1.0):
            rises += 1
            if rises >= DIVERGENCE_PATIENCE:
                raise _diverged(alpha, it, f"the dual objective rose from {best:.6g} to {d:.6g}")
        else:
            rises = 0
        best = min(best, d)
        if bad_new:
            raise _diverged(alpha, it, "the coefficients are not finite")
        change = float(change) / scale
        if monitor.update(objective=p, dual_objective=d, duality_gap=p + d, max_change=change):
            break
        # working precision: the step moves c by less than alpha times the rounding of z (a tol
        # below float32 resolution is met there instead of spinning to max_iter)
        at_precision = change * kbar < PRECISION_FLOOR * eps * max(1.0, float(zmax))
        if change < tol or at_precision:
            converged = True
            break
    z = matvec(c)
    _, p, d, _ = rows.reduce(_score_stats, y, z, c, C, loss=loss, combine=_merge_score_stats)
    primal.append(float(p))
    dual.append(float(d))
    z = rows.map(_cast, z, to=dtype, width=width, dtype=dtype)
    return c, z, it, converged, np.array(primal), np.array(dual)


def _diverged(alpha, it, what):
    return FixedPointDivergenceError(
        f"the fixed-point iteration diverged at iteration {it} ({what}): step_size={alpha:.6g} is too "
        f"large for this kernel matrix (eq. 11 needs 0 < step_size < 2/||K||_2); pass a smaller step_size, "
        f"e.g. step_size='trace' (1/trace(K), always safe) or step_size='power'."
    )


def _run(matvec, diag, y, loss, C, *, step_size, tol, max_iter, c0, dtype, s, verbose, callback, random_state, what,
         rows=None):
    check_positive(tol, "tol")
    check_positive(max_iter, "max_iter", integer=True)
    rows = HostRows(0) if rows is None else rows
    n = diag.shape[0]
    stats, dropped = rows.reduce(_diag_stats, diag, rows.index(n), combine=_merge_diag_stats)
    if dropped.size:
        logger.info("%d point(s) have a zero kernel diagonal; their coefficients are fixed at 0", dropped.size)
    stats = (float(stats[0]), int(stats[1]), float(stats[2]))
    if stats[1] == 0:
        zeros = rows.map(_start, y, None, diag, to=dtype, width=_width(y), dtype=dtype)
        _, p, d, _ = rows.reduce(_score_stats, y, zeros, zeros, C, loss=loss, combine=_merge_score_stats)
        return SolverResult(zeros, zeros, _intercept(rows, zeros, s), 0, True, np.array([float(p)]),
                            np.array([float(d)]), dropped, None)
    if s:
        plain = matvec

        def matvec(c):  # K + s^2 1 1^T
            z = plain(c)
            b = _intercept(rows, c, s)
            return rows.map(_plus, z, b=b, width=_width(z), dtype=(np.zeros(1, z.dtype) + b).dtype)

    step = _choose_step(step_size, rows, diag, stats, matvec, n, dtype, random_state)
    with IterationMonitor(verbose, callback, total=max_iter, desc=what) as monitor:
        c, z, it, converged, primal, dual = _fixed_point_core(
            rows, matvec, diag, stats, y, loss, C, step, tol=tol, max_iter=max_iter, c0=c0, dtype=dtype,
            monitor=monitor
        )
        stopped = monitor.stopped_by_callback
    return SolverResult(c, z, _intercept(rows, c, s), it, converged, primal, dual, dropped, step,
                        stopped_by_callback=stopped)


def kernel_fixed_point(kernel, X, y, loss="squared", C=1.0, *, step_size="trace", tol=1e-4, max_iter=1000, c0=None,
                       intercept_scaling=0.0, epsilon=0.1, max_memory=None, random_state=None, verbose=0,
                       callback=None, cache=None, cache_bytes=None):
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
    verbose, callback : progress bar / per-iteration callback (kernelscale.base.monitor).
    cache : kernelscale.ops.row_cache.KernelRowCache or None
        Reuse rows computed by an earlier solve on the same kernel and X.
    cache_bytes : int or None
        For a dask X: the kernel blocks K(X_i, X_j) are computed once and kept (persisted) when
        the n x n kernel takes at most this many bytes (default ``max_memory``), else computed
        again by every product.

    A dask X (row chunks; y (n, k) and a per-entry C as dask arrays with its row chunks) is
    solved over its chunks: c, K c and the per-row state stay dask arrays in X's row chunks,
    each iteration is one kernel product of one task per pair of row chunks, summed over the
    second by a tree, and the scalars (objectives, the largest change, the power iteration's
    norms) come back by tree reductions. The iterates are numpy's up to the order of the sums.

    Returns
    -------
    SolverResult
    """
    kernel, budget = make_kernel(kernel), parse_memory(max_memory)  # bytes from here on
    if is_dask(X):  # over the row chunks (kernelscale.dask.fit): y (n, k) and C (per entry) dask arrays too
        loss, s = make_loss(loss, epsilon), check_intercept_scaling(intercept_scaling)
        rows = DaskRows(X.chunks[0], budget)
        diag = rows.map(_diag, X, kernel=kernel, s=s, dtype=np.float64)
        n = X.shape[0]
        keep = n * n * X.dtype.itemsize <= (rows.budget if cache_bytes is None else cache_bytes)
        blocks = rows.kernel_blocks(kernel, X) if keep else None
        return _run(partial(rows.kernel_matvec, kernel, X, blocks=blocks), diag, y, loss, C, step_size=step_size, tol=tol,
                    max_iter=max_iter, c0=c0, dtype=X.dtype, s=s, verbose=verbose, callback=callback,
                    random_state=random_state, what="fixed point", rows=rows)
    X = as_float_array(X, "X", accept_sparse=True)
    n, dtype = X.shape[0], X.dtype
    loss, y, C, s = setup(X, y, loss, C, intercept_scaling, epsilon)
    diag = _diag(X, kernel=kernel, s=s)
    keep = diag > 0
    if cache is None:
        k = 1 if y.ndim == 1 else y.shape[1]
        cache = KernelOperator(kernel, X, budget).row_cache(reserved_bytes=vector_bytes(n, k, dtype),
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
