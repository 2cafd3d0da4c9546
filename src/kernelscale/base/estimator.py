"""Plumbing shared by every estimator: kernel resolution, sample and class weights, warm starts.

One implementation of each convention of the shared vocabulary (docs/conventions.md):

- :func:`resolve_kernel`: the fitted ``kernel_`` is a copy of ``kernel`` whose data-dependent
  parameters (``sigma="median"``) are fixed from the training points of positive weight (the
  median weighted by ``sample_weight`` when the weights differ).
- :func:`fit_weights`: ``sample_weight`` times the ``class_weight`` of each sample's class
  ("balanced" counts samples, not weights, as scikit-learn does), validated once
  (:func:`check_class_weight`: finite weights >= 0, not 0 for every class).
- :func:`warm_start_iterations`: ``n_iter`` (``n_stages``) is the TOTAL a warm-started model
  reaches, as for scikit-learn's ensembles: a refit runs the missing iterations only.
- :func:`validate_fit_data` and :func:`commit_fit`: a fit never leaves a half-fitted model. It
  validates without touching the estimator, computes into locals and commits every fitted
  attribute in one step at the end; an exception or KeyboardInterrupt before the commit leaves
  the previous model (or an unfitted estimator) exactly as it was.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_random_state
from sklearn.metrics import r2_score
from sklearn.utils.class_weight import compute_class_weight

from .validation import check_sample_weight, float_value, number_repr, validate_data
from ..kernels import MEDIAN_SAMPLES, make_kernel
from ..ops.rows import is_dask, stack_rows

__all__ = ["resolve_kernel", "fit_weights", "check_class_weight", "check_some_weight", "warm_start_iterations", "validate_fit_data", "commit_fit",
           "INPUT_ATTRIBUTES", "FiniteR2Mixin", "finite_r2_score", "warm_start_from"]

#: what scikit-learn's ``validate_data(..., reset=True)`` sets on the estimator
INPUT_ATTRIBUTES = ("n_features_in_", "feature_names_in_")


def resolve_kernel(kernel, X, random_state, sample_weight=None):
    """A resolved copy of ``kernel`` for the training points X (see the module docstring). For a
    dask X (row chunks, ``sample_weight`` a dask array or None) only the subsample of rows of
    positive weight that the median trick draws on numpy (``rng.choice`` of MEDIAN_SAMPLES
    indices, the same draw) is gathered, so the bandwidth is numpy's."""
    kernel = make_kernel(kernel)
    if kernel.is_resolved:
        return clone(kernel)
    random_state = check_random_state(random_state)
    if is_dask(X):
        stats = positive_counts(X, sample_weight)
        n_pos = int(stats[:, 0].sum())
        keep = np.arange(n_pos)
        if n_pos > MEDIAN_SAMPLES:
            keep = np.sort(random_state.choice(n_pos, MEDIAN_SAMPLES, replace=False))
        rows, weights, _ = positive_rows(X, sample_weight, keep, stats)
        equal = sample_weight is None or stats[:, 1].min() == stats[:, 2].max()
        return kernel.resolve(rows, random_state, None if equal else weights)
    if sample_weight is not None:
        positive = sample_weight > 0
        X, sample_weight = X[positive], sample_weight[positive]
        if np.all(sample_weight == sample_weight[0]):
            sample_weight = None  # equal weights: the plain median
    return kernel.resolve(X, random_state, sample_weight)


def _positive(w, Z):
    """Rows of the chunk with positive weight (all of them without weights): (count, min, max of w)."""
    if w is None:
        return np.array([Z.shape[0], 1.0, 1.0])
    pos = w[w > 0]
    return np.array([pos.size, pos.min(initial=np.inf), pos.max(initial=-np.inf)])


def positive_counts(Z, w):
    """Per row chunk of the dask array Z (weights w, a dask array or None): (count, min, max) of
    the positive weights, an (n_chunks, 3) array (one small task per chunk)."""
    import dask

    Zb = list(Z.to_delayed().ravel())
    wb = [None] * len(Zb) if w is None else list(w.to_delayed().ravel())
    return np.array(dask.compute(*map(dask.delayed(_positive), wb, Zb))).reshape(len(Zb), 3)


def _select(Z, w, keep, start):
    """The rows ``keep`` (indices among the chunk's rows of positive weight), their weights and
    their indices in the whole array (the chunk starts at row ``start``)."""
    index = np.arange(Z.shape[0]) if w is None else np.flatnonzero(w > 0)
    return Z[index[keep]], None if w is None else w[index[keep]], start + index[keep]


