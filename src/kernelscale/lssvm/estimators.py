"""The estimators of paper 4's multi-class LS-SVM (docs/algorithms.md section 4):
:class:`LSSVMClassifier` (one-hot {0, 1} targets with bias, eqs. 3, 16-19; the class with the
largest score, eq. 14) and :class:`LSSVMRegressor` (real-valued targets, natively multi-output).

They validate, resolve the kernel (the median bandwidth weighted by ``sample_weight``), drop the
samples of zero weight, resolve ``max_memory`` into bytes once per fit, pick ``batch_size="auto"``
(:func:`kernelscale.lssvm.memory.auto_batch_size`) and hand the arrays to
:func:`kernelscale.lssvm.solvers.solve_lssvm`; on a dask X chunked by rows the same solvers run
over the chunks (:mod:`kernelscale.lssvm.distributed`). Departures from the paper (the defaults
C = 10 and a Gaussian kernel, the averaged committee, the line search, probabilities by a
projection onto the simplex) are listed in docs/algorithms.md section 4.4.
"""

from __future__ import annotations

import logging
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MultiOutputMixin, RegressorMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..base.classifier import check_class_memory, encode_classes, one_hot
from ..base.boundary import BoundaryMixin
from ..base.estimator import (
    INPUT_ATTRIBUTES, FiniteR2Mixin, commit_fit, fit_weights, resolve_kernel, validate_fit_data,
    warm_start_iterations,
)
from ..base.params import DEVICE_CONSTRAINT
from ..base.validation import check_finite_result, check_sample_weight, validate_data, as_rows
from ..exact import kernel_predict
from ..kernels import KERNEL_NAMES, Kernel
from ..ops.feature_blocks import float_dtype
from ..ops.kernel import row_width
from ..ops.memory import PLAN_HEADROOM, parse_memory
from ..ops.rows import is_dask
from ..simplex import project_simplex
from .distributed import prepare
from .memory import auto_batch_size, auto_n_iter, class_bytes, lssvm_fit_memory
from .solvers import ITERATIVE, SOLVERS, solve_lssvm

__all__ = ["LSSVMClassifier", "LSSVMRegressor"]

logger = logging.getLogger(__name__)


