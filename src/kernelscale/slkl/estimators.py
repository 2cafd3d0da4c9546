"""SLKL's estimators: ``SLKLRegressor`` and ``SLKLClassifier`` (paper 1; docs/algorithms.md section 1).

An estimator validates the data, resolves its parameters and its memory budget, draws the M
candidates and hands the numerical method to plain functions: the solvers of :mod:`.solver` on
the candidate columns of :mod:`.columns` (in the column mode that fits the budget), or for more
than two classes one-vs-one on the per-class sums of :mod:`.multiclass`. ``max_memory`` is
resolved into bytes once per fit (and once per prediction) at this boundary; everything below
takes those bytes (see :mod:`kernelscale.ops.memory`), so a fit with ``max_memory=None`` plans
with one reading of the free memory.

The learned model is kernel ridge regression with the learned kernel; ``predict`` evaluates
f(x) = K(x, X_fit_) @ dual_coef_ over the active candidates only (eqs. 16-17).

Threads: the coordinate loops of a fit run on one BLAS thread (each visit is a few small
matrix-vector products, which a multithreaded BLAS slows down). The limit is process-wide: while
a fit runs, BLAS calls of other threads of the process run on one thread as well; the thread count
is restored when the last of overlapping fits ends. With several outputs (classes) the Gram
solver's compiled loops run side by side on as many threads as the BLAS would have used
(``threadpoolctl.threadpool_limits(1)`` runs them in turn), each output with its own seed, so the
model does not depend on the thread count (with a BLAS whose products do not depend on it either,
as OpenBLAS's). A callback or verbose output runs them in turn; extra threads stay within
``max_memory``. Measurements: benchmarks/studies/slkl.md, "Threads".

Dask: on a dask X chunked by rows, the Gram solver fits over the chunks (:mod:`kernelscale.dask.fit`
calls ``_fit_prepared``): the same sum functions that run on the host arrays run per chunk through
the row executors of :mod:`kernelscale.ops.rows`, and the coordinate descent runs on their M x M
totals here.
"""

from __future__ import annotations

import contextvars
import math
import logging
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MultiOutputMixin, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..base.classifier import (
    OneVsRestScoresMixin, class_pairs, encode_classes, one_hot, one_hot_estimates, one_vs_one_scores_in_blocks,
    one_vs_rest_from_one_hot, one_vs_rest_targets,
)
from ..base.boundary import BoundaryMixin
from ..base.estimator import (
    FiniteR2Mixin, INPUT_ATTRIBUTES, commit_fit, fit_weights, positive_counts, positive_rows, resolve_kernel,
    target_means, validate_fit_data,
)
from ..base.monitor import IterationMonitor, problem_callbacks
from ..base.params import DEVICE_CONSTRAINT
from ..base.validation import as_rows, check_finite_result, validate_data
from ..kernels import KERNEL_NAMES, Kernel
from ..ops.kernel import KernelOperator
from ..ops.lapack_threads import blas_threads, one_blas_thread
from ..ops.memory import parse_memory
from ..ops.rows import executor, is_dask
from ..simplex import project_simplex
from . import loop as _slkl_loop
from .columns import (
    COLUMN_MODES, KernelColumns, candidate_scale, gram_state_bytes, gram_sums, plan_columns, weighted_targets,
)
from .multiclass import (
    check_one_vs_rest_memory, check_ovo_memory, choose_decomposition, class_gram_sums, ovo_gram_bytes, pair_gram,
    pair_sums, partial_sums,
)
from .solver import DEPRECATED_UPDATES, UPDATES, check_update, slkl, slkl_gram

__all__ = ["SLKLRegressor", "SLKLClassifier"]

logger = logging.getLogger(__name__)

#: "auto" sparsity: this fraction of the weighted mean square of the target (the paper's 0.01
#: for +-1 targets); why: benchmarks/studies/slkl.md, "Sparsity"
AUTO_SPARSITY = 0.01
#: n_components="auto": max(AUTO_MIN_COMPONENTS, AUTO_COMPONENTS_PER_SQRT_N sqrt(n)) candidates, at
#: most AUTO_MAX_COMPONENTS; why: benchmarks/studies/slkl.md, "Capacity that grows with n"
AUTO_MIN_COMPONENTS = 256
AUTO_COMPONENTS_PER_SQRT_N = 4.0
AUTO_MAX_COMPONENTS = 4096


def auto_components(n, budget=None):
    """n_components="auto" for n training points: max(256, ceil(4 sqrt(n))) within
    [1, AUTO_MAX_COMPONENTS], at most n. 256 (the former default) up to 4096 points, 895 at 50000,
    4000 at one million; non-decreasing in n. With ``budget`` (bytes) the growth beyond 256 stops
    where the Gram solver's state of one problem (:func:`~kernelscale.slkl.columns.gram_state_bytes`)
    would take more than a quarter of it (M <= sqrt(budget / 128): 884 for 100 MB)."""
    m = max(AUTO_MIN_COMPONENTS, math.ceil(AUTO_COMPONENTS_PER_SQRT_N * math.sqrt(max(int(n), 0))))
    m = min(m, AUTO_MAX_COMPONENTS)
    if budget is not None:
        lo, hi = AUTO_MIN_COMPONENTS, m  # the largest M within the budget, not below the former 256
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if 4 * gram_state_bytes(mid, 1) <= budget:
                lo = mid
            else:
                hi = mid - 1
        m = min(m, lo)
    return int(max(1, min(m, int(n))))

