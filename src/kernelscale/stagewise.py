"""Stagewise regression on seeded feature blocks (ALGORITHMS.md section 5, Algorithm 3).

For t = 1..T: GEN a block of p features from (seed, t), fit what the current predictions miss
on that block, update the predictions. Blocks are never stored: block t is regenerated from
``(seed_, t)`` by :mod:`kernelscale.ops.feature_blocks` and applied to rows by
:class:`kernelscale.ops.features.FeatureOperator`, so a fitted model holds the seed, the PCA map
and the block weights only, and prediction regenerates every block.

Generators (``generator``), on the data after PCA to ``pca_components`` dimensions (appendix
A.2.1; the PCA mean and components are plain arrays):

- ``"rff"``: Gaussian random Fourier features sqrt(2/p) cos(z w + b) of the Gaussian kernel
  exp(-|z - z'|^2 / (2 sigma^2)), sigma by the median trick on the reduced data;
- ``"sample"``: p of the (reduced) features, drawn without replacement from ``block_rng(seed,
  t)`` (all of them when p >= d);
- ``"logit"``: random logits sigmoid(z w + b - pi) with the frequencies w ~ N(0, I / sigma^2)
  and phases b ~ U[0, 2 pi] of the same Gaussian Fourier block, i.e. thresholds uniform in
  [-pi, pi] on random directions scaled by the median distance;
- ``"polynomial"``: TensorSketch features of (gamma <z, z'> + 1)^degree with gamma = 1 / sigma^2
  (:class:`kernelscale.features.PolynomialRandomFeatures` blocks).

Updates (``update``), each with an unpenalised intercept and a ridge ``alpha``:

- ``"linear"``: ridge fit of the residual y - y_hat on the block (the paper's linear stages);
- ``"calibrated"``: the same fit on the block AND the current predictions (the paper's "simplest"
  calibration: "we only use the previous predictions as features in our new batch");
- ``"softmax"`` (classifier only; the multinomial logistic loss, named as the loss is everywhere
  in the library): ``inner_iter`` steps of Algorithm 1 with the softmax link on
  the block, the current scores as a fixed offset (accelerated steps, the default of
  :func:`kernelscale.least_squares.generalized_least_squares`; monotone like the plain ones).

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
from sklearn.utils.validation import check_is_fitted, validate_data

from ._classifier import check_class_memory, encode_classes, one_hot
from ._monitor import IterationMonitor
from ._validation import as_float_array, check_finite_result, check_same_features
from ._estimator import INPUT_ATTRIBUTES, commit_fit, fit_weights, validate_fit_data, warm_start_iterations
from ._glm import factor_spd, normalized_weights, softmax, softmax_loss
from ._params import MEMORY_CONSTRAINT
from .kernels import GaussianKernel, LinearKernel, PolynomialKernel
from .least_squares import generalized_least_squares, gls_fixed_bytes
from .ops.feature_blocks import FeatureBlockSpec, seed_from
from .ops.features import FeatureOperator
from .ops.memory import parse_memory, plan_rows
from .simplex import project_simplex

__all__ = [
    "StagewiseClassifier",
    "StagewiseRegressor",
    "generator_spec",
    "stagewise_regression",
    "pca_fit",
    "pca_transform",
    "GENERATORS",
]

logger = logging.getLogger(__name__)

GENERATORS = ("rff", "sample", "logit", "polynomial")
#: the feature method (kernelscale.ops.feature_blocks) of every generator
_METHODS = {"rff": "cos", "sample": "sample", "logit": "logit", "polynomial": "tensorsketch"}

StagewiseResult = namedtuple("StagewiseResult", "coef intercept calibration objective_history n_stages")


# ----------------------------------------------------------------------------------------------
# PCA (arrays only, so that the fitted map persists without pickling an sklearn object)


def pca_fit(X, n_components, sample_weight=None, max_memory=None):
    """Weighted PCA: the mean (d,) and the top ``n_components`` eigenvectors (d, n_components) of
    the weighted covariance, both float64, from row blocks under ``max_memory``.

    Components are ordered by decreasing variance; each is signed so that its entry of largest
    magnitude is positive (deterministic output).
    """
    X = as_float_array(X, "X")
    n, d = X.shape
    if isinstance(n_components, bool) or not isinstance(n_components, Integral) or n_components < 1:
        raise ValueError(f"pca_components must be an integer >= 1, got {n_components!r}.")
    if n_components > d:
        raise ValueError(
            f"pca_components={n_components} is larger than the number of features d={d}; pass "
            f"pca_components <= {d}, or pca_components=None to use the features as they are."
        )
    w = normalized_weights(sample_weight, n)
    budget, fixed = parse_memory(max_memory), 4 * 8 * d * d
    plan_rows(
        n, d * X.dtype.itemsize, fixed, budget, f"the PCA ({d} x {d} covariance)",
        "increase max_memory, or pass pca_components=None",
    )
    op = FeatureOperator(None, budget - fixed)
    mean = op.weighted_mean(X, w)
    values, vectors = linalg.eigh(op.weighted_gram(X, w, center=mean), check_finite=False)
    components = vectors[:, np.argsort(values)[::-1][:n_components]]
    top = np.argmax(np.abs(components), axis=0)
    components *= np.where(components[top, np.arange(n_components)] < 0, -1.0, 1.0)
    return mean, np.ascontiguousarray(components)


def pca_transform(X, mean, components, max_memory=None):
    """(X - mean) @ components in X's dtype, centring one row block at a time."""
    X = as_float_array(X, "X")
    check_same_features(X, mean.shape[0])
    dtype = X.dtype
    mean, components = mean.astype(dtype, copy=False), components.astype(dtype, copy=False)
    out = np.empty((X.shape[0], components.shape[1]), dtype=dtype)
    chunk = plan_rows(
        X.shape[0], X.shape[1] * dtype.itemsize, out.nbytes, parse_memory(max_memory), "the PCA projection",
        "increase max_memory",
    )
    for s in range(0, X.shape[0], chunk):
        np.matmul(X[s : s + chunk] - mean, components, out=out[s : s + chunk])
    return out


