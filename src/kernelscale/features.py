"""Explicit feature maps as scikit-learn transformers: random Fourier features, polynomial random
features and Nystrom features; and :class:`SeededFeatureMap`, the public view of seeded blocks.

The random-feature transformers are block 0 of a seeded map: their parameters are drawn by
:mod:`kernelscale.ops.feature_blocks` (block t from ``(seed, t)``; the feature families and their
normalisation are described there) and applied to rows by
:class:`kernelscale.ops.features.FeatureOperator`.
"""

from __future__ import annotations

import logging
import math
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Hidden, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .base.estimator import INPUT_ATTRIBUTES, commit_fit, validate_fit_data
from .base.boundary import BoundaryMixin
from .base.monitor import IterationMonitor
from .base.params import DEVICE_CONSTRAINT, KERNEL_CONSTRAINT, MEMORY_CONSTRAINT
from .base.validation import (
    FLOAT_DTYPES, as_float_array, check_finite_result, check_positive, check_same_features, validate_data,
)
from .ops.kernel import KernelOperator, kernel_matrix
from .kernels import PolynomialKernel, make_kernel
from .ops.feature_blocks import FeatureBlockSpec, seed_from
from .ops.feature_blocks import float_dtype as _float_dtype
from .ops.backend import NUMPY
from .ops.features import FeatureOperator
from .ops.memory import available_memory, format_bytes, parse_memory, release_freed

__all__ = [
    "SeededFeatureMap",
    "RandomFourierFeatures",
    "PolynomialRandomFeatures",
    "NystromFeatures",
]

logger = logging.getLogger(__name__)


class SeededFeatureMap:
    """A random-feature map in blocks regenerated on demand from ``(seed, t)``: the public view
    of :class:`kernelscale.ops.features.FeatureOperator`.

    ``block(X, t)`` returns the ``block_size`` features of block t; each block alone estimates
    the kernel without bias, so (1/T) sum_{t<T} block(x, t) . block(z, t) -> k(x, z) as T grows,
    and ``blocks(X, ts)`` (the concatenation divided by sqrt(len(ts))) is a map with
    len(ts) * block_size features. This is the feature generator of the doubly stochastic
    (docs/algorithms.md section 2.2) and stagewise (section 5.2) methods.

    The map stores the kernel, the sizes and the integer ``seed`` only, never the random weights:
    its memory does not grow with the number of blocks used.

    Parameters
    ----------
    kernel : Kernel or str
        A resolved kernel (a number as sigma, or ``kernel.resolve(X)`` first).
    block_size : int
        Feature columns per block.
    random_state : int, RandomState or None
        An int >= 0 is the seed itself; otherwise one integer seed is drawn from it here.
    n_features_in : int or None
        Input dimension; None takes it from the first X seen, then checks it.
    method : str or None
        See :mod:`kernelscale.ops.feature_blocks`; None is the kernel's default.
    max_memory : int, str or None
        Budget for the features of a row chunk (see :mod:`kernelscale.ops.memory`).
    """

    def __init__(self, kernel, block_size, random_state=None, *, n_features_in=None, method=None, max_memory=None):
        kernel = make_kernel(kernel)
        self.seed = seed_from(random_state)
        if n_features_in is not None:
            n_features_in = int(check_positive(n_features_in, "n_features_in", integer=True))
        # validate everything once, with a placeholder dimension when it is not yet known
        spec = FeatureBlockSpec(kernel, n_features_in or 1, block_size, self.seed, np.float64, method)
        self.kernel = spec.kernel
        self.block_size = spec.block_size
        self.method = spec.method
        self.n_features_in = n_features_in
        self.budget = parse_memory(max_memory)

    def __repr__(self):
        return (
            f"SeededFeatureMap(kernel={self.kernel!r}, block_size={self.block_size}, "
            f"seed={self.seed}, method={self.method!r})"
        )

    def spec(self, dtype=np.float64):
        """The FeatureBlockSpec of this map's blocks in ``dtype``."""
        if self.n_features_in is None:
            raise ValueError("n_features_in is not known yet: pass it, or call block(X, t) first.")
        return FeatureBlockSpec(self.kernel, self.n_features_in, self.block_size, self.seed, dtype, self.method)

    def params(self, t, dtype=np.float64):
        """The regenerated parameters of block t."""
        return self.spec(_float_dtype(dtype)).block(t)

    def _operator(self, X):
        X = as_float_array(X, "X")
        if self.n_features_in is None:
            self.n_features_in = X.shape[1]
        check_same_features(X, self.n_features_in)
        return X, FeatureOperator(self.spec(X.dtype), self.budget)

    def block(self, X, t):
        """Features (n, block_size) of block t, in X's dtype (float32 stays float32)."""
        X, op = self._operator(X)
        return op.transform(X, [t])

    def blocks(self, X, ts):
        """[block(X, t) for t in ts] side by side, divided by sqrt(len(ts))."""
        ts = list(ts)
        if not ts:
            raise ValueError("ts must name at least one block.")
        X, op = self._operator(X)
        out = op.transform(X, ts)
        out *= math.sqrt(1.0 / len(ts))
        return out