_PARAMS_DOC = """
    kernel : Kernel or str, default="gaussian"
        A kernelscale kernel or one of ``KERNEL_NAMES``; ``sigma="median"`` is resolved in fit
        into ``kernel_``.
    n_components : int >= 1 or "auto", default="auto"
        M, the number of candidate columns, sampled uniformly without replacement from the
        training points (a number larger than n is clipped to n with a warning). "auto" follows
        n: max(256, ceil(4 sqrt(n))), at most 4096 and n (``candidates_.size``): 256, the former
        default, up to 4096 points, 895 at 50000, 4000 at one million. O(sqrt n) centres keep
        the statistical rate of kernel ridge regression with Nystrom centres (Rudi, Camoriano &
        Rosasco 2015). At 50000 x 30 the fit took 1.6 s with 256 candidates and about 3 s with
        1024, for 16.4% -> 12.4% test error; from there the l1 penalty, not M, sets the active
        columns (benchmarks/studies/slkl.md, "Capacity that grows with n"). "auto" grows beyond
        256 only while the Gram solver's M x M state takes at most a quarter of ``max_memory``;
        the memory of the columns is planned by ``columns``.
    sparsity : float > 0 or "auto", default="auto"
        The paper's nu: weight of the l1 penalty nu sum(mu) of eq. 14; larger values keep
        fewer columns active. Only alpha * sparsity matters (Prop. 3). "auto" is 0.01 times the
        weighted mean square of the target, sum(w y^2) / n, per output (the regressor: of the
        target less ``intercept_``; kept in ``sparsity_``):
        the first term of eq. 14 grows like y^2 and the penalty does not, so a fixed nu makes the
        fit depend on the units of y. For +-1 class targets without
        weights "auto" is exactly 0.01, the value of the paper's experiments, for two classes
        and for each one-vs-one pair (``SLKLClassifier``'s ``multi_class``); for k > 2 classes
        one-vs-rest it is divided by k (0.01 / k for each of the k problems). With the
        classifier's alpha of 0.1 the product alpha * nu is ten times smaller than the paper's.
        Chosen on held-out training data (benchmarks/studies/slkl.md, "Sparsity").
    alpha : float > 0, default=1.0 (SLKLClassifier: 0.1)
        The ridge, the paper's lambda in (lambda I + K(mu))^-1 of eq. 14; larger values
        regularise more. The classifier's +-1 targets take 0.1, chosen on held-out training
        data (benchmarks/studies/slkl.md, "Ridge").
    update : "line_search" or "newton", default="line_search"
        The coordinate step. "line_search": the minimiser of F along the coordinate (an exact
        line search on F's closed form along it; never raises F). "newton": the paper's Newton
        step (eq. 19), safeguarded: a Newton step that would raise F is replaced by the
        line-search step and counted in ``n_newton_fallbacks_``.

        .. deprecated:: 0.2
           ``update="exact"`` was renamed ``"line_search"`` (the same step); "exact" is
           accepted with a FutureWarning and will be removed in 0.3.
    tol : float > 0, default=1e-4
        Stop when F(mu^{k-M}) - F(mu^k) <= tol F(mu^{k-M}) (checked every M visits).
    max_iter : int or None, default=None
        Maximum coordinate visits per output (None: 500 M); ConvergenceWarning if reached.
    columns : "auto", "gram", "precompute" or "on_the_fly", default="auto"
        "gram": compute Q = C^T C and C^T y once (BLAS-3 over kernel row blocks, memory O(M^2))
        and run the visits on them, O(m0) per skipped visit and O(m0^2) per other visit (same
        iterates as the column modes; see :mod:`kernelscale.slkl.solver`). "precompute": keep all M
        columns (memory n M) and pay O(n) / O(n m0) per visit as in the paper (Sec. 4.2).
        "on_the_fly": recompute a visited column from the kernel and keep only the active ones
        (memory O(n m0 + m0^2), O(n d) extra work per visit). "auto" takes "gram" when its
        state fits in half of ``max_memory``, else "precompute" when the M columns take at most
        a quarter of it, else "on_the_fly". The mode used is ``columns_used_``. On a dask X
        chunked by rows, "auto" and "gram" fit over the chunks: the M candidate rows are gathered
        and one pass sums each chunk's share of C^T W C, C^T W y and y^T W y (docs/dask.md);
        the other modes gather X.
    max_memory : int, str or None, default=None
        Budget for the columns, the active set and kernel blocks (half the available memory
        if None, read once per fit); fit fails at once, naming what to change, when it cannot fit.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (docs/gpus.md): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
    warm_start : bool, default=False
        Reuse the previous candidates and weights ``mu_`` when the training set has the same
        size, n_components and number of outputs (the classifier: the same classes and the same
        ``multi_class_``).
    random_state : int, RandomState or None
        Seeds the candidate sample, the coordinate choice and the median heuristic.
    verbose : int, default=0
        1 shows a progress bar with F, updated every M visits.
    callback : callable or None
        Called every M visits with a dict (iteration, objective, n_active, problem); returning
        True stops the current output's problem."""