# ----------------------------------------------------------------------------------------------
# GEN


def generator_spec(generator, n_features, block_size, seed, kernel=None, dtype=np.float64):
    """GEN of Algorithm 3 as a seeded feature map: block t of features of data with
    ``n_features`` columns is regenerated from ``(seed, t)`` only.

    ``generator``: "rff", "sample", "logit" or "polynomial" (module docstring); ``kernel``: the
    resolved GaussianKernel (rff, logit) or PolynomialKernel (polynomial); unused for "sample".
    """
    if generator not in GENERATORS:
        raise ValueError(f"generator must be one of {GENERATORS}, got {generator!r}.")
    kernel = LinearKernel() if generator == "sample" else kernel
    return FeatureBlockSpec(kernel, n_features, block_size, seed, dtype, _METHODS[generator])


# ----------------------------------------------------------------------------------------------
# Algorithm 3


def _fit_stage_ls(op, F, P, Y, w, uniform, alpha, calibrated):
    """Ridge fit of R = Y - P on [F, P] ("calibrated") or F ("linear"), intercept unpenalised.

    Centres F in place. Returns (A (p, k), B (k, k) or None, c (k,)) in float64 for the
    uncentred model y_hat + F A + y_hat B + c, and the update itself (n, k) in F's dtype.
    """
    dtype = F.dtype
    R = Y - P
    f_mean = op.weighted_mean(F, w)
    F -= f_mean.astype(dtype)
    blocks = [F]
    if calibrated:
        p_mean = op.weighted_mean(P, w)
        blocks.append(P - p_mean.astype(dtype))
    sizes = [b.shape[1] for b in blocks]
    total = sum(sizes)
    gram = np.empty((total, total))
    cross = np.empty((total, Y.shape[1]))
    edges = np.cumsum([0] + sizes)
    for i, Bi in enumerate(blocks):
        cross[edges[i] : edges[i + 1]] = op.weighted_gram(Bi, w, R, uniform=uniform)
        for j in range(i, len(blocks)):
            g = op.weighted_gram(Bi, w, None if j == i else blocks[j], uniform=uniform)
            gram[edges[i] : edges[i + 1], edges[j] : edges[j + 1]] = g
            gram[edges[j] : edges[j + 1], edges[i] : edges[i + 1]] = g.T
    gram[np.diag_indices_from(gram)] += alpha
    factor = factor_spd(gram, "the Gram matrix of a feature block", "use alpha > 0 (e.g. 1e-6)")
    sol = linalg.cho_solve(factor, cross, check_finite=False)
    c0 = w @ R.astype(np.float64)
    A = sol[: sizes[0]]
    A_d = A.astype(dtype)
    update = F @ A_d
    c = c0 - f_mean @ A_d.astype(np.float64)
    B = None
    if calibrated:
        B = sol[sizes[0] :]
        B_d = B.astype(dtype)
        update += blocks[1] @ B_d
        c -= p_mean @ B_d.astype(np.float64)
    update += c0.astype(dtype)
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


