"""Kernel functions: blocks K(X, Z), diagonals, and the median bandwidth heuristic.

A kernel is a small scikit-learn-style object (clonable, with ``get_params``) that estimators take
as a parameter. ``kernel(X, Z)`` returns the block K(X, Z); ``kernel.diag(X)`` its diagonal. The
blocked, memory-bounded products live in :mod:`kernelscale.ops.kernel`, which uses the two-step
interface ``prepare(Z)`` (per-Z work done once) and ``block(X, prepared)``.

Squared distances use the GEMM form |x|^2 + |z|^2 - 2 <x, z>, evaluated as ONE matrix product of
augmented operands and clipped at zero, so the only elementwise passes left are the clip and the
kernel's profile (e.g. ``exp``). float32 inputs are computed in float32.

The formulas are written once, against numpy's names: on a torch device (kernelscale.ops.torch_backend)
the same code runs on tensors through :func:`_namespace`.

Finite input gives finite kernel values in range. Where a norm term of the GEMM form would
overflow (|x|^2 beyond the dtype's range, e.g. values ~1e160 in float64 or ~1e20 in float32, or a
tiny sigma), that block is computed on X / t and Z / t, t a power of two, and the bandwidth scaled
to match; the checks cost O(n + m) per block, so ordinary blocks are computed as before.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist, pdist
from sklearn.base import BaseEstimator, clone
from sklearn.utils import check_random_state

from .base.validation import (
    as_float_array, check_positive, check_same_features, float_value, number_repr, result_dtype,
)

__all__ = [
    "Kernel",
    "GaussianKernel",
    "LaplacianKernel",
    "MaternKernel",
    "PolynomialKernel",
    "LinearKernel",
    "make_kernel",
    "median_heuristic",
    "KERNEL_NAMES",
]

MEDIAN_SAMPLES = 1000


@dataclass(frozen=True)
class PreparedSet:
    """The right-hand point set of a kernel block, with per-point work done once.

    ``data`` is Z cast to the computation dtype; ``aux`` is the kernel's augmented operand
    (or None), e.g. [Z - c, 1, -|z - c|^2 / (2 sigma^2)] for the Gaussian kernel, where the
    centre ``c`` (the mean of Z, for distance kernels) is subtracted from both sides because
    distances do not change under translation but the GEMM form loses digits far from 0.
    """

    data: np.ndarray
    aux: np.ndarray | None
    dtype: np.dtype
    center: np.ndarray | None = None

    def __post_init__(self):
        object.__setattr__(self, "dtype", _numpy_dtype(self.dtype))

    @property
    def n_points(self):
        return self.data.shape[0]

    @property
    def sparse(self):
        """True when Z is a scipy.sparse CSR matrix (then ``aux`` is :class:`SparseAux`)."""
        return sp.issparse(self.data)

    @property
    def nbytes(self):
        return _nbytes(self.data) + (0 if self.aux is None else _nbytes(self.aux))


@dataclass(frozen=True)
class SparseAux:
    """What blocks against a sparse Z need: Z^T as CSR (d, m) for the products X Z^T, and the
    per-point squared norms |z|^2 (float64 values of Z's dtype) for distance kernels."""

    transposed: object
    sq_norms: np.ndarray

    @property
    def nbytes(self):
        return _nbytes(self.transposed) + self.sq_norms.nbytes


def _nbytes(a):
    """Bytes of an array, of a scipy.sparse CSR/CSC matrix's three arrays, or of a SparseAux."""
    if sp.issparse(a):
        return a.data.nbytes + a.indices.nbytes + a.indptr.nbytes
    return a.nbytes


def sparse_nbytes(n_rows, nnz, dtype, index_itemsize=4):
    """Bytes of a CSR matrix of ``n_rows`` rows holding ``nnz`` stored values of ``dtype``."""
    return nnz * (np.dtype(dtype).itemsize + index_itemsize) + (n_rows + 1) * index_itemsize


def as_csr(X, dtype):
    """A scipy.sparse X as CSR of ``dtype`` (no copy when it already is)."""
    X = X.tocsr() if X.format != "csr" else X
    return X if X.dtype == dtype else X.astype(dtype)


def sparse_sq_norms(X):
    """|x|^2 of every row of a scipy.sparse CSR X, a 1-d array of its dtype."""
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    return np.bincount(rows, X.data.astype(np.float64) ** 2, minlength=X.shape[0]).astype(X.dtype, copy=False)


def sparse_product(X, prep, out):
    """out = X Z^T for the prepared Z, where X or Z (or both) is scipy.sparse: a sparse product,
    written into ``out`` (C-ordered) with no dense copy of a sparse operand."""
    if prep.sparse:
        if sp.issparse(X):  # sparse @ sparse: a sparse result, scattered into out
            product = X @ prep.aux.transposed
            if out.flags.c_contiguous:
                out[...] = 0.0
                product.tocsr().toarray(out=out)
            else:
                out[...] = product.toarray()
        else:
            out[...] = X @ prep.aux.transposed  # dense @ sparse: a dense result
    else:
        out[...] = X @ prep.data.T  # sparse @ dense: a dense result
    return out


def sparse_l1_distances(X, Z, out):
    """out = |x - z|_1 for the rows of X (dense or scipy.sparse CSR) and of the CSR Z, from
    |x|_1 + |z|_1 + the sum over z's nonzeros of (|x_k - z_k| - |x_k| - |z_k|): one row of X
    densified at a time (d float64 values), O(nnz(Z)) work a row, no dense copy of Z."""
    x = np.zeros(Z.shape[1], dtype=np.float64)
    z_values = Z.data.astype(np.float64, copy=False)
    z_abs = np.abs(z_values)
    owners = np.repeat(np.arange(Z.shape[0]), np.diff(Z.indptr))
    z_l1 = np.bincount(owners, z_abs, minlength=Z.shape[0])
    for i in range(X.shape[0]):
        if sp.issparse(X):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            cols, vals = X.indices[lo:hi], X.data[lo:hi].astype(np.float64)
            x[cols] = vals
            x_l1 = float(np.abs(vals).sum())
        else:
            x[:] = X[i]
            x_l1 = float(np.abs(x).sum())
        xk = x[Z.indices]
        corr = np.abs(xk - z_values) - np.abs(xk) - z_abs
        row = x_l1 + z_l1 + np.bincount(owners, corr, minlength=Z.shape[0])
        out[i] = np.maximum(row, 0.0)
        if sp.issparse(X):
            x[cols] = 0.0
    return out


def _sparse_sq_distances(X, prep, out):
    """out = max(|x|^2 + |z|^2 - 2 <x, z>, 0) with X or Z scipy.sparse (no centring: the norms
    come from the nonzeros)."""
    sparse_product(X, prep, out)
    out *= -2.0
    out += (sparse_sq_norms(X) if sp.issparse(X) else _sq_norms(X))[:, None]
    out += prep.aux.sq_norms if prep.sparse else _sq_norms(prep.data)
    np.maximum(out, 0.0, out=out)
    return out


class Kernel(BaseEstimator):
    """Base class of kernelscale kernels.

    Subclasses implement ``_prepare(Z)`` (a PreparedSet, with the augmented right operand
    where the kernel has one), ``_fill(Xc, prep, out)`` (write K(Xc, Z) into ``out``) and ``diag``. ``_workspace_per_entry`` is the number
    of temporary bytes per block entry beyond the block itself (bytes, per dtype itemsize).
    """

    #: True when k(x, z) depends on x - z only (random Fourier features exist).
    shift_invariant = False
    #: extra temporaries per block entry, in units of the block's itemsize
    _workspace_per_entry = 0.0

    # -- user-facing ---------------------------------------------------------------------------
    def __call__(self, X, Z=None):
        """Return the kernel block K(X, Z) (K(X, X) when Z is None)."""
        X = as_float_array(X, "X", accept_sparse=True)
        Z = X if Z is None else as_float_array(Z, "Z", accept_sparse=True)
        check_same_features(Z, X.shape[1], "Z")
        return self.block(X, self.prepare(Z, result_dtype(X, Z)))

    def diag(self, X):
        """Return the diagonal k(x_i, x_i) of K(X, X) as a 1-d array."""
        raise NotImplementedError

    def resolve(self, X, random_state=None, sample_weight=None):
        """Return a copy whose data-dependent parameters (``sigma="median"``) are fixed from X
        (weighted by ``sample_weight`` if given); a kernel with nothing to resolve is returned."""
        self._check_params()
        return self

    @property
    def is_resolved(self):
        """False while a parameter still needs data (``sigma="median"``): call ``resolve``."""
        return True

    # -- blocked interface used by kernelscale.ops.kernel --------------------------------------
    def prepare(self, Z, dtype=None, backend=None):
        """Precompute what every block against the point set Z needs (done once per Z), on
        ``backend`` (an ops backend; default numpy)."""
        self._check_ready()
        dtype = _numpy_dtype(Z.dtype if dtype is None else dtype)
        if sp.issparse(Z):
            if backend is not None and getattr(backend, "name", "numpy") != "numpy":
                raise ValueError("scipy.sparse X runs on the host (numpy) only; pass device=None, or a dense X.")
            Z = as_csr(Z, dtype)
            return PreparedSet(Z, SparseAux(Z.T.tocsr(), sparse_sq_norms(Z)), dtype)
        Z = np.ascontiguousarray(Z, dtype=dtype) if backend is None else backend.asarray(Z, dtype)
        return self._prepare(Z)

    def block(self, X, prepared, out=None):
        """Write K(X, Z) for the prepared Z into ``out`` (allocated if None) and return it; on
        the prepared set's device."""
        if sp.issparse(X) or prepared.sparse:  # the host, from the nonzeros
            Xc = as_csr(X, prepared.dtype) if sp.issparse(X) else np.ascontiguousarray(X, dtype=prepared.dtype)
            shape = (Xc.shape[0], prepared.n_points)
            if out is None:
                out = np.empty(shape, dtype=prepared.dtype)
            elif tuple(out.shape) != shape or out.dtype != prepared.dtype:
                raise ValueError(f"out must have shape {shape} and dtype {prepared.dtype}.")
            self._fill_sparse(Xc, prepared, out)
            return out
        xp = _namespace(prepared.data)
        Xc = xp.ascontiguousarray(X, dtype=prepared.dtype, like=prepared.data)
        shape = (Xc.shape[0], prepared.n_points)
        if out is None:
            out = xp.empty(shape, dtype=prepared.dtype, like=prepared.data)
        elif tuple(out.shape) != shape or _numpy_dtype(out.dtype) != prepared.dtype:
            raise ValueError(f"out must have shape {shape} and dtype {prepared.dtype}.")
        self._fill(Xc, prepared, out)
        return out

    def bytes_per_row(self, n_cols, n_features, dtype):
        """Bytes ``block`` allocates per row of X: the block row and its temporaries, plus the
        row's cast copy, augmented operand and norm (an upper bound)."""
        item = np.dtype(dtype).itemsize
        width = _augmented_width(n_features)
        return int(item * (n_cols * (1.0 + self._workspace_per_entry) + n_features + width + 1))

    def aux_bytes(self, n_points, n_features, dtype, input_dtype=None):
        """Bytes ``prepare`` allocates for a point set: the augmented operand, plus the cast
        copy when ``input_dtype`` differs from ``dtype``."""
        item = np.dtype(dtype).itemsize
        cast = n_points * n_features * item if np.dtype(input_dtype or dtype) != np.dtype(dtype) else 0
        return cast + n_points * _augmented_width(n_features) * item

    # -- subclass hooks -------------------------------------------------------------------------
    def _prepare(self, Z):
        return PreparedSet(Z, None, Z.dtype)

    def _fill(self, Xc, prep, out):
        raise NotImplementedError

    def _fill_sparse(self, Xc, prep, out):
        """K(Xc, Z) into ``out`` when Xc or Z is scipy.sparse (the other a dense host array);
        the default densifies the sparse rows of this block only (every named kernel overrides it)."""
        dense = prep if not prep.sparse else self._prepare(np.ascontiguousarray(prep.data.toarray()))
        self._fill(Xc.toarray() if sp.issparse(Xc) else Xc, dense, out)

    def _check_params(self):
        pass

    def _check_ready(self):
        self._check_params()
        if not self.is_resolved:
            raise ValueError(
                f"{type(self).__name__}(sigma='median') needs data to pick sigma: call "
                f"kernel.resolve(X) first (estimators do this in fit), or pass a number as sigma."
            )


# ----------------------------------------------------------------------------------------------
# the array namespace of a block


def _namespace(a):
    """numpy for host arrays, the torch adapter (numpy's names) for tensors."""
    if isinstance(a, np.ndarray):
        return np
    from .ops.torch_namespace import TORCH_XP  # only reached with a tensor, so torch is loaded

    return TORCH_XP


def _numpy_dtype(dtype):
    if isinstance(dtype, np.dtype) or not type(dtype).__module__.startswith("torch"):
        return np.dtype(dtype)
    from .ops.torch_namespace import numpy_dtype

    return numpy_dtype(dtype)


def _abs_max(a):
    """max |a| (0 for an empty array), as a Python float."""
    return float(abs(a).max()) if a.shape[0] else 0.0


# ----------------------------------------------------------------------------------------------
# squared distances in GEMM form


def _sq_norms(A):
    return _namespace(A).einsum("ij,ij->i", A, A)


def _row_sq_norms(A):
    """|a|^2 of every row of a dense or scipy.sparse CSR A."""
    return sparse_sq_norms(A) if sp.issparse(A) else _sq_norms(A)


#: on a CUDA device the augmented operands have a multiple of this many columns (zeros padded
#: before the last two): cuBLAS takes GEMMs whose rows are not 32-byte aligned on slower paths
_DEVICE_ALIGN = 8
#: torch device types whose augmented operands are padded so
_PAD_ON_DEVICES = frozenset({"cuda"})


def _padded(device_type, d):
    """Columns of the augmented operand of d features on a device of ``device_type`` (None:
    numpy)."""
    return -(-(d + 2) // _DEVICE_ALIGN) * _DEVICE_ALIGN if device_type in _PAD_ON_DEVICES else d + 2


def _augmented_width(d):
    """Columns of an augmented operand of d features on the backend in use (for the memory
    estimates, which are made under the backend that computes)."""
    from .ops.context import ACTIVE_BACKEND  # a leaf of ops (ops imports this module)

    return _padded(getattr(getattr(ACTIVE_BACKEND.get(), "device", None), "type", None), d)


def _augmented(xp, A, center):
    """An (n, width) array for the augmented operand of A (n, d), its first d columns A - c and
    its last two to be filled; width is d + 2, rounded up to a multiple of _DEVICE_ALIGN on a
    CUDA device with zero columns in between (the products do not change)."""
    n, d = A.shape
    width = _padded(None if xp is np else A.device.type, d)
    pad = width - d - 2
    out = xp.empty((n, width), dtype=A.dtype, like=A)
    xp.subtract(A, center, out=out[:, :d])
    if pad:
        out[:, d : d + pad] = 0.0
    return out, out[:, :d]


def _augmented_left(X, center, scale, shift):
    """[scale (x - c), shift |x - c|^2, 1], so that left @ right.T sums all three terms."""
    out, centered = _augmented(_namespace(X), X, center)
    out[:, -2] = shift * _sq_norms(centered)
    centered *= scale
    out[:, -1] = 1.0
    return out


def _prepare_distances(Z, shift):
    """PreparedSet with aux = [z - c, 1, shift |z - c|^2], c the mean of Z."""
    center = Z.mean(axis=0)
    aux, centered = _augmented(_namespace(Z), Z, center)
    aux[:, -2] = 1.0
    aux[:, -1] = shift * _sq_norms(centered)
    return PreparedSet(Z, aux, Z.dtype, center)


def _squared_distances(Xc, prep, out, left=None):
    """out = max(|x - c|^2 + |z - c|^2 - 2 <x - c, z - c>, 0), prepared with shift 1 (``left``:
    the left operand when already built)."""
    xp = _namespace(out)
    if left is None:
        left = _augmented_left(Xc, prep.center, -2.0, 1.0)
    xp.matmul(left, prep.aux.T, out=out)
    xp.maximum(out, 0.0, out=out)
    return out


def _overflows(left, prep, scale):
    """True unless left @ prep.aux.T is safe: the norm columns finite and at most max/8 in size
    (then |cross term| <= their sum and no partial sum exceeds max/2), ``scale`` within range."""
    limit = float(_namespace(left).finfo(left.dtype).max) / 8
    return not (abs(scale) <= 8 * limit and _abs_max(left[:, -2]) <= limit and _abs_max(prep.aux[:, -1]) <= limit)


def _scaled_squared_distances(Xc, Z, out):
    """out = |x - z|^2 / t^2 (GEMM form on X / t and Z / t, t a power of two that keeps every
    coordinate below 2 in size, so nothing overflows); returns t."""
    big = max(_abs_max(Xc), _abs_max(Z))
    t = math.ldexp(1.0, math.frexp(big)[1] - 1) if big > 0 else 1.0
    _squared_distances(Xc / t, _prepare_distances(Z / t, 1.0), out)
    return t


def _scale_nonnegative(out, factor):
    """out *= factor for out >= 0, where factor may be beyond the dtype's range (0 * inf = 0)."""
    xp = _namespace(out)
    if abs(factor) <= float(xp.finfo(out.dtype).max):
        with np.errstate(over="ignore"):  # products beyond the range: inf, so k = 0
            xp.multiply(out, factor, out=out)
    else:
        out[out > 0] = math.copysign(math.inf, factor)


def _over_square(c, sigma):
    """c / sigma^2, as +-inf or 0 where sigma^2 under- or overflows."""
    try:
        return c / sigma**2
    except OverflowError:
        return c * 0.0
    except ZeroDivisionError:
        return math.copysign(math.inf, c)


# ----------------------------------------------------------------------------------------------
# bandwidth


def _weighted_median(values, weights):
    """Median of ``values`` repeated ``weights`` times: np.median of the repeated array for
    integer weights, and unchanged when all weights are scaled by the same factor."""
    order = np.argsort(values, kind="stable")
    values, cum = values[order], np.cumsum(weights[order])
    half = cum[-1] / 2.0
    tol = 1e-9 * half  # cumulative sums of scaled weights reach `half` only up to rounding
    # the two middle values, as np.median takes them: the first whose cumulative weight reaches
    # half, and the one whose span contains half (the next one when a span ends exactly there)
    lower = values[min(np.searchsorted(cum, half - tol, side="left"), len(values) - 1)]
    upper = values[min(np.searchsorted(cum, half + tol, side="right"), len(values) - 1)]
    return 0.5 * (float(lower) + float(upper))


def median_heuristic(X, metric="euclidean", n_samples=MEDIAN_SAMPLES, random_state=None, sample_weight=None):
    """Median pairwise distance of a random subsample of X (the median trick).

    Uses at most ``n_samples`` rows drawn without replacement; ``metric`` is "euclidean" or
    "cityblock" (L1, for the Laplacian kernel). Pairs at distance zero are ignored. With
    ``sample_weight`` the pair (i, j) counts w_i w_j times, so integer weights act as repeated
    samples and points of weight zero do not count.
    """
    X = as_float_array(X, "X", accept_sparse=True)
    rng = check_random_state(random_state)
    weights = None
    if sample_weight is not None:
        weights = np.asarray(sample_weight, dtype=np.float64)
        X, weights = X[weights > 0], weights[weights > 0]
    if X.shape[0] < 2:
        raise ValueError(
            f"sigma='median' needs at least 2 samples (with positive weight) to measure distances; "
            f"got {X.shape[0]} sample(s). Pass a number as sigma instead."
        )
    if X.shape[0] > n_samples:
        keep = np.sort(rng.choice(X.shape[0], n_samples, replace=False))
        X = X[keep]
        weights = None if weights is None else weights[keep]
    if sp.issparse(X):  # the sample's distances from its nonzeros (no dense copy of the rows)
        dist = _sparse_pdist(X, metric)
    else:
        with np.errstate(over="ignore"):
            dist = pdist(X, metric=metric)
    if not np.all(np.isfinite(dist)) and not sp.issparse(X):  # squares or sums overflowed: measure X / t, t a power of 2
        # 2**e > max |x| (2**1023 for values past it: 2**1024 is not a float)
        t = math.ldexp(1.0, min(math.frexp(float(np.abs(X).max()))[1], 1023))
        with np.errstate(over="ignore"):
            dist = pdist(X / t, metric=metric) * t
    if weights is None:  # the two middle positive distances, partitioned in place: no sort, no copy
        zeros = dist.size - np.count_nonzero(dist)  # distances are >= 0: the zeros come first
        m = dist.size - zeros
        _check_some_positive(m)
        lo, hi = zeros + (m - 1) // 2, zeros + m // 2
        dist.partition([lo, hi])
        return _check_finite_median(0.5 * (float(dist[lo]) + float(dist[hi])))
    positive = dist > 0
    _check_some_positive(np.count_nonzero(positive))
    i, j = np.triu_indices(X.shape[0], 1)
    with np.errstate(over="ignore", under="ignore"):
        pair_weights = (weights[i] * weights[j])[positive]
    if not np.all(np.isfinite(pair_weights) & (pair_weights > 0)):  # w_i w_j over/underflowed: the
        with np.errstate(under="ignore"):  # median does not change when all weights are scaled
            pair_weights = (weights[i] / weights.max() * (weights[j] / weights.max()))[positive]
    return _check_finite_median(_weighted_median(dist[positive], pair_weights))


def _sparse_pdist(X, metric):
    """pdist's condensed distances (upper triangle, row by row) of a scipy.sparse CSR X of at
    most MEDIAN_SAMPLES rows: Euclidean from the Gram matrix and the squared norms, cityblock by
    :func:`sparse_l1_distances`; float64."""
    X = as_csr(X, np.float64)
    n = X.shape[0]
    full = np.empty((n, n))
    if metric == "cityblock":
        sparse_l1_distances(X, X, full)
    else:
        prep = PreparedSet(X, SparseAux(X.T.tocsr(), sparse_sq_norms(X)), np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            _sparse_sq_distances(X, prep, full)
            np.sqrt(full, out=full)
    return full[np.triu_indices(n, 1)]


def _check_finite_median(sigma):
    """``sigma``, or a ValueError naming X when the median distance is not a finite float."""
    if not math.isfinite(sigma):
        raise ValueError(
            f"sigma='median' failed: the median distance between points of X is {sigma}, beyond the "
            f"float range; rescale X (e.g. sklearn.preprocessing.StandardScaler) or pass a number as sigma."
        )
    return sigma


def _check_some_positive(n_positive):
    if n_positive == 0:
        raise ValueError(
            "sigma='median' failed: all sampled points of X coincide, so their median distance "
            "is zero; pass a positive number as sigma."
        )


class _BandwidthKernel(Kernel):
    """Shared logic of kernels with a bandwidth ``sigma`` (a number or "median")."""

    shift_invariant = True
    _median_metric = "euclidean"

    @property
    def is_resolved(self):
        return not isinstance(self.sigma, str)

    def _check_params(self):
        if isinstance(self.sigma, str):
            if self.sigma != "median":
                raise ValueError(f"sigma must be a positive number or 'median', got {self.sigma!r}.")
        else:
            check_positive(self.sigma, "sigma")

    def resolve(self, X, random_state=None, sample_weight=None):
        self._check_params()
        if self.is_resolved:
            return self
        sigma = median_heuristic(X, self._median_metric, random_state=random_state, sample_weight=sample_weight)
        return clone(self).set_params(sigma=sigma)

    def diag(self, X):
        X = as_float_array(X, "X", accept_sparse=True)
        return np.ones(X.shape[0], dtype=X.dtype)


class GaussianKernel(_BandwidthKernel):
    """Gaussian (RBF) kernel k(x, z) = exp(-|x - z|^2 / (2 sigma^2)).

    Parameters
    ----------
    sigma : float or "median", default="median"
        Bandwidth. "median" sets sigma to the median pairwise Euclidean distance of a subsample
        of the training data (estimators resolve it in ``fit``). scikit-learn's ``gamma`` is
        1 / (2 sigma^2).
    """

    def __init__(self, sigma="median"):
        self.sigma = sigma

    def _prepare(self, Z):
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is handled in _fill
            return _prepare_distances(Z, _over_square(-0.5, self.sigma))

    def _fill(self, Xc, prep, out):
        inv = _over_square(1.0, self.sigma)
        # [x / s^2, -|x|^2 / 2s^2, 1] . [z, 1, -|z|^2 / 2s^2] = -|x - z|^2 / 2s^2 (x, z centred)
        with np.errstate(over="ignore", invalid="ignore"):
            left = _augmented_left(Xc, prep.center, inv, -0.5 * inv)
        xp = _namespace(out)
        if _overflows(left, prep, inv):
            ratio = _scaled_squared_distances(Xc, prep.data, out) / self.sigma  # t / s, maybe inf
            _scale_nonnegative(out, -0.5 * ratio * ratio)
        else:
            xp.matmul(left, prep.aux.T, out=out)
            xp.minimum(out, 0.0, out=out)
        xp.exp(out, out=out)

    def _fill_sparse(self, Xc, prep, out):
        _sparse_sq_distances(Xc, prep, out)
        with np.errstate(over="ignore"):
            _scale_nonnegative(out, _over_square(-0.5, self.sigma))
        np.exp(out, out=out)


class LaplacianKernel(_BandwidthKernel):
    """Laplacian kernel k(x, z) = exp(-|x - z|_1 / sigma), with the L1 distance.

    This is scikit-learn's ``laplacian_kernel`` (gamma = 1 / sigma). Its random Fourier features
    are products of Cauchy draws. The L2 exponential kernel exp(-|x - z|_2 / sigma), which Falkon
    calls "Laplacian", is ``MaternKernel(sigma, nu=0.5)``. ``sigma="median"`` uses the median L1
    distance. L1 distances have no GEMM form, so blocks cost O(n m d) scalar work.
    """

    _median_metric = "cityblock"

    def __init__(self, sigma="median"):
        self.sigma = sigma

    def bytes_per_row(self, n_cols, n_features, dtype):
        # cdist works in float64: float32 blocks need a float64 temporary
        extra = 8 * n_cols if np.dtype(dtype) != np.float64 else 0
        return super().bytes_per_row(n_cols, n_features, dtype) + extra

    def aux_bytes(self, n_points, n_features, dtype, input_dtype=None):
        cast = n_points * n_features * np.dtype(dtype).itemsize if np.dtype(input_dtype or dtype) != np.dtype(dtype) else 0
        return cast + n_points * n_features * 8

    def _prepare(self, Z):
        xp = _namespace(Z)
        return PreparedSet(Z, xp.ascontiguousarray(Z, dtype=np.float64, like=Z), Z.dtype)

    def _fill(self, Xc, prep, out):
        xp = _namespace(out)
        if xp is not np:
            out[...] = xp.cdist_l1(Xc, prep.aux)
        elif out.dtype == np.float64:
            cdist(Xc, prep.aux, metric="cityblock", out=out)
        else:
            with np.errstate(over="ignore"):  # distances beyond float32: inf, so k = 0
                out[...] = cdist(Xc.astype(np.float64), prep.aux, metric="cityblock")
        _scale_nonnegative(out, -1.0 / self.sigma)  # -1 / sigma may be -inf: k(x, x) stays 1
        xp.exp(out, out=out)

    def _fill_sparse(self, Xc, prep, out):
        sparse_l1_distances(Xc, prep.data if prep.sparse else sp.csr_matrix(prep.data), out)
        _scale_nonnegative(out, -1.0 / self.sigma)
        np.exp(out, out=out)


class MaternKernel(_BandwidthKernel):
    """Matérn kernel with smoothness ``nu`` in {0.5, 1.5, 2.5}, with r = |x - z|_2 / sigma:

    - nu = 0.5: exp(-r), the L2 exponential kernel (what Falkon calls the Laplacian kernel);
    - nu = 1.5: (1 + sqrt(3) r) exp(-sqrt(3) r);
    - nu = 2.5: (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r).

    This is scikit-learn's ``Matern(length_scale=sigma, nu=nu)``.
    """

    NU_VALUES = (0.5, 1.5, 2.5)

    def __init__(self, sigma="median", nu=1.5):
        self.sigma = sigma
        self.nu = nu

    @property
    def _workspace_per_entry(self):
        return 0.0 if self.nu == 0.5 else 1.0

    def _check_params(self):
        super()._check_params()
        if self.nu not in self.NU_VALUES:
            raise ValueError(f"nu must be one of {self.NU_VALUES}, got {self.nu!r}.")

    #: s = sqrt(2 nu) r beyond which k is 0 in every dtype (exp(-s) underflows, the polynomial not)
    S_MAX = 1e4

    def _prepare(self, Z):
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is handled in _fill
            return _prepare_distances(Z, 1.0)

    def _fill_sparse(self, Xc, prep, out):
        _sparse_sq_distances(Xc, prep, out)
        np.sqrt(out, out=out)
        _scale_nonnegative(out, math.sqrt(2.0 * self.nu) / self.sigma)
        np.minimum(out, self.S_MAX, out=out)
        self._finish(np, out)

    def _fill(self, Xc, prep, out):
        xp = _namespace(out)
        factor = math.sqrt(2.0 * self.nu) / self.sigma  # s = sqrt(2 nu) r; may be inf
        with np.errstate(over="ignore", invalid="ignore"):
            left = _augmented_left(Xc, prep.center, -2.0, 1.0)
        if _overflows(left, prep, 2.0):
            t = _scaled_squared_distances(Xc, prep.data, out)
            xp.sqrt(out, out=out)
            _scale_nonnegative(out, factor * t)
            s_max = math.inf
        else:
            xp.sqrt(_squared_distances(Xc, prep, out, left), out=out)
            _scale_nonnegative(out, factor)
            # an upper bound of s, from |x - z| <= |x - c| + |z - c| (the norm columns are >= 0)
            s_max = factor * (math.sqrt(_abs_max(left[:, -2])) + math.sqrt(_abs_max(prep.aux[:, -1])))
        if s_max > self.S_MAX:  # else inf * exp(-inf) would give NaN
            xp.minimum(out, self.S_MAX, out=out)
        self._finish(xp, out)

    def _finish(self, xp, out):
        """k from s = sqrt(2 nu) r in ``out``, in place."""
        if self.nu == 0.5:
            xp.negative(out, out=out)
            xp.exp(out, out=out)
            return
        if self.nu == 1.5:
            poly = out + 1.0
        else:  # 1 + s + s^2 / 3 with a single temporary
            poly = out / 3.0
            poly += 1.0
            poly *= out
            poly += 1.0
        xp.negative(out, out=out)
        xp.exp(out, out=out)
        out *= poly


class PolynomialKernel(Kernel):
    """Polynomial kernel k(x, z) = (gamma <x, z> + coef0)^degree.

    Parameters
    ----------
    degree : int >= 1, default=3
    gamma : float > 0, default=1.0
    coef0 : float, default=1.0
    """

    def __init__(self, degree=3, gamma=1.0, coef0=1.0):
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0

    def _check_params(self):
        check_positive(self.degree, "degree", integer=True)
        check_positive(self.gamma, "gamma")
        if isinstance(self.coef0, bool) or not isinstance(self.coef0, numbers.Real):
            raise TypeError(f"coef0 must be a number, got {self.coef0!r}.")
        if not math.isfinite(float_value(self.coef0)):  # an integer beyond the float range too
            raise ValueError(f"coef0 must be finite (within the float range, about 1.8e308), got "
                             f"{number_repr(self.coef0)}.")

    def _fill_sparse(self, Xc, prep, out):
        sparse_product(Xc, prep, out)
        if self.gamma != 1:
            out *= float(self.gamma)
        self._power(np, out)

    def _fill(self, Xc, prep, out):
        xp = _namespace(out)
        left = Xc if self.gamma == 1 else Xc * float(self.gamma)
        xp.matmul(left, prep.data.T, out=out)
        self._power(xp, out)

    def _power(self, xp, out):
        """(out + coef0)^degree in place."""
        if self.coef0 != 0:
            out += self.coef0
        degree = int(self.degree)
        if degree & (degree - 1) == 0:  # 2, 4, 8, ...: in-place squarings, about 3x faster than power
            while degree > 1:
                xp.multiply(out, out, out=out)
                degree //= 2
        else:
            xp.power(out, degree, out=out)

    def diag(self, X):
        self._check_params()
        X = as_float_array(X, "X", accept_sparse=True)
        return (self.gamma * _row_sq_norms(X) + self.coef0) ** self.degree


class LinearKernel(Kernel):
    """Linear kernel k(x, z) = <x, z>."""

    def _fill(self, Xc, prep, out):
        _namespace(out).matmul(Xc, prep.data.T, out=out)

    def _fill_sparse(self, Xc, prep, out):
        sparse_product(Xc, prep, out)

    def diag(self, X):
        return _row_sq_norms(as_float_array(X, "X", accept_sparse=True))


_SHORTCUTS = {
    "gaussian": GaussianKernel,
    "rbf": GaussianKernel,
    "laplacian": LaplacianKernel,
    "matern": MaternKernel,
    "polynomial": PolynomialKernel,
    "poly": PolynomialKernel,
    "linear": LinearKernel,
}
KERNEL_NAMES = tuple(_SHORTCUTS)


def make_kernel(kernel, name="kernel"):
    """Return a Kernel object for a Kernel instance or one of the names in KERNEL_NAMES.

    Strings give the kernel with its default parameters (``sigma="median"`` for bandwidth
    kernels). The instance is validated but not copied.
    """
    if isinstance(kernel, Kernel):
        kernel._check_params()
        return kernel
    if isinstance(kernel, str) and kernel.lower() in _SHORTCUTS:
        return _SHORTCUTS[kernel.lower()]()
    raise ValueError(
        f"{name}={kernel!r} is not a kernel: pass a kernelscale kernel object such as "
        f"GaussianKernel(sigma=1.0), or one of the names {', '.join(map(repr, KERNEL_NAMES))}."
    )
