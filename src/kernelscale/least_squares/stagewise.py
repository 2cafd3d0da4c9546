"""Stagewise regression on seeded feature blocks (ALGORITHMS.md section 5, Algorithm 3).

For t = 1..T: GEN a block of p features from (seed, t), fit what the current predictions miss
on that block, update the predictions. Blocks are never stored: block t is regenerated from
``(seed_, t)`` by :mod:`kernelscale.ops.feature_blocks` and applied to rows by
:class:`kernelscale.ops.features.FeatureOperator`, so a fitted model holds the seed, the PCA map
and the block weights only, and prediction regenerates every block.

GEN (``kernel`` and ``feature_method``), on the data after PCA to ``pca_components`` dimensions
(appendix A.2.1, :func:`kernelscale.preprocessing.pca_fit`; by default to 50 dimensions when X
has more than 50 features, none otherwise). ``kernel`` is a kernelscale kernel or its name
(``sigma="median"`` is resolved on the reduced data); ``feature_method`` picks the feature form
(:mod:`kernelscale.ops.feature_blocks`), None the kernel's default:

- Gaussian (default ``"cos"``): random Fourier features sqrt(2/p) cos(z w + b) of
  exp(-|z - z'|^2 / (2 sigma^2)), sigma by the median trick on the reduced data by default;
  ``"logit"``: random logits sigmoid(z w + b - pi) with the frequencies w ~ N(0, I / sigma^2) and
  phases b ~ U[0, 2 pi] of the same Fourier block, i.e. thresholds uniform in [-pi, pi] on random
  directions scaled by sigma; ``"cossin"`` also works (as for Laplacian and Matern kernels);
- Polynomial (default ``"tensorsketch"``): TensorSketch features of (gamma <z, z'> + coef0)^degree
  (``"maclaurin"`` also works);
- Linear (default ``"sample"``): p of the (reduced) features, drawn without replacement from
  ``block_rng(seed, t)`` (all of them when p >= d); ``"gaussian"`` projections also work.

These replace the former ``generator``/``sigma``/``degree``: "rff" with ``sigma`` is
``kernel=GaussianKernel(sigma)`` (the default ``kernel="gaussian"`` is sigma="median"), "logit"
is ``feature_method="logit"``, "sample" is ``kernel="linear"``. The former "polynomial" used
PolynomialKernel(degree, gamma=1 / sigma^2, coef0=1) with sigma from the median trick; now the
PolynomialKernel is given as it is (its gamma is not taken from the data).

Updates (``update``), each with an unpenalised intercept and a ridge ``alpha``:

- ``"linear"``: ridge fit of the residual y - y_hat on the block (the paper's linear stages);
- ``"calibrated"``: the same fit on the block AND the current predictions (the paper's "simplest"
  calibration: "we only use the previous predictions as features in our new batch");
- ``"softmax"`` (classifier only; the multinomial logistic loss, named as the loss is everywhere
  in the library): ``inner_iter`` steps of Algorithm 1 with the softmax link on
  the block, the current scores as a fixed offset (accelerated steps, the default of
  :func:`kernelscale.least_squares.estimators.generalized_least_squares`; monotone like the plain ones).

"No change" is always feasible and the ridge shrinks towards it, so the training residual
sum_i w_i |y_i - y_hat_i|^2 never increases with "linear" and "calibrated", and the training
logistic loss never increases with "softmax" (each stage starts at zero weights and Algorithm 1
is monotone); the squared residual of "softmax" stages is not guaranteed.
"""

from __future__ import annotations

import logging
from collections import namedtuple
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..base.classifier import check_class_memory, encode_classes, one_hot
from ..base.monitor import IterationMonitor
from ..base.validation import as_float_array, check_finite_result, validate_data
from ..base.estimator import (
    INPUT_ATTRIBUTES, FiniteR2Mixin, commit_fit, fit_weights, resolve_kernel, validate_fit_data,
    warm_start_iterations,
)
from ..linalg import factor_spd
from ..losses import softmax, softmax_loss
from ..base.device import DeviceMixin
from ..base.params import DEVICE_CONSTRAINT, KERNEL_CONSTRAINT, MEMORY_CONSTRAINT
from ..kernels import make_kernel
from .estimators import _squared_error, generalized_least_squares, gls_fixed_bytes
from ..ops.feature_blocks import METHODS, FeatureBlockSpec, kernel_family, seed_from
from ..ops.features import FeatureOperator
from ..ops.lapack_threads import one_lapack_thread
from ..ops.memory import parse_memory, plan_rows
from ..ops.rows import executor, is_dask, row_weights, total, weighted_sum
from ..preprocessing import pca_fit, pca_transform
from ..simplex import project_simplex

