"""Explicit feature maps: random Fourier features, polynomial random features, Nystrom, and
seeded feature blocks.

Seeded blocks
-------------
A random-feature map is cut into blocks of ``block_size`` columns. All random draws of block t
come from ONE generator, :func:`block_rng` ``(seed, t)`` =
``np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(t,)))``, which is the t-th child
of ``np.random.SeedSequence(seed).spawn(...)``. So block t is regenerated bit for bit from
``(seed, t)`` with no other state, and different t give statistically independent blocks. This
is what the doubly stochastic method (ALGORITHMS.md §2, "random features omega_i FROM SEED i")
and the stagewise method (§5, "GEN a block of p features") share: they store the seed and the
block coefficients only, never the random weights.

Draws are always made in float64 and then cast to the block's dtype, so a float32 block is the
float64 block rounded. The order of the draws inside a block is part of the format: changing it
changes every regenerated block.

Normalisation: every block is on its own an unbiased estimate of the kernel,
E[phi_t(x) . phi_t(z)] = k(x, z), so (1/T) sum_t phi_t(x) . phi_t(z) is the map with
T * block_size features (``SeededFeatureMap.blocks`` returns that concatenation / sqrt(T)).

Feature families (``method``):

- shift-invariant kernels, by their spectral densities (Rahimi & Recht 2007):
  Gaussian w ~ N(0, I / sigma^2); Laplacian (L1) w_j ~ Cauchy(0, 1 / sigma) independently;
  Matern(sigma, nu) w = z sqrt(2 nu / chi2_{2nu}) / sigma, z ~ N(0, I) (multivariate Student-t
  with 2 nu degrees of freedom). ``"cos"``: sqrt(2/D) cos(X w + b), b ~ U[0, 2 pi];
  ``"cossin"``: sqrt(2/D) [cos(X w), sin(X w)] with D/2 frequencies (D even), the form of the
  doubly stochastic authors' code.
- polynomial (gamma <x, z> + coef0)^p = <x', z'>^p with x' = [sqrt(gamma) x, sqrt(coef0)]
  (coef0 >= 0): ``"tensorsketch"`` (Pham & Pagh 2013: p independent count sketches of x',
  multiplied in the Fourier domain) or ``"maclaurin"`` (Kar & Karnick 2012 for a homogeneous
  polynomial: prod_j <r_j, x'> / sqrt(D) with Rademacher r_j).
- linear <x, z>: ``"gaussian"`` projections X W / sqrt(D), W ~ N(0, I).
"""

from __future__ import annotations

import logging
import math
import numbers
import warnings
from collections import OrderedDict
from dataclasses import dataclass, replace
from numbers import Integral, Real

import numpy as np
import scipy.fft
import scipy.sparse
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ._validation import FLOAT_DTYPES, as_float_array, check_positive, check_same_features
from .ops.kernel import iter_kernel_blocks, kernel_matrix
from .ops.memory import parse_memory
from .kernels import (
    KERNEL_NAMES,
    GaussianKernel,
    Kernel,
    LaplacianKernel,
    LinearKernel,
    MaternKernel,
    PolynomialKernel,
    make_kernel,
)

__all__ = [
    "block_rng",
    "FeatureBlockSpec",
    "FourierBlock",
    "TensorSketchBlock",
    "MaclaurinBlock",
    "LinearBlock",
    "sample_block",
    "transform_block",
    "SeededFeatureMap",
    "RandomFourierFeatures",
    "PolynomialRandomFeatures",
    "NystromFeatures",
]

logger = logging.getLogger(__name__)

#: methods per kernel family; the first one is the default
METHODS = {
    "fourier": ("cos", "cossin"),
    "polynomial": ("tensorsketch", "maclaurin"),
    "linear": ("gaussian",),
}


# ----------------------------------------------------------------------------------------------
# seeds


def _check_index(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}.")
    return int(value)


def block_rng(seed, t):
    """The generator of block t: ``default_rng(SeedSequence(seed, spawn_key=(t,)))``.

    Equal to the t-th child of ``np.random.SeedSequence(seed).spawn(t + 1)``; it depends on
    ``(seed, t)`` only. Use it for the feature draws of block t and nothing else (derive other
    randomness, e.g. mini-batches, from a different seed).
    """
    seed = _check_index(seed, "seed")
    t = _check_index(t, "t")
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(t,)))


