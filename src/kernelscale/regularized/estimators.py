"""RegularizedKernelClassifier / RegularizedKernelRegressor: problem (2) of paper 3 as estimators.

Both minimise  C sum_i w_i L(y_i, g(x_i)) + |g|_H^2 / 2  over g = sum_i c_i k(., x_i), i.e.
F(c) = f(K c) + c^T K c / 2 with f(z) = sum_i C w_i L(y_i, z_i) (C = 1/lam), by coordinate
descent (Algorithm 1; Algorithm 2 on w = X^T c for ``kernel="linear"``) or by the fixed-point
iteration (10). See kernelscale.regularized.coordinate_descent and kernelscale.regularized.fixed_point. With the optional
dependency numba installed, the coordinate-descent sweeps run compiled (same iterates, much faster).

Problem (2) has no bias. ``fit_intercept=True`` adds a REGULARISED intercept, LIBLINEAR-style:
the kernel becomes K + s^2 (s = ``intercept_scaling``; for the linear kernel: an extra constant
feature s), so b = s^2 sum_i c_i and b^2 / (2 s^2) is added to the objective. LIBSVM's SVC/SVR
use an unregularised b instead (the dual gets the constraint sum_i c_i = 0); the two coincide
only as s -> infinity, and larger s makes the solvers converge more slowly.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, MultiOutputMixin, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..base.boundary import BoundaryMixin
from ..base.params import DEVICE_CONSTRAINT
from ..base.classifier import (
    OneVsRestScoresMixin, check_class_memory, encode_classes, one_vs_one_problems,
    one_vs_one_scores_in_blocks, one_vs_rest_from_one_hot, one_vs_rest_targets,
)
from ..base.estimator import (
    FiniteR2Mixin, INPUT_ATTRIBUTES, commit_fit, fit_weights, resolve_kernel, validate_fit_data, warm_start_from,
)
from ..base.monitor import problem_callbacks
from .coordinate_descent import RULES, kernel_coordinate_descent, linear_coordinate_descent, prefers_csr
from ..exact import kernel_predict
from ..base.validation import array_bytes, as_rows, check_finite_result, check_sparse, validate_data
from .problem import as_C, vector_bytes
from .fixed_point import kernel_fixed_point, linear_fixed_point
from ..kernels import KERNEL_NAMES, Kernel, LinearKernel
from ..ops.kernel import KernelOperator
from ..ops.memory import format_bytes, parse_memory, ufunc_workspace_bytes
from ..ops.rows import DaskRows, executor, is_dask
from ..losses import CLASSIFICATION_LOSSES, REGRESSION_LOSSES, make_loss

__all__ = ["RegularizedKernelClassifier", "RegularizedKernelRegressor"]

SOLVERS = ("coordinate_descent", "fixed_point")


#: the estimator's own O(n) arrays besides the solver's (weights, C, masks, targets), measured
#: against tracemalloc peaks in tests/test_conventions.py
_ESTIMATOR_BYTES_PER_SAMPLE = 128
#: max_iter="auto": at most this many sweeps / iterations (the former fixed default) ...
AUTO_MAX_ITER = 1000
#: ... and, for kernel coordinate descent, at most this many passes' worth of kernel rows computed
#: (AUTO_ROW_PASSES p rows for a problem on p points; rows kept in the cache are free): an exact
#: kernel method costs O(p^2 d) a pass: at 50000 x 30 about 10 s, and the default fit ran past
#: 90 s; 3 passes keep it near 30 s (benchmarks/studies/regularized.md, "Capacity that grows with n")
AUTO_ROW_PASSES = 3


def auto_max_rows(p):
    """The kernel rows ``max_iter="auto"`` lets coordinate descent compute on a problem of p
    points: AUTO_ROW_PASSES * p (non-decreasing in p; never reached while the cache holds every
    row, as on up to about 11000 points with the default cache_size of 1GB in float64)."""
    return AUTO_ROW_PASSES * int(p)


class _RegularizedBase(BoundaryMixin, BaseEstimator):
    #: its first call in a process loads numba code: warmed up with these parameters (base/warmup.py)
    _warm_params = {"max_iter": 1}

    _parameter_constraints: dict = {
        "kernel": [Kernel, StrOptions(set(KERNEL_NAMES))],
        "C": [Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions(set(SOLVERS))],
        "rule": [StrOptions(set(RULES))],
        "step_size": [StrOptions({"trace", "power"}), Interval(Real, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "shrinking": ["boolean"],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(Real, 0, None, closed="neither")],
        "warm_start": ["boolean"],
        "max_memory": [Interval(Real, 0, None, closed="neither"), str, None],
        "device": DEVICE_CONSTRAINT,
        "cache_size": [Interval(Real, 0, None, closed="neither"), str, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callback": [callable, None],
    }

    def _is_linear(self):
        return isinstance(self.kernel, LinearKernel) or (isinstance(self.kernel, str) and self.kernel == "linear")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # every kernel: blocks from the nonzeros (kernelscale.kernels)
        return tags

    def _validate_X(self, X, y=None, reset=True, fit=False):
        sparse = "csr"
        check_sparse(X)  # before scipy's conversions or the compiled sweeps read its indices
        if not fit:
            return validate_data(self, X, accept_sparse=sparse, dtype=[np.float64, np.float32], reset=reset)
        return validate_fit_data(self, X, y, accept_sparse=sparse, dtype=[np.float64, np.float32],
                                 **self._y_validation)

    #: every attribute a fit may set (a refit deletes those it does not set again)
    _FITTED = ("kernel_", "step_size_", "n_iter_", "objective_history_", "dual_objective_history_",
               "duality_gap_", "dropped_", "coef_", "support_", "support_vectors_", "dual_coef_", "intercept_",
               "classes_", "multi_class_", *INPUT_ATTRIBUTES)

    def _solve(self, X, Y, sample_weight, loss, fitted, warm_start=True, squeeze=False, tol_scale=1.0,
               problems=None):
        """Fit the columns of Y (n, m) as m problems and commit ``fitted`` plus the fitted state
        in one step (1-d coefficients with ``squeeze``); ``warm_start=False`` starts from 0;
        the solvers stop at ``tol * tol_scale``. ``problems`` (coordinate descent only): m pairs
        (rows, targets), problem j fitted on X[rows] alone (one-vs-one; Y only gives the shape),
        its coefficients 0 outside its rows."""
        n, m = Y.shape
        # the budgets in bytes, once per fit (both refused on every path, also where not used)
        budget = parse_memory(self.max_memory)
        cache_bytes = None if self.cache_size is None else parse_memory(self.cache_size, "cache_size")
        rng = check_random_state(self.random_state)
        linear = self._is_linear()
        if linear:  # no kernel rows: the budget holds the O(n) solver state
            need = vector_bytes(n, m, X.dtype)
            if need > budget:
                raise ValueError(
                    f"max_memory={format_bytes(budget)} is too small for the linear solver's state on "
                    f"{n} samples ({format_bytes(need)}); increase max_memory to at least {need} bytes."
                )
        kernel = resolve_kernel(self.kernel, X, rng, sample_weight)
        distributed = is_dask(X)
        if distributed:  # the loss weights C w_i per entry, as the solver's setup rounds them (as_C)
            Cw = DaskRows(X.chunks[0], 0).map(_loss_weights, Y, sample_weight, C=self.C, to=X.dtype, width=m,
                                             dtype=np.float64)
        else:
            Cw = self.C * sample_weight
        s = self.intercept_scaling if self.fit_intercept else 0.0
        c0 = None
        if self.warm_start and warm_start:  # from the previous c where it has this fit's shape
            c0 = warm_start_from(getattr(self, "dual_coef_", None), (n, m), "dual_coef_")
        auto = self.max_iter == "auto"
        common = dict(loss=loss, tol=self.tol * tol_scale, max_iter=AUTO_MAX_ITER if auto else self.max_iter,
                      intercept_scaling=s, random_state=rng, verbose=self.verbose)

        def row_cache(points, weights):
            """The kernel row cache of one solve on ``points`` (all of X, or a pair's rows, beside the
            (n, m) coefficients of all pairs)."""
            p = points.shape[0]
            # one-vs-one: beside this pair's state and its copy of the rows, the coefficients of all
            # pairs and the solutions (c and K c over each pair's rows) kept until the end
            state = (vector_bytes(n, m, X.dtype) if problems is None
                     else vector_bytes(p, 1, X.dtype) + array_bytes(points) + (8 + X.dtype.itemsize) * n * m
                     + 2 * X.dtype.itemsize * pair_rows)
            return KernelOperator(kernel, points, budget).row_cache(
                reserved_bytes=state + _ESTIMATOR_BYTES_PER_SAMPLE * p + ufunc_workspace_bytes(),
                max_rows=_cache_rows(p, X.dtype, int(np.count_nonzero(weights)) or 1, cache_bytes))

        pair_rows = 0 if problems is None else sum(rows.size for rows, _ in problems)
        cache = row_cache(X, sample_weight) if not linear and not distributed and problems is None else None
        if self.solver == "fixed_point":
            common.update(step_size=self.step_size, c0=c0, callback=self.callback)
            if linear:
                results = [linear_fixed_point(X, Y, C=Cw, **common)]
            else:
                kept = budget if cache_bytes is None else min(cache_bytes, budget)
                results = [kernel_fixed_point(kernel, X, Y, C=Cw, max_memory=budget, cache=cache,
                                              cache_bytes=kept, **common)]
            coef = results[0].coef
            intercept = np.broadcast_to(np.asarray(results[0].intercept, dtype=X.dtype), (m,)).copy()
            w = results[0].w
            fitted["step_size_"] = float(results[0].step_size) if results[0].step_size is not None else None
        else:
            common["shrinking"] = self.shrinking
            common["rule"] = self.rule
            Xs = sp.csr_matrix(X) if linear and m > 1 and prefers_csr(X) else X  # convert once, not per class
            results = []
            for j, cb in enumerate(problem_callbacks(self.callback, m)):
                rows, y = (slice(None), Y[:, j]) if problems is None else problems[j]
                Xj, Cj = (Xs, Cw) if problems is None else (Xs[rows], Cw[rows])
                start = None if c0 is None else c0[rows, j]
                if linear:
                    results.append(linear_coordinate_descent(Xj, y, C=Cj, c0=start, callback=cb, **common))
                else:
                    results.append(kernel_coordinate_descent(
                        kernel, Xj, y, C=Cj, c0=start, callback=cb,
                        cache=cache if problems is None else row_cache(Xj, sample_weight[rows]),
                        max_rows=auto_max_rows(Xj.shape[0]) if auto else None, **common))
            coef = np.zeros((n, m), dtype=results[0].coef.dtype)
            for j, r in enumerate(results):
                coef[slice(None) if problems is None else problems[j][0], j] = r.coef
            intercept = np.array([r.intercept for r in results], dtype=X.dtype)
            w = np.stack([r.w for r in results]) if linear else None
        if distributed:
            coef = self._gather_coef(coef, X, budget)
        if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(intercept))):
            raise ValueError("the solver produced non-finite coefficients; rescale X or y, or lower C.")
        capped = [r for r in results if (r.info or {}).get("row_cap_reached")]
        if capped and not all(r.converged or r.stopped_by_callback for r in results if r not in capped):
            capped = []  # the message below names max_iter, which also stopped a problem
        if capped:
            warnings.warn(
                f"{type(self).__name__} stopped {len(capped)} of {len(results)} problem(s) before tol={self.tol:g}: "
                f"max_iter='auto' bounds the kernel work of coordinate descent to {AUTO_ROW_PASSES} passes' "
                f"worth of kernel rows (an exact kernel method costs O(n^2 d) a pass); pass an integer max_iter "
                f"to run to tol, or use a scalable family for large n.",
                ConvergenceWarning,
                stacklevel=3,
            )
        elif not all(r.converged or r.stopped_by_callback for r in results):
            max_iter = AUTO_MAX_ITER if auto else self.max_iter
            warnings.warn(
                f"{type(self).__name__} ({self.solver}) did not reach tol={self.tol:g} in max_iter="
                f"{max_iter} {'sweeps' if self.solver == 'coordinate_descent' else 'iterations'}; "
                f"increase max_iter or tol"
                + (", or use step_size='power'" if self.solver == "fixed_point" and self.step_size == "trace" else "") + ".",
                ConvergenceWarning,
                stacklevel=3,
            )
        hist = [r.objective_history for r in results]
        dual = [r.dual_history for r in results]
        support = None if linear else np.flatnonzero(np.any(coef != 0, axis=1))
        coef = np.ascontiguousarray(coef, dtype=X.dtype)
        fitted.update(
            kernel_=kernel,
            n_iter_=int(max(r.n_iter for r in results)),
            objective_history_=hist[0] if len(hist) == 1 else hist,
            dual_objective_history_=dual[0] if len(dual) == 1 else dual,
            duality_gap_=float(sum(r.duality_gap for r in results)),
            dropped_=results[0].dropped if problems is None else np.unique(np.concatenate(
                [rows[r.dropped] for (rows, _), r in zip(problems, results)])).astype(results[0].dropped.dtype),
            dual_coef_=coef[:, 0] if squeeze else coef,
            intercept_=intercept[0] if squeeze else intercept,
        )
        if linear:
            w = np.ascontiguousarray(w.reshape(m, -1), dtype=X.dtype)
            fitted["coef_"] = w[0] if squeeze else w
        else:
            fitted.update(support_=support,
                          support_vectors_=as_rows(self._support_rows(X, support, budget)))
        return commit_fit(self, fitted, stale=self._FITTED)

    #: a dask y is passed in float64, as numpy's fit converts it (kernelscale.dask.fit)
    _float64_targets = True
    #: the configurations that fit over dask row chunks (for kernelscale.dask.dispatch's messages)
    _chunked_configuration = "solver='fixed_point' and a kernel other than 'linear'"

    def _fits_over_chunks(self):
        """A dask X is fitted over its row chunks (kernelscale.dask.fit) by the fixed-point
        solver: one distributed kernel product K c per iteration (eq. 10, step 1), one task per
        pair of row chunks, with c, K c and the targets kept as dask arrays in X's row chunks;
        the scalars of the stopping rule, the step size and the objectives come back by tree sums.
        Coordinate descent (sequential over the coordinates) and the linear path gather X."""
        return self.solver == "fixed_point" and not self._is_linear()

    def _gather_coef(self, coef, X, budget):
        """The model of a distributed fit: c, n values per problem, gathered as numpy holds them
        (``dual_coef_``), within ``budget`` bytes."""
        need = coef.nbytes
        if need > budget:
            raise ValueError(
                f"the fitted {type(self).__name__} holds a coefficient per training point ({format_bytes(need)} "
                f"for {X.shape[0]} points), more than max_memory={format_bytes(budget)}; increase max_memory."
            )
        return coef.compute()

    def _support_rows(self, X, support, budget):
        """X[support]: for a dask X the rows with a non-zero coefficient, the points predict needs,
        gathered within ``budget`` bytes (every row for the squared loss, whose c has no zeros)."""
        if not is_dask(X):
            return X[support]
        need = support.size * X.shape[1] * X.dtype.itemsize
        if need > budget:
            raise ValueError(
                f"the fitted {type(self).__name__} predicts from its {support.size} support vectors "
                f"({format_bytes(need)}), more than max_memory={format_bytes(budget)}; increase max_memory."
            )
        return X[support].compute()

    def _scores(self, X):
        """(n, m) decision values K(X, X_fit) c + b (or X w + b on the linear path)."""
        check_is_fitted(self)
        return self._decision_values(self._validate_X(X, reset=False))

    def _decision_values(self, X):
        """:meth:`_scores` of a validated X."""
        intercept = self.intercept_.reshape(-1)
        if hasattr(self, "coef_"):
            scores = np.asarray(X @ self.coef_.reshape(intercept.size, -1).T)
            return check_finite_result(scores + intercept.astype(scores.dtype), "decision values")
        coef = self.dual_coef_.reshape(self.dual_coef_.shape[0], -1)[self.support_]
        if self.support_.size == 0:
            dtype = np.result_type(X.dtype, self.dual_coef_.dtype)
            return np.zeros((X.shape[0], intercept.size), dtype=dtype) + intercept.astype(dtype)
        return check_finite_result(kernel_predict(self.kernel_, X, self.support_vectors_, coef, intercept,
                                                  max_memory=self.max_memory), "decision values")


def _cache_rows(n, dtype, n_rows, cache_bytes):
    """Kernel rows the cache may keep: ``n_rows`` (the rows a solve can ask for), at most
    ``cache_bytes`` of them (None: no limit beyond the budget)."""
    if cache_bytes is None:
        return n_rows
    return int(max(1, min(n_rows, cache_bytes // (n * np.dtype(dtype).itemsize))))


_COMMON_DOC = """
    kernel : Kernel or str, default="gaussian"
        A kernelscale kernel or one of ``KERNEL_NAMES``; ``sigma="median"`` is resolved in fit
        (weighted by ``sample_weight``) into ``kernel_``. ``"linear"`` (or ``LinearKernel()``)
        runs Algorithm 2 on w = X^T c and accepts scipy.sparse X.
    C : float > 0, default=1.0
        Loss weight, 1/lam of the paper.
    solver : "coordinate_descent" or "fixed_point", default="coordinate_descent"
        On a dask X chunked by rows, "fixed_point" (non-linear kernels) fits over the chunks: c
        and K c stay on the workers, one kernel product per iteration, one task per pair of row
        chunks (docs/dask.md); the model is numpy's, so ``dual_coef_`` (n values) and
        ``support_vectors_`` (the rows with c_i != 0) are gathered once at the end, within
        ``max_memory``. "coordinate_descent" gathers X.
    rule : "cyclic", "aitken" or "random", default="random"
        Index rule of coordinate descent (randomised cyclic by default).
    step_size : "trace", "power" or float > 0, default="trace"
        Step of the fixed-point solver: 1/trace(K) (always safe), or 1.8/||K||_2 with the norm
        estimated by power iteration (usually far fewer iterations), or a number, which is
        refused (ValueError) when it provably exceeds 2/||K||_2 and otherwise raises
        ``FixedPointDivergenceError`` if the iteration diverges.
    tol : float > 0, default=1e-3
        Stop when the largest coefficient change over a sweep is below tol (fixed point: the
        change divided by step_size * mean(k_ii), the scale of a coordinate step); for the
        regressor with the squared loss, below tol times the root mean square of y (the
        coefficients are then in the units of y). The default is
        LIBSVM's; at it the kernel path matched LIBSVM's test error on adult and MNIST
        (benchmarks/papers/fixed_point.py). Lower it when the coefficients themselves matter.
    max_iter : int or "auto", default="auto"
        Sweeps (coordinate descent) or iterations (fixed point); ConvergenceWarning if reached.
        "auto": 1000 (the former default), and kernel coordinate descent also stops once it has
        computed 3 passes' worth of kernel rows (3 p rows on a problem of p points; rows the
        cache keeps cost nothing), with a ConvergenceWarning. That bound never binds while
        ``cache_size`` holds every row (about 11000 points at the default 1GB in float64); above
        it a pass costs O(n^2 d) (at 50000 x 30 about 10 s on 2 cores), and the bound keeps the
        fit near 3 passes (benchmarks/studies/regularized.md, "Capacity that grows with n",
        has the error it costs). An exact kernel
        method's cost grows like n^2: use a scalable family for larger n.
    shrinking : bool, default=True
        Skip coordinates stuck at a bound of the dual (coordinate descent).
    fit_intercept : bool, default=False
        Add the regularised intercept b = s^2 sum(c) (kernel K + s^2; see the module notes for
        how it differs from LIBSVM's unregularised bias).
    intercept_scaling : float > 0, default=1.0
        s above.
    warm_start : bool, default=False
        Start from the previous ``dual_coef_`` when its shape matches (same number of samples
        and problems), else from 0.
    max_memory : int, str or None, default=None
        Budget for cached kernel rows and blocked kernel products (half the available memory if
        None); fit fails at once, naming it, when one kernel row does not fit.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (docs/gpus.md): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
    cache_size : int, str or None, default="1GB"
        At most this many bytes of kernel rows are kept between sweeps (within ``max_memory``),
        like LIBSVM's cache; rows that do not fit are recomputed when needed. None keeps as many
        as ``max_memory`` allows, which can be the whole n x n kernel matrix: faster when it
        fits, but memory then grows like n^2.
    random_state : int, RandomState or None
        Seeds the median heuristic, the "random" rule and the power iteration.
    verbose : int, default=0
        1 shows a progress bar with the objective.
    callback : callable or None
        Called with a dict (iteration, objective, dual_objective, duality_gap, max_change; with
        coordinate descent also n_active, and "problem" when it solves several problems one
        after the other) after every sweep/iteration; returning True stops the current problem
        (the fixed-point solver iterates all problems together)."""

_ATTR_DOC = """
    kernel_ : Kernel
        The kernel used (bandwidth resolved).
    dual_coef_ : ndarray
        c of problem (2) for every training point (0 for points of zero weight or with a zero
        kernel diagonal).
    intercept_ : ndarray
        b = s^2 sum(c) per problem (0 without ``fit_intercept``).
    support_, support_vectors_ : ndarray (kernel path)
        Indices and rows of the training points with a non-zero coefficient, used by predict.
    coef_ : ndarray (linear kernel only)
        w = X^T c, shape (n_problems, n_features) for the classifier.
    dropped_ : ndarray
        Training points whose kernel diagonal k_ii is zero: their kernel row is zero, so, as in
        the paper (section 4.1), they are removed from the problem (c_i = 0).
    n_iter_ : int
        Sweeps or iterations run (the maximum over problems).
    objective_history_ : ndarray or list of ndarray
        F(c) of problem (2) at the start and after every sweep/iteration; a list with one array
        per problem when coordinate descent solved several (one-vs-rest, multi-output); the
        fixed-point solver iterates all problems together and records their sum. Under
        coordinate descent F converges but need not decrease monotonically. On the linear path
        (``kernel="linear"``) F and D cost a pass over X and are evaluated only after sweeps over
        all coordinates: NaN after sweeps over a shrunk working set.
    dual_objective_history_ : ndarray or list of ndarray
        D(c) = f^*(-c) + c^T K c / 2, which coordinate descent and the fixed-point iteration
        decrease monotonically; F + D >= 0 is the duality gap.
    duality_gap_ : float
        F + D at the end, summed over problems (0 at the exact solution).
    step_size_ : float (fixed-point solver only)
        The step used."""


class RegularizedKernelClassifier(OneVsRestScoresMixin, ClassifierMixin, _RegularizedBase):
    __doc__ = """Kernel SVM / logistic regression without bias by coordinate descent or fixed point (paper 3).

    Minimises C sum_i w_i L(y_i, g(x_i)) + |g|_H^2 / 2 for each binary problem (labels +-1).
    More than two classes are handled one-vs-one by default (one problem per pair of classes on
    their rows alone, as LIBSVM) or one-vs-rest (one problem per class, sharing the kernel row
    cache); ``decision_function`` returns one score per class either way.

    Parameters
    ----------
    loss : "hinge", "squared_hinge" or "logistic", default="hinge"
        (1 - yz)_+, (1 - yz)_+^2 (no 1/2, as LinearSVC) or log(1 + exp(-yz)).
    multi_class : "auto", "ovo" or "ovr", default="auto"
        How more than two classes are decomposed. "ovo": k(k-1)/2 problems, one per pair of
        classes, each on the rows of its two classes (coordinate descent only); predict is the
        majority vote. "ovr": k problems on all rows. "auto" is "ovo" (as LIBSVM's SVC) for
        coordinate descent with the hinge and squared hinge losses and a kernel other than
        "linear", and "ovr" otherwise: the linear kernel as LIBLINEAR's LinearSVC, the fixed-point
        solver (it iterates all problems in one kernel product), the logistic loss (its
        probabilities are one-vs-rest). Why one-vs-one by default: benchmarks/studies/regularized.md.""" + _COMMON_DOC + """
    class_weight : dict, "balanced" or None
        Multiplies each sample's weight by the weight of its class (in every binary problem).

    Attributes
    ----------
    classes_ : ndarray
    multi_class_ : "ovo" or "ovr"
        The decomposition used (``multi_class`` with "auto" resolved; "ovr" for two classes). With
        "ovo" every array with one column per problem (``dual_coef_``, ``intercept_``, ``coef_``)
        has one per pair of classes (0, 1), (0, 2), ..., (k-2, k-1), positive values meaning
        the first.""" + _ATTR_DOC + """

    Notes
    -----
    ``predict_proba`` exists only for ``loss="logistic"`` (and not with ``multi_class="ovo"``):
    sigmoid(score) for two classes, and the normalised sigmoids of the one-vs-rest scores for
    more (argmax = predict). With one-vs-one, ``decision_function`` gives each class its votes
    plus its summed pairwise decision values squashed into (-1/3, 1/3). Hinge-loss
    scores are margins, not probabilities, so no probabilities are offered for them (wrap the
    model in ``sklearn.calibration.CalibratedClassifierCV`` to get calibrated ones).
    """

    _parameter_constraints: dict = {
        **_RegularizedBase._parameter_constraints,
        "loss": [StrOptions(set(CLASSIFICATION_LOSSES))],
        "multi_class": [StrOptions({"auto", "ovo", "ovr"})],
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }
    _y_validation = {}

    def __init__(self, kernel="gaussian", *, loss="hinge", multi_class="auto", C=1.0, solver="coordinate_descent",
                 rule="random",
                 step_size="trace", tol=1e-3, max_iter="auto", shrinking=True, fit_intercept=False,
                 intercept_scaling=1.0, class_weight=None, warm_start=False, max_memory=None, device=None,
                 cache_size="1GB",
                 random_state=None, verbose=0, callback=None):
        self.kernel = kernel
        self.loss = loss
        self.multi_class = multi_class
        self.C = C
        self.solver = solver
        self.rule = rule
        self.step_size = step_size
        self.tol = tol
        self.max_iter = max_iter
        self.shrinking = shrinking
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.max_memory = max_memory
        self.device = device
        self.cache_size = cache_size
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) (scipy.sparse allowed for the linear kernel) and class labels y."""
        X, y, fitted = self._validate_X(X, y, fit=True)
        classes, codes = encode_classes(y)
        sample_weight = fit_weights(sample_weight, self.class_weight, X, codes, classes, ones=True)
        if self._scheme(classes.size) == "ovo":
            m = classes.size * (classes.size - 1) // 2
            # the pairs are solved one at a time on their rows: what lasts is the (n, m) coefficients
            # (float64, then the model's copy in X's dtype) and each pair's solution (2 values a row)
            check_class_memory((8 + X.dtype.itemsize) * X.shape[0] * m
                               + 2 * X.dtype.itemsize * X.shape[0] * (classes.size - 1), self.max_memory,
                               classes.size, f"the coefficients of the {m} one-vs-one problems")
            problems = one_vs_one_problems(codes, classes.size)
            fitted.update(classes_=classes, multi_class_="ovo")
            same = (np.array_equal(getattr(self, "classes_", None), classes)
                    and getattr(self, "multi_class_", "ovr") == "ovo")
            shape_only = np.broadcast_to(np.float64(0.0), (X.shape[0], m))  # no memory: Y's shape
            return self._solve(X, shape_only, sample_weight, make_loss(self.loss), fitted, warm_start=same,
                               problems=problems)
        m = 1 if classes.size == 2 else classes.size
        check_class_memory(vector_bytes(X.shape[0], m, X.dtype) + 8 * X.shape[0] * m, self.max_memory,
                           classes.size, "the one-vs-rest targets and the per-class solver state")
        return self._fit_prepared(X, one_vs_rest_targets(codes, classes.size), classes, sample_weight, fitted)

    def _scheme(self, n_classes):
        """"ovo" or "ovr": ``multi_class`` resolved for ``n_classes`` classes (a ValueError for
        one-vs-one with the fixed-point solver)."""
        if n_classes == 2:
            return "ovr"
        if self.multi_class == "ovo" and self.solver != "coordinate_descent":
            raise ValueError(
                f"multi_class='ovo' needs solver='coordinate_descent' (got solver={self.solver!r}); the "
                f"fixed-point solver fits the classes one-vs-rest: set multi_class='ovr' or 'auto'."
            )
        if self.multi_class == "auto":
            return ("ovo" if self.solver == "coordinate_descent" and self.loss != "logistic" and not self._is_linear()
                    else "ovr")
        return self.multi_class

    def _fit_prepared(self, X, Y, classes, sample_weight, fitted):
        """The fit on validated X, +-1 targets Y (one column per class, one for two classes) and
        weights: numpy arrays, or dask arrays with X's row chunks, Y one-hot there
        (:mod:`kernelscale.dask.fit`; weights None for ones)."""
        if is_dask(Y):
            Y = DaskRows(X.chunks[0], 0).map(one_vs_rest_from_one_hot, Y,
                                            width=1 if classes.size == 2 else classes.size, dtype=np.float64)
        same_classes = (np.array_equal(getattr(self, "classes_", None), classes)  # warm start only then
                        and getattr(self, "multi_class_", "ovr") == "ovr")
        fitted.update(classes_=classes, multi_class_=self._scheme(classes.size))
        return self._solve(X, Y, sample_weight, make_loss(self.loss), fitted, warm_start=same_classes)


    def _scores(self, X):
        """(n, n_classes) scores (one column for two classes); one-vs-one pairwise decision values
        become votes (:func:`kernelscale.base.classifier.one_vs_one_scores`), over row blocks within
        ``max_memory``."""
        if getattr(self, "multi_class_", "ovr") != "ovo":
            return super()._scores(X)
        X = self._validate_X(X, reset=False)
        return one_vs_one_scores_in_blocks(self._decision_values, X, self.classes_.size, self.max_memory)

    def _has_proba(self):
        """The logistic loss fitted (or, before fit, to be fitted) one-vs-rest."""
        scheme = getattr(self, "multi_class_", None)
        return self.loss == "logistic" and (scheme == "ovr" if scheme is not None else self.multi_class != "ovo")

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities for loss="logistic" (normalised one-vs-rest sigmoids for > 2 classes)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = expit(scores)
            return np.stack([1.0 - p, p], axis=1)
        p = expit(scores)
        return p / p.sum(axis=1, keepdims=True)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


def _loss_weights(Y, w, *, C, to):
    """C w_i per entry of Y (w None: ones), rounded to the working dtype as the solver's setup does."""
    return as_C(C * (np.ones(Y.shape[0]) if w is None else w), Y, to)


def _sum_squares(Y):
    return np.sum(np.square(Y))


def _target_scale(Y):
    """The root mean square of the targets (1 for a zero target). With the squared loss the
    coefficients c are linear in y, so ``tol`` is taken relative to it and the fit is the same
    in any units of y (an absolute tol stopped early on targets of order 1e-5); the absolute
    and epsilon-insensitive losses bound |c| by C w_i whatever y, so their tol stays absolute."""
    rms = float(np.sqrt(executor(0, Y).sum(_sum_squares, Y) / Y.size))
    return rms if rms > 0 and np.isfinite(rms) else 1.0


class RegularizedKernelRegressor(MultiOutputMixin, FiniteR2Mixin, RegressorMixin, _RegularizedBase):
    __doc__ = """Kernel ridge / least absolute deviations / SVR without bias by coordinate descent or fixed
    point (paper 3).

    Minimises C sum_i w_i L(y_i, g(x_i)) + |g|_H^2 / 2; with ``loss="squared"`` this is
    scikit-learn's ``KernelRidge(alpha=1/C)``. Each column of a 2-d y is an independent problem.

    Parameters
    ----------
    loss : "squared", "absolute" or "epsilon_insensitive", default="squared"
        (y - z)^2 / 2, |y - z| or (|y - z| - epsilon)_+.
    epsilon : float >= 0, default=0.1
        Width of the insensitive tube (loss="epsilon_insensitive" only).""" + _COMMON_DOC + """

    Attributes
    ----------""" + _ATTR_DOC + """
    """

    _parameter_constraints: dict = {
        **_RegularizedBase._parameter_constraints,
        "loss": [StrOptions(set(REGRESSION_LOSSES))],
        "epsilon": [Interval(Real, 0, None, closed="left")],
    }
    _y_validation = {"multi_output": True, "y_numeric": True}

    def __init__(self, kernel="gaussian", *, loss="squared", C=1.0, epsilon=0.1, solver="coordinate_descent",
                 rule="random", step_size="trace", tol=1e-3, max_iter="auto", shrinking=True, fit_intercept=False,
                 intercept_scaling=1.0, warm_start=False, max_memory=None, device=None, cache_size="1GB",
                 random_state=None, verbose=0, callback=None):
        self.kernel = kernel
        self.loss = loss
        self.C = C
        self.epsilon = epsilon
        self.solver = solver
        self.rule = rule
        self.step_size = step_size
        self.tol = tol
        self.max_iter = max_iter
        self.shrinking = shrinking
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.warm_start = warm_start
        self.max_memory = max_memory
        self.device = device
        self.cache_size = cache_size
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) (scipy.sparse allowed for the linear kernel) and y (n,) or (n, k)."""
        X, y, fitted = self._validate_X(X, y, fit=True)
        sample_weight = fit_weights(sample_weight, None, X, ones=True)
        return self._fit_prepared(X, np.asarray(y, dtype=np.float64), None, sample_weight, fitted)

    def _fit_prepared(self, X, y, classes, sample_weight, fitted):
        """The fit on validated X, float64 y and weights: numpy arrays, or dask arrays with X's row
        chunks (:mod:`kernelscale.dask.fit`; weights None for ones)."""
        Y = y.reshape(y.shape[0], -1)
        return self._solve(X, Y, sample_weight, make_loss(self.loss, self.epsilon), fitted, squeeze=y.ndim == 1,
                           tol_scale=_target_scale(Y) if self.loss == "squared" else 1.0)

    def predict(self, X):
        """g(x) for each row of X: shape (n,), or (n, k) for a 2-d training y."""
        scores = self._scores(X)
        return scores[:, 0] if self.dual_coef_.ndim == 1 else scores
