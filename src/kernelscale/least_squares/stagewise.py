"""The stagewise estimators of paper 5 (docs/algorithms.md section 5, Algorithm 3):
:class:`StagewiseClassifier` and :class:`StagewiseRegressor`.

They reduce X by a weighted PCA (appendix A.2.1, :func:`kernelscale.preprocessing.pca_fit`; by
default to 50 dimensions when X has more than 50 features, none otherwise), resolve the kernel on
the reduced data (``sigma="median"``), choose the "auto" block size and ridge from the number of
samples, parse ``max_memory`` once into bytes, and run
:func:`~kernelscale.least_squares.stagewise_solver.stagewise_regression` (its module describes
GEN, the stage updates and their guarantees). Predictions regenerate every block from the seed.

Departures from the paper (section 5.4): PCA only above 50 features by default, the median
bandwidth taken on the reduced data, the per-stage "auto" ridge 0.1 / n and the "auto" block size
below 12288 samples (both in the estimators' docstrings; their measurements in
``benchmarks/studies/least_squares.md``).
"""

from __future__ import annotations

import logging
import math
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..base.classifier import check_class_memory, encode_classes, one_hot
from ..base.boundary import BoundaryMixin
from ..base.estimator import (
    INPUT_ATTRIBUTES, FiniteR2Mixin, commit_fit, fit_weights, resolve_kernel, validate_fit_data,
    warm_start_iterations,
)
from ..base.monitor import IterationMonitor
from ..base.params import DEVICE_CONSTRAINT, KERNEL_CONSTRAINT, MEMORY_CONSTRAINT
from ..base.validation import check_finite_result, validate_data
from ..kernels import make_kernel
from ..losses import softmax
from ..ops.feature_blocks import METHODS, FeatureBlockSpec, seed_from
from ..ops.features import FeatureOperator
from ..ops.memory import largest_fitting, parse_memory
from ..ops.rows import executor, is_dask, row_weights, total, weighted_sum
from ..preprocessing import pca_fit, pca_transform
from ..simplex import project_simplex
from .stagewise_solver import (
    feature_method_of, feature_spec, replay_stage, stage_task_rows, stagewise_fit_bytes, stagewise_regression,
)

__all__ = [
    "StagewiseClassifier",
    "StagewiseRegressor",
    "feature_spec",
    "stagewise_regression",
]

logger = logging.getLogger(__name__)

#: pca_components="auto": PCA to this many components when X has more features, none otherwise
AUTO_PCA_COMPONENTS = 50
#: alpha="auto" is this over the number of samples (estimator docstring)
_AUTO_RIDGE = 0.1
#: block_size="auto": the largest block (the paper's), reached from AUTO_BLOCK_RATIO * 1024 samples
AUTO_BLOCK_MAX = 1024
#: block_size="auto": n // AUTO_BLOCK_RATIO features per block below AUTO_BLOCK_RATIO * 1024 samples
AUTO_BLOCK_RATIO = 12
#: block_size="auto": the smallest block (n // 4 when fewer than 4 * this many samples)
AUTO_BLOCK_MIN = 16


#: n_stages="auto": AUTO_MIN_STAGES stages up to the samples where the "auto" block stops growing
#: (AUTO_BLOCK_RATIO * AUTO_BLOCK_MAX = 12288), then AUTO_MIN_STAGES sqrt(n / 12288) (the features
#: n_stages * 1024 grow like sqrt(n)), at most AUTO_MAX_STAGES (benchmarks/studies/least_squares.md,
#: "Capacity that grows with n")
AUTO_MIN_STAGES = 8
AUTO_MAX_STAGES = 64


def _auto_n_stages(n):
    """n_stages="auto" (estimator docstring): round(8 sqrt(n / 12288)) within [8, 64]: 8 (the
    former default) up to 13872 samples, 16 at 50000, 18 at 60000, 36 at 250000, 64 from about
    775000 on; non-decreasing in n."""
    grown = round(AUTO_MIN_STAGES * math.sqrt(max(int(n), 0) / (AUTO_BLOCK_RATIO * AUTO_BLOCK_MAX)))
    return int(min(AUTO_MAX_STAGES, max(AUTO_MIN_STAGES, grown)))