def _seed_from(random_state):
    """An integer seed: ``random_state`` itself when it is an int, else one draw from it."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return _check_index(random_state, "random_state")
    rng = check_random_state(random_state)
    return int(rng.randint(0, np.iinfo(np.int64).max, dtype=np.int64))


def _float_dtype(dtype, name="dtype"):
    try:
        dtype = np.dtype(dtype)
    except TypeError as err:
        raise ValueError(f"{name} must be np.float32 or np.float64, got {dtype!r}.") from err
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"{name} must be np.float32 or np.float64, got {dtype}.")
    return dtype


def _family(kernel):
    """The feature family of a kernel: "fourier", "polynomial" or "linear"."""
    if isinstance(kernel, (GaussianKernel, LaplacianKernel, MaternKernel)):
        return "fourier"
    if isinstance(kernel, PolynomialKernel):
        return "polynomial"
    if isinstance(kernel, LinearKernel):
        return "linear"
    raise ValueError(
        f"no random features are known for {type(kernel).__name__}; supported kernels are "
        f"GaussianKernel, LaplacianKernel, MaternKernel, PolynomialKernel and LinearKernel."
    )


# ----------------------------------------------------------------------------------------------
# the parameters of one block


def _cast(a, dtype):
    return None if a is None else np.ascontiguousarray(a, dtype=dtype)


@dataclass(frozen=True, eq=False)
class FourierBlock:
    """Random Fourier features of a shift-invariant kernel (Rahimi & Recht 2007).

    ``weights`` (d, m) are the frequencies; ``offset`` (m,) the phases b for the "cos" form, or
    None for the "cossin" form (then the block has 2m columns).
    """

    weights: np.ndarray
    offset: np.ndarray | None

    @property
    def dtype(self):
        return self.weights.dtype

    @property
    def n_features_in(self):
        return self.weights.shape[0]

    @property
    def n_features_out(self):
        m = self.weights.shape[1]
        return m if self.offset is not None else 2 * m

    def astype(self, dtype):
        return FourierBlock(_cast(self.weights, dtype), _cast(self.offset, dtype))

    def _transform(self, X):
        # one GEMM, then the trigonometric pass in place
        proj = np.matmul(X, self.weights)
        m = self.weights.shape[1]
        if self.offset is not None:
            proj += self.offset
            np.cos(proj, out=proj)
            proj *= math.sqrt(2.0 / m)
            return proj
        out = np.empty((X.shape[0], 2 * m), dtype=proj.dtype)
        np.cos(proj, out=out[:, :m])
        np.sin(proj, out=out[:, m:])
        out *= math.sqrt(1.0 / m)
        return out


def _append_constant(X, gamma, coef0):
    """x' = [sqrt(gamma) x, sqrt(coef0)], so that <x', z'> = gamma <x, z> + coef0."""
    out = np.empty((X.shape[0], X.shape[1] + 1), dtype=X.dtype)
    np.multiply(X, math.sqrt(gamma), out=out[:, :-1])
    out[:, -1] = math.sqrt(coef0)
    return out


@dataclass(frozen=True, eq=False)
class TensorSketchBlock:
    """TensorSketch of (gamma <x, z> + coef0)^degree (Pham & Pagh 2013).

    ``indices`` and ``signs`` (degree, d + 1) are the hash functions h_j: [d+1] -> [D] and
    s_j: [d+1] -> {-1, +1} of the degree independent count sketches of x'. The features are
    IFFT(prod_j FFT(CS_j(x'))), whose inner product is an unbiased estimate of <x', z'>^degree.
    """

    indices: np.ndarray
    signs: np.ndarray
    n_components: int
    gamma: float
    coef0: float

    @property
    def dtype(self):
        return self.signs.dtype

    @property
    def n_features_in(self):
        return self.indices.shape[1] - 1

    @property
    def n_features_out(self):
        return self.n_components

    def astype(self, dtype):
        return replace(self, signs=_cast(self.signs, dtype))

    def _transform(self, X):
        Xa = _append_constant(X, self.gamma, self.coef0)
        rows = np.arange(Xa.shape[1])
        D = self.n_components
        product = None
        for h, s in zip(self.indices, self.signs):
            count_sketch = scipy.sparse.csr_array((s, (rows, h)), shape=(Xa.shape[1], D))
            spectrum = scipy.fft.rfft(Xa @ count_sketch, axis=1)
            if product is None:
                product = spectrum
            else:
                product *= spectrum
        return np.ascontiguousarray(scipy.fft.irfft(product, n=D, axis=1))