# ----------------------------------------------------------------------------------------------
# scikit-learn transformers


def _resolve_kernel(kernel, X, rng):
    """A fitted copy of ``kernel`` with ``sigma="median"`` fixed from X."""
    kernel = clone(make_kernel(kernel, "kernel"))
    if not kernel.is_resolved and X.shape[0] < 2:
        raise ValueError(
            f"sigma='median' needs at least 2 samples to pick a bandwidth, got n_samples="
            f"{X.shape[0]}; pass more data or a number as sigma."
        )
    return kernel.resolve(X, rng)


class _SeededTransformer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BoundaryMixin, BaseEstimator):
    """Shared fit/transform of transformers that are block 0 of a seeded map.

    ``transform`` equals ``SeededFeatureMap(kernel_, n_components, seed_, method=...).block(X, 0)``.
    """

    def _kernel(self, X, rng):
        raise NotImplementedError

    def _method(self):
        return self.method

    def _dtype(self, X):
        return X.dtype

    def _block_attributes(self, block):
        """Fitted attributes read from the block, besides ``block_``."""
        return {}

    def fit(self, X, y=None):
        """Resolve the kernel and draw the random weights; ``y`` is ignored. The fitted
        attributes are set together at the end (a failed refit keeps the previous ones)."""
        self._validate_params()
        parse_memory(self.max_memory)  # refused here, not at the first transform
        X, _, fitted = validate_fit_data(self, X, None, dtype=FLOAT_DTYPES)
        rng = check_random_state(self.random_state)
        kernel = self._kernel(X, rng)
        seed = seed_from(self.random_state if isinstance(self.random_state, Integral) else rng)
        self._check_map_memory(X.shape[1], getattr(kernel, "degree", 1))
        block = self._spec(self._dtype(X), kernel, X.shape[1], seed).block(0)
        fitted.update(kernel_=kernel, seed_=seed, block_=block, **self._block_attributes(block))
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def _check_map_memory(self, n_features, degree):
        """Refuse, naming the hyperparameters, a random map larger than the memory available now
        (an upper bound of its arrays: n_components x (n_features + 2) x degree float64 values)."""
        need = 8 * self.n_components * (n_features + 2) * max(1, degree)
        if need > available_memory():
            what = f"n_components={self.n_components}" + (f" and degree={degree}" if degree != 1 else "")
            raise ValueError(
                f"{what} need a random map of about {format_bytes(need)} for {n_features} features, more than the "
                f"{format_bytes(available_memory())} of memory available; lower n_components"
                f"{' or degree' if degree != 1 else ''}."
            )

    def _spec(self, dtype, kernel=None, n_features=None, seed=None):
        """The spec of the fitted map, or of the one a fit builds from ``kernel``, ``n_features`` and ``seed``."""
        if kernel is None:
            kernel, n_features, seed = self.kernel_, self.n_features_in_, self.seed_
        return FeatureBlockSpec(kernel, n_features, self.n_components, seed, dtype, self._method())

    def transform(self, X):
        """Return the (n_samples, n_components) random features of X."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=FLOAT_DTYPES, reset=False)
        dtype = self._dtype(X)
        block = self.block_ if self.block_.dtype == dtype else self.block_.astype(dtype)
        operator = FeatureOperator(self._spec(dtype), parse_memory(self.max_memory), blocks={0: block})
        # written block by block into the result, which max_memory does not count: the work beside
        # it (a row chunk's projection, the map's parameters) stays within max_memory
        features = np.empty((X.shape[0], operator.spec.n_features_out), dtype=dtype)
        def fill(rows, out):
            if operator.backend is NUMPY:
                operator.transform(rows, [0], out=out, count_out=False)
            else:  # computed on the device, copied into the host result
                out[...] = operator.transform(rows, [0])

        _in_row_slices(X, fill, self.verbose, type(self).__name__, features)
        return check_finite_result(features, "features")

    @property
    def _n_features_out(self):
        return self.block_.n_features_out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


#: the parameters every random-feature transformer documents alike
_TRANSFORM_PARAMS = """
    max_memory : int, str or None, default=None
        Bytes ``transform`` may use beside its output (rows are cut to fit; docs/memory.md).
    verbose : int, default=0
        1 shows a progress bar over the rows ``transform`` computes.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (docs/gpus.md): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.