_ATTR_DOC = """
    kernel_ : Kernel
        The kernel used (bandwidth resolved).
    sparsity_ : float or ndarray (n_outputs,)
        The nu used (``sparsity`` resolved; one per output for a 2-d y or several classes).
    candidates_ : ndarray (M,)
        Indices of the candidate training points.
    mu_ : ndarray (M,) or (M, n_outputs)
        Weights over the candidates.
    active_ : ndarray
        Indices of the training points whose weight is positive (for some output).
    n_active_ : int
        m0, the size of ``active_``.
    X_fit_ : ndarray (m0, d)
        The active training points, all that predict needs.
    dual_coef_ : ndarray (m0,) or (m0, n_outputs)
        mu_m a_m / sqrt(k(x_m, x_m)), so that f(x) = K(x, X_fit_) @ dual_coef_.
    objective_history_ : ndarray or list of ndarray
        F at the start and every M visits (one array per output when there are several).
    n_iter_ : int
        Coordinate visits (maximum over outputs).
    n_skipped_ : int
        Visits settled by the O(n) skip rule (mu_m = 0 and lam a^2 <= nu), summed over outputs.
    columns_used_ : str
        The ``columns`` mode "auto" resolved to ("gram", "precompute" or "on_the_fly").
    n_newton_fallbacks_ : int
        With update="newton": raw Newton steps that would have raised F, replaced by the
        line-search step (0 for update="line_search")."""

_OVERFLOW = ("SLKL produced non-finite weights: its arithmetic overflowed or lost all precision on the values of X, "
             "y and sample_weight (e.g. y * sqrt(sample_weight) or their squares beyond the float range); rescale X "
             "or y, scale sample_weight towards 1, or increase alpha or sparsity.")