@dataclass(frozen=True, eq=False)
class MaclaurinBlock:
    """Random Maclaurin features of <x', z'>^degree (Kar & Karnick 2012, homogeneous case).

    ``weights`` (degree, d + 1, D) are Rademacher vectors r_j; features prod_j <r_j, x'> / sqrt(D).
    """

    weights: np.ndarray
    gamma: float
    coef0: float

    @property
    def dtype(self):
        return self.weights.dtype

    @property
    def n_features_in(self):
        return self.weights.shape[1] - 1

    @property
    def n_features_out(self):
        return self.weights.shape[2]

    def astype(self, dtype):
        return replace(self, weights=_cast(self.weights, dtype))

    def _transform(self, X):
        Xa = _append_constant(X, self.gamma, self.coef0)
        out = np.matmul(Xa, self.weights[0])
        for r in self.weights[1:]:
            out *= np.matmul(Xa, r)
        out *= math.sqrt(1.0 / self.weights.shape[2])
        return out


@dataclass(frozen=True, eq=False)
class LinearBlock:
    """Gaussian random projections of the linear kernel: ``weights`` = W / sqrt(D), W ~ N(0, I)."""

    weights: np.ndarray

    @property
    def dtype(self):
        return self.weights.dtype

    @property
    def n_features_in(self):
        return self.weights.shape[0]

    @property
    def n_features_out(self):
        return self.weights.shape[1]

    def astype(self, dtype):
        return LinearBlock(_cast(self.weights, dtype))

    def _transform(self, X):
        return np.matmul(X, self.weights)


# ----------------------------------------------------------------------------------------------
# the frozen description of a map, sampling and transforming blocks


@dataclass(frozen=True)
class FeatureBlockSpec:
    """Everything that determines the blocks of a random-feature map (no random state).

    Parameters
    ----------
    kernel : Kernel or str
        A resolved kernel (no ``sigma="median"``; call ``kernel.resolve(X)`` first). A copy is
        stored, so later changes to the argument do not change the blocks.
    n_features_in : int
        Number of input features d.
    block_size : int
        Number of feature columns per block (even for ``method="cossin"``).
    seed : int >= 0
        Block t is drawn from ``block_rng(seed, t)``.
    dtype : np.float32 or np.float64
        dtype of the sampled parameters (draws are made in float64 and cast).
    method : str or None
        Feature family member, see the module docstring; None picks the kernel's default
        ("cos", "tensorsketch" or "gaussian").
    """

    kernel: Kernel
    n_features_in: int
    block_size: int
    seed: int
    dtype: np.dtype = np.dtype(np.float64)
    method: str | None = None

    def __post_init__(self):
        kernel = make_kernel(self.kernel)
        if not kernel.is_resolved:
            raise ValueError(
                f"{type(kernel).__name__}(sigma='median') needs data: call kernel.resolve(X) "
                f"before building random features, or pass a number as sigma."
            )
        family = _family(kernel)
        if family == "polynomial" and kernel.coef0 < 0:
            raise ValueError(
                f"random features of the polynomial kernel need coef0 >= 0 (the kernel is not "
                f"positive definite otherwise), got coef0={kernel.coef0!r}."
            )
        method = METHODS[family][0] if self.method is None else self.method
        if method not in METHODS[family]:
            raise ValueError(
                f"method={self.method!r} is not available for {type(kernel).__name__}; use one "
                f"of {METHODS[family]}."
            )
        check_positive(self.n_features_in, "n_features_in", integer=True)
        check_positive(self.block_size, "block_size", integer=True)
        if method == "cossin" and self.block_size % 2:
            raise ValueError(
                f"method='cossin' gives cos and sin columns in pairs, so block_size must be even, "
                f"got {self.block_size}."
            )
        object.__setattr__(self, "kernel", clone(kernel))
        object.__setattr__(self, "n_features_in", int(self.n_features_in))
        object.__setattr__(self, "block_size", int(self.block_size))
        object.__setattr__(self, "seed", _check_index(self.seed, "seed"))
        object.__setattr__(self, "dtype", _float_dtype(self.dtype))
        object.__setattr__(self, "method", method)