def _objective(P, Y, w, update):
    if update == "softmax":
        return softmax_loss(P, Y, w)[1]
    diff = Y - P
    return float(w @ np.einsum("ij,ij->i", diff, diff).astype(np.float64))


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
    feature map ``spec`` (a FeatureBlockSpec, e.g. :func:`generator_spec`).

    ``init`` (k,) is the stage-0 prediction (logistic: scores); ``stages`` = (coef, intercept,
    calibration) of an earlier fit on the same data, replayed before continuing (warm start).
    Fits stages until ``n_stages`` in total or until ``monitor.update`` returns True.

    Returns
    -------
    StagewiseResult(coef (T, p, k), intercept (T, k), calibration (T, k, k) or None, in Z's
    dtype; objective_history (T + 1,): the weighted squared residual ("linear",
    "calibrated") or softmax loss ("softmax") after every stage; n_stages = T).
    """
    Z = as_float_array(Z, "Z")
    n = Z.shape[0]
    dtype = Z.dtype
    Y = np.asarray(Y, dtype=dtype)
    k = Y.shape[1]
    uniform = sample_weight is None
    w = normalized_weights(sample_weight, n)
    budget = parse_memory(max_memory)
    need = stagewise_fit_bytes(n, k, spec, update, dtype.itemsize)
    plan_rows(
        1, 1, need, budget,
        f"a stagewise fit ({n} x {spec.n_features_out} features per block)",
        "reduce block_size, pass float32 data (halves it), or increase max_memory",
    )
    op = FeatureOperator(spec.astype(dtype), budget)
    P = np.empty((n, k), dtype=dtype)
    P[:] = np.zeros(k) if init is None else np.asarray(init, dtype=dtype)
    coefs, intercepts, calibrations = [], [], []
    if stages is not None:
        for t in range(stages[0].shape[0]):
            cal = None if stages[2] is None else stages[2][t]
            P = _replay_stage(op, Z, t, P, stages[0][t], stages[1][t], cal)
            coefs.append(stages[0][t])
            intercepts.append(stages[1][t])
            calibrations.append(cal)
    history = [_objective(P, Y, w, update)]
    monitor = monitor if monitor is not None else IterationMonitor()
    for t in range(len(coefs), n_stages):
        F = op.transform(Z, [t])
        if update == "softmax":
            result = generalized_least_squares(
                F, Y, link="softmax", alpha=alpha, max_iter=inner_iter, tol=0.0,
                sample_weight=w, offset=P, max_memory=max_memory,
            )
            A, B, c = result.coef.T.astype(dtype), None, result.intercept.astype(dtype)
            step = F @ A
            step += c
            P += step
        else:
            A, B, c, step = _fit_stage_ls(op, F, P, Y, w, uniform, alpha, update == "calibrated")
            A, c = A.astype(dtype), c.astype(dtype)
            B = None if B is None else B.astype(dtype)
            P += step
        del F
        coefs.append(A)
        intercepts.append(c)
        calibrations.append(B)
        history.append(_objective(P, Y, w, update))
        if monitor.update(objective=history[-1], stage=t):
            break
    p, T = spec.n_features_out, len(coefs)
    coef = np.asarray(coefs, dtype=dtype).reshape(T, p, k)
    intercept = np.asarray(intercepts, dtype=dtype).reshape(T, k)
    calibration = np.asarray(calibrations, dtype=dtype).reshape(T, k, k) if update == "calibrated" else None
    return StagewiseResult(coef, intercept, calibration, np.asarray(history), T)


# ----------------------------------------------------------------------------------------------
# estimators


class _StagewiseBase(BaseEstimator):
    """Fit / replay logic shared by StagewiseClassifier and StagewiseRegressor."""

    _parameter_constraints: dict = {
        "generator": [StrOptions(set(GENERATORS))],
        "block_size": [Interval(Integral, 1, None, closed="left")],
        "n_stages": [Interval(Integral, 1, None, closed="left")],
        "pca_components": [Interval(Integral, 1, None, closed="left"), None],
        "sigma": [StrOptions({"median"}), Interval(Real, 0, None, closed="neither")],
        "degree": [Interval(Integral, 1, None, closed="left")],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "warm_start": ["boolean"],
        "max_memory": MEMORY_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callback": [callable, None],
    }

    def _resolve_generator(self, Z, sample_weight, rng):
        if self.generator == "sample":
            return None
        sigma = GaussianKernel(self.sigma).resolve(Z, rng, sample_weight).sigma
        if self.generator == "polynomial":
            return PolynomialKernel(degree=self.degree, gamma=1.0 / sigma**2, coef0=1.0)
        return GaussianKernel(sigma=float(sigma))

    def _spec(self, dtype):
        d = self.n_features_in_ if self.pca_components_ is None else self.pca_components_.shape[1]
        return generator_spec(self.generator, d, self.block_size, self.seed_, self.kernel_, dtype)

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
            warm_start_iterations(self.n_stages, self.n_iter_, name="n_stages")
            stages = (self.coef_, self.intercept_, self.calibration_)
            history = list(self.objective_history_[:-1])
            seed, kernel, init = self.seed_, self.kernel_, self.init_
            pca_mean, pca_components = self.pca_mean_, self.pca_components_
        else:
            if self.pca_components is not None and self.pca_components > d:
                raise ValueError(
                    f"pca_components={self.pca_components} is larger than the number of features "
                    f"of X (n_features={d}); pass pca_components <= {d}, or pca_components=None "
                    f"to skip the PCA."
                )
            stages, history = None, []
            rng = check_random_state(self.random_state)
            seed = seed_from(self.random_state if isinstance(self.random_state, Integral) else rng)
            pca_mean = pca_components = None
            if self.pca_components is not None:
                mean, components = pca_fit(X, self.pca_components, sw, self.max_memory)
                pca_mean, pca_components = mean.astype(dtype), components.astype(dtype)
        Z = X if pca_components is None else pca_transform(X, pca_mean, pca_components, self.max_memory)
        if stages is None:
            kernel = self._resolve_generator(Z, sw, rng)
            init = np.asarray(init_fn(Y, normalized_weights(sw, n)), dtype=dtype)
        spec = generator_spec(self.generator, Z.shape[1], self.block_size, seed, kernel, dtype)
        if self.generator == "sample" and self.block_size >= Z.shape[1]:
            logger.info(
                "generator='sample' with block_size=%d >= %d features: every stage refits all "
                "features, so stages after the first change (almost) nothing", self.block_size, Z.shape[1],
            )
        with IterationMonitor(self.verbose, self.callback, total=self.n_stages, desc="stagewise") as monitor:
            result = stagewise_regression(
                Z, Y, spec, update=update, n_stages=self.n_stages,
                inner_iter=getattr(self, "inner_iter", 50), alpha=self.alpha, init=init,
                sample_weight=sw, stages=stages, max_memory=self.max_memory, monitor=monitor,
            )
        fitted.update(seed_=seed, kernel_=kernel, init_=init, pca_mean_=pca_mean, pca_components_=pca_components,
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
    generator : {"rff", "sample", "logit", "polynomial"}, default="rff"
        GEN of Algorithm 3 (see :mod:`kernelscale.stagewise`).
    block_size : int >= 1, default=1024
        p, the features per block ("sample" uses min(p, d)).
    n_stages : int >= 1, default=8
        T, the number of blocks (with ``warm_start``, in total).
    pca_components : int or None, default=50
        Reduce X to this many principal components first (appendix A.2.1); must be <= the
        number of features; None uses X as it is (no centring).
    sigma : "median" or float > 0, default="median"
        Bandwidth of "rff" and "logit" (Gaussian exp(-|z - z'|^2 / (2 sigma^2)); "median": median
        pairwise distance of the reduced data) and gamma = 1 / sigma^2 of "polynomial".
    degree : int >= 1, default=2
        Degree of the "polynomial" features.
    alpha : float >= 0, default=1e-6
        Ridge of every block fit, added to the block's second-moment matrix. Absolute, unlike
        the relative ``alpha="auto"`` of the least-squares classifiers: the generated blocks
        have a fixed scale (e.g. sqrt(2/p) cos for "rff", mean variance about 1 / p), so for
        them 1e-6 is a fixed fraction of the feature variance; for "sample" it is relative to
        X's scale.
    warm_start : bool, default=False
        Keep the fitted stages (same data) and add stages until ``n_stages`` in total.
    max_memory : int, str or None
        Budget for one block of features (n x p), its Gram matrix and the n x k work arrays,
        checked before a fit allocates; predictions apply blocks to row chunks within it.
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
    kernel_ : GaussianKernel, PolynomialKernel or None
        The resolved generator kernel (None for "sample").
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
        self, generator="rff", *, block_size=1024, n_stages=8, update="linear", inner_iter=50,
        pca_components=50, sigma="median", degree=2, alpha=1e-6, class_weight=None,
        warm_start=False, max_memory=None, random_state=None, verbose=0, callback=None,
    ):
        self.generator = generator
        self.block_size = block_size
        self.n_stages = n_stages
        self.update = update
        self.inner_iter = inner_iter
        self.pca_components = pca_components
        self.sigma = sigma
        self.degree = degree
        self.alpha = alpha
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.max_memory = max_memory
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on X (n, d) and class labels y (n,), with optional sample weights."""
        previous_d = getattr(self, "n_features_in_", None)
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32])
        classes, codes = encode_classes(y)
        if self.warm_start and hasattr(self, "classes_") and not np.array_equal(classes, self.classes_):
            raise ValueError("warm_start=True but the classes changed; set warm_start=False.")
        # the n x k arrays of a stage (stagewise_fit_bytes, which stagewise_regression checks with the rest)
        check_class_memory(7 * X.dtype.itemsize * X.shape[0] * classes.size, self.max_memory, classes.size,
                           "the one-hot targets and a stage's other n x k arrays")
        Y = one_hot(codes, classes.size, X.dtype)
        sw = fit_weights(sample_weight, self.class_weight, X, codes, classes)

        def init(Y, w):
            prior = w @ Y.astype(np.float64)
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