class _LSSVMBase(BoundaryMixin, BaseEstimator):
    #: its first call in a process loads LAPACK's solvers: warmed up with these parameters (base/warmup.py)
    _warm_params = {"n_iter": 1}

    _parameter_constraints: dict = {
        "kernel": [Kernel, StrOptions(set(KERNEL_NAMES))],
        "C": [Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions(set(SOLVERS))],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "n_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tol": [Interval(Real, 0, None, closed="neither"), None],
        "n_averaged": [Interval(Integral, 1, None, closed="left")],
        "dtype": "no_validation",  # checked in fit (np.float32, np.float64 or None)
        "max_memory": [Interval(Real, 0, None, closed="neither"), str, None],
        "device": DEVICE_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callback": [callable, None],
        "warm_start": ["boolean"],
    }

    def _work_dtype(self, X):
        return X.dtype if self.dtype is None else float_dtype(self.dtype, "dtype")

    def _auto_batch(self, X, Y, dtype, kernel, budget):
        """batch_size="auto" (:func:`kernelscale.lssvm.memory.auto_batch_size`): beyond 4096 rows
        the whole system only for the iterative solvers on the host (the path of
        :class:`kernelscale.lssvm.cholesky.WholeSystemCholesky`) within ``budget`` (bytes); blocks
        no larger than ``budget`` holds."""
        n, d = X.shape[0], row_width(X)  # a sparse row counts its stored values
        return self._auto_batch_for(n, d, Y.shape[1] if Y.ndim == 2 else 1, dtype, kernel, budget)

    def _auto_batch_for(self, n, d, k, dtype, kernel, budget):
        """:meth:`_auto_batch` for n rows, d features and k target columns."""

        def block_fits(J):
            room = budget * (1 - PLAN_HEADROOM)  # the largest block would fill the budget
            return lssvm_fit_memory(n, d, k, J, dtype, kernel, self.solver, self.n_averaged) <= room

        def fits(J):
            return self.solver in ITERATIVE and self.device is None and block_fits(J)
        return auto_batch_size(n, fits, block_fits)

    def _dask_block(self, n, d, k, dtype, budget):
        """J of a distributed fit on n rows within ``budget`` bytes per task (batch_size, or its
        "auto" resolution as the fit makes it): :mod:`kernelscale.dask.memory` plans with it."""
        if self.batch_size != "auto":
            return min(int(self.batch_size), n + 1)
        from ..kernels import make_kernel

        return min(self._auto_batch_for(n, d, k, dtype, make_kernel(self.kernel), budget), n + 1)

    #: every attribute a fit may set (a refit deletes those it does not set again)
    _FITTED = ("kernel_", "X_fit_", "intercept_", "dual_coef_", "n_iter_", "batch_size_", "n_regularized_",
               "n_updates_", "residual_history_", "update_history_", "objective_history_", "classes_",
               *INPUT_ATTRIBUTES)

    def _fit_system(self, X, Y, sample_weight, fitted, budget, squeeze=False):
        """Validate weights, resolve the kernel, solve within ``budget`` (bytes, the fit's
        ``max_memory`` resolved once); commit ``fitted`` plus the fitted state in one step (a 1-d
        ``dual_coef_`` and a scalar ``intercept_`` with ``squeeze``)."""
        dtype = self._work_dtype(X)
        rng = check_random_state(self.random_state)
        if is_dask(X):  # dask arrays with X's row chunks (kernelscale.dask.fit), weights checked there
            X, Y, sample_weight = prepare(X, Y, sample_weight, dtype, budget)
            kernel = resolve_kernel(self.kernel, X, rng, sample_weight)  # numpy's draw of rows
        else:
            if sample_weight is not None:
                sample_weight = check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
                if not np.any(sample_weight > 0):
                    raise ValueError(
                        "sample_weight has no positive entry: all weights are zero; pass at least one "
                        "non-zero weight."
                    )
                keep = sample_weight > 0
                if not keep.all():
                    X, Y, sample_weight = X[keep], Y[keep], sample_weight[keep]
            X = as_rows(X, dtype)
            kernel = resolve_kernel(self.kernel, X, rng, sample_weight)
        init, init_count, done = None, 0, 0
        same_classes = "classes_" not in fitted or np.array_equal(fitted["classes_"], getattr(self, "classes_", None))
        if self.warm_start and hasattr(self, "dual_coef_") and self.solver != "exact" and same_classes:
            prev = self.dual_coef_.reshape(self.dual_coef_.shape[0], -1)
            if prev.shape == Y.shape:
                init = (np.asarray(self.intercept_).reshape(-1), prev)
                init_count, done = int(getattr(self, "n_updates_", 0)), self.n_iter_
            else:
                logger.info(
                    "warm_start: previous solution has shape %s, data %s; starting cold", prev.shape, Y.shape
                )
        batch_size = self._auto_batch(X, Y, dtype, kernel, budget) if self.batch_size == "auto" else self.batch_size
        total_iter = auto_n_iter(X.shape[0], batch_size) if self.n_iter == "auto" else self.n_iter
        n_iter = total_iter if init is None else warm_start_iterations(total_iter, done)
        if n_iter == 0:
            return self
        seed = rng if not isinstance(self.random_state, Integral) else self.random_state
        sol = solve_lssvm(
            kernel,
            X,
            Y,
            self.C,
            self.solver,
            sample_weight=sample_weight,
            batch_size=batch_size,
            n_iter=n_iter,
            tol=self.tol,
            n_averaged=self.n_averaged,
            init=init,
            init_count=init_count,
            random_state=seed,
            max_memory=budget,
            verbose=self.verbose,
            callback=self.callback,
        )
        intercept, dual_coef = sol.intercept, sol.dual_coef
        if squeeze:
            dual_coef, intercept = dual_coef[:, 0], intercept[0]
        if is_dask(X):
            X = X.compute()  # the model holds the training rows, as numpy's does (predictions need them)
        fitted.update(
            kernel_=kernel,
            X_fit_=X,
            intercept_=intercept,
            dual_coef_=dual_coef,
            n_iter_=done + sol.n_iter,
            batch_size_=sol.batch_size,
            n_regularized_=sol.n_regularized,
            n_updates_=init_count + (0 if self.solver == "exact" else self.n_averaged * sol.n_iter),
        )
        if sol.residual_history is not None:
            fitted["residual_history_"] = sol.residual_history
        if sol.update_history is not None:
            fitted["update_history_"] = sol.update_history
        runs = sol.residual_history if sol.residual_history is not None else sol.update_history
        if runs is not None:  # the library's convention: 1-d for one run, a list of 1-d for several
            runs = [h[~np.isnan(h)] for h in runs]
            previous = getattr(self, "objective_history_", None) if init is not None else None
            if previous is not None:  # a warm start continues the history, as n_iter_ continues
                before = previous if isinstance(previous, list) else [previous]
                skip = int(sol.residual_history is not None)  # a new residual history repeats the last one
                runs = [np.concatenate([a, b[skip:]]) for a, b in zip(before, runs)] if len(before) == len(runs) else runs
            fitted["objective_history_"] = runs[0] if len(runs) == 1 else runs
        return commit_fit(self, fitted, stale=self._FITTED)

    def _scores(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        # computed in the fit dtype, returned in the dtype of X (float64 in, float64 out)
        scores = kernel_predict(
            self.kernel_,
            X.astype(self.X_fit_.dtype, copy=False),
            self.X_fit_,
            self.dual_coef_,
            self.intercept_,
            max_memory=parse_memory(self.max_memory),
        )
        return check_finite_result(scores.astype(X.dtype, copy=False), "decision values")


_PARAMS_DOC = """
    kernel : Kernel or str, default="gaussian"
        ``sigma="median"`` (the default bandwidth) is resolved in ``fit`` (weighted by
        ``sample_weight``); the resolved copy is ``kernel_``. The paper's setting is the
        polynomial kernel <x, x'>^4 (eq. 64) on centred unit-norm inputs
        (:class:`kernelscale.preprocessing.CenterNormalize`), with float32: see
        ``benchmarks/papers/lssvm.py``.
    C : float > 0, default=10
        Regularisation, the paper's gamma: D = I / C in Theta (eq. 17); C = 1 is scikit-learn's
        ``KernelRidge(alpha=1)`` plus the bias. The paper's 1e4 (with its polynomial kernel on
        MNIST) interpolates small data sets with the default Gaussian kernel and makes the system
        ill conditioned (docs/algorithms.md section 4.4; the measurements behind the default are
        in benchmarks/studies/lssvm.md).
    solver : {"matching_pursuit", "kaczmarz", "kaczmarz_mp", "nystrom", "exact"}
        See :mod:`kernelscale.lssvm.solvers`. "exact" builds the n x n kernel matrix.
    batch_size : int >= 1 or "auto", default="auto"
        J, the number of rows of Theta per block; a number is clipped with a warning to
        n_samples + 1. "auto": n_samples + 1 up to 4096 rows, and up to 12288 rows when the
        iterative solvers run on the host (``device=None``) and the n x n system fits
        ``max_memory``; else 1000, or the largest block below it that ``max_memory`` holds. With
        J = n_samples + 1 one block is the whole system and one iteration solves it, by a
        Cholesky factorisation of K + D (n^3 / 3 flops; see :mod:`kernelscale.lssvm.solvers`),
        far less than the 10 to 60 iterations of blocks that C = 10 needs to reach tol (timings
        in benchmarks/studies/lssvm.md).
    n_iter : int >= 1 or "auto", default="auto"
        T, the most iterations per run (committee members for "nystrom"); ignored by "exact".
        "auto" follows n: 100 when one block is the whole system (it stops at ``tol`` after an
        iteration or two); on blocks of J rows, ceil(150 sqrt(n) / J) within [1, 100]. Matching
        pursuit updates only the coefficients of its block, so the model then has up to
        150 sqrt(n) centres (O(sqrt n), as Nystrom ridge regression needs to keep the exact
        rate; Rudi, Camoriano & Rosasco 2015): with the "auto" J = 1000, 17 iterations at 12288
        rows, 34 at 50000 (about 25-30 s on 2 cores at d = 30, where 100 iterations of J = 2000
        took over 5 minutes), 100 from 444445 rows on. Each iteration costs about
        J^2 n + 2 J n d flops: the fit grows like n^1.5 up to there, like n beyond
        (benchmarks/studies/lssvm.md, "Capacity that grows with n").
    tol : float > 0 or None, default=1e-4
        A run stops once the residual ||Z - Theta W||_F is at most tol ||Z||_F (matching
        pursuit, kaczmarz_mp) or the update ||W(t+1) - W(t)||_F at most tol ||W||_F
        (kaczmarz); ``n_iter_`` counts the iterations run. None runs all n_iter iterations.
        "nystrom" ignores it.
    n_averaged : int >= 1, default=1
        S, independently seeded solutions averaged (eq. 68).
    dtype : np.float32, np.float64 or None, default=None
        Dtype of every array of the fit and of predictions. None follows the input: float32
        stays float32, anything else float64 (the paper computes in float32).
    max_memory : int, str or None
        Memory budget ("2GB", bytes; None is half the available memory), resolved into bytes
        once per ``fit`` (and once per prediction). ``fit`` estimates its memory
        (:func:`kernelscale.lssvm.memory.lssvm_fit_memory`) before allocating and fails naming
        batch_size / dtype; predictions run in row blocks within it.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (docs/gpus.md): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
    random_state : int, RandomState or None
        Seeds the block draws (and the median heuristic).
    verbose : int, default=0
        1 shows a progress bar with the residual (or update) norm.
    callback : callable or None
        Called after every iteration with a dict ("iteration", "objective" — the residual or
        update norm, None for "nystrom" —, "run", "step", "residual"/"update", "coef");
        returning True stops the fit (the average of the runs so far is kept).
    warm_start : bool, default=False
        Start from the previous solution when the new problem has the same shape and run the
        iterations missing to reach ``n_iter`` in total (new blocks are drawn; for "nystrom" new
        members join the committee). The residual of the warm start costs one blocked pass over
        the kernel matrix.

    Conventions: sample_weight weights the squared errors (D = diag(1 / (C s_i)), see
    :mod:`kernelscale.lssvm.system`); zero weights drop samples. float32 is kept end to end when asked.
"""

_ATTRS_DOC = """
    kernel_ : Kernel
    X_fit_ : ndarray (n_fit, n_features), the training points with positive weight (gathered at
        the end of a fit on a dask X, as predictions need them).
    dual_coef_ : ndarray, A of eq. 19.
    intercept_ : ndarray, b of eq. 19.
    n_iter_ : int, iterations run so far (per run of ``n_averaged``), warm starts included.
    n_updates_ : int, block updates (committee members) so far, warm starts included.
    batch_size_ : int, J actually used.
    n_regularized_ : int, block solves that needed a ridge.
    residual_history_ : ndarray (n_averaged, n_iter + 1), ||Z - Theta W||_F (matching pursuit
        and kaczmarz_mp); non-increasing (eq. 60).
    update_history_ : ndarray (n_averaged, n_iter), ||W(t+1) - W(t)||_F (kaczmarz and
        kaczmarz_mp); its squares sum to at most ||W(0) - W*||^2 (eq. 44).
    objective_history_ : ndarray or list of ndarray, the rows of residual_history_ if present,
        else of update_history_, without the iterations a callback cut: 1-d for one run
        (n_averaged=1), else one array per run.
    n_features_in_ : int
"""


class LSSVMClassifier(ClassifierMixin, _LSSVMBase):
    __doc__ = (
        """Multi-class LS-SVM (one-hot {0, 1} targets with bias, eqs. 3, 16-19), randomized solvers.

    ``decision_function`` gives the scores K(x, X) A + b (eq. 68 with the averaged W; for two
    classes, the difference of the two scores); ``predict`` their argmax (eq. 14);
    ``predict_proba`` their projection onto the probability simplex, as for every least-squares
    classifier of the library (eq. 15 as printed is not a normalised softmax).

    Parameters
    ----------"""
        + _PARAMS_DOC
        + """    class_weight : dict, "balanced" or None
        Multiplies the sample weights per class.

    Attributes
    ----------
    classes_ : ndarray (n_classes,)"""
        + _ATTRS_DOC
    )

    _parameter_constraints: dict = {
        **_LSSVMBase._parameter_constraints,
        "class_weight": [StrOptions({"balanced"}), dict, None],
    }

    def __init__(
        self,
        kernel="gaussian",
        *,
        C=10.0,
        solver="matching_pursuit",
        batch_size="auto",
        n_iter="auto",
        tol=1e-4,
        n_averaged=1,
        dtype=None,
        max_memory=None,
        device=None,
        random_state=None,
        verbose=0,
        callback=None,
        warm_start=False,
        class_weight=None,
    ):
        self.kernel = kernel
        self.C = C
        self.solver = solver
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.tol = tol
        self.n_averaged = n_averaged
        self.dtype = dtype
        self.max_memory = max_memory
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start
        self.class_weight = class_weight

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and class labels y (n,), with optional sample weights."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32])
        classes, codes = encode_classes(y)
        sample_weight = fit_weights(sample_weight, self.class_weight, X, codes, classes)
        dtype = self._work_dtype(X)
        budget = parse_memory(self.max_memory)  # the fit's budget, in bytes from here on
        need = class_bytes(X.shape[0], classes.size, np.dtype(dtype).itemsize, self.solver, self.n_averaged)
        check_class_memory(need, budget, classes.size, "the one-hot targets and the LS-SVM state")
        Y = one_hot(codes, classes.size, dtype)
        fitted["classes_"] = classes
        return self._fit_system(X, Y, sample_weight, fitted, budget)

    def _fit_prepared(self, X, Y, classes, sample_weight, fitted):
        """The fit on validated dask arrays with X's row chunks (:mod:`kernelscale.dask.fit`):
        one-hot targets Y (n, k) and weights, solved over the chunks."""
        fitted["classes_"] = classes
        return self._fit_system(X, Y, sample_weight, fitted, parse_memory(self.max_memory))

    def decision_function(self, X):
        """Scores (n, n_classes); for two classes the (n,) difference score_1 - score_0."""
        scores = self._scores(X)
        if self.classes_.size == 2:
            return scores[:, 1] - scores[:, 0]
        return scores

    def predict(self, X):
        """The class with the largest score (eq. 14)."""
        scores = self._scores(X)
        return self.classes_[np.argmax(scores, axis=1)]

    def predict_proba(self, X):
        """The scores (least-squares fits of one-hot codes) projected onto the probability
        simplex, the library's rule for least-squares scores (paper 5); its argmax is
        ``predict``."""
        return project_simplex(self._scores(X))

    def predict_log_proba(self, X):
        with np.errstate(divide="ignore"):  # a projection puts exact zeros: log 0 = -inf
            return np.log(self.predict_proba(X))


class LSSVMRegressor(MultiOutputMixin, FiniteR2Mixin, RegressorMixin, _LSSVMBase):
    __doc__ = (
        """LS-SVM regression with bias (eqs. 16-19 with real-valued targets), randomized solvers.

    Native multi-output: y of shape (n, k) solves the k systems together.

    Parameters
    ----------"""
        + _PARAMS_DOC
        + """
    Attributes
    ----------"""
        + _ATTRS_DOC
    )

    def __init__(
        self,
        kernel="gaussian",
        *,
        C=10.0,
        solver="matching_pursuit",
        batch_size="auto",
        n_iter="auto",
        tol=1e-4,
        n_averaged=1,
        dtype=None,
        max_memory=None,
        device=None,
        random_state=None,
        verbose=0,
        callback=None,
        warm_start=False,
    ):
        self.kernel = kernel
        self.C = C
        self.solver = solver
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.tol = tol
        self.n_averaged = n_averaged
        self.dtype = dtype
        self.max_memory = max_memory
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and y (n,) or (n, k), with optional sample weights."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32], multi_output=True,
                                         y_numeric=True)
        Y = np.asarray(y, dtype=self._work_dtype(X)).reshape(X.shape[0], -1)
        return self._fit_system(X, Y, sample_weight, fitted, parse_memory(self.max_memory), squeeze=np.ndim(y) == 1)

    def _fit_prepared(self, X, y, classes, sample_weight, fitted):
        """The fit on dask arrays with X's row chunks (:mod:`kernelscale.dask.fit`), over the chunks."""
        Y = y[:, None] if y.ndim == 1 else y
        return self._fit_system(X, Y, sample_weight, fitted, parse_memory(self.max_memory), squeeze=y.ndim == 1)

    def predict(self, X):
        """K(X, X_fit_) dual_coef_ + intercept_, in blocks under ``max_memory``."""
        return self._scores(X)
