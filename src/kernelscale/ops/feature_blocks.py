"""Seeded random-feature blocks: block t of a feature map is regenerated from (seed, t) alone.

A random-feature map is cut into blocks of ``block_size`` columns. All random draws of block t
come from ONE generator, :func:`block_rng` ``(seed, t)`` =
``np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(t,)))``, the t-th child of
``np.random.SeedSequence(seed).spawn(...)``. So block t is regenerated bit for bit from
``(seed, t)`` with no other state, and different t give statistically independent blocks. The
doubly stochastic method (docs/algorithms.md section 2.2, "random features omega_i FROM SEED i") and
the stagewise method (section 5, "GEN a block of p features") store the seed and the block
coefficients only, never the random weights.

Draws are made with numpy in float64 on the host and then cast to the block's dtype, so a
float32 block is the float64 block rounded, and a block is the same on every device. The order
of the draws inside a block is a stored format: changing it changes every regenerated block.

Normalisation: every block is on its own an unbiased estimate of the kernel,
E[phi_t(x) . phi_t(z)] = k(x, z), so (1/T) sum_t phi_t(x) . phi_t(z) estimates k with
T * block_size features.

Methods (``FeatureBlockSpec.method``), by kernel family:

- shift-invariant kernels, by their spectral densities (Rahimi & Recht 2007):
  Gaussian w ~ N(0, I / sigma^2); Laplacian (L1) w_j ~ Cauchy(0, 1 / sigma) independently;
  Matern(sigma, nu) w = z sqrt(2 nu / chi2_{2nu}) / sigma, z ~ N(0, I) (multivariate Student-t
  with 2 nu degrees of freedom). ``"cos"``: sqrt(2/D) cos(X w + b), b ~ U[0, 2 pi];
  ``"cossin"``: sqrt(2/D) [cos(X w), sin(X w)] with D/2 frequencies (D even), the form of the
  doubly stochastic authors' code; ``"logit"``: sigmoid(X w + b - pi) with the draws of
  ``"cos"`` (the stagewise method's random logits; not a kernel estimate).
- polynomial (gamma <x, z> + coef0)^p = <x', z'>^p with x' = [sqrt(gamma) x, sqrt(coef0)]
  (coef0 >= 0): ``"tensorsketch"`` (Pham & Pagh 2013: p independent count sketches of x',
  multiplied in the Fourier domain) or ``"maclaurin"`` (Kar & Karnick 2012 for a homogeneous
  polynomial: prod_j <r_j, x'> / sqrt(D) with Rademacher r_j).
- linear <x, z>: ``"gaussian"`` projections X W / sqrt(D), W ~ N(0, I); ``"sample"``:
  min(D, d) of the input columns drawn without replacement (the stagewise method's column
  subsets; an estimate of <x, z> only up to the factor D / d).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields, replace

import numpy as np
import scipy.fft
import scipy.sparse
from scipy.special import expit
from sklearn.base import clone
from sklearn.utils import check_random_state

from ..base.validation import check_positive
from ..kernels import GaussianKernel, Kernel, LaplacianKernel, LinearKernel, MaternKernel, PolynomialKernel, make_kernel
from .backend import NUMPY
from .memory import available_memory, format_bytes

__all__ = [
    "block_rng",
    "seed_from",
    "float_dtype",
    "FeatureBlock",
    "FourierBlock",
    "LogitBlock",
    "TensorSketchBlock",
    "MaclaurinBlock",
    "LinearBlock",
    "ColumnBlock",
    "FeatureBlockSpec",
    "METHODS",
    "kernel_family",
]


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


def seed_from(random_state):
    """An integer seed: ``random_state`` itself when it is an int, else one draw from it."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return _check_index(random_state, "random_state")
    rng = check_random_state(random_state)
    return int(rng.randint(0, np.iinfo(np.int64).max, dtype=np.int64))


def float_dtype(dtype, name="dtype"):
    """``dtype`` as np.float32 or np.float64, or a ValueError naming ``name``."""
    try:
        dtype = np.dtype(dtype)
    except TypeError as err:
        raise ValueError(f"{name} must be np.float32 or np.float64, got {dtype!r}.") from err
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"{name} must be np.float32 or np.float64, got {dtype}.")
    return dtype