def positive_rows(Z, w, ranks, stats=None):
    """Rows of the dask array Z at the sorted ``ranks`` among its rows of positive weight (all
    rows when w is None): (rows, weights or None, row indices), gathering only those rows."""
    import dask

    stats = positive_counts(Z, w) if stats is None else stats
    offsets = np.concatenate([[0], np.cumsum(stats[:, 0].astype(np.int64))])
    starts = np.concatenate([[0], np.cumsum(Z.chunks[0])])
    Zb = list(Z.to_delayed().ravel())
    wb = [None] * len(Zb) if w is None else list(w.to_delayed().ravel())
    parts = dask.compute(*(
        dask.delayed(_select)(z, c, ranks[(ranks >= offsets[i]) & (ranks < offsets[i + 1])] - offsets[i], starts[i])
        for i, (z, c) in enumerate(zip(Zb, wb))
    ))
    weights = None if w is None else np.concatenate([p[1] for p in parts])
    return stack_rows([p[0] for p in parts]), weights, np.concatenate([p[2] for p in parts])


def check_class_weight(class_weight, classes=None):
    """Return ``class_weight`` (None, "balanced" or a dict {label: weight}), or raise a ValueError
    naming it: a weight that is not a finite number >= 0 (negative, NaN, inf, an integer beyond
    the float range, a string), or, given ``classes`` (the sorted labels of y), a dict that weighs
    every one of them 0 (a class the dict does not name weighs 1, as in scikit-learn)."""
    if not isinstance(class_weight, dict):
        return class_weight
    for label, weight in class_weight.items():
        ok = isinstance(weight, numbers.Real) and not isinstance(weight, bool)
        number = float_value(weight) if ok else math.nan
        if not (math.isfinite(number) and number >= 0):
            raise ValueError(
                f"class_weight[{label!r}] is {number_repr(weight)}; class weights must be finite numbers >= 0 "
                f"(0 ignores a class): pass e.g. class_weight={{{label!r}: 2.0}}, or class_weight='balanced'."
            )
    if classes is not None and all(float(class_weight.get(label, 1.0)) == 0 for label in
                                   (c.item() if isinstance(c, np.generic) else c for c in classes)):
        raise ValueError(
            f"class_weight={class_weight!r} weighs every class of y ({', '.join(map(repr, np.asarray(classes)[:10].tolist()))}) 0, "
            f"so no sample is left to fit; give at least one class a positive weight."
        )
    return class_weight


def check_some_weight(w, what="sample_weight times class_weight"):
    """Return the float64 weights ``w``, or raise a ValueError naming ``what`` when none is positive
    or one overflowed to inf."""
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{what} overflows the float range for some samples; scale the weights down "
                         f"(only their ratios matter).")
    if w.size and not np.any(w > 0):
        raise ValueError(f"{what} is 0 for every sample, so no sample is left to fit; give some samples of "
                         f"some class a positive weight.")
    return w


def fit_weights(sample_weight, class_weight, X, codes=None, classes=None, *, ones=False):
    """float64 weights per sample: ``sample_weight`` (ones when None) times the class weights
    of ``codes`` (integer class codes) under ``class_weight`` (None, "balanced" or a dict keyed
    by the labels in ``classes``, checked by :func:`check_class_weight`). When both are None:
    None, or ones with ``ones=True``. A ValueError names class_weight when the product leaves
    no positive weight or overflows."""
    if sample_weight is None and class_weight is None and not ones:
        return None
    w = check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    if class_weight is not None:
        check_class_weight(class_weight, classes)
        y = classes[codes]
        with np.errstate(over="ignore"):
            w = w * compute_class_weight(class_weight, classes=classes, y=y)[codes]
        check_some_weight(w)
    return w


def warm_start_iterations(n_iter, done, *, name="n_iter"):
    """Iterations a warm-started fit runs to reach the total ``n_iter`` after ``done``.

    Raises a ValueError when ``n_iter < done`` (a model cannot be un-fitted) and warns when
    ``n_iter == done`` (nothing to do), as scikit-learn's ensembles do with ``n_estimators``.
    """
    if n_iter < done:
        raise ValueError(
            f"{name}={n_iter} is smaller than the {done} iterations the warm-started model has "
            f"already run; {name} is the total to reach: pass {name} > {done}, or warm_start=False "
            f"to fit from scratch."
        )
    if n_iter == done:
        warnings.warn(
            f"warm_start with {name}={n_iter} equal to the iterations already run does nothing; "
            f"increase {name} to continue.",
            UserWarning,
            stacklevel=3,
        )
    return n_iter - done


def warm_start_from(previous, shape, what):
    """The previous fit's state ``previous`` (None before any fit) as an array of ``shape`` for a
    warm start to continue from, or None: a fit on another number of rows (or outputs) cannot
    continue from it, so it starts from scratch, with a UserWarning saying so."""
    if previous is None:
        return None
    if np.shape(previous)[:1] == tuple(shape[:1]) and np.size(previous) == math.prod(shape):
        return np.reshape(previous, shape)
    warnings.warn(
        f"warm_start=True, but the previous model's {what} has shape {np.shape(previous)} and this fit needs "
        f"{tuple(shape)} (rows, outputs): it was fitted on other data, so this fit starts from scratch. Pass "
        f"warm_start=False to silence this, or refit on the same rows to continue.",
        UserWarning, stacklevel=3,
    )
    return None


