"""The front door: :class:`AutoKernelClassifier` and :class:`AutoKernelRegressor`.

One knob, ``time_budget`` (seconds). ``fit`` chooses, on the data it is given:

- the **hyperparameters** (input scaling, kernel, bandwidth, ridge) by the leave-one-out search
  of :mod:`kernelscale.auto.search` (successive halving over nested subsamples);
- the **method** and its **capacity** by the rules of :mod:`kernelscale.auto.plan`: the exact
  solver where it is affordable, otherwise stagewise regression on random features with as many
  stages as the budget pays for, the number kept chosen on held-out rows.

The fitted estimator is ``best_estimator_`` (an ordinary kernelscale estimator, applied to the
scaled rows); every candidate the search scored is in ``cv_results_``.
"""

from __future__ import annotations

import logging
import sys
import time
from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from ..base.boundary import BoundaryMixin
from ..base.classifier import encode_classes, one_hot
from ..base.estimator import INPUT_ATTRIBUTES, FiniteR2Mixin, commit_fit, validate_fit_data
from ..base.params import DEVICE_CONSTRAINT, MEMORY_CONSTRAINT
from ..base.validation import check_sample_weight, validate_data
from ..least_squares import (
    StagewiseClassifier, StagewiseRegressor, feature_spec, stage_store_bytes, stagewise_fit_bytes,
)
from ..lssvm import LSSVMClassifier, LSSVMRegressor
from ..lssvm.memory import lssvm_fit_memory
from ..ops.memory import parse_memory
from ..preprocessing import pca_fit, pca_transform
from . import plan
from .pairwise import OneVsOneLSSVMClassifier
from .search import KERNELS, candidates, halving_search, standard_scaling, standardize

__all__ = ["AutoKernelClassifier", "AutoKernelRegressor"]

logger = logging.getLogger(__name__)

#: components of the PCA in front of the random features when X has more features
#: (StagewiseClassifier's pca_components="auto")
PCA_COMPONENTS = 50
#: the search never scores a candidate on more rows than this
SEARCH_MAX_ROWS = 1600
#: an upper bound on the stages of a stagewise fit: the budget stops it long before
MAX_STAGES = 100_000
#: the stagewise fit's block of random features per stage
STAGE_BLOCK = 256
#: seconds kept back from the budget for what follows the last stage (choosing the stages kept)
RESERVE_SHARE = 0.05