def _auto_block_size(n):
    """block_size="auto" (estimator docstring): min(1024, max(n // 12, min(16, n // 4))), >= 1.

    1024 (the paper's block) from 12288 samples on, n // 12 from 192 to 12287 samples, 16 from 64
    to 191, n // 4 below 64; continuous and non-decreasing in n."""
    return int(max(1, min(AUTO_BLOCK_MAX, max(n // AUTO_BLOCK_RATIO, min(AUTO_BLOCK_MIN, n // 4)))))


def _auto_block_within(n, k, kernel, Z, method, update, budget, held):
    """block_size="auto" within ``budget`` bytes: :func:`_auto_block_size`, or the largest block
    below it whose stage (:func:`stagewise_fit_bytes`, on the rows whose features it holds at
    once, :func:`stage_task_rows`, as the fit checks it) fits beside the ``held`` bytes of the
    PCA-reduced data; the rule's block when not even one feature fits (the fit then refuses,
    naming the fix)."""
    rows = stage_task_rows(Z, update)
    item = Z.dtype.itemsize

    def fits(block):
        spec = FeatureBlockSpec(kernel, Z.shape[1], block, 0, Z.dtype, method)
        return held + stagewise_fit_bytes(rows, k, spec, update, item) <= budget

    block = _auto_block_size(n)
    if fits(block):
        return block
    return largest_fitting(fits, block) or block


# ----------------------------------------------------------------------------------------------
# estimators


class _StagewiseBase(BoundaryMixin, BaseEstimator):
    """Fit / replay logic shared by StagewiseClassifier and StagewiseRegressor."""

    #: its first call in a process loads numba code: warmed up with these parameters (base/warmup.py)
    _warm_params = {"n_stages": 1}
    #: its random features' cosine is compiled code the warm-up's few rows would not load
    _compiled_cosine = True

    _parameter_constraints: dict = {
        "kernel": KERNEL_CONSTRAINT,
        "feature_method": [StrOptions(set(METHODS)), None],
        "block_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "n_stages": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "pca_components": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"}), None],
        "alpha": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "warm_start": ["boolean"],
        "max_memory": MEMORY_CONSTRAINT,
        "device": DEVICE_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callback": [callable, None],
    }

    def _n_pca(self, d):
        """Components of the PCA for d input features (None: no PCA)."""
        if self.pca_components == "auto":
            return AUTO_PCA_COMPONENTS if d > AUTO_PCA_COMPONENTS else None
        if self.pca_components is not None and self.pca_components > d:
            raise ValueError(
                f"pca_components={self.pca_components} is larger than the number of features "
                f"of X (n_features={d}); pass pca_components <= {d}, pca_components=None to skip "
                f"the PCA, or pca_components='auto'."
            )
        return self.pca_components

    def _n_stages(self, n):
        """T for n samples: ``n_stages``, "auto" resolved by :func:`_auto_n_stages`."""
        return _auto_n_stages(n) if self.n_stages == "auto" else int(self.n_stages)

    def _dask_reduces_X(self, d):
        """Whether a fit on d features reads X only for the PCA and keeps its projection
        (:func:`kernelscale.dask.fit._keep`)."""
        if self.warm_start and hasattr(self, "coef_"):
            return self.pca_components_ is not None
        return self._n_pca(d) is not None

    def _block_size(self, n):
        """block_size for n training rows ("auto": :func:`_auto_block_size`, the most a fit uses:
        the fit itself may take less to stay within max_memory, :func:`_auto_block_within`)."""
        return _auto_block_size(n) if self.block_size == "auto" else int(self.block_size)

    def _same_features(self):
        """Whether kernel and feature_method still give the fitted kernel_ and feature_method_ (a
        sigma="median" matches any resolved bandwidth)."""
        kernel = make_kernel(self.kernel, "kernel")
        method = feature_method_of(kernel, self.feature_method)
        if type(kernel) is not type(self.kernel_) or method != self.feature_method_:
            return False
        given = {k: v for k, v in kernel.get_params().items() if not (k == "sigma" and v == "median")}
        return all(self.kernel_.get_params()[k] == v for k, v in given.items())

    def _spec(self, dtype):
        d = self.n_features_in_ if self.pca_components_ is None else self.pca_components_.shape[1]
        return FeatureBlockSpec(self.kernel_, d, self.block_size_, self.seed_, dtype, self.feature_method_)

    def _reduce(self, X, budget):
        if self.pca_components_ is None:
            return X
        return pca_transform(X, self.pca_mean_, self.pca_components_, budget)

    def _fit_stages(self, X, Y, sw, update, init_fn, previous_d, fitted, budget):
        """Fit (or, with warm_start, continue) Algorithm 3 and commit ``fitted`` plus the fitted
        state in one step, once the stages are fitted: a failed or interrupted fit leaves an
        earlier fit (or an unfitted estimator) intact. ``budget``: ``max_memory`` in bytes."""
        n, d = X.shape
        dtype = X.dtype
        if self.warm_start and hasattr(self, "coef_"):
            if previous_d != d or self.coef_.shape[2] != Y.shape[1] or self.update_ != update:
                raise ValueError(
                    "warm_start=True continues the previous fit, but the features, targets or "
                    "update changed; set warm_start=False to fit from scratch."
                )
            if not self._same_features():
                raise ValueError(
                    f"warm_start=True continues the previous fit with kernel_={self.kernel_!r} and "
                    f"feature_method_={self.feature_method_!r}, but kernel or feature_method changed; "
                    f"set warm_start=False to fit from scratch."
                )
            warm_start_iterations(self._n_stages(n), self.n_iter_, name="n_stages")
            stages = (self.coef_, self.intercept_, self.calibration_)
            history = list(self.objective_history_[:-1])
            seed, kernel, method, init = self.seed_, self.kernel_, self.feature_method_, self.init_
            pca_mean, pca_components, block_size = self.pca_mean_, self.pca_components_, self.block_size_
        else:
            method = feature_method_of(self.kernel, self.feature_method)  # a bad pair fails before the PCA
            n_pca = self._n_pca(d)
            stages, history = None, []
            rng = check_random_state(self.random_state)
            seed = seed_from(self.random_state if isinstance(self.random_state, Integral) else rng)
            pca_mean = pca_components = None
            block_size = None if self.block_size == "auto" else self.block_size  # "auto": below, on Z
            if n_pca is not None:
                mean, components = pca_fit(X, n_pca, sw, budget)  # over row chunks for dask X
                pca_mean, pca_components = mean.astype(dtype), components.astype(dtype)
        rows = executor(budget, X)
        Z = X if pca_components is None else rows.map(
            pca_transform, X, mean=pca_mean, components=pca_components, max_memory=budget,
            width=pca_components.shape[1], dtype=dtype)
        if stages is None:
            kernel = resolve_kernel(self.kernel, Z, rng, sw)
            init = np.asarray(init_fn(rows.sum(weighted_sum, Y, row_weights(rows, X, sw, n))), dtype=dtype)
        if block_size is None:
            held = 0 if Z is X or is_dask(Z) else Z.nbytes
            block_size = _auto_block_within(n, Y.shape[1], kernel, Z, method, update, budget, held)
        spec = FeatureBlockSpec(kernel, Z.shape[1], block_size, seed, dtype, method)
        if method == "sample" and block_size >= Z.shape[1]:
            logger.info(
                "feature_method='sample' with block_size=%d >= %d features: every stage refits all "
                "features, so stages after the first change (almost) nothing", block_size, Z.shape[1],
            )
        # sum(w) = n without weights; integer weights act as repetitions, as everywhere else
        alpha = _AUTO_RIDGE / (n if sw is None else total(rows, sw)) if self.alpha == "auto" else float(self.alpha)
        n_stages = self._n_stages(n)
        with IterationMonitor(self.verbose, self.callback, total=n_stages, desc="stagewise") as monitor:
            result = stagewise_regression(
                Z, Y, spec, update=update, n_stages=n_stages,
                inner_iter=getattr(self, "inner_iter", 50), alpha=alpha, init=init,
                sample_weight=sw, stages=stages, budget=budget, monitor=monitor,
            )
        fitted.update(seed_=seed, kernel_=kernel, feature_method_=method, init_=init, block_size_=block_size,
                      alpha_=alpha,
                      pca_mean_=pca_mean, pca_components_=pca_components,
                      update_=update, coef_=result.coef, intercept_=result.intercept,
                      calibration_=result.calibration, n_iter_=result.n_stages,
                      objective_history_=np.asarray(history + list(result.objective_history)))
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def keep_stages(self, n_stages):
        """Keep only the first ``n_stages`` fitted stages (for example the number that scored best
        on held-out rows through ``staged_decision_function`` / ``staged_predict``); returns self.
        Stage t's features are regenerated from (seed_, t), so the model is exactly the fit that
        stopped after ``n_stages`` stages."""
        check_is_fitted(self)
        if not (isinstance(n_stages, Integral) and 0 <= n_stages <= self.n_iter_):
            raise ValueError(f"n_stages must be an int in [0, n_iter_={self.n_iter_}]; got {n_stages!r}.")
        t = int(n_stages)
        calibration = None if self.calibration_ is None else self.calibration_[:t]
        return commit_fit(self, {"coef_": self.coef_[:t], "intercept_": self.intercept_[:t],
                                 "calibration_": calibration, "n_iter_": t,
                                 "objective_history_": self.objective_history_[:t + 1]})

    def _staged_outputs(self, X):
        """Yield the raw outputs (n, k) after every stage, regenerating each block once and
        applying it to row blocks sized by ``max_memory``."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        dtype = X.dtype
        budget = parse_memory(self.max_memory)
        Z = self._reduce(X, budget)
        op = FeatureOperator(self._spec(dtype), budget)
        P = np.empty((X.shape[0], self.coef_.shape[2]), dtype=dtype)
        P[:] = self.init_.astype(dtype)
        for t in range(self.n_iter_):
            coef, intercept = self.coef_[t].astype(dtype), self.intercept_[t].astype(dtype)
            cal = None if self.calibration_ is None else self.calibration_[t].astype(dtype)
            P = replay_stage(op, Z, t, P, coef, intercept, cal)
            yield check_finite_result(P.copy(), "predictions")

    def _outputs(self, X):
        check_is_fitted(self)
        out = None
        for out in self._staged_outputs(X):
            pass
        if out is None:  # no stage fitted (stopped by the callback before the first)
            X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
            out = np.tile(self.init_.astype(X.dtype), (X.shape[0], 1))
        return out


_DOC_COMMON = """
    Parameters
    ----------
    kernel : Kernel or str, default="gaussian"
        The kernel whose random features GEN draws (Gaussian, Laplacian, Matern, polynomial or
        linear; see :mod:`kernelscale.least_squares.stagewise_solver`); ``sigma="median"`` is
        resolved on the PCA-reduced data into ``kernel_``. (The former ``generator=``, ``sigma=``
        and ``degree=``: benchmarks/studies/least_squares.md.)
    block_size : int >= 1 or "auto", default="auto"
        p, the features per block ("sample" uses min(p, d)). "auto", for n samples (the rows of
        X, not the sum of the weights): min(1024, max(n // 12, min(16, n // 4))), at least 1,
        i.e. 1024 (the paper's larger block) from 12288 samples on, n // 12 from 192 to 12287,
        16 from 64 to 191 and n // 4 below 64 (continuous and non-decreasing in n). With the
        default 8 stages that is 2n/3 features in all below 12288 samples: a block of p >= n
        features interpolates the residual at once, and a stage costs O(n p^2). The floor of 16
        keeps the smallest sets from blocks of a few features. (How the rule was chosen:
        benchmarks/studies/least_squares.md.) A stage holds the n x p block of features, so
        "auto" is at most the largest block ``max_memory`` holds. Kept in ``block_size_``.
    n_stages : int >= 1 or "auto", default="auto"
        T, the number of blocks (with ``warm_start``, in total). "auto" follows n (the rows of
        X): 8 (the former default) up to 13872 samples, then round(8 sqrt(n / 12288)), at most
        64 (``n_iter_``): 16 at 50000 samples, 18 at 60000, 36 at 250000. Below 12288 samples the
        "auto" block grows with n (2n/3 features in all); from there the blocks stay at 1024 and
        the stages carry the growth, so the features n_stages * block_size grow like sqrt(n) (the
        rate-keeping order of random features; Rudi & Rosasco 2017). A stage costs O(n p^2): at
        50000 x 30 about 1-2 s on 2 cores, and 8 more stages took the test RMSE from 1.66 to
        1.51 (benchmarks/studies/least_squares.md, "Capacity that grows with n").
    feature_method : str or None, default=None
        The feature form (:mod:`kernelscale.ops.feature_blocks`); None is the kernel's default:
        "cos" (Gaussian and other shift-invariant kernels), "tensorsketch" (polynomial), "sample"
        (linear: column subsets). "logit" gives random logits from a shift-invariant kernel's
        Fourier draws.
    pca_components : int, "auto" or None, default="auto"
        Reduce X to this many principal components first (appendix A.2.1); an int must be <= the
        number of features; "auto" is 50 when X has more than 50 features and no PCA otherwise;
        None uses X as it is (no centring).
    alpha : float >= 0 or "auto", default="auto"
        Ridge of every block fit, added to the block's weighted second-moment matrix (weights
        summing to 1), so alpha = lambda / n is the ridge lambda of sum_i w_i |r_i - f_i|^2 with
        weights averaging 1. "auto": 0.1 / n (n the sum of the sample weights, the number of
        samples without them; kept in ``alpha_``): close to 1e-6 on 60000 samples, while on a
        few hundred samples it keeps the stages from fitting noise
        (benchmarks/studies/least_squares.md). The generated blocks have a fixed scale (e.g.
        sqrt(2/p) cos for "cos"), so alpha is not relative to X's scale, except for "sample".
    warm_start : bool, default=False
        Keep the fitted stages (same data) and add stages until ``n_stages`` in total.
    max_memory : int, str or None
        Budget for one block of features (n x p), its Gram matrix and the n x k work arrays,
        checked before a fit allocates and parsed once per fit; predictions apply blocks to row
        chunks within it.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (docs/gpus.md): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
    random_state : int, RandomState or None
        An int is the seed of the feature blocks (``seed_``); otherwise one seed is drawn.
    verbose : int; callback : callable or None
        Progress per stage; the callback gets {"iteration", "stage", "objective"} and stops the
        fit by returning True.
"""

_DOC_ATTRIBUTES = """
    Attributes
    ----------
    seed_ : int
        Block t is regenerated from (seed_, t).
    kernel_ : Kernel
        The resolved kernel (a copy; ``sigma="median"`` replaced by its value).
    feature_method_ : str
        The feature method used (``feature_method`` or the kernel's default).
    block_size_ : int, alpha_ : float
        ``block_size`` and ``alpha`` resolved (their "auto" rules).
    pca_mean_ : (d,), pca_components_ : (d, pca_components), or None
    init_ : (k,)
        Stage-0 prediction.
    coef_ : (n_iter_, p, k), intercept_ : (n_iter_, k), calibration_ : (n_iter_, k, k) or None
        The block weights: stage t adds F_t coef_[t] + y_hat calibration_[t] + intercept_[t].
    n_iter_ : int
        Number of stages fitted.
    objective_history_ : (n_iter_ + 1,)
        Training residual sum_i w_i |y_i - y_hat_i|^2 (weights summing to 1) after each stage
        (logistic loss for update="softmax"); non-increasing.
    update_ : str; n_features_in_ : int
"""


class StagewiseClassifier(ClassifierMixin, _StagewiseBase):
    __doc__ = (
        """Stagewise least-squares classifier on seeded random feature blocks (paper 5,
    Algorithm 3).

    Fits one-hot targets block by block (``update="linear"`` or ``"calibrated"``), or the
    multinomial logistic loss (``update="softmax"``, ``inner_iter`` steps of Algorithm 1 per
    block). ``predict_proba`` is softmax of the scores for "softmax" and the projection of the
    predictions onto the probability simplex otherwise (it keeps the argmax, so ``predict``
    agrees with it). Multi-label targets are not supported (use
    CalibratedLeastSquaresClassifier).
"""
        + _DOC_COMMON
        + """    update : {"linear", "calibrated", "softmax"}, default="linear"
    inner_iter : int >= 1, default=50
        Algorithm 1 steps per block for update="softmax".
    class_weight : "balanced", dict or None
"""
        + _DOC_ATTRIBUTES
        + "    classes_ : (k,)\n"
    )

    _parameter_constraints: dict = {
        **_StagewiseBase._parameter_constraints,
        "update": [StrOptions({"linear", "calibrated", "softmax"})],
        "inner_iter": [Interval(Integral, 1, None, closed="left")],
        "class_weight": [StrOptions({"balanced"}), dict, None],
    }

    def __init__(
        self, kernel="gaussian", *, block_size="auto", n_stages="auto", update="linear", inner_iter=50,
        feature_method=None, pca_components="auto", alpha="auto", class_weight=None,
        warm_start=False, max_memory=None, device=None, random_state=None, verbose=0, callback=None,
    ):
        self.kernel = kernel
        self.block_size = block_size
        self.n_stages = n_stages
        self.update = update
        self.inner_iter = inner_iter
        self.feature_method = feature_method
        self.pca_components = pca_components
        self.alpha = alpha
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.max_memory = max_memory
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and class labels y (n,), with optional sample weights."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32])
        classes, codes = encode_classes(y)
        budget = parse_memory(self.max_memory)
        check_class_memory(7 * X.dtype.itemsize * X.shape[0] * classes.size, budget, classes.size,
                           "the one-hot targets and a stage's other n x k arrays")
        Y = one_hot(codes, classes.size, X.dtype)
        sw = fit_weights(sample_weight, self.class_weight, X, codes, classes)
        return self._fit_prepared(X, Y, classes, sw, fitted, budget=budget)

    def _fit_prepared(self, X, Y, classes, sw, fitted, budget=None):
        """The fit on validated X, one-hot targets Y (n, k) and weights sw: numpy arrays, or dask
        arrays with the same row chunks (:mod:`kernelscale.dask.fit`), fitted over them.
        ``budget``: ``max_memory`` in bytes (parsed here when not given)."""
        previous_d = getattr(self, "n_features_in_", None)
        if self.warm_start and hasattr(self, "classes_") and not np.array_equal(classes, self.classes_):
            raise ValueError("warm_start=True but the classes changed; set warm_start=False.")

        def init(prior):  # prior = sum_i w_i y_i, weights summing to 1
            return np.log(np.maximum(prior, 1e-12)) if self.update == "softmax" else prior

        fitted["classes_"] = classes
        budget = parse_memory(self.max_memory) if budget is None else budget
        return self._fit_stages(X, Y, sw, self.update, init, previous_d, fitted, budget)

    def _format(self, S):
        return S[:, 1] - S[:, 0] if S.shape[1] == 2 else S

    def decision_function(self, X):
        """Scores (n, k): predictions of the one-hot targets, or logits for update="softmax";
        for two classes the 1-d difference s_1 - s_0."""
        return self._format(self._outputs(X))

    def staged_decision_function(self, X):
        """Yield ``decision_function(X)`` after each stage (blocks regenerated once each)."""
        for S in self._staged_outputs(X):
            yield self._format(S)

    def predict_proba(self, X):
        S = self._outputs(X)
        return softmax(S) if self.update_ == "softmax" else project_simplex(S)

    def predict(self, X):
        S = self._outputs(X)
        return self.classes_[np.argmax(S, axis=1)]


class StagewiseRegressor(FiniteR2Mixin, RegressorMixin, _StagewiseBase):
    __doc__ = (
        """Stagewise least-squares regression on seeded random feature blocks (paper 5,
    Algorithm 3), for one or several targets.
"""
        + _DOC_COMMON
        + """    update : {"linear", "calibrated"}, default="linear"
        "calibrated" adds the current predictions to every block's features.
"""
        + _DOC_ATTRIBUTES
    )

    _parameter_constraints: dict = {
        **_StagewiseBase._parameter_constraints,
        "update": [StrOptions({"linear", "calibrated"})],
    }

    def __init__(
        self, kernel="gaussian", *, block_size="auto", n_stages="auto", update="linear", feature_method=None,
        pca_components="auto", alpha="auto", warm_start=False, max_memory=None, device=None,
        random_state=None, verbose=0, callback=None,
    ):
        self.kernel = kernel
        self.block_size = block_size
        self.n_stages = n_stages
        self.update = update
        self.feature_method = feature_method
        self.pca_components = pca_components
        self.alpha = alpha
        self.warm_start = warm_start
        self.max_memory = max_memory
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and targets y (n,) or (n, k), with optional sample weights."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32], multi_output=True,
                                         y_numeric=True)
        sw = fit_weights(sample_weight, None, X)
        return self._fit_prepared(X, np.asarray(y, dtype=X.dtype), None, sw, fitted)

    def _fit_prepared(self, X, y, classes, sw, fitted, budget=None):
        """The fit on validated X, targets y (n,) or (n, k) in X's dtype and weights sw: numpy
        arrays, or dask arrays with the same row chunks (:mod:`kernelscale.dask.fit`).
        ``budget``: ``max_memory`` in bytes (parsed here when not given)."""
        previous_d = getattr(self, "n_features_in_", None)
        fitted["single_output_"] = y.ndim == 1
        Y = y.reshape(X.shape[0], -1)
        budget = parse_memory(self.max_memory) if budget is None else budget
        return self._fit_stages(X, Y, sw, self.update, lambda prior: prior, previous_d, fitted, budget)

    def _format(self, P):
        return P[:, 0] if self.single_output_ else P

    def predict(self, X):
        return self._format(self._outputs(X))

    def staged_predict(self, X):
        """Yield ``predict(X)`` after each stage (blocks regenerated once each)."""
        for P in self._staged_outputs(X):
            yield self._format(P)