def validate_fit_data(estimator, X, y, **kwargs):
    """``validate_data(estimator, X, y, reset=True, **kwargs)`` that leaves ``estimator`` as it was.

    Returns X, y (None when y is None: an unsupervised fit) and a dict of the attributes it would
    have set (``n_features_in_`` and, for a DataFrame, ``feature_names_in_``), to pass to
    :func:`commit_fit` with the fitted state.
    """
    state = vars(estimator)
    before = {name: state[name] for name in INPUT_ATTRIBUTES if name in state}
    try:
        out = validate_data(estimator, X, y, **kwargs)  # y=None: refused if the estimator needs y
        X, y = (out, None) if y is None else out
        seen = {name: state[name] for name in INPUT_ATTRIBUTES if name in state}
    finally:
        for name in INPUT_ATTRIBUTES:
            state.pop(name, None)
        state.update(before)
    return X, y, seen


def commit_fit(estimator, fitted, stale=()):
    """Set the attributes in the dict ``fitted`` and delete those named in ``stale`` that it does
    not set, in one step: an interrupt sees the old state or the new one, never a mix."""
    state = {name: value for name, value in vars(estimator).items() if name not in stale}
    state.update(fitted)
    estimator.__dict__ = state  # a single store
    return estimator


def finite_r2_score(y_true, y_pred, sample_weight=None):
    """scikit-learn's ``r2_score`` (uniform average over outputs), finite for every finite input.

    The ordinary result is scikit-learn's, unchanged. When that is NaN or infinite (the sums of
    squares overflowed: targets or predictions beyond ~1e154), each output's R^2 is recomputed
    from scaled residuals, R^2 = 1 - (s_res / s_tot)^2 ss_res / ss_tot with s the largest
    residual and ss the weighted sum of squared residuals divided by it (R^2 does not change when
    y, the predictions or the weights are scaled); a score below the float range is returned as
    the most negative float. With fewer than two samples it is NaN, as scikit-learn's.
    """
    with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        score = r2_score(y_true, y_pred, sample_weight=sample_weight)
    if np.isfinite(score) or len(y_true) < 2:  # one sample: undefined, NaN as in scikit-learn
        return score
    y = np.asarray(y_true, dtype=np.float64).reshape(len(y_true), -1)
    p = np.asarray(y_pred, dtype=np.float64).reshape(y.shape[0], -1)
    w = np.ones(y.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    w = w / w.max()
    scores = [_scaled_r2(y[:, j], p[:, j], w) for j in range(y.shape[1])]
    return float(np.sum(np.divide(scores, len(scores))))  # a mean that cannot overflow


def _scaled_r2(y, p, w):
    t = max(np.abs(y).max(), np.abs(p).max())
    if t > 0:  # |y|, |p| <= 1 after dividing by the power of two above t: differences stay finite
        t = np.ldexp(1.0, np.frexp(t)[1])
        y, p = y / t, p / t
    res = y - p
    tot = y - np.average(y, weights=w)
    s_res, s_tot = np.abs(res).max(), np.abs(tot).max()
    if s_tot == 0:  # constant y, as r2_score(force_finite=True): 1 for a perfect fit, else 0
        return 1.0 if s_res == 0 else 0.0
    if s_res == 0:
        return 1.0
    ss_res, ss_tot = np.sum(w * (res / s_res) ** 2), np.sum(w * (tot / s_tot) ** 2)
    log_ratio = 2 * (np.log(s_res) - np.log(s_tot)) + np.log(ss_res) - np.log(ss_tot)
    if log_ratio > np.log(np.finfo(np.float64).max):
        return -np.finfo(np.float64).max
    return float(1.0 - np.exp(log_ratio))


class FiniteR2Mixin:
    """``score``: the R^2 of ``RegressorMixin``, finite for every finite input (see
    :func:`finite_r2_score`). Listed before ``RegressorMixin`` in the bases of a regressor."""

    def score(self, X, y, sample_weight=None):
        """R^2 of ``self.predict(X)`` against y (scikit-learn's, finite for extreme values)."""
        return finite_r2_score(y, self.predict(X), sample_weight=sample_weight)


def target_means(Y, sample_weight):
    """The column means of Y (n, k) weighted by ``sample_weight`` (None: ones), float64 (k,); numpy
    or dask arrays: a regressor's intercept (``fit_intercept``). Zeros where the weights sum to
    zero or a mean is not finite (targets near the float range: the fits refuse those, or fit them
    as they are)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if is_dask(Y):
            import dask

            w = sample_weight
            if w is not None:
                w = w / w.max()  # the weights' scale does not change the mean; their sum stays finite
            sums, total = dask.compute(Y.sum(axis=0) if w is None else (Y * w[:, None]).sum(axis=0),
                                       Y.shape[0] if w is None else w.sum())
        else:
            w = np.ones(Y.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
            w = w / w.max() if w.size and w.max() > 0 else w
            sums, total = w @ Y, w.sum()
        means = np.asarray(sums, dtype=np.float64) / float(total) if total > 0 else np.zeros(Y.shape[1])
    return means if np.all(np.isfinite(means)) else np.zeros(Y.shape[1])