def _sample_frequencies(kernel, d, m, rng):
    """Frequencies (d, m) drawn from the kernel's spectral density."""
    if isinstance(kernel, GaussianKernel):
        w = rng.standard_normal((d, m))
    elif isinstance(kernel, LaplacianKernel):
        # the 1-d Fourier transform of exp(-|u| / sigma) is Cauchy(0, 1 / sigma)
        w = rng.standard_cauchy((d, m))
    else:  # Matern: multivariate Student-t, 2 nu degrees of freedom, one chi2 per frequency
        dof = 2.0 * kernel.nu
        w = rng.standard_normal((d, m))
        w *= np.sqrt(dof / rng.chisquare(dof, size=m))
    w /= kernel.sigma
    return w


def sample_block(spec, t):
    """Return the parameters of block t of ``spec`` (a FeatureBlockSpec), drawn from
    ``block_rng(spec.seed, t)`` only: the same (spec, t) gives bit-identical arrays."""
    if not isinstance(spec, FeatureBlockSpec):
        raise TypeError(f"spec must be a FeatureBlockSpec, got {type(spec).__name__}.")
    rng = block_rng(spec.seed, t)
    kernel, d, D, dtype = spec.kernel, spec.n_features_in, spec.block_size, spec.dtype
    if spec.method in ("cos", "cossin"):
        m = D if spec.method == "cos" else D // 2
        weights = _sample_frequencies(kernel, d, m, rng)
        offset = rng.uniform(0.0, 2.0 * np.pi, size=m) if spec.method == "cos" else None
        return FourierBlock(_cast(weights, dtype), _cast(offset, dtype))
    if spec.method == "tensorsketch":
        indices = rng.integers(0, D, size=(kernel.degree, d + 1))
        signs = rng.integers(0, 2, size=(kernel.degree, d + 1)) * 2.0 - 1.0
        return TensorSketchBlock(indices, _cast(signs, dtype), D, float(kernel.gamma), float(kernel.coef0))
    if spec.method == "maclaurin":
        weights = rng.integers(0, 2, size=(kernel.degree, d + 1, D)) * 2.0 - 1.0
        return MaclaurinBlock(_cast(weights, dtype), float(kernel.gamma), float(kernel.coef0))
    weights = rng.standard_normal((d, D))
    weights /= math.sqrt(D)
    return LinearBlock(_cast(weights, dtype))


def transform_block(X, params):
    """Features (n, params.n_features_out) of X for one block, computed in ``params.dtype``.

    Each block alone is an unbiased estimate: E[phi(x) . phi(z)] = k(x, z).
    """
    X = as_float_array(X, "X")
    check_same_features(X, params.n_features_in)
    return params._transform(np.ascontiguousarray(X, dtype=params.dtype))


# ----------------------------------------------------------------------------------------------
# the user-facing seeded map


class SeededFeatureMap:
    """A random-feature map in blocks regenerated on demand from ``(seed, t)``.

    ``block(X, t)`` returns the ``block_size`` features of block t; each block alone estimates
    the kernel without bias, so (1/T) sum_{t<T} block(x, t) . block(z, t) -> k(x, z) as T grows,
    and ``blocks(X, ts)`` (the concatenation divided by sqrt(len(ts))) is a map with
    len(ts) * block_size features. This is the feature generator of the doubly stochastic
    (ALGORITHMS.md §2) and stagewise (§5) methods.

    The map stores the kernel, the sizes and the integer ``seed`` only, never the random weights:
    its memory does not grow with the number of blocks used. An optional LRU cache keeps the
    parameters of the ``cache_size`` most recently used blocks (default 0: regenerate every
    time); it never holds more than ``cache_size`` blocks.

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
        See the module docstring; None is the kernel's default.
    cache_size : int, default=0
    """

    def __init__(self, kernel, block_size, random_state=None, *, n_features_in=None, method=None, cache_size=0):
        kernel = make_kernel(kernel)
        self.seed = _seed_from(random_state)
        if n_features_in is not None:
            n_features_in = int(check_positive(n_features_in, "n_features_in", integer=True))
        # validate everything once, with a placeholder dimension when it is not yet known
        spec = FeatureBlockSpec(kernel, n_features_in or 1, block_size, self.seed, np.float64, method)
        self.kernel = spec.kernel
        self.block_size = spec.block_size
        self.method = spec.method
        self.n_features_in = n_features_in
        self.cache_size = int(check_positive(cache_size, "cache_size", allow_zero=True, integer=True))
        self._cache = OrderedDict()

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
        """The regenerated parameters of block t (through the LRU cache when enabled)."""
        t = _check_index(t, "t")
        dtype = _float_dtype(dtype)
        if self.cache_size == 0:
            return sample_block(self.spec(dtype), t)
        key = (t, dtype.str)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        params = sample_block(self.spec(dtype), t)
        self._cache[key] = params
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return params

    def _check_X(self, X):
        X = as_float_array(X, "X")
        if self.n_features_in is None:
            self.n_features_in = X.shape[1]
        check_same_features(X, self.n_features_in)
        return X

    def block(self, X, t):
        """Features (n, block_size) of block t, in X's dtype (float32 stays float32)."""
        X = self._check_X(X)
        return self.params(t, X.dtype)._transform(np.ascontiguousarray(X))

    def blocks(self, X, ts):
        """[block(X, t) for t in ts] side by side, divided by sqrt(len(ts))."""
        X = self._check_X(X)
        ts = [_check_index(t, "t") for t in ts]
        if not ts:
            raise ValueError("ts must name at least one block.")
        out = np.empty((X.shape[0], len(ts) * self.block_size), dtype=X.dtype)
        Xc = np.ascontiguousarray(X)
        for i, t in enumerate(ts):
            out[:, i * self.block_size : (i + 1) * self.block_size] = self.params(t, X.dtype)._transform(Xc)
        out *= math.sqrt(1.0 / len(ts))
        return out