"""


class RandomFourierFeatures(_SeededTransformer):
    __doc__ = """Random Fourier features of a shift-invariant kernel (Rahimi & Recht 2007).

    Phi(x) . Phi(z) is an unbiased estimate of k(x, z) with error O(1 / sqrt(n_components)).
    Frequencies come from the kernel's spectral density (Gaussian: normal; Laplacian: Cauchy;
    Matern: Student-t), see the module docstring.

    Parameters
    ----------
    kernel : Kernel or str, default="gaussian"
        A shift-invariant kernel (Gaussian, Laplacian, Matern); ``sigma="median"`` is resolved
        in ``fit`` with ``random_state``. For the polynomial kernel use PolynomialRandomFeatures.
    n_components : int, default=1024
        Number of features D (even for ``method="cossin"``).
    method : {"cos", "cossin"}, default="cos"
        "cos": sqrt(2/D) cos(X w + b); "cossin": sqrt(2/D) [cos(X w), sin(X w)], D/2 frequencies.
    random_state : int, RandomState or None
        An int is the seed of the block; ``transform`` equals
        ``SeededFeatureMap(kernel_, n_components, seed_, method=method).block(X, 0)``.
    dtype : None, np.float32 or np.float64
        Computation dtype; None follows the input (float32 in, float32 out).
""" + _TRANSFORM_PARAMS.lstrip("\n") + """
    Attributes
    ----------
    kernel_, seed_, n_features_in_, block_ (FourierBlock), random_weights_ (d, m),
    random_offset_ (m,) or None.
    """

    _parameter_constraints: dict = {
        "kernel": KERNEL_CONSTRAINT,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "method": [StrOptions({"cos", "cossin"})],
        "random_state": ["random_state"],
        "dtype": "no_validation",  # checked in fit by _float_dtype
        "max_memory": MEMORY_CONSTRAINT,
        "verbose": ["verbose"],
        "device": DEVICE_CONSTRAINT,
    }

    def __init__(self, kernel="gaussian", *, n_components=1024, method="cos", random_state=None, dtype=None,
                 max_memory=None, verbose=0, device=None):
        self.kernel = kernel
        self.n_components = n_components
        self.method = method
        self.random_state = random_state
        self.dtype = dtype
        self.max_memory = max_memory
        self.verbose = verbose
        self.device = device

    def _kernel(self, X, rng):
        kernel = make_kernel(self.kernel, "kernel")
        if not kernel.shift_invariant:
            raise ValueError(
                f"RandomFourierFeatures needs a shift-invariant kernel (Gaussian, Laplacian, "
                f"Matern), got {type(kernel).__name__}; use PolynomialRandomFeatures for the "
                f"polynomial kernel."
            )
        if self.method == "cossin" and self.n_components % 2:
            raise ValueError(
                f"method='cossin' needs an even n_components (cos and sin pairs), got "
                f"n_components={self.n_components}."
            )
        return _resolve_kernel(kernel, X, rng)

    def _dtype(self, X):
        return X.dtype if self.dtype is None else _float_dtype(self.dtype, "dtype")

    def _block_attributes(self, block):
        return {"random_weights_": block.weights, "random_offset_": block.offset}


class PolynomialRandomFeatures(_SeededTransformer):
    __doc__ = """Random features of the polynomial kernel (gamma <x, z> + coef0)^degree.

    Phi(x) . Phi(z) is an unbiased estimate of ``kernel`` with error O(1 / sqrt(n_components)).

    Parameters
    ----------
    kernel : PolynomialKernel, "polynomial" or None, default=None
        The kernel; None is ``PolynomialKernel(degree=2, gamma=1.0, coef0=1.0)`` (coef0 >= 0:
        the random maps need non-negative coefficients).
    n_components : int, default=1024
    method : {"tensorsketch", "maclaurin"}, default="tensorsketch"
        TensorSketch (Pham & Pagh 2013): O(n (d degree + degree D log D)); random Maclaurin
        (Kar & Karnick 2012): degree GEMMs, O(n d D degree), usually higher variance.
    random_state : int, RandomState or None