__all__ = [
    "StagewiseClassifier",
    "StagewiseRegressor",
    "feature_spec",
    "stagewise_regression",
]

logger = logging.getLogger(__name__)

#: the feature method of each kernel family for feature_method=None (the linear kernel's column
#: subsets are the paper's "sample" generator)
DEFAULT_METHOD = {"fourier": "cos", "polynomial": "tensorsketch", "linear": "sample"}
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


def _auto_block_size(n):
    """block_size="auto" (estimator docstring): min(1024, max(n // 12, min(16, n // 4))), >= 1.

    1024 from 12288 samples on (so at every n >= 12288, and in the papers' benchmarks, as
    before), n // 12 from 192 to 12287 samples, 16 from 64 to 191, n // 4 below 64; continuous
    and non-decreasing in n."""
    return int(max(1, min(AUTO_BLOCK_MAX, max(n // AUTO_BLOCK_RATIO, min(AUTO_BLOCK_MIN, n // 4)))))

StagewiseResult = namedtuple("StagewiseResult", "coef intercept calibration objective_history n_stages")


# ----------------------------------------------------------------------------------------------
# GEN


def feature_method_of(kernel, feature_method=None):
    """The feature method of ``kernel`` (an object or a name): ``feature_method``, or the kernel
    family's default (:data:`DEFAULT_METHOD`) when None; a ValueError naming the argument when the
    kernel has no random features or the method is not one of its family."""
    kernel = make_kernel(kernel, "kernel")
    try:
        family = kernel_family(kernel)
    except ValueError as err:
        raise ValueError(f"kernel={kernel!r} cannot be used by the stagewise method: {err}") from None
    if feature_method is None:
        return DEFAULT_METHOD[family]
    if METHODS.get(feature_method, (None,))[0] != family:
        available = tuple(k for k, v in METHODS.items() if v[0] == family)
        raise ValueError(
            f"feature_method={feature_method!r} is not available for {type(kernel).__name__}; pass "
            f"one of {available}, or feature_method=None for its default {DEFAULT_METHOD[family]!r}."
        )
    return feature_method


def feature_spec(kernel, n_features, block_size, seed, feature_method=None, dtype=np.float64):
    """GEN of Algorithm 3 as a seeded feature map: block t of features of data with
    ``n_features`` columns is regenerated from ``(seed, t)`` only.

    ``kernel``: a resolved kernel (no sigma="median") or a name; ``feature_method``: see the
    module docstring (None: the kernel's default, e.g. "sample" for the linear kernel).
    """
    method = feature_method_of(kernel, feature_method)
    return FeatureBlockSpec(make_kernel(kernel, "kernel"), n_features, block_size, seed, dtype, method)


# ----------------------------------------------------------------------------------------------
# Algorithm 3


def _difference(A, B):
    return A - B


def _centered(F, center, in_place):
    if not in_place:
        return F - center
    F -= center
    return F


def _stage_update(F, Pc, A, B, c0):
    """F A (+ (P - pbar) B) + c0: a fitted stage's change of the predictions, per row."""
    update = F @ A
    if B is not None:
        update += Pc @ B
    update += c0
    return update


def _fit_stage_ls(op, F, P, Y, w, uniform, alpha, calibrated):
    """Ridge fit of R = Y - P on [F, P] ("calibrated") or F ("linear"), intercept unpenalised.

    ``op`` is a row executor (:mod:`kernelscale.ops.rows`). Centres F (in place on host arrays).
    Returns (A (p, k), B (k, k) or None, c (k,)) in float64 for the uncentred model
    y_hat + F A + y_hat B + c, and the update itself (n, k) in F's dtype.
    """
    dtype = F.dtype
    (n, p), k = F.shape, Y.shape[1]
    R = op.map(_difference, Y, P, width=k, dtype=dtype)
    f_mean = op.weighted_mean(F, w)
    F = op.map(_centered, F, center=f_mean.astype(dtype), in_place=not op.distributed, width=p, dtype=dtype,
               persist=False)
    blocks = [F]
    if calibrated:
        p_mean = op.weighted_mean(P, w)
        blocks.append(op.map(_centered, P, center=p_mean.astype(dtype), in_place=False, width=k, dtype=dtype))
    sizes = [b.shape[1] for b in blocks]
    total = sum(sizes)
    gram = np.empty((total, total))
    cross = np.empty((total, Y.shape[1]))
    edges = np.cumsum([0] + sizes)
    for i, Bi in enumerate(blocks):
        cross[edges[i] : edges[i + 1]], *grams = op.weighted_grams(
            Bi, w, [R] + [None if j == i else blocks[j] for j in range(i, len(blocks))], uniform=uniform)
        for j, g in zip(range(i, len(blocks)), grams):
            gram[edges[i] : edges[i + 1], edges[j] : edges[j + 1]] = g
            gram[edges[j] : edges[j + 1], edges[i] : edges[i + 1]] = g.T
    gram[np.diag_indices_from(gram)] += alpha
    factor = factor_spd(gram, "the Gram matrix of a feature block", "use alpha > 0 (e.g. 1e-6)")
    with one_lapack_thread(gram.shape[0]):
        sol = linalg.cho_solve(factor, cross, check_finite=False)
    c0 = op.sum(weighted_sum, R, w)
    A = sol[: sizes[0]]
    A_d = A.astype(dtype)
    c = c0 - f_mean @ A_d.astype(np.float64)
    B = B_d = None
    if calibrated:
        B = sol[sizes[0] :]
        B_d = B.astype(dtype)
        c -= p_mean @ B_d.astype(np.float64)
    update = op.map(_stage_update, F, blocks[1] if calibrated else None, A=A_d, B=B_d, c0=c0.astype(dtype),
                    width=k, dtype=dtype)
    return A, B, c, update


def _replay_stage(op, Z, t, P, coef, intercept, calibration):
    """y_hat + F_t A + y_hat B + c for the fitted stage t (B absent for linear/logistic stages),
    F_t = block t of the features of Z."""
    out = op.scores(Z, coef[None], [t])
    if calibration is not None:
        out += P @ calibration
    out += intercept
    out += P
    return out


def _replay_chunk(Z, P, op, t, coef, intercept, calibration):
    return _replay_stage(op, Z, t, P, coef, intercept, calibration)


def _constant_rows(Z, value):
    P = np.empty((Z.shape[0], value.shape[0]), dtype=Z.dtype)
    P[:] = value
    return P


def _features(Z, op, t):
    """Block t of the features of the rows Z, regenerated from (seed, t) where the task runs."""
    return op.transform(Z, [t])


def _apply_step(F, P, A, c, in_place):
    step = F @ A
    step += c
    return _add(P, step, in_place)


def _add(P, step, in_place):
    """P + step; in place on host arrays (a dask task leaves its input chunks as they are)."""
    if not in_place:
        return P + step
    P += step
    return P


def _objective(P, Y, w, update):
    if update == "softmax":
        return softmax_loss(P, Y, w)[1]
    return _squared_error(Y, P, w)


def stagewise_fit_bytes(n, k, spec, update, itemsize):
    """Bytes Algorithm 3 holds while fitting one stage (the block of the map ``spec``, its Gram
    and the n x k arrays), not counting the data itself."""
    p = spec.n_features_out
    q = p + (k if update == "calibrated" else 0)
    need = itemsize * n * p * (spec.workspace + 1) + 3 * 8 * q * q + itemsize * n * k * 7
    if update == "softmax":
        need += gls_fixed_bytes(n, p, k, itemsize, with_offset=True)
    return need


def stagewise_regression(
    Z,
    Y,
    spec,
    *,
    update="linear",
    n_stages=8,
    inner_iter=50,
    alpha=1e-6,
    init=None,
    sample_weight=None,
    stages=None,
    max_memory=None,
    monitor=None,
):
    """Algorithm 3 on data Z (n, d) (already PCA-reduced) and targets Y (n, k), GEN the
    feature map ``spec`` (a FeatureBlockSpec, e.g. :func:`feature_spec`).

    ``init`` (k,) is the stage-0 prediction (logistic: scores); ``stages`` = (coef, intercept,
    calibration) of an earlier fit on the same data, replayed before continuing (warm start).
    Fits stages until ``n_stages`` in total or until ``monitor.update`` returns True.

    Returns
    -------
    StagewiseResult(coef (T, p, k), intercept (T, k), calibration (T, k, k) or None, in Z's
    dtype; objective_history (T + 1,): the weighted squared residual ("linear",
    "calibrated") or softmax loss ("softmax") after every stage; n_stages = T).
    """
    distributed = is_dask(Z)
    if not distributed:
        Z = as_float_array(Z, "Z")
        Y = np.asarray(Y, dtype=Z.dtype)
    n = Z.shape[0]
    dtype = Z.dtype
    k = Y.shape[1]
    uniform = sample_weight is None
    budget = parse_memory(max_memory)
    rows_n = max(Z.chunks[0]) if distributed else n  # rows one task holds at once
    need = stagewise_fit_bytes(rows_n, k, spec, update, dtype.itemsize)
    plan_rows(
        1, 1, need, budget,
        f"a stagewise fit ({rows_n} x {spec.n_features_out} features per block)",
        "reduce block_size, pass float32 data (halves it), or increase max_memory",
    )
    rows = executor(budget, Z)
    w = row_weights(rows, Z, sample_weight, n)
    op = FeatureOperator(spec.astype(dtype), budget)
    p = spec.n_features_out
    P = rows.map(_constant_rows, Z, value=np.zeros(k) if init is None else np.asarray(init, dtype=dtype),
                 dtype=dtype, width=k)
    coefs, intercepts, calibrations = [], [], []
    if stages is not None:
        for t in range(stages[0].shape[0]):
            cal = None if stages[2] is None else stages[2][t]
            P = rows.map(_replay_chunk, Z, P, op=op, t=t, coef=stages[0][t], intercept=stages[1][t],
                         calibration=cal, width=k, dtype=dtype)
            coefs.append(stages[0][t])
            intercepts.append(stages[1][t])
            calibrations.append(cal)
    history = [rows.sum(_objective, P, Y, w, update=update)]
    monitor = monitor if monitor is not None else IterationMonitor()
    for t in range(len(coefs), n_stages):
        # over dask chunks, F (n x p) stays lazy for the least-squares updates: each of their
        # passes regenerates its chunk of F from Z, so a worker holds no n x p array (softmax's
        # inner iterations read F many times: kept)
        F = rows.map(_features, Z, op=op, t=t, width=p, dtype=dtype, persist=update == "softmax")
        if update == "softmax":
            result = generalized_least_squares(
                F, Y, link="softmax", alpha=alpha, max_iter=inner_iter, tol=0.0,
                sample_weight=w, offset=P, max_memory=max_memory,
            )
            A, B, c = result.coef.T.astype(dtype), None, result.intercept.astype(dtype)
            P = rows.map(_apply_step, F, P, A=A, c=c, in_place=not distributed, width=k, dtype=dtype)
        else:
            A, B, c, step = _fit_stage_ls(rows, F, P, Y, w, uniform, alpha, update == "calibrated")
            A, c = A.astype(dtype), c.astype(dtype)
            B = None if B is None else B.astype(dtype)
            P = rows.map(_add, P, step, in_place=not distributed, width=k, dtype=dtype)
        del F
        coefs.append(A)
        intercepts.append(c)
        calibrations.append(B)
        history.append(rows.sum(_objective, P, Y, w, update=update))
        if monitor.update(objective=history[-1], stage=t):
            break
    T = len(coefs)
    coef = np.asarray(coefs, dtype=dtype).reshape(T, p, k)
    intercept = np.asarray(intercepts, dtype=dtype).reshape(T, k)
    calibration = np.asarray(calibrations, dtype=dtype).reshape(T, k, k) if update == "calibrated" else None
    return StagewiseResult(coef, intercept, calibration, np.asarray(history), T)


# ----------------------------------------------------------------------------------------------
# estimators


class _StagewiseBase(DeviceMixin, BaseEstimator):
    """Fit / replay logic shared by StagewiseClassifier and StagewiseRegressor."""

    _parameter_constraints: dict = {
        "kernel": KERNEL_CONSTRAINT,
        "feature_method": [StrOptions(set(METHODS)), None],
        "block_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "n_stages": [Interval(Integral, 1, None, closed="left")],
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

    def _dask_reduces_X(self, d):
        """Whether a fit on d features reads X only for the PCA and keeps its projection
        (:func:`kernelscale.dask.fit._keep`)."""
        if self.warm_start and hasattr(self, "coef_"):
            return self.pca_components_ is not None
        return self._n_pca(d) is not None

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

    def _reduce(self, X):
        if self.pca_components_ is None:
            return X
        return pca_transform(X, self.pca_mean_, self.pca_components_, self.max_memory)

    def _fit_stages(self, X, Y, sw, update, init_fn, previous_d, fitted):
        """Fit (or, with warm_start, continue) Algorithm 3 and commit ``fitted`` plus the fitted
        state in one step, once the stages are fitted: a failed or interrupted fit leaves an
        earlier fit (or an unfitted estimator) intact."""
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
            warm_start_iterations(self.n_stages, self.n_iter_, name="n_stages")
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
            block_size = _auto_block_size(n) if self.block_size == "auto" else self.block_size
            if n_pca is not None:
                mean, components = pca_fit(X, n_pca, sw, self.max_memory)  # over row chunks for dask X
                pca_mean, pca_components = mean.astype(dtype), components.astype(dtype)
        rows = executor(parse_memory(self.max_memory), X)
        Z = X if pca_components is None else rows.map(
            pca_transform, X, mean=pca_mean, components=pca_components, max_memory=self.max_memory,
            width=pca_components.shape[1], dtype=dtype)
        if stages is None:
            kernel = resolve_kernel(self.kernel, Z, rng, sw)
            init = np.asarray(init_fn(rows.sum(weighted_sum, Y, row_weights(rows, X, sw, n))), dtype=dtype)
        spec = FeatureBlockSpec(kernel, Z.shape[1], block_size, seed, dtype, method)
        if method == "sample" and block_size >= Z.shape[1]:
            logger.info(
                "feature_method='sample' with block_size=%d >= %d features: every stage refits all "
                "features, so stages after the first change (almost) nothing", block_size, Z.shape[1],
            )
        # sum(w) = n without weights; integer weights act as repetitions, as everywhere else
        alpha = _AUTO_RIDGE / (n if sw is None else total(rows, sw)) if self.alpha == "auto" else float(self.alpha)
        with IterationMonitor(self.verbose, self.callback, total=self.n_stages, desc="stagewise") as monitor:
            result = stagewise_regression(
                Z, Y, spec, update=update, n_stages=self.n_stages,
                inner_iter=getattr(self, "inner_iter", 50), alpha=alpha, init=init,
                sample_weight=sw, stages=stages, max_memory=self.max_memory, monitor=monitor,
            )
        fitted.update(seed_=seed, kernel_=kernel, feature_method_=method, init_=init, block_size_=block_size,
                      alpha_=alpha,
                      pca_mean_=pca_mean, pca_components_=pca_components,
                      update_=update, coef_=result.coef, intercept_=result.intercept,
                      calibration_=result.calibration, n_iter_=result.n_stages,
                      objective_history_=np.asarray(history + list(result.objective_history)))
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def _staged_outputs(self, X):
        """Yield the raw outputs (n, k) after every stage, regenerating each block once and
        applying it to row blocks sized by ``max_memory``."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        dtype = X.dtype
        Z = self._reduce(X)
        op = FeatureOperator(self._spec(dtype), parse_memory(self.max_memory))
        P = np.empty((X.shape[0], self.coef_.shape[2]), dtype=dtype)
        P[:] = self.init_.astype(dtype)
        for t in range(self.n_iter_):
            coef, intercept = self.coef_[t].astype(dtype), self.intercept_[t].astype(dtype)
            cal = None if self.calibration_ is None else self.calibration_[t].astype(dtype)
            P = _replay_stage(op, Z, t, P, coef, intercept, cal)
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
        linear; see :mod:`kernelscale.least_squares.stagewise`); ``sigma="median"`` is resolved on the
        PCA-reduced data into ``kernel_``. GaussianKernel(sigma) is the former generator="rff",
        "linear" the former "sample"; for the former "polynomial" pass the PolynomialKernel.
    block_size : int >= 1 or "auto", default="auto"
        p, the features per block ("sample" uses min(p, d)). "auto", for n samples (the rows of
        X, not the sum of the weights): min(1024, max(n // 12, min(16, n // 4))), at least 1,
        i.e. 1024 (the paper's larger block) from 12288 samples on, n // 12 from 192 to 12287,
        16 from 64 to 191 and n // 4 below 64 (continuous and non-decreasing in n). With the
        default 8 stages that is 2n/3 features in all below 12288 samples: a block of p >= n
        features interpolates the residual at once (diabetes, 331 samples, 1024 features: test
        RMSE 2.6x kernel ridge's), and a stage costs O(n p^2), so the former n // 4 below 4096
        samples and 1024 above (8000 features for 4000 samples, 2n) fitted 4000 x 10 rows in
        about 1.5 s where the other estimators take 0.04-0.08 s. n // 12 cuts that about 9x at
        n = 4000 while the test error stays within 1.5x of exact kernel ridge / SVC on the
        robustness benchmark's sets (the tightest, 30 classes on 4000 samples, is 1.26x with
        333 features per block against 1.45x with 250); the floor of 16 keeps the smallest
        sets (iris, wine) from blocks of a few features. From 12288 samples on "auto" is 1024
        as before, so the papers' benchmarks (30000 samples and more) are unchanged. Kept in
        ``block_size_``.
    n_stages : int >= 1, default=8
        T, the number of blocks (with ``warm_start``, in total).
    feature_method : str or None, default=None
        The feature form (:mod:`kernelscale.ops.feature_blocks`); None is the kernel's default:
        "cos" (Gaussian and other shift-invariant kernels), "tensorsketch" (polynomial), "sample"
        (linear: column subsets). "logit" gives random logits from a shift-invariant kernel's
        Fourier draws (the former generator="logit").
    pca_components : int, "auto" or None, default="auto"
        Reduce X to this many principal components first (appendix A.2.1); an int must be <= the
        number of features; "auto" is 50 when X has more than 50 features and no PCA otherwise;
        None uses X as it is (no centring).
    alpha : float >= 0 or "auto", default="auto"
        Ridge of every block fit, added to the block's weighted second-moment matrix (weights
        summing to 1), so alpha = lambda / n is the ridge lambda of sum_i w_i |r_i - f_i|^2 with
        weights averaging 1. "auto": 0.1 / n (n the sum of the sample weights, the number of
        samples without them; kept in ``alpha_``): on 60000 MNIST digits it is 1.7e-6, close to the former default 1e-6
        (1 / n there: 2.26% test error against 2.09%), while on a few hundred samples it keeps
        the stages from fitting noise (breast_cancer: 4.9% test error against 6.3% with 1e-6,
        both with the "auto" block size). The generated blocks have a fixed scale (e.g.
        sqrt(2/p) cos for "cos"), so alpha is not relative to X's scale, except for "sample".
    warm_start : bool, default=False
        Keep the fitted stages (same data) and add stages until ``n_stages`` in total.
    max_memory : int, str or None
        Budget for one block of features (n x p), its Gram matrix and the n x k work arrays,
        checked before a fit allocates; predictions apply blocks to row chunks within it.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (README, "GPUs"): None is numpy on the host
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
        self, kernel="gaussian", *, block_size="auto", n_stages=8, update="linear", inner_iter=50,
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
        check_class_memory(7 * X.dtype.itemsize * X.shape[0] * classes.size, self.max_memory, classes.size,
                           "the one-hot targets and a stage's other n x k arrays")
        Y = one_hot(codes, classes.size, X.dtype)
        sw = fit_weights(sample_weight, self.class_weight, X, codes, classes)
        return self._fit_prepared(X, Y, classes, sw, fitted)

    def _fit_prepared(self, X, Y, classes, sw, fitted):
        """The fit on validated X, one-hot targets Y (n, k) and weights sw: numpy arrays, or dask
        arrays with the same row chunks (:mod:`kernelscale.dask.fit`), fitted over them."""
        previous_d = getattr(self, "n_features_in_", None)
        if self.warm_start and hasattr(self, "classes_") and not np.array_equal(classes, self.classes_):
            raise ValueError("warm_start=True but the classes changed; set warm_start=False.")

        def init(prior):  # prior = sum_i w_i y_i, weights summing to 1
            return np.log(np.maximum(prior, 1e-12)) if self.update == "softmax" else prior

        fitted["classes_"] = classes
        return self._fit_stages(X, Y, sw, self.update, init, previous_d, fitted)

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
        self, kernel="gaussian", *, block_size="auto", n_stages=8, update="linear", feature_method=None,
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

    def _fit_prepared(self, X, y, classes, sw, fitted):
        """The fit on validated X, targets y (n,) or (n, k) in X's dtype and weights sw: numpy
        arrays, or dask arrays with the same row chunks (:mod:`kernelscale.dask.fit`)."""
        previous_d = getattr(self, "n_features_in_", None)
        fitted["single_output_"] = y.ndim == 1
        Y = y.reshape(X.shape[0], -1)
        return self._fit_stages(X, Y, sw, self.update, lambda prior: prior, previous_d, fitted)

    def _format(self, P):
        return P[:, 0] if self.single_output_ else P

    def predict(self, X):
        return self._format(self._outputs(X))

    def staged_predict(self, X):
        """Yield ``predict(X)`` after each stage (blocks regenerated once each)."""
        for P in self._staged_outputs(X):
            yield self._format(P)