# ----------------------------------------------------------------------------------------------
# scikit-learn transformers


_KERNEL_CONSTRAINT = [StrOptions(set(KERNEL_NAMES)), Kernel]


def _resolve_kernel(kernel, X, rng):
    """A fitted copy of ``kernel`` with ``sigma="median"`` fixed from X."""
    kernel = clone(make_kernel(kernel, "kernel"))
    if not kernel.is_resolved and X.shape[0] < 2:
        raise ValueError(
            f"sigma='median' needs at least 2 samples to pick a bandwidth, got n_samples="
            f"{X.shape[0]}; pass more data or a number as sigma."
        )
    return kernel.resolve(X, rng)


class _SeededTransformer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Shared fit/transform of transformers that are block 0 of a seeded map.

    ``transform`` equals ``SeededFeatureMap(kernel_, n_components, seed_, method=...).block(X, 0)``.
    """

    def _kernel(self, X, rng):
        raise NotImplementedError

    def _method(self):
        return self.method

    def _dtype(self, X):
        return X.dtype

    def fit(self, X, y=None):
        """Resolve the kernel and draw the random weights; ``y`` is ignored."""
        self._validate_params()
        X = validate_data(self, X, dtype=FLOAT_DTYPES)
        rng = check_random_state(self.random_state)
        self.kernel_ = self._kernel(X, rng)
        self.seed_ = _seed_from(self.random_state if isinstance(self.random_state, Integral) else rng)
        spec = FeatureBlockSpec(self.kernel_, X.shape[1], self.n_components, self.seed_, self._dtype(X), self._method())
        self.block_ = sample_block(spec, 0)
        return self

    def transform(self, X):
        """Return the (n_samples, n_components) random features of X."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=FLOAT_DTYPES, reset=False)
        dtype = self._dtype(X)
        params = self.block_ if self.block_.dtype == dtype else self.block_.astype(dtype)
        return params._transform(np.ascontiguousarray(X, dtype=dtype))

    @property
    def _n_features_out(self):
        return self.block_.n_features_out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


class RandomFourierFeatures(_SeededTransformer):
    """Random Fourier features of a shift-invariant kernel (Rahimi & Recht 2007).

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

    Attributes
    ----------
    kernel_, seed_, n_features_in_, block_ (FourierBlock), random_weights_ (d, m),
    random_offset_ (m,) or None.
    """

    _parameter_constraints: dict = {
        "kernel": _KERNEL_CONSTRAINT,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "method": [StrOptions({"cos", "cossin"})],
        "random_state": ["random_state"],
        "dtype": "no_validation",  # checked in fit by _float_dtype
    }

    def __init__(self, kernel="gaussian", n_components=1024, *, method="cos", random_state=None, dtype=None):
        self.kernel = kernel
        self.n_components = n_components
        self.method = method
        self.random_state = random_state
        self.dtype = dtype

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

    def fit(self, X, y=None):
        super().fit(X, y)
        self.random_weights_ = self.block_.weights
        self.random_offset_ = self.block_.offset
        return self