class StagewiseRegressor(RegressorMixin, _StagewiseBase):
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
        self, generator="rff", *, block_size=1024, n_stages=8, update="linear", pca_components=50,
        sigma="median", degree=2, alpha=1e-6, warm_start=False, max_memory=None,
        random_state=None, verbose=0, callback=None,
    ):
        self.generator = generator
        self.block_size = block_size
        self.n_stages = n_stages
        self.update = update
        self.pca_components = pca_components
        self.sigma = sigma
        self.degree = degree
        self.alpha = alpha
        self.warm_start = warm_start
        self.max_memory = max_memory
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
        previous_d = getattr(self, "n_features_in_", None)
        X, y, fitted = validate_fit_data(self, X, y, dtype=[np.float64, np.float32], multi_output=True,
                                         y_numeric=True)
        sw = fit_weights(sample_weight, None, X)
        fitted["single_output_"] = y.ndim == 1
        Y = np.asarray(y, dtype=X.dtype).reshape(X.shape[0], -1)
        return self._fit_stages(X, Y, sw, self.update, lambda Y, w: w @ Y.astype(np.float64), previous_d, fitted)

    def _format(self, P):
        return P[:, 0] if self.single_output_ else P

    def predict(self, X):
        return self._format(self._outputs(X))

    def staged_predict(self, X):
        """Yield ``predict(X)`` after each stage (blocks regenerated once each)."""
        for P in self._staged_outputs(X):
            yield self._format(P)