class _AutoBase(BoundaryMixin, BaseEstimator):
    _parameter_constraints: dict = {
        "time_budget": [Interval(Real, 0, None, closed="neither")],
        "max_memory": MEMORY_CONSTRAINT,
        "device": DEVICE_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, *, time_budget=60.0, max_memory=None, device=None, random_state=None, verbose=0):
        self.time_budget = time_budget
        self.max_memory = max_memory
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------------------------------
    def _log(self, text):
        logger.info(text)
        if self.verbose:
            print(f"[{type(self).__name__}] {text}", file=sys.stderr, flush=True)

    def _fit_auto(self, X, y, Y, codes, sample_weight, fitted):
        start = time.perf_counter()
        deadline = start + float(self.time_budget)
        budget = parse_memory(self.max_memory)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        n, d = X.shape
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, X)
        flops = plan.exact_flop_rate(n, d, self.time_budget, X.dtype, budget)
        exact_bytes = lssvm_fit_memory(n, d, self._n_outputs(y), n, X.dtype, "gaussian", "exact")
        exact = plan.use_exact(n, d, exact_bytes, self.time_budget, flops, budget)
        method = "exact" if exact else "stagewise"
        self._log(f"{n} rows x {d} features, budget {self.time_budget:g} s: method {method}")

        # the search: a random permutation, weighted by sample_weight when given
        order = _search_order(n, sample_weight, rng)
        reduce = _SubsamplePCA(budget) if not exact and d > PCA_COMPONENTS else None
        searched = order[:SEARCH_MAX_ROWS]
        if exact:
            search_end = deadline - plan.exact_seconds(n, d, flops) - 0.1 * self.time_budget
        else:
            search_end = start + plan.SEARCH_SHARE * self.time_budget
        found = halving_search(X[searched], Y[searched], None if codes is None else codes[searched], search_end,
                               reduce=reduce, budget=budget, random_state=seed, log=self._log,
                               pairwise=exact and sample_weight is None, grid=candidates(X))
        best = found.best
        if exact:
            alpha = max(found.alpha * (n / found.rows) ** plan.ALPHA_GROWTH, plan.smallest_ridge(n, X.dtype, found.kernel_mean))
            single = self._single_precision and plan.single_precision_suffices(n, alpha, found.kernel_mean)
        else:
            single = self._single_precision
        dtype = np.dtype(np.float32) if single else X.dtype
        if best.scaling == "standard":
            mean, scale = standard_scaling(X)
        elif dtype != X.dtype and not sp.issparse(X):
            # single precision keeps a column's digits relative to its offset (a timestamp of 1e9
            # would round to 64): centre first; the kernels do not change under translation
            mean, scale = X.mean(axis=0, dtype=np.float64), np.ones(d)
        else:
            mean = scale = None
        Xs = X.astype(dtype, copy=False) if mean is None else standardize(X, mean, scale).astype(dtype, copy=False)
        sigma = found.sigma * (found.rows / n) ** plan.BANDWIDTH_GROWTH
        kernel = KERNELS[best.kernel](sigma=sigma)
        common = dict(max_memory=self.max_memory, device=self.device, random_state=seed)
        if exact:
            if found.multiclass == "ovo":
                model = OneVsOneLSSVMClassifier(kernel, C=1.0 / alpha, max_memory=self.max_memory)
                model.fit(Xs, y)
            else:
                model = self._exact(kernel, C=1.0 / alpha, solver="exact", **common)
                model.fit(Xs, y, sample_weight=sample_weight)
            chosen = {"alpha": alpha, "multiclass": found.multiclass}
            unseen = (found.loo_decision, y[searched][:found.rows])
        else:
            model, chosen, unseen = self._stagewise(kernel, Xs, y, sample_weight, order, deadline, common)
        if codes is not None:
            decision, labels = unseen
            fitted["threshold_"] = self._threshold(decision, labels == fitted["classes_"][-1])
        self._log(f"fitted {type(model).__name__} in {time.perf_counter() - start:.1f} s")
        fitted.update(
            best_estimator_=model, method_=method, dtype_=dtype, scaling_mean_=mean, scaling_scale_=scale,
            best_params_={"scaling": best.scaling, "kernel": best.kernel, "sigma": sigma,
                          "bandwidth_factor": best.factor, **chosen},
            best_score_=found.score, cv_results_=_as_columns(found.records),
            fit_time_=time.perf_counter() - start,
        )
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def _stagewise(self, kernel, X, y, sample_weight, order, deadline, common):
        """A stagewise fit on all but the held-out rows, stopped by the deadline, cut to the
        number of stages that scores best on the held-out rows."""
        n = X.shape[0]
        held = np.sort(order[: plan.holdout_rows(n)])
        train = np.setdiff1d(np.arange(n), held, assume_unique=True)
        reserve = RESERVE_SHARE * self.time_budget
        clock = _StageClock(deadline - reserve)
        budget = parse_memory(self.max_memory)
        block = _stage_block(n - held.size, self._n_outputs(y), X.dtype, kernel, budget)
        model = self._stagewise_class(kernel, block_size=block, update="calibrated", callback=clock,
                                      n_stages=_most_stages(block, self._n_outputs(y), X.dtype, kernel, budget),
                                      **common)
        sw = None if sample_weight is None else sample_weight[train]
        model.fit(X[train], y[train], sample_weight=sw)
        losses, best_rows, rows, best_out, out = [], None, None, None, None
        for out in self._staged(model, X[held]):
            rows = self._holdout_losses(model, out, y[held])
            losses.append(float(np.mean(rows)))
            if losses[-1] < min(losses[:-1], default=np.inf):
                best_rows, best_out = rows, out
        keep = plan.stages_to_keep(losses, best_rows, rows)
        model.keep_stages(keep)
        self._log(f"stagewise: {clock.stages} stages of {block} features, kept {keep} "
                  f"(held-out loss {losses[keep - 1] if keep else float('nan'):.4f})")
        kept = out if keep == len(losses) else best_out
        return model, {"n_stages": keep, "block_size": block}, (kept, y[held])

    def _scaled(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        dtype = getattr(self, "dtype_", None)
        if dtype is None:  # a model saved before dtype_ was recorded
            dtype = np.float32 if self.method_ == "stagewise" and self._single_precision else X.dtype
        if self.scaling_mean_ is None:
            return X.astype(dtype, copy=False)
        return standardize(X, self.scaling_mean_, self.scaling_scale_).astype(dtype, copy=False)

    def predict(self, X):
        X = self._scaled(X)
        return self.best_estimator_.predict(X)


def _most_stages(block, k, dtype, kernel, budget):
    """MAX_STAGES, or fewer where the stages' coefficients (:func:`stage_store_bytes`) would take
    more than a quarter of ``budget`` bytes (the stage itself has half: :func:`_stage_block`)."""
    store = stage_store_bytes(feature_spec(kernel, 1, block, 0).n_features_out, k, "calibrated",
                              np.dtype(dtype).itemsize)
    return int(min(MAX_STAGES, max(1, budget // 4 // store)))


def _stage_block(n, k, dtype, kernel, budget):
    """STAGE_BLOCK features per stage, or the largest power of 2 below it whose stage fits in
    half of ``budget`` bytes (the other half for the rows and the PCA); at least 1."""
    block = STAGE_BLOCK
    while block > 1 and 2 * stagewise_fit_bytes(n, k, feature_spec(kernel, 1, block, 0), "calibrated",
                                                np.dtype(dtype).itemsize) > budget:
        block //= 2
    return block


class _StageClock:
    """The callback of a stagewise fit under a deadline: stops before a stage that would end
    past it (a stage is predicted to take as long as the slowest so far)."""

    def __init__(self, deadline):
        self.deadline = deadline
        self.last = time.perf_counter()
        self.slowest = 0.0
        self.stages = 0

    def __call__(self, info):
        now = time.perf_counter()
        self.slowest = max(self.slowest, now - self.last)
        self.last = now
        self.stages += 1
        return now + self.slowest > self.deadline


class _SubsamplePCA:
    """The PCA a stagewise fit puts in front of its features, fitted on the search's rows, so that
    the search measures bandwidths where the features will be drawn."""

    def __init__(self, budget):
        self.budget = budget

    def __call__(self, Z):
        mean, components = pca_fit(Z, PCA_COMPONENTS, None, self.budget)
        return pca_transform(Z, mean, components, self.budget)


def _search_order(n, sample_weight, rng):
    """A random order of the rows; with weights, drawn with probability proportional to them
    (rows of weight zero last)."""
    if sample_weight is None:
        return rng.permutation(n)
    w = np.asarray(sample_weight, dtype=np.float64)
    keys = np.where(w > 0, rng.random_sample(n) ** (1.0 / np.where(w > 0, w, 1.0)), -1.0)
    return np.argsort(-keys, kind="stable")


def _as_columns(records):
    """cv_results_: a dict of lists, one entry per evaluation (as scikit-learn's searches)."""
    keys = list(records[0]) if records else []
    return {k: [r[k] for r in records] for k in keys}


_DOC = """
    Parameters
    ----------
    time_budget : float > 0, default=60
        Seconds the whole ``fit`` may take: the search and the final fit on all the data. The fit
        ends within the budget plus a few percent (the last stage or solve is predicted before
        it starts). More time buys a larger model where the data has room for one.
    max_memory : int, str or None
        Memory budget of every step (the search's subsample kernels, the final fit).
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (docs/gpus.md).
    random_state : int, RandomState or None
        Seeds the search's subsamples and the final model's random features.
    verbose : int, default=0
        1 prints what is tried and the best score so far.

    Attributes
    ----------
    best_estimator_ : estimator
        The fitted kernelscale estimator (on the scaled rows, see ``scaling_mean_``).
    method_ : {"exact", "stagewise"}
        The method the rules chose (kernelscale.auto.plan).
    best_params_ : dict
        Scaling, kernel, sigma, bandwidth factor, and the ridge and "multiclass" (exact: "ovo"
        when one-vs-one ridges scored better than one-vs-rest in the search, for three classes or
        more and no sample_weight; ``best_estimator_`` is then a
        :class:`kernelscale.auto.pairwise.OneVsOneLSSVMClassifier`) or the stages kept and the
        block size (stagewise).
    best_score_ : float
        The winner's leave-one-out loss in the search (error rate, or MSE over the variance).
    cv_results_ : dict of lists
        Every evaluation of the search: scaling, kernel, bandwidth_factor, sigma, alpha,
        multiclass, n_samples, validation_loss, fit_time.
    scaling_mean_, scaling_scale_ : (d,) arrays or None
        The standardisation applied to X before ``best_estimator_`` (None: X as it is; the
        stagewise classifier, which computes in single precision, centres dense X with a scale
        of 1 when the search kept it as it is). For
        scipy.sparse X the "standard" scaling does not centre (``scaling_mean_`` is zero, as
        scikit-learn's ``StandardScaler(with_mean=False)``), so X stays sparse: it only divides
        each column by its standard deviation. The search's Gaussian and Laplacian kernels do not
        change under translation, so this gives the dense input's search up to rounding; a model
        fitted on dense X (a non-zero mean) densifies sparse X given to ``predict``.
    dtype_ : numpy dtype
        The precision ``best_estimator_`` was fitted and predicts in: float32 for a classifier's
        stagewise fit, and for its exact fit where the ridge keeps single precision accurate
        (:func:`kernelscale.auto.plan.single_precision_suffices`); else X's.
    fit_time_ : float
        Seconds the fit took.
    n_features_in_ : int

    Notes
    -----
    A fit depends on how fast the machine runs it: the budget decides how many candidates the
    search scores on how many rows and how many stages a stagewise fit adds, so two fits with the
    same ``random_state`` are equal only when neither was cut by the clock (small data sets, where
    the search scores every candidate on all rows and the exact solver runs). Pass the fitted
    ``best_estimator_``'s parameters to that estimator to refit deterministically.
"""


class AutoKernelClassifier(ClassifierMixin, _AutoBase):
    __doc__ = """Kernel classifier that chooses its method, capacity and hyperparameters within a time budget.
""" + _DOC + """    classes_ : (k,)
    threshold_ : float
        Two classes: ``predict`` gives ``classes_[1]`` where the model's decision value exceeds
        it: 0, unless Platt's scaling of decision values on rows the model did not fit (leave-one-
        out or held out) puts the even odds clearly elsewhere
        (:func:`kernelscale.auto.plan.decision_threshold`). ``decision_function`` is the model's
        less it; ``predict_proba`` is the model's own.
"""

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Search, choose and fit on X (n, d) and class labels y (n,) within ``time_budget``."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32])
        classes, codes = encode_classes(y)
        fitted["classes_"] = classes
        return self._fit_auto(X, y, one_hot(codes, classes.size), codes, sample_weight, fitted)

    _exact = LSSVMClassifier
    _stagewise_class = StagewiseClassifier
    #: the final model computes in single precision: random features and 0/1 codes lose nothing
    #: in it, and a stage or a Cholesky takes about half the time (the exact route only where its
    #: ridge keeps the solve accurate, plan.single_precision_suffices; a regressor keeps X's
    #: precision: its targets may carry an offset that single precision would round away)
    _single_precision = True

    @staticmethod
    def _n_outputs(y):
        return np.unique(y).size

    @staticmethod
    def _staged(model, X):
        return model.staged_decision_function(X)

    @staticmethod
    def _holdout_losses(model, scores, y):
        picked = scores.argmax(axis=1) if scores.ndim == 2 else (scores > 0).astype(int)
        return (model.classes_[picked] != y).astype(np.float64)

    def _threshold(self, decision, positive):
        """The two-class decision threshold (:func:`kernelscale.auto.plan.decision_threshold`)
        from decision values on rows the model did not fit (None or 2-d: more classes) and
        whether each of those rows is of the second class."""
        if decision is None or decision.ndim != 1:
            return 0.0
        threshold = plan.decision_threshold(decision, positive)
        if threshold:
            self._log(f"two classes: decision threshold {threshold:.4g} (Platt's scaling on rows not fitted)")
        return threshold

    def decision_function(self, X):
        X = self._scaled(X)
        values = self.best_estimator_.decision_function(X)
        return values - getattr(self, "threshold_", 0.0) if values.ndim == 1 else values

    def predict(self, X):
        check_is_fitted(self)
        if not getattr(self, "threshold_", 0.0):  # a model saved before thresholds has none
            return super().predict(X)
        return self.classes_[(self.decision_function(X) > 0).astype(np.intp)]

    def predict_proba(self, X):
        X = self._scaled(X)
        return self.best_estimator_.predict_proba(X)


class AutoKernelRegressor(FiniteR2Mixin, RegressorMixin, _AutoBase):
    __doc__ = """Kernel regressor that chooses its method, capacity and hyperparameters within a time budget.
""" + _DOC

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Search, choose and fit on X (n, d) and targets y (n,) within ``time_budget``."""
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32], y_numeric=True)
        y = np.asarray(y, dtype=X.dtype)
        return self._fit_auto(X, y, y.reshape(-1, 1).astype(np.float64), None, sample_weight, fitted)

    _exact = LSSVMRegressor
    _stagewise_class = StagewiseRegressor
    _single_precision = False

    @staticmethod
    def _n_outputs(y):
        return 1

    @staticmethod
    def _staged(model, X):
        return model.staged_predict(X)

    @staticmethod
    def _holdout_losses(model, pred, y):
        return (pred - y) ** 2