class _SLKLBase(BoundaryMixin, BaseEstimator):
    #: "auto" sparsity shared out over the outputs (the one-vs-rest problems of several classes)
    _AUTO_SPARSITY_PER_CLASS = False
    _parameter_constraints: dict = {
        "kernel": [Kernel, StrOptions(set(KERNEL_NAMES))],
        "n_components": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "sparsity": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "update": [StrOptions(set(UPDATES) | set(DEPRECATED_UPDATES), deprecated=set(DEPRECATED_UPDATES))],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "columns": [StrOptions(set(COLUMN_MODES))],
        "max_memory": [Interval(Real, 0, None, closed="neither"), str, None],
        "device": DEVICE_CONSTRAINT,
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callback": [callable, None],
    }

    #: a dask y is passed in float64, as numpy's fit converts it (kernelscale.dask.fit)
    _float64_targets = True
    #: the configurations that fit over dask row chunks (for kernelscale.dask.dispatch's messages)
    _chunked_configuration = "columns='auto' or columns='gram'"

    def __init__(self, kernel, *, n_components, sparsity, alpha, update, tol, max_iter, columns, max_memory, device,
                 warm_start, random_state, verbose, callback):
        self.kernel = kernel
        self.n_components = n_components
        self.sparsity = sparsity
        self.alpha = alpha
        self.update = update
        self.tol = tol
        self.max_iter = max_iter
        self.columns = columns
        self.max_memory = max_memory
        self.device = device
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback

    def _n_components(self, n, budget, clip=False):
        """M for n training points: ``n_components`` ("auto": :func:`auto_components` within
        ``budget`` bytes), at most n with ``clip`` (a number above n is clipped with a warning by
        the fit itself)."""
        if self.n_components == "auto":
            return auto_components(n, budget)
        M = int(self.n_components)  # True passes the Integral constraint; numpy's choice() refuses it
        return min(M, n) if clip else M

    def _budget(self):
        """``max_memory`` in bytes: read once per fit or prediction, and passed down as bytes."""
        return parse_memory(self.max_memory)

    def _fits_over_chunks(self):
        """A dask X is fitted over its row chunks (kernelscale.dask.fit) with the Gram solver: one
        pass of per-chunk sums C^T W C, C^T W y and y^T W y (one-vs-one: per class); the coordinate
        descent runs on these M x M quantities here. The other column modes hold n-sized columns:
        they gather X. The sums are taken per chunk and added up a tree, not over numpy's row
        blocks: the model differs from numpy's by rounding, which the classifier's +-1 systems at
        small alpha can amplify (benchmarks/studies/slkl.md, "Dask")."""
        return self.columns in ("auto", "gram")

    def _solve_outputs(self, solve_one, k, threads=1):
        """One SLKL problem per output column j (eq. 14 for the j-th target); ``solve_one(j, monitor)``,
        on up to ``threads`` threads (in turn with a callback or verbose output, whose order is kept)."""
        callbacks = problem_callbacks(self.callback, k)

        def run(j):
            with IterationMonitor(self.verbose, callbacks[j], desc=f"SLKL output {j}" if k > 1 else "SLKL") as mon:
                return solve_one(j, mon)

        if threads <= 1 or self.callback is not None or self.verbose:
            return [run(j) for j in range(k)]
        # an error (or an interrupt of the caller) stops the outputs not yet started, and the
        # running ones at their next epoch: their monitors ask to stop
        failed = threading.Event()

        def run_threaded(j):
            if failed.is_set():
                return None
            try:
                with IterationMonitor(0, lambda info: failed.is_set()) as mon:
                    return solve_one(j, mon)
            except BaseException:
                failed.set()
                raise

        contexts = [contextvars.copy_context() for _ in range(k)]  # the caller's np.errstate in each task
        pool = ThreadPoolExecutor(threads)
        try:
            return list(pool.map(lambda j: contexts[j].run(run_threaded, j), range(k)))
        except BaseException:
            failed.set()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    #: every attribute a fit may set (a refit deletes those it does not set again)
    _FITTED = ("kernel_", "sparsity_", "columns_used_", "_n_fit", "candidates_", "active_", "n_active_", "X_fit_",
               "objective_history_", "n_iter_", "n_skipped_", "n_newton_fallbacks_", "mu_", "dual_coef_",
               "classes_", *INPUT_ATTRIBUTES)

    def _solve(self, X, Y, sample_weight, fitted, budget, warm_start=True, squeeze=False, pairs=None):
        """Fit the columns of Y (n, k) as k problems over shared candidates within ``budget``
        bytes and commit ``fitted`` plus the fitted state in one step (``mu_`` and ``dual_coef_``
        1-d with ``squeeze``); ``warm_start=False`` ignores the previous weights. With ``pairs``
        (p, 2) of class codes, Y is one-hot and the problems are the p one-vs-one ones, +1 for a
        pair's first class and -1 for its second on their rows only, solved on the Gram solver
        from per-class sums."""
        n_all, k = Y.shape[0], (Y.shape[1] if pairs is None else len(pairs))
        if not 1e-150 <= float(self.alpha) <= 1e150:  # the coordinate steps divide by alpha**2
            raise ValueError(f"alpha={self.alpha!r} is outside the range of SLKL's arithmetic (alpha**2 must be a "
                             f"finite, normal float); pass 1e-150 <= alpha <= 1e150.")
        update = check_update(self.update)
        distributed = is_dask(X)
        if distributed:  # the rows of positive weight stay in their chunks: counted, not gathered
            counts = positive_counts(X, sample_weight)
            n = int(counts[:, 0].sum())
        else:
            keep = np.flatnonzero(sample_weight > 0)
            Xk, Yk, wk = X[keep], Y[keep], sample_weight[keep]
            n = keep.size
        if n == 0:
            raise ValueError("sample_weight has no positive entry; pass at least one positive weight.")
        rng = check_random_state(self.random_state)
        kernel = resolve_kernel(self.kernel, X, rng, sample_weight) if distributed else resolve_kernel(
            self.kernel, Xk, rng, wk)
        M = self._n_components(n, budget)
        if M > n:
            warnings.warn(f"n_components={M} > n_samples={n} (with positive weight); using n_components={n}.",
                          UserWarning, stacklevel=3)
            M = n
        prev_mu = getattr(self, "mu_", None)
        warm = (self.warm_start and warm_start and prev_mu is not None and getattr(self, "_n_fit", None) == n_all
                and prev_mu.reshape(prev_mu.shape[0], -1).shape == (M, k)
                and (sample_weight is None or np.all(_take(sample_weight, self.candidates_) > 0)))
        if warm:
            mu0 = prev_mu.reshape(M, k)
            if distributed:
                candidates, Zc = self.candidates_, _take(X, self.candidates_)
            else:
                cand = np.searchsorted(keep, self.candidates_)
        else:
            cand = rng.choice(n, M, replace=False)
            mu0 = None
            if distributed:  # the M candidate rows, gathered in the order of the draw
                order = np.argsort(cand)
                rows, _, index = positive_rows(X, sample_weight, cand[order], counts)
                inverse = np.argsort(order)  # rows[inverse]: the rows back in the draw's order (CSR too)
                Zc, candidates = rows[inverse], index[inverse]
        if not distributed:
            candidates, Zc = keep[cand], Xk[cand]
        if pairs is None:
            gram_bytes, mode = gram_state_bytes(M, k), self.columns
        else:  # the Gram solver, its columns mode and memory checked by the caller
            gram_bytes, mode = ovo_gram_bytes(M, Y.shape[1], partial_sums(distributed)), "gram"
        mode = plan_columns(mode, M, n, gram_bytes=gram_bytes, precomputed_bytes=M * n * X.dtype.itemsize,
                            budget=budget, distributed=distributed)
        scale = candidate_scale(kernel, Zc)
        # the Gram sums: one pass over the rows, on the host arrays or per dask row chunk
        sums = executor(budget, X)
        Xr, Yr, wr = (X, Y, sample_weight) if distributed else (Xk, Yk, None if np.all(wk == 1.0) else wk)
        gram_kw = dict(kernel=kernel, points=Zc, scale=scale, budget=budget)
        if pairs is not None:  # per class C^T W C, C^T w, sum(w), rows; then per pair
            Qs, R, wsum, class_rows = sums.sum(class_gram_sums, Xr, Yr, wr, **gram_kw)
            R, yy, rows = pair_sums(R, wsum, class_rows, pairs)
        elif mode == "gram":  # C^T W C, C^T W y, y^T W y and the non-zero targets
            # (on the host: one BLAS-3 pass over kernel row blocks, all BLAS threads, shared by the k outputs)
            Q, R, yy, nonzero = sums.sum(gram_sums, Xr, Yr, wr, **gram_kw)
        else:  # the column modes (on the host only)
            Yw, sqrt_w, yy, nonzero = weighted_targets(Yr, wr)
            source = KernelColumns(KernelOperator(kernel, Xk, budget), cand, sqrt_w)
        if pairs is None:
            nu = _resolve_sparsity(self.sparsity, yy, n, nonzero,
                                   shared=yy.size if self._AUTO_SPARSITY_PER_CLASS else 1)
        else:  # each pair's mean over its own rows
            nu = _resolve_sparsity(self.sparsity, yy, np.maximum(rows, 1), rows > 0)
        kw = dict(lam=self.alpha, update=update, tol=self.tol, max_iter=self.max_iter)
        # one seed per output: the draws of output j do not depend on the others, so the outputs
        # may run in any order, on any number of threads, with the same result
        seeds = rng.randint(np.iinfo(np.int32).max, size=k) if k > 1 else None

        def state(j):
            return rng if seeds is None else np.random.RandomState(seeds[j])

        threads = 1
        if mode == "gram":
            if _slkl_loop.compiled_epoch() is not None:
                # the outputs' compiled coordinate loops (without the GIL) side by side; each thread
                # beyond the first holds another G state with its refresh (3 M^2 floats, as counted in
                # gram_bytes for the first), within the budget left beside gram_bytes
                # (a pair's Q_a + Q_b adds M^2 more)
                threads = max(1, min(k, blas_threads(),
                                     1 + (budget - gram_bytes) // ((24 if pairs is None else 32) * M * M)))

            def solve_one(j, mon):
                Qj = Q if pairs is None else pair_gram(Qs, pairs[j])
                return slkl_gram(Qj, R[:, j], yy[j], nu=nu[j], mu0=None if mu0 is None else mu0[:, j], monitor=mon,
                                 random_state=state(j), **kw)
        else:
            if mode == "precompute":
                source = source.materialise()
            reserved = source.nbytes + 4 * n * 8

            def solve_one(j, mon):
                res = slkl(source, Yw[:, j], nu=nu[j], mu0=None if mu0 is None else mu0[:, j], budget=budget,
                           reserved_bytes=reserved, monitor=mon, random_state=state(j), **kw)
                res.u = None  # n floats per output that the estimator does not use
                return res
        # one BLAS thread for the coordinate loops (see the module docstring)
        with one_blas_thread():
            try:
                results = self._solve_outputs(solve_one, k, threads)
            except (ValueError, np.linalg.LinAlgError) as err:  # scipy's check_finite, a failed factorization
                if not (isinstance(err, np.linalg.LinAlgError) or "infs or NaNs" in str(err)):
                    raise
                raise ValueError(_OVERFLOW) from err
        if not all(r.converged or r.stopped_by_callback for r in results):
            warnings.warn(
                f"{type(self).__name__} did not reach tol={self.tol:g} in max_iter="
                f"{max(r.n_iter for r in results)} coordinate visits; increase max_iter or tol.",
                ConvergenceWarning, stacklevel=3)
        mu = np.stack([r.mu for r in results], axis=1)
        a = np.stack([r.a for r in results], axis=1)
        on = np.flatnonzero(np.any(mu > 0, axis=1))
        coef = (mu[on] * a[on]) * scale[on, None]
        if not np.all(np.isfinite(coef)):
            raise ValueError(_OVERFLOW)
        coef = np.ascontiguousarray(coef, dtype=X.dtype)
        hist = [r.objective_history for r in results]
        fitted.update(
            kernel_=kernel,
            sparsity_=float(nu[0]) if squeeze else nu,
            columns_used_=mode,
            _n_fit=n_all,
            candidates_=candidates,
            active_=candidates[on],
            n_active_=int(on.size),
            X_fit_=as_rows(Zc[on]),
            objective_history_=hist[0] if k == 1 else hist,
            n_iter_=int(max(r.n_iter for r in results)),
            n_skipped_=int(sum(r.n_skipped for r in results)),
            n_newton_fallbacks_=int(sum(r.n_newton_fallbacks for r in results)),
            mu_=mu[:, 0] if squeeze else mu,
            dual_coef_=coef[:, 0] if squeeze else coef,
        )
        return commit_fit(self, fitted, stale=self._FITTED)

    def _scores(self, X):
        check_is_fitted(self)
        return self._decision_values(validate_data(self, X, dtype=[np.float64, np.float32], reset=False),
                                     self._budget())

    def _decision_values(self, X, budget):
        """K(X, X_fit_) @ dual_coef_ for a validated X, within ``budget`` bytes: one column per
        output (or pair)."""
        coef = self.dual_coef_[:, None] if self.dual_coef_.ndim == 1 else self.dual_coef_
        if self.n_active_ == 0:
            return np.zeros((X.shape[0], coef.shape[1]), dtype=np.result_type(X.dtype, coef.dtype))
        scores = KernelOperator(self.kernel_, self.X_fit_, budget).predict(X, coef)
        return check_finite_result(scores, "decision values" if hasattr(self, "classes_") else "predictions")


def _resolve_sparsity(sparsity, yy, n, nonzero, shared=1):
    """nu per output: the number given, or "auto" = 0.01 * mean(w y^2) / shared of each weighted
    target column Yw = sqrt(w) y (0.01 / shared for a zero target), from yy = sum(Yw^2) over the
    n rows of positive weight (one n per output for one-vs-one pairs) and ``nonzero`` (whether Yw
    has a non-zero entry); ``shared``: the number of one-vs-rest problems of a classifier with
    more than two classes, else 1."""
    with np.errstate(over="ignore", under="ignore"):
        mean_square = yy / n
    if not np.all(np.isfinite(mean_square)):
        raise ValueError(_OVERFLOW)  # y^2 beyond the float range: so is the objective of eq. 14
    if sparsity != "auto":
        return np.full(np.shape(yy)[0], float(sparsity))
    if np.any((mean_square == 0) & np.asarray(nonzero, dtype=bool)):
        raise ValueError(_OVERFLOW)  # y^2 below the float range
    return np.where(mean_square > 0, AUTO_SPARSITY * mean_square, AUTO_SPARSITY) / shared


def _take(a, index):
    """The rows ``index`` of a (numpy, or a dask array: only those rows are computed)."""
    return a[index].compute() if is_dask(a) else a[index]


class SLKLRegressor(MultiOutputMixin, FiniteR2Mixin, RegressorMixin, _SLKLBase):
    __doc__ = """Stochastic low-rank kernel learning for regression (paper 1).

    Learns a sparse conical combination of M rank-one Nystrom kernels by minimising eq. 14 with
    stochastic coordinate descent, then predicts as kernel ridge regression with that kernel.
    The paper has no intercept (``fit_intercept=False``); by default the targets are centred
    first (``intercept_``, added back by ``predict``). Each column of a 2-d y is an independent problem
    (its own weights mu) over shared candidates. ``sample_weight`` w gives the weighted
    least-squares version (rows of C and y scaled by sqrt(w)); points of zero weight are
    dropped, and candidates are drawn from the others. The solver works in float64 (the
    Woodbury downdates lose too many digits in float32); precomputed columns are stored in the
    input dtype and predictions of float32 input are float32.

    Parameters
    ----------""" + _PARAMS_DOC + """
    fit_intercept : bool, default=True
        Fit eq. 14 to the targets less their weighted mean (``intercept_``), which ``predict``
        adds back; False is the paper's model. The rank-one kernels have no constant term, so
        targets far from zero cost columns and ridge, and they set the "auto" sparsity (a
        hundredth of the targets' mean square, which a mean far from zero inflates). Chosen on
        held-out training data (benchmarks/studies/slkl.md, "Intercept"). Dask input: one more
        pass over y and the weights, for their means. A model saved before this parameter
        existed loads with fit_intercept=True but no offset (and predicts as it did).

    Attributes
    ----------""" + _ATTR_DOC + """
    intercept_ : float or ndarray (n_outputs,)
        The targets' weighted mean (0 with fit_intercept=False).
    """

    _parameter_constraints: dict = {**_SLKLBase._parameter_constraints, "fit_intercept": ["boolean"]}
    _FITTED = (*_SLKLBase._FITTED, "intercept_")

    def __init__(self, kernel="gaussian", *, n_components="auto", sparsity="auto", alpha=1.0, update="line_search",
                 tol=1e-4, max_iter=None, columns="auto", fit_intercept=True, max_memory=None, device=None,
                 warm_start=False, random_state=None, verbose=0, callback=None):
        super().__init__(kernel, n_components=n_components, sparsity=sparsity, alpha=alpha, update=update, tol=tol,
                         max_iter=max_iter, columns=columns, max_memory=max_memory, device=device,
                         warm_start=warm_start, random_state=random_state, verbose=verbose, callback=callback)
        self.fit_intercept = fit_intercept

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and y (n,) or (n, k)."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32], multi_output=True,
                                         y_numeric=True)
        sample_weight = fit_weights(sample_weight, None, X, ones=True)
        return self._fit_prepared(X, np.asarray(y, dtype=np.float64), None, sample_weight, fitted)

    def _fit_prepared(self, X, y, classes, sample_weight, fitted, budget=None):
        """The fit on validated X, float64 y and weights: numpy arrays, or dask arrays with X's row
        chunks (:mod:`kernelscale.dask.fit`; weights None for ones); ``budget``: ``max_memory`` in
        bytes (None: read it now)."""
        budget = self._budget() if budget is None else budget
        Y = y.reshape(y.shape[0], -1)
        offset = target_means(Y, sample_weight) if self.fit_intercept else np.zeros(Y.shape[1])
        if np.any(offset):
            Y = Y - offset
        fitted = {**fitted, "intercept_": float(offset[0]) if y.ndim == 1 else offset}
        return self._solve(X, Y, sample_weight, fitted, budget, squeeze=y.ndim == 1)

    def predict(self, X):
        """f(x) = sum_m mu_m a_m k(x_m, x) / sqrt(k(x_m, x_m)) + ``intercept_``: shape (n,), or (n, k)
        for a 2-d y."""
        scores = self._scores(X)
        offset = np.asarray(getattr(self, "intercept_", 0.0))  # absent from models saved before it existed
        if np.any(offset):
            scores = check_finite_result(scores + offset.astype(scores.dtype), "predictions")
        return scores[:, 0] if self.dual_coef_.ndim == 1 else scores


class SLKLClassifier(OneVsRestScoresMixin, ClassifierMixin, _SLKLBase):
    __doc__ = """SLKL classifier: regression on +-1 targets, one problem per pair of classes or per class.

    Two classes make one problem. For more, ``multi_class`` picks one-vs-one (a problem per
    pair of classes on their rows, as LIBSVM's SVC; the default where its Gram matrices fit) or
    one-vs-all (a problem per class on all rows: the protocol of the paper's USPS and MNIST
    experiments). ``predict`` is the argmax of the class scores (the sign for two classes, the
    majority vote of the pairs for one-vs-one). ``predict_proba`` follows the library's rule for
    least-squares scores (as LS-SVM's and the least-squares classifiers' of paper 5): one-vs-rest
    scores, regressions of +-1 codes, become estimates (s + 1) / 2 of the one-hot codes, which are
    projected onto the probability simplex; one-vs-one scores (votes plus the squashed
    confidence) are projected as they are, so a class that wins a whole vote more than every
    other gets probability 1 and only classes close in votes share it. The projection keeps the
    argmax, so ``predict`` is the argmax of the probabilities. They are least-squares estimates,
    not calibrated probabilities: wrap the model in ``sklearn.calibration.CalibratedClassifierCV``
    where calibration matters (on digits, one-vs-one's projected votes had a lower log loss than
    their shares of the k (k - 1) / 2 votes, whose largest probability is at most 2 / k).

    Parameters
    ----------""" + _PARAMS_DOC + """
    multi_class : "auto", "ovo" or "ovr", default="auto"
        How more than two classes are decomposed (:mod:`kernelscale.slkl.multiclass`). "ovo":
        k(k-1)/2 problems, one per pair of classes on the rows of its two classes, all over the
        same M candidates: one pass over the rows sums each class's C^T W C (M x M) and C^T w,
        and a pair's problem is the Gram solver on Q_a + Q_b and r_a - r_b; "auto" sparsity is
        0.01 times the pair's mean weight. "ovr": k problems on all rows, "auto" sparsity
        0.01 / k each. "auto" is "ovo" when ``columns`` is "auto" or "gram" and everything
        one-vs-one holds (the k Gram matrices, the solver's state, the per-pair weights and
        coefficients; on dask chunks the tree's partial sums of the Gram matrices) fits in half
        of ``max_memory``, else "ovr". Chosen on held-out training data: one-vs-one made fewer
        validation errors on every multi-class set of the study, at up to about twice the fit
        time (benchmarks/studies/slkl.md, "Multi-class").
    class_weight : dict, "balanced" or None
        Multiplies each sample's weight by its class weight (in every binary problem).

    Attributes
    ----------
    classes_ : ndarray
    multi_class_ : "ovo" or "ovr"
        The decomposition used ("ovr" for two classes). With "ovo" every array with one column
        per problem (``mu_``, ``dual_coef_``, ``sparsity_``, ``objective_history_``) has one per
        pair of classes (0, 1), (0, 2), ..., (k-2, k-1), positive values meaning the first;
        ``decision_function`` gives each class its votes plus its summed pairwise decision values
        squashed into (-1/3, 1/3).""" + _ATTR_DOC + """
    """

    _parameter_constraints: dict = {
        **_SLKLBase._parameter_constraints,
        "multi_class": [StrOptions({"auto", "ovo", "ovr"})],
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }
    _AUTO_SPARSITY_PER_CLASS = True
    _FITTED = (*_SLKLBase._FITTED, "multi_class_")

    def __init__(self, kernel="gaussian", *, n_components="auto", sparsity="auto", alpha=0.1, update="line_search",
                 tol=1e-4, max_iter=None, columns="auto", multi_class="auto", class_weight=None, max_memory=None,
                 device=None, warm_start=False, random_state=None, verbose=0, callback=None):
        super().__init__(kernel, n_components=n_components, sparsity=sparsity, alpha=alpha, update=update, tol=tol,
                         max_iter=max_iter, columns=columns, max_memory=max_memory, device=device,
                         warm_start=warm_start, random_state=random_state, verbose=verbose, callback=callback)
        self.multi_class = multi_class
        self.class_weight = class_weight

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and class labels y."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32])
        classes, codes = encode_classes(y)
        sample_weight = fit_weights(sample_weight, self.class_weight, X, codes, classes, ones=True)
        n, k = X.shape[0], classes.size
        # read once: the decomposition, the memory checks and the solvers plan with the same bytes
        # (a second reading could find less memory, which the targets then take some of)
        budget = self._budget()
        scheme = self._scheme(k, n, distributed=False, budget=budget)
        if scheme == "ovo":
            self._check_ovo_memory(n, k, distributed=False, budget=budget)
            return self._fit_prepared(X, one_hot(codes, k), classes, sample_weight, fitted, scheme, budget)
        check_one_vs_rest_memory(n, self._n_components(n, budget, clip=True), k, budget)
        return self._fit_prepared(X, one_vs_rest_targets(codes, k), classes, sample_weight, fitted, scheme, budget)

    def _check_ovo_memory(self, n, k, distributed, budget):
        """A ValueError, before anything class-sized is allocated, when one-vs-one does not fit."""
        check_ovo_memory(n, self._n_components(n, budget, clip=True), k, budget, distributed)

    def _scheme(self, n_classes, n, distributed, budget):
        """"ovo" or "ovr": ``multi_class`` resolved for ``n_classes`` classes of n samples within
        ``budget`` bytes (:func:`kernelscale.slkl.multiclass.choose_decomposition`)."""
        return choose_decomposition(self.multi_class, self.columns, n_classes, n,
                                    self._n_components(n, budget, clip=True), budget, distributed)

    def _fit_prepared(self, X, Y, classes, sample_weight, fitted, scheme=None, budget=None):
        """The fit on validated X, targets Y and weights: numpy arrays from :meth:`fit` with the
        ``scheme`` it chose (Y one-hot for one-vs-one, else the +-1 targets of
        :func:`one_vs_rest_targets`), or dask arrays with X's row chunks, Y one-hot, the scheme
        chosen here (:mod:`kernelscale.dask.fit`; weights None for ones); ``budget``:
        ``max_memory`` in bytes (None: read it now)."""
        k = classes.size
        budget = self._budget() if budget is None else budget
        if scheme is None:
            scheme = self._scheme(k, X.shape[0], distributed=is_dask(X), budget=budget)
            if scheme == "ovo":
                self._check_ovo_memory(X.shape[0], k, distributed=is_dask(X), budget=budget)
        same_classes = (np.array_equal(getattr(self, "classes_", None), classes)  # warm start only then
                        and getattr(self, "multi_class_", "ovr") == scheme)
        fitted.update(classes_=classes, multi_class_=scheme)
        if scheme == "ovo":
            return self._solve(X, Y, sample_weight, fitted, budget, warm_start=same_classes, pairs=class_pairs(k))
        if is_dask(Y):
            Y = executor(0, X).map(one_vs_rest_from_one_hot, Y, width=1 if k == 2 else k, dtype=np.float64)
        return self._solve(X, Y, sample_weight, fitted, budget, warm_start=same_classes, squeeze=k == 2)

    def _scores(self, X):
        """One column per class (one for two classes); one-vs-one pairwise decision values become
        votes (:func:`kernelscale.base.classifier.one_vs_one_scores`), over row blocks within
        ``max_memory`` (read once)."""
        if getattr(self, "multi_class_", "ovr") != "ovo":
            return super()._scores(X)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        budget = self._budget()
        return one_vs_one_scores_in_blocks(lambda rows: self._decision_values(rows, budget), X, self.classes_.size,
                                           budget)

    def predict_proba(self, X):
        """Class probabilities (n, n_classes): the scores projected onto the probability simplex,
        one-vs-rest ones as estimates (s + 1) / 2 of the one-hot codes (see the class
        docstring); the argmax is ``predict``."""
        scores = self._scores(X)
        if getattr(self, "multi_class_", "ovr") == "ovo":
            return project_simplex(scores)
        return project_simplex(one_hot_estimates(scores))

    def predict_log_proba(self, X):
        """The log of ``predict_proba`` (-inf where the projection puts an exact 0)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags
