"""Data transforms: the image transforms of paper 4 and the weighted PCA of paper 5.

Image transforms of paper 4 (randomized LS-SVM, docs/algorithms.md section 4.2) as transformers.

Inputs are flattened images, one per row, stored row-major (numpy's and MNIST's layout), with
an optional leading channel axis: ``image_shape`` is (L, L) or (channels, L, L); None infers a
single-channel L x L image from n_features = L^2. Every transform works image by image, keeps
float32 as float32, and is stateless (``fit`` only validates and records n_features_in_).

- :class:`CenterNormalize` (eqs. 61-62): subtract each image's mean, divide by its norm.
- :class:`FFTFeatures` (eqs. 69-75): [xi, phi] / sqrt(2) with xi the centred unit-norm image
  and phi the centred unit-norm sqrt|FFT| of the vectorised image, first half of its values.
- :class:`GaussianCenterFilter` (eq. 76): multiply each channel by exp(-c[(i - L/2)^2 +
  (j - L/2)^2]), i, j = 1..L, with c = 4 / L^2 by default.

A vector of zero norm (a constant image) is left at zero instead of dividing by zero.

Weighted PCA (paper 5, appendix A.2.1; the stagewise method's input reduction) as plain arrays,
so that a fitted map persists without pickling an sklearn object: :func:`pca_fit` gives the
mean and components, :func:`pca_transform` applies them, both within ``max_memory``.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .base.estimator import INPUT_ATTRIBUTES, commit_fit, validate_fit_data
from .linalg import symmetric_eigh
from .base.validation import as_float_array, check_same_features, validate_data
from .ops.memory import parse_memory, plan_rows

__all__ = ["CenterNormalize", "FFTFeatures", "GaussianCenterFilter", "image_shape_of", "pca_fit", "pca_transform"]

_FLOATS = [np.float64, np.float32]


def image_shape_of(n_features, image_shape=None):
    """Return (channels, L, L) for flattened images of ``n_features`` values.

    ``image_shape`` None means one L x L channel with L = sqrt(n_features); otherwise it must be
    (L, L) or (channels, L, L) with product n_features. Raises a ValueError naming the fix.
    """
    if image_shape is None:
        side = math.isqrt(n_features)
        if side * side != n_features:
            raise ValueError(
                f"X has {n_features} features, which is not a square number, so it is not a "
                f"flattened L x L image; pass image_shape=(L, L) or (channels, L, L) matching "
                f"n_features, or flattened square images."
            )
        return 1, side, side
    shape = tuple(image_shape)
    if len(shape) == 2:
        shape = (1,) + shape
    if len(shape) != 3 or any(isinstance(s, bool) or not isinstance(s, Integral) or s < 1 for s in shape):
        raise ValueError(
            f"image_shape must be (L, L) or (channels, L, L) of positive integers, got {image_shape!r}."
        )
    channels, height, width = (int(s) for s in shape)
    if height != width:
        raise ValueError(f"image_shape={image_shape!r} is not square; the paper's transforms need L x L images.")
    if channels * height * width != n_features:
        raise ValueError(
            f"image_shape={image_shape!r} holds {channels * height * width} values but X has "
            f"{n_features} features; pass the image_shape of the flattened images in X."
        )
    return channels, height, width


def _center_normalize(V):
    """Rows minus their mean, divided by their norm (rows of zero norm stay zero); in place.

    The result does not change when a row is scaled, so rows whose squares would overflow or
    underflow are first divided by a power of two near their largest value (exactly: ordinary
    rows are untouched)."""
    if V.size:
        _rescale_extreme_rows(V)
    V -= V.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(V, axis=1, keepdims=True)
    np.divide(V, norms, out=V, where=norms > 0)
    return V


def _rescale_extreme_rows(V):
    """Divide in place each row of V whose largest |value| lies outside [2^-e, 2^e] (e a quarter
    of the dtype's exponent range) by the power of two of that value."""
    e = np.finfo(V.dtype).maxexp // 4
    peak = np.abs(V).max(axis=1)
    rows = np.flatnonzero((peak > np.ldexp(1.0, e)) | ((peak < np.ldexp(1.0, -e)) & (peak > 0)))
    if rows.size:
        exponent = np.frexp(peak[rows])[1]
        V[rows] = np.ldexp(V[rows], -exponent[:, None]).astype(V.dtype, copy=False)


class _ImageTransform(TransformerMixin, BaseEstimator):
    """Validation shared by the image transforms; subclasses implement ``_transform``."""

    _needs_image = True

    def fit(self, X, y=None):
        """Validate X (and image_shape); nothing is learned. ``y`` is ignored."""
        self._validate_params()
        X, _, fitted = validate_fit_data(self, X, None, accept_sparse=False, dtype=_FLOATS)  # self untouched if X is refused
        if self._needs_image:
            image_shape_of(X.shape[1], self.image_shape)
        return commit_fit(self, fitted, stale=INPUT_ATTRIBUTES)

    def transform(self, X):
        """Transform each row (a flattened image); the dtype is kept."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=False, dtype=_FLOATS, reset=False)
        return self._transform(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.requires_fit = True
        return tags


class CenterNormalize(_ImageTransform):
    """Centre and unit-normalise each row (eqs. 61-62): x <- x - <x>; x <- x / |x|.

    Inner products of the results are cosines (eq. 63). Works on any vectors (no image
    geometry is used); a row of zero norm after centring stays zero.
    """

    _needs_image = False
    _parameter_constraints: dict = {}

    def _transform(self, X):
        return _center_normalize(np.array(X, dtype=X.dtype, copy=True))


class FFTFeatures(_ImageTransform):
    """FFT features of eqs. 69-75: x <- [xi, phi] / sqrt(2), n_features + n_features // 2 values.

    xi is the image vector centred (70) and unit-normalised (73); phi = |FFT(xi_centred)|^{1/2}
    (71) keeps the first n_features // 2 values of the 1-d FFT of the vectorised image (the FFT
    of a real vector is symmetric; 392 for 28 x 28, giving the paper's 1176 features), centred
    (72) and unit-normalised (74). The output rows have unit norm.

    Parameters
    ----------
    image_shape : None, (L, L) or (channels, L, L)
        Shape of each flattened (row-major) image; None infers L = sqrt(n_features).
    order : {"F", "C"}, default="F"
        How the image is vectorised before the FFT. The paper concatenates the COLUMNS of each
        image (channel after channel), which "F" reproduces from row-major input; "C" uses the
        row-major order as stored. The xi part is returned in the input order either way.
    """

    _parameter_constraints: dict = {
        "image_shape": [tuple, list, None],
        "order": [StrOptions({"F", "C"})],
    }

    def __init__(self, image_shape=None, order="F"):
        self.image_shape = image_shape
        self.order = order

    def _transform(self, X):
        channels, L, _ = image_shape_of(X.shape[1], self.image_shape)
        n, d = X.shape
        half = d // 2
        xi = _center_normalize(np.array(X, dtype=X.dtype, copy=True))
        vec = xi
        if self.order == "F":  # concatenate the columns of each channel
            vec = xi.reshape(n, channels, L, L).transpose(0, 1, 3, 2).reshape(n, d)
        # xi is centred before it is normalised, so its FFT is that of eq. 70 up to a scale
        # that the normalisation of phi (eq. 74) removes
        phi = np.sqrt(np.abs(np.fft.fft(vec, axis=1)[:, :half])).astype(X.dtype, copy=False)
        if half:
            # the zero frequency of a centred vector is exactly 0; its rounding residue (sqrt of
            # ~eps) would otherwise leak into phi's mean and norm
            phi[:, 0] = 0.0
        _center_normalize(phi)
        out = np.empty((n, d + half), dtype=X.dtype)
        out[:, :d] = xi
        out[:, d:] = phi
        out *= np.asarray(1.0 / np.sqrt(2.0), dtype=X.dtype)
        return out

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self)
        d = self.n_features_in_
        return np.asarray([f"pixel{i}" for i in range(d)] + [f"fft{i}" for i in range(d // 2)], dtype=object)


class GaussianCenterFilter(_ImageTransform):
    """Multiply each image channel by G_ij = exp(-c[(i - L/2)^2 + (j - L/2)^2]) (eq. 76).

    i, j = 1..L as printed in the paper (so the peak is at pixel (L/2, L/2), 1-based); G is
    symmetric in i and j, so row- and column-major flattening give the same result.

    Parameters
    ----------
    image_shape : None, (L, L) or (channels, L, L)
    c : float > 0 or None, default=None
        Width constant; None is the paper's best c = 4 / L^2.
    """

    _parameter_constraints: dict = {
        "image_shape": [tuple, list, None],
        "c": [Interval(Real, 0, None, closed="neither"), None],
    }

    def __init__(self, image_shape=None, c=None):
        self.image_shape = image_shape
        self.c = c

    def gaussian_filter(self, L):
        """The L x L filter G of eq. 76."""
        c = 4.0 / L**2 if self.c is None else float(self.c)
        i = np.arange(1, L + 1) - L / 2.0
        return np.exp(-c * (i[:, None] ** 2 + i[None, :] ** 2))

    def _transform(self, X):
        channels, L, _ = image_shape_of(X.shape[1], self.image_shape)
        G = np.tile(self.gaussian_filter(L).ravel(), channels).astype(X.dtype)
        return X * G


# ----------------------------------------------------------------------------------------------
# weighted PCA (arrays only)


def pca_fit(X, n_components, sample_weight=None, max_memory=None):
    """Weighted PCA: the mean (d,) and the top ``n_components`` eigenvectors (d, n_components) of
    the weighted covariance, both float64, from row blocks under ``max_memory``.

    Components are ordered by decreasing variance; each is signed so that its entry of largest
    magnitude is positive (deterministic output).
    """
    from .ops.rows import executor, is_dask, row_weights

    if not is_dask(X):  # a dask X (validated chunk by chunk by the caller) is summed over its row chunks
        X = as_float_array(X, "X", accept_sparse=True)  # sparse: one row chunk densified at a time
    n, d = X.shape
    if isinstance(n_components, bool) or not isinstance(n_components, Integral) or n_components < 1:
        raise ValueError(f"pca_components must be an integer >= 1, got {n_components!r}.")
    if n_components > d:
        raise ValueError(
            f"pca_components={n_components} is larger than the number of features d={d}; pass "
            f"pca_components <= {d}, or pca_components=None to use the features as they are."
        )
    budget, fixed = parse_memory(max_memory), 4 * 8 * d * d
    plan_rows(
        max(X.chunks[0]) if is_dask(X) else n, d * X.dtype.itemsize, fixed, budget, f"the PCA ({d} x {d} covariance)",
        "increase max_memory, or pass pca_components=None",
    )
    op = executor(budget - fixed, X)
    w = row_weights(op, X, sample_weight, n)
    mean = op.weighted_mean(X, w)
    values, vectors = symmetric_eigh(op.weighted_gram(X, w, center=mean), op.budget)
    components = vectors[:, np.argsort(values)[::-1][:n_components]]
    top = np.argmax(np.abs(components), axis=0)
    components *= np.where(components[top, np.arange(n_components)] < 0, -1.0, 1.0)
    return mean, np.ascontiguousarray(components)


def pca_transform(X, mean, components, max_memory=None):
    """(X - mean) @ components in X's dtype, centring one row block at a time."""
    X = as_float_array(X, "X", accept_sparse=True)
    check_same_features(X, mean.shape[0])
    dtype = X.dtype
    mean, components = mean.astype(dtype, copy=False), components.astype(dtype, copy=False)
    out = np.empty((X.shape[0], components.shape[1]), dtype=dtype)
    chunk = plan_rows(
        X.shape[0], X.shape[1] * dtype.itemsize, out.nbytes, parse_memory(max_memory), "the PCA projection",
        "increase max_memory",
    )
    for s in range(0, X.shape[0], chunk):
        rows = X[s : s + chunk]
        np.matmul((rows.toarray() if sp.issparse(rows) else rows) - mean, components, out=out[s : s + chunk])
    return out