# ----------------------------------------------------------------------------------------------
# the parameters of one block


@dataclass(frozen=True, eq=False)
class FeatureBlock:
    """The random parameters of one block of a feature map.

    A subclass says how its parameters are drawn (``draw(spec, rng)``: float64 draws, in an
    order that is part of the stored format), its ``shape`` (input dimension d, features out)
    and how it maps rows (``apply(X, backend, out=None)``: the (n, n_features_out) features of X
    in the block's dtype, written into ``out`` when given). Its floating arrays are what
    ``astype`` casts.
    """

    def _float_arrays(self):
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: v for k, v in values.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"}

    @property
    def dtype(self):
        """dtype of the floating parameters (None for a block without any)."""
        return next((a.dtype for a in self._float_arrays().values()), None)

    @property
    def n_features_in(self):
        return self.shape[0]

    @property
    def n_features_out(self):
        return self.shape[1]

    @property
    def nbytes(self):
        return sum(a.nbytes for a in (getattr(self, f.name) for f in fields(self)) if isinstance(a, np.ndarray))

    def astype(self, dtype):
        """The block with its floating parameters cast to ``dtype`` (C-contiguous)."""
        return replace(self, **{k: np.ascontiguousarray(a, dtype=dtype) for k, a in self._float_arrays().items()})


@dataclass(frozen=True, eq=False)
class FourierBlock(FeatureBlock):
    """Random Fourier features of a shift-invariant kernel (Rahimi & Recht 2007).

    ``weights`` (d, m) are the frequencies; ``offset`` (m,) the phases b for the "cos" form, or
    None for the "cossin" form (then the block has 2m columns).
    """

    weights: np.ndarray
    offset: np.ndarray | None

    @classmethod
    def draw(cls, spec, rng):
        m = spec.block_size if spec.method != "cossin" else spec.block_size // 2
        weights = _sample_frequencies(spec.kernel, spec.n_features_in, m, rng)
        offset = rng.uniform(0.0, 2.0 * np.pi, size=m) if spec.method != "cossin" else None
        return cls(weights, offset)

    @property
    def shape(self):
        d, m = self.weights.shape
        return d, m if self.offset is not None else 2 * m

    def apply(self, X, backend=NUMPY, out=None):
        # one GEMM, then the trigonometric pass in place
        m = self.weights.shape[1]
        if self.offset is not None:
            proj = backend.matmul(X, self.weights, out=out)
            return backend.phase_cos(proj, backend.asarray(self.offset), math.sqrt(2.0 / m))
        proj = backend.matmul(X, self.weights)
        out = backend.empty((X.shape[0], 2 * m), dtype=proj.dtype) if out is None else out
        backend.cos(proj, out=out[:, :m])
        backend.sin(proj, out=out[:, m:])
        out *= math.sqrt(1.0 / m)
        return out


@dataclass(frozen=True, eq=False)
class LogitBlock(FourierBlock):
    """Random logits sigmoid(X w + b - pi): the frequencies and phases of a "cos" Fourier block
    as random directions with thresholds uniform in [-pi, pi] (stagewise GEN "logit")."""

    def apply(self, X, backend=NUMPY, out=None):
        F = backend.matmul(X, self.weights, out=out)
        F += backend.asarray(self.offset - np.asarray(np.pi, dtype=self.offset.dtype))
        return expit(F, out=F) if backend is NUMPY else backend.xp.expit(F, out=F)


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


def _append_constant(X, gamma, coef0, backend):
    """x' = [sqrt(gamma) x, sqrt(coef0)], so that <x', z'> = gamma <x, z> + coef0."""
    out = backend.empty((X.shape[0], X.shape[1] + 1), dtype=X.dtype)
    if scipy.sparse.issparse(X):  # a row chunk of sparse X, densified (polynomial sketches are dense)
        out[:, :-1] = 0.0
        coo = X.tocoo()
        out[coo.row, coo.col] = coo.data * math.sqrt(gamma)
    else:
        backend.xp.multiply(X, math.sqrt(gamma), out=out[:, :-1])
    out[:, -1] = math.sqrt(coef0)
    return out