""" + _TRANSFORM_PARAMS.lstrip("\n") + """    degree, gamma, coef0 : deprecated
        The kernel's parameters before ``kernel=``; pass ``kernel=PolynomialKernel(degree, gamma,
        coef0)`` instead (they still work, with a FutureWarning, and are removed in 0.3).

    Attributes
    ----------
    kernel_ (PolynomialKernel), seed_, n_features_in_, block_ (TensorSketchBlock or
    MaclaurinBlock).
    """

    _parameter_constraints: dict = {
        "kernel": [PolynomialKernel, StrOptions({"polynomial", "poly"}), None, Interval(Integral, 1, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "method": [StrOptions({"tensorsketch", "maclaurin"})],
        "random_state": ["random_state"],
        "max_memory": MEMORY_CONSTRAINT,
        "verbose": ["verbose"],
        "device": DEVICE_CONSTRAINT,
        "degree": [Interval(Integral, 1, None, closed="left"), Hidden(StrOptions({"deprecated"}))],
        "gamma": [Interval(Real, 0, None, closed="neither"), Hidden(StrOptions({"deprecated"}))],
        "coef0": [Interval(Real, 0, None, closed="left"), Hidden(StrOptions({"deprecated"}))],
    }

    def __init__(self, kernel=None, *, n_components=1024, method="tensorsketch", random_state=None,
                 max_memory=None, verbose=0, device=None, degree="deprecated", gamma="deprecated",
                 coef0="deprecated"):
        self.kernel = kernel
        self.n_components = n_components
        self.method = method
        self.random_state = random_state
        self.max_memory = max_memory
        self.verbose = verbose
        self.device = device
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0

    def _kernel_for_name(self, value):
        """``kernel=None`` stands for PolynomialKernel(degree=2, gamma=1.0, coef0=1.0) (so
        ``set_params(kernel__degree=3)`` starts from it); a name as for every estimator."""
        if value is None:
            return PolynomialKernel(degree=2, gamma=1.0, coef0=1.0)
        return super()._kernel_for_name(value)

    def _kernel(self, X, rng):
        old = {k: getattr(self, k) for k in ("degree", "gamma", "coef0") if getattr(self, k) != "deprecated"}
        kernel = self.kernel
        if isinstance(kernel, Integral):  # the former first positional parameter, degree
            old.setdefault("degree", int(kernel))
            kernel = None
        if old:
            if kernel is not None:
                raise ValueError(f"pass either kernel or the deprecated {', '.join(old)}, not both.")
            warnings.warn(
                f"PolynomialRandomFeatures({', '.join(f'{k}={v!r}' for k, v in old.items())}) is deprecated "
                f"and removed in 0.3; pass kernel=PolynomialKernel(...) instead.", FutureWarning, stacklevel=4)
            return PolynomialKernel(**{"degree": 2, "gamma": 1.0, "coef0": 1.0, **old})
        if kernel is None:
            return self._kernel_for_name(None)
        kernel = make_kernel(kernel, "kernel")
        if kernel.coef0 < 0:
            raise ValueError(f"PolynomialRandomFeatures needs coef0 >= 0 (non-negative coefficients), got "
                             f"coef0={kernel.coef0}.")
        return kernel


def _in_row_slices(X, compute, verbose, name, out=None):
    """``compute(X)``; with ``verbose``, over 20 slices of rows with a progress bar (the features
    of a row do not depend on the others, so the result is the same). With ``out`` (the result,
    preallocated) ``compute(rows, out_rows)`` writes each slice in place."""
    if out is not None:
        if not verbose or X.shape[0] < 2:
            compute(X, out)
            return out
        bounds = np.linspace(0, X.shape[0], min(20, X.shape[0]) + 1).astype(int)
        with IterationMonitor(verbose, total=bounds.size - 1, desc=f"{name}.transform", show=()) as monitor:
            for start, stop in zip(bounds[:-1], bounds[1:]):
                compute(X[start:stop], out[start:stop])
                monitor.update(rows=int(stop))
        return out
    if not verbose or X.shape[0] < 2:
        return compute(X)
    bounds = np.linspace(0, X.shape[0], min(20, X.shape[0]) + 1).astype(int)
    out = None  # filled slice by slice: the output once, plus one slice's result
    with IterationMonitor(verbose, total=bounds.size - 1, desc=f"{name}.transform", show=()) as monitor:
        for start, stop in zip(bounds[:-1], bounds[1:]):
            part = compute(X[start:stop])
            if out is None:
                out = np.empty((X.shape[0],) + part.shape[1:], dtype=part.dtype)
            out[start:stop] = part
            monitor.update(rows=int(stop))
    return out


class NystromFeatures(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BoundaryMixin, BaseEstimator):
    """Nystrom features K(X, L) K_LL^{+1/2} on uniformly sampled landmarks L.

    Landmarks are ``check_random_state(random_state).permutation(n)[:n_components]`` — the
    same rows scikit-learn's ``Nystroem`` picks for the same ``random_state``. K_LL^{+1/2} is the
    symmetric pseudo-inverse square root from ``eigh``, dropping eigenvalues at or below
    ``m * eps * max eigenvalue`` (eps of the fit dtype, m landmarks), so Phi(x) . Phi(z) =
    K(x, L) K_LL^+ K(L, z). Kernel blocks go through kernelscale.ops under ``max_memory``.

    Parameters
    ----------
    kernel : Kernel or str, default="gaussian"
        ``sigma="median"`` is resolved in ``fit`` (after the landmarks are drawn).
    n_components : int, default=256
        Number of landmarks m; set to n_samples (with a warning) when larger.
    random_state : int, RandomState or None
    max_memory : int, str or None
        Budget for kernel blocks (see kernelscale.ops.memory).
    verbose : int, default=0
        1 shows a progress bar over the rows ``transform`` computes.
    device : None, "auto", "cpu", "cuda" or "cuda:N", default=None
        Where kernel and feature blocks are computed (docs/gpus.md): None is numpy on the host
        (a torch tensor as input selects its device); the others need torch.

    Attributes
    ----------
    kernel_, n_features_in_, components_ (m, d) landmarks, component_indices_ (m,),
    normalization_ (m, m) float64, n_components_ (number of landmarks used).
    """

    #: its first call in a process loads LAPACK's eigensolver: warmed up as it is (base/warmup.py)
    _warm_params = {}

    _parameter_constraints: dict = {
        "kernel": KERNEL_CONSTRAINT,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "max_memory": MEMORY_CONSTRAINT,
        "verbose": ["verbose"],
        "device": DEVICE_CONSTRAINT,
    }

    def __init__(self, kernel="gaussian", *, n_components=256, random_state=None, max_memory=None, verbose=0,
                 device=None):
        self.kernel = kernel
        self.n_components = n_components
        self.random_state = random_state
        self.max_memory = max_memory
        self.verbose = verbose
        self.device = device

    def fit(self, X, y=None):
        """Pick the landmarks and compute K_LL^{+1/2}; ``y`` is ignored."""
        self._validate_params()
        X, _, fitted = validate_fit_data(self, X, None, dtype=FLOAT_DTYPES)
        parse_memory(self.max_memory)
        kernel = make_kernel(self.kernel, "kernel")
        rng = check_random_state(self.random_state)
        n = X.shape[0]
        m = int(self.n_components)  # True passes the Integral constraint: an int for the shapes below
        if m > n:
            warnings.warn(
                f"n_components={m} > n_samples={n}: using all {n} samples as landmarks.",
                UserWarning,
                stacklevel=2,
            )
            m = n
        indices = rng.permutation(n)[:m]
        components = X[indices]
        kernel = _resolve_kernel(kernel, X, rng)
        K = kernel_matrix(kernel, components.astype(np.float64), max_memory=self.max_memory)
        check_finite_result(K, "kernel values of the landmarks")
        try:
            eigvals, eigvecs = np.linalg.eigh(K)
        except np.linalg.LinAlgError as err:  # "Eigenvalues did not converge"
            raise ValueError(
                f"the eigendecomposition of the landmarks' kernel matrix failed ({err}): X holds values too large "
                f"or too small for the kernel's arithmetic; rescale X (e.g. sklearn.preprocessing.StandardScaler)."
            ) from err
        cutoff = m * np.finfo(X.dtype).eps * max(eigvals[-1], 0.0)
        keep = eigvals > cutoff
        if not keep.all():
            logger.debug("NystromFeatures: dropped %d of %d eigenvalues <= %g", m - keep.sum(), m, cutoff)
        U = eigvecs[:, keep]
        fitted.update(component_indices_=indices, components_=components, kernel_=kernel,
                      normalization_=(U / np.sqrt(eigvals[keep])) @ U.T, n_components_=m)
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def transform(self, X):
        """Return the (n_samples, n_components_) Nystrom features of X, in X's dtype."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=FLOAT_DTYPES, reset=False)
        # K(X, components) @ normalization_, in X's dtype, block by block within max_memory
        release_freed()  # what the fit freed, before the blocks take the budget
        centres = KernelOperator(self.kernel_, self.components_, parse_memory(self.max_memory), dtype=X.dtype)
        normalization = self.normalization_.astype(X.dtype, copy=False)
        out = _in_row_slices(X, lambda rows: centres.predict(rows, normalization), self.verbose, "NystromFeatures")
        return check_finite_result(out, "features")

    @property
    def _n_features_out(self):
        return self.n_components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