class PolynomialRandomFeatures(_SeededTransformer):
    """Random features of the polynomial kernel (gamma <x, z> + coef0)^degree.

    Equals kernelscale.kernels.PolynomialKernel(degree, gamma, coef0) in expectation:
    Phi(x) . Phi(z) is unbiased with error O(1 / sqrt(n_components)).

    Parameters
    ----------
    degree : int >= 1, default=2
    gamma : float > 0, default=1.0
    coef0 : float >= 0, default=1.0
    n_components : int, default=1024
    method : {"tensorsketch", "maclaurin"}, default="tensorsketch"
        TensorSketch (Pham & Pagh 2013): O(n (d degree + degree D log D)); random Maclaurin
        (Kar & Karnick 2012): degree GEMMs, O(n d D degree), usually higher variance.
    random_state : int, RandomState or None

    Attributes
    ----------
    kernel_ (PolynomialKernel), seed_, n_features_in_, block_ (TensorSketchBlock or
    MaclaurinBlock).
    """

    _parameter_constraints: dict = {
        "degree": [Interval(Integral, 1, None, closed="left")],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "coef0": [Interval(Real, 0, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "method": [StrOptions({"tensorsketch", "maclaurin"})],
        "random_state": ["random_state"],
    }

    def __init__(self, degree=2, gamma=1.0, coef0=1.0, n_components=1024, *, method="tensorsketch", random_state=None):
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.n_components = n_components
        self.method = method
        self.random_state = random_state

    def _kernel(self, X, rng):
        return PolynomialKernel(degree=self.degree, gamma=self.gamma, coef0=self.coef0)


class NystromFeatures(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
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

    Attributes
    ----------
    kernel_, n_features_in_, components_ (m, d) landmarks, component_indices_ (m,),
    normalization_ (m, m) float64, n_components_ (number of landmarks used).
    """

    _parameter_constraints: dict = {
        "kernel": _KERNEL_CONSTRAINT,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "max_memory": [None, str, Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, kernel="gaussian", n_components=256, *, random_state=None, max_memory=None):
        self.kernel = kernel
        self.n_components = n_components
        self.random_state = random_state
        self.max_memory = max_memory

    def fit(self, X, y=None):
        """Pick the landmarks and compute K_LL^{+1/2}; ``y`` is ignored."""
        self._validate_params()
        X = validate_data(self, X, dtype=FLOAT_DTYPES)
        parse_memory(self.max_memory)
        kernel = make_kernel(self.kernel, "kernel")
        rng = check_random_state(self.random_state)
        n = X.shape[0]
        m = self.n_components
        if m > n:
            warnings.warn(
                f"n_components={m} > n_samples={n}: using all {n} samples as landmarks.",
                UserWarning,
                stacklevel=2,
            )
            m = n
        self.component_indices_ = rng.permutation(n)[:m]
        self.components_ = X[self.component_indices_]
        self.kernel_ = _resolve_kernel(kernel, X, rng)
        K = kernel_matrix(self.kernel_, self.components_.astype(np.float64), max_memory=self.max_memory)
        eigvals, eigvecs = np.linalg.eigh(K)
        cutoff = m * np.finfo(X.dtype).eps * max(eigvals[-1], 0.0)
        keep = eigvals > cutoff
        if not keep.all():
            logger.debug("NystromFeatures: dropped %d of %d eigenvalues <= %g", m - keep.sum(), m, cutoff)
        U = eigvecs[:, keep]
        self.normalization_ = (U / np.sqrt(eigvals[keep])) @ U.T
        self.n_components_ = m
        return self

    def transform(self, X):
        """Return the (n_samples, n_components_) Nystrom features of X, in X's dtype."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=FLOAT_DTYPES, reset=False)
        dtype = X.dtype
        normalization = self.normalization_.astype(dtype, copy=False)
        copied = normalization.nbytes if normalization is not self.normalization_ else 0
        out = None
        blocks = iter_kernel_blocks(
            self.kernel_, X, self.components_, self.max_memory, dtype=dtype, fixed_bytes=copied
        )
        for start, stop, block in blocks:
            if out is None:  # after the budget check of the first block
                out = np.empty((X.shape[0], self.n_components_), dtype=dtype)
            np.matmul(block, normalization, out=out[start:stop])
        return out

    @property
    def _n_features_out(self):
        return self.n_components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