@dataclass(frozen=True, eq=False)
class TensorSketchBlock(FeatureBlock):
    """TensorSketch of (gamma <x, z> + coef0)^degree (Pham & Pagh 2013).

    ``indices`` and ``signs`` (degree, d + 1) are the hash functions h_j: [d+1] -> [D] and
    s_j: [d+1] -> {-1, +1} of the degree independent count sketches of x'. The features are
    IFFT(prod_j FFT(CS_j(x'))), whose inner product is an unbiased estimate of <x', z'>^degree.
    The count sketches and FFTs run on the host (scipy), whatever the backend.
    """

    indices: np.ndarray
    signs: np.ndarray
    n_components: int
    gamma: float
    coef0: float

    @classmethod
    def draw(cls, spec, rng):
        kernel, d, D = spec.kernel, spec.n_features_in, spec.block_size
        indices = rng.integers(0, D, size=(kernel.degree, d + 1))
        signs = rng.integers(0, 2, size=(kernel.degree, d + 1)) * 2.0 - 1.0
        return cls(indices, signs, D, float(kernel.gamma), float(kernel.coef0))

    @property
    def shape(self):
        return self.indices.shape[1] - 1, self.n_components

    def apply(self, X, backend=NUMPY, out=None):
        if backend is not NUMPY:  # on the host, then back to the device
            F = backend.asarray(self.apply(backend.to_numpy(X)))
            if out is None:
                return F
            out[...] = F
            return out
        Xa = _append_constant(X, self.gamma, self.coef0, backend)
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
        if out is None:
            return np.ascontiguousarray(scipy.fft.irfft(product, n=D, axis=1))
        out[...] = scipy.fft.irfft(product, n=D, axis=1)
        return out


@dataclass(frozen=True, eq=False)
class MaclaurinBlock(FeatureBlock):
    """Random Maclaurin features of <x', z'>^degree (Kar & Karnick 2012, homogeneous case).

    ``weights`` (degree, d + 1, D) are Rademacher vectors r_j; features prod_j <r_j, x'> / sqrt(D).
    """

    weights: np.ndarray
    gamma: float
    coef0: float

    @classmethod
    def draw(cls, spec, rng):
        kernel, d, D = spec.kernel, spec.n_features_in, spec.block_size
        weights = rng.integers(0, 2, size=(kernel.degree, d + 1, D)) * 2.0 - 1.0
        return cls(weights, float(kernel.gamma), float(kernel.coef0))

    @property
    def shape(self):
        return self.weights.shape[1] - 1, self.weights.shape[2]

    def apply(self, X, backend=NUMPY, out=None):
        Xa = _append_constant(X, self.gamma, self.coef0, backend)
        out = backend.matmul(Xa, self.weights[0], out=out)
        for r in self.weights[1:]:
            out *= backend.matmul(Xa, r)
        out *= math.sqrt(1.0 / self.weights.shape[2])
        return out


@dataclass(frozen=True, eq=False)
class LinearBlock(FeatureBlock):
    """Gaussian random projections of the linear kernel: ``weights`` = W / sqrt(D), W ~ N(0, I)."""

    weights: np.ndarray

    @classmethod
    def draw(cls, spec, rng):
        weights = rng.standard_normal((spec.n_features_in, spec.block_size))
        weights /= math.sqrt(spec.block_size)
        return cls(weights)

    @property
    def shape(self):
        return self.weights.shape

    def apply(self, X, backend=NUMPY, out=None):
        return backend.matmul(X, self.weights, out=out)


@dataclass(frozen=True, eq=False)
class ColumnBlock(FeatureBlock):
    """min(D, d) input columns, drawn without replacement and sorted (stagewise GEN "sample")."""

    indices: np.ndarray
    n_features: int

    @classmethod
    def draw(cls, spec, rng):
        d = spec.n_features_in
        return cls(np.sort(rng.choice(d, size=min(spec.block_size, d), replace=False)), d)

    @property
    def shape(self):
        return self.n_features, self.indices.size

    def apply(self, X, backend=NUMPY, out=None):
        if backend is not NUMPY:
            return backend.xp.take_columns(X, self.indices, out=out)
        if scipy.sparse.issparse(X):
            columns = X[:, self.indices].toarray()
            if out is None:
                return columns
            out[...] = columns
            return out
        return np.take(X, self.indices, axis=1, out=out)


# ----------------------------------------------------------------------------------------------
# the frozen description of a map


#: method -> (kernel family, block type, temporaries per feature entry in units of the itemsize)
METHODS = {
    "cos": ("fourier", FourierBlock, 1),
    "cossin": ("fourier", FourierBlock, 2),
    "logit": ("fourier", LogitBlock, 1),
    "tensorsketch": ("polynomial", TensorSketchBlock, 6),
    "maclaurin": ("polynomial", MaclaurinBlock, 2),
    "gaussian": ("linear", LinearBlock, 1),
    "sample": ("linear", ColumnBlock, 1),
}
_DEFAULT_METHOD = {"fourier": "cos", "polynomial": "tensorsketch", "linear": "gaussian"}


def kernel_family(kernel):
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
        dtype of the blocks' parameters (draws are made in float64 and cast).
    method : str or None
        See the module docstring; None picks the kernel family's default ("cos",
        "tensorsketch" or "gaussian").
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
        family = kernel_family(kernel)
        if family == "polynomial" and kernel.coef0 < 0:
            raise ValueError(
                f"random features of the polynomial kernel need coef0 >= 0 (the kernel is not "
                f"positive definite otherwise), got coef0={kernel.coef0!r}."
            )
        method = _DEFAULT_METHOD[family] if self.method is None else self.method
        if METHODS.get(method, (None,))[0] != family:
            available = tuple(k for k, v in METHODS.items() if v[0] == family)
            raise ValueError(
                f"method={self.method!r} is not available for {type(kernel).__name__}; use one "
                f"of {available}."
            )
        check_positive(self.n_features_in, "n_features_in", integer=True)
        check_positive(self.block_size, "block_size", integer=True)
        if method == "cossin" and self.block_size % 2:
            raise ValueError(
                f"method='cossin' gives cos and sin columns in pairs, so block_size must be even, "
                f"got {self.block_size}."
            )
        object.__setattr__(self, "kernel", clone(kernel))
        self._check_draw_memory(method)
        object.__setattr__(self, "n_features_in", int(self.n_features_in))
        object.__setattr__(self, "block_size", int(self.block_size))
        object.__setattr__(self, "seed", _check_index(self.seed, "seed"))
        object.__setattr__(self, "dtype", float_dtype(self.dtype))
        object.__setattr__(self, "method", method)

    def _check_draw_memory(self, method):
        """Refuse, naming the parameters, a block whose float64 draws exceed the memory available
        now (a polynomial degree of 10**15 would otherwise fail inside numpy)."""
        d, D = int(self.n_features_in), int(self.block_size)
        degree = int(getattr(self.kernel, "degree", 1))
        per_method = {"tensorsketch": 2 * degree * (d + 1), "maclaurin": degree * (d + 1) * D, "sample": min(D, d)}
        need = 8 * per_method.get(method, (d + 1) * D)
        if need > available_memory():
            fix = "block_size" + (" or the kernel's degree" if method in ("tensorsketch", "maclaurin") else "")
            raise ValueError(
                f"one block of random features (block_size={D}, {d} input features"
                f"{f', degree={degree}' if fix != 'block_size' else ''}) needs {format_bytes(need)} of random "
                f"draws, more than the {format_bytes(available_memory())} available; lower {fix}."
            )

    def block(self, t):
        """The parameters of block t, drawn from ``block_rng(seed, t)`` only: the same (spec, t)
        gives bit-identical arrays."""
        block = METHODS[self.method][1].draw(self, block_rng(self.seed, t))
        return block.astype(self.dtype)

    def astype(self, dtype):
        """The same map with parameters in ``dtype``."""
        return self if np.dtype(dtype) == self.dtype else replace(self, dtype=dtype)

    @property
    def workspace(self):
        """Temporaries per feature entry while a block is applied, in units of the itemsize."""
        return METHODS[self.method][2]

    @property
    def n_features_out(self):
        """Feature columns of every block ("sample": at most the input dimension)."""
        return min(self.block_size, self.n_features_in) if self.method == "sample" else self.block_size

    @property
    def block_bytes(self):
        """Bytes of one block's parameters (about: d x D entries, degree times for Maclaurin)."""
        per = self.kernel.degree if self.method == "maclaurin" else 1
        return self.n_features_in * self.block_size * self.dtype.itemsize * per
