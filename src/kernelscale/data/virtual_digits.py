"""A lazily generated, deterministic stream of deformed digits ("virtual examples").

Dai et al. (2014, "Scalable Kernel Methods via Doubly Stochastic Gradients", NIPS) train on
MNIST8M: 8.1 million virtual examples made by deforming the 60000 MNIST training digits
(Loosli, Canu & Bottou 2007, "Training invariant support vector machines using selective
sampling"). :class:`VirtualDigits` builds such a stream from any set of base images: example
``i`` is base image ``i mod n`` moved by a random affine map (shift, rotation and scaling about the
image centre) composed with an elastic deformation (Simard, Steinkraus & Platt 2003: a uniform
random displacement field smoothed by a Gaussian of width ``elastic_sigma`` and scaled by
``elastic_alpha``), resampled bilinearly.

The stream is cut into chunks of ``chunk_size`` examples. Chunk ``c`` depends on ``(seed, c)``
alone (``np.random.default_rng([seed, c])``), so any worker can regenerate any chunk, in any
order, bit for bit, and the whole stream never exists at once. (Bit for bit on one kind of
machine and environment: the smoothing of the elastic field is a BLAS matrix product and the
resampling is compiled when numba is installed, so the last bits of a pixel can differ between
CPU types, or with and without numba.)
"""

from __future__ import annotations

import functools
import importlib.util
import math
import numbers

import numpy as np
from scipy import ndimage

__all__ = ["VirtualDigits"]

#: numba is installed: the resampling runs compiled (set USE_NUMBA = False for scipy's
#: map_coordinates, the same images to rounding)
NUMBA_AVAILABLE = importlib.util.find_spec("numba") is not None
USE_NUMBA = True


def _check_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def _check_real(value, name, *, minimum=0.0, strict=False, hint=""):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    ok = ok and (value > minimum if strict else value >= minimum)
    if not ok:
        bound = ">" if strict else ">="
        raise ValueError(f"{name} must be a finite number {bound} {minimum}, got {value!r}{hint}.")
    return float(value)


class VirtualDigits:
    """Deterministic, lazily generated stream of deformed copies of base images (MNIST8M style).

    Parameters
    ----------
    images : array of shape (n, height, width) or (n, height * width) with square images
        The base images, e.g. ``load_dataset("mnist").X_train`` (uint8, 0..255, flattened).
        They are kept by reference, not copied; values must be finite.
    labels : array of shape (n,)
        The base labels; example ``i`` carries ``labels[i % n]``.
    n_examples : int
        Length of the stream (MNIST8M: 8_100_000).
    chunk_size : int, default=10000
        Examples per chunk; the last chunk may be shorter.
    seed : int, default=0
        Chunk ``c`` is drawn from ``np.random.default_rng([seed, c])``.
    max_shift : float, default=2.0
        Translations are uniform in ``[-max_shift, max_shift]`` pixels along each axis.
    max_rotation : float, default=10.0
        Rotations are uniform in ``[-max_rotation, max_rotation]`` degrees.
    scale_range : (float, float), default=(0.9, 1.1)
        Isotropic scale factors are uniform in this range.
    elastic_alpha : float, default=10.0
        Scale (in pixels) of the elastic displacement field; 0 switches it off.
    elastic_sigma : float, default=3.0
        Width (in pixels) of the Gaussian that smooths the field.
    include_originals : bool, default=True
        The first ``n`` examples (the first pass over the base) are the undeformed originals.
    dtype : numpy float dtype, optional
        dtype of the generated X. Default: float32 images stay float32, anything else gives
        float64 (``dtype=np.float32`` halves the memory of a chunk of uint8 MNIST).

    Notes
    -----
    Pixels moved in from outside the image take the smallest base value (the background), and
    generated values are clipped to ``[images.min(), images.max()]``.
    """

    def __init__(self, images, labels, *, n_examples, chunk_size=10000, seed=0, max_shift=2.0,
                 max_rotation=10.0, scale_range=(0.9, 1.1), elastic_alpha=10.0, elastic_sigma=3.0,
                 include_originals=True, dtype=None):
        images = np.asarray(images)
        if images.dtype.kind not in "biuf":
            raise ValueError(f"images must be numeric, got dtype {images.dtype}; convert them, "
                             f"e.g. np.asarray(images, dtype=np.float32).")
        if images.ndim == 2:
            side = int(round(np.sqrt(images.shape[1])))
            if side * side != images.shape[1]:
                raise ValueError(
                    f"images has {images.shape[1]} columns, which is not a square image; pass "
                    f"them as an array of shape (n, height, width).")
            image_shape = (side, side)
        elif images.ndim == 3:
            image_shape = images.shape[1:]
        else:
            raise ValueError(f"images must have shape (n, height, width) or (n, height * width), "
                             f"got shape {images.shape}.")
        if images.shape[0] == 0 or min(image_shape) < 2:
            raise ValueError(f"images must hold at least one image of at least 2x2 pixels, got "
                             f"shape {images.shape}.")
        lo, hi = images.min(), images.max()
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError("images contain NaN or infinity; remove or replace them first.")
        labels = np.asarray(labels)
        if labels.shape != (images.shape[0],):
            raise ValueError(f"labels must have shape ({images.shape[0]},), one per image, got "
                             f"shape {labels.shape}.")
        if dtype is None:
            dtype = np.float32 if images.dtype == np.float32 else np.float64
        dtype = np.dtype(dtype)
        if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype must be np.float32 or np.float64, got {dtype}.")
        self.n_examples = _check_int(n_examples, "n_examples", 1)
        self.chunk_size = _check_int(chunk_size, "chunk_size", 1)
        self.seed = _check_int(seed, "seed", 0)
        self.max_shift = _check_real(max_shift, "max_shift")
        self.max_rotation = _check_real(max_rotation, "max_rotation", hint=" (degrees)")
        if self.max_rotation >= 180:
            raise ValueError(f"max_rotation is in degrees and must be < 180, got {max_rotation!r};"
                             f" digits rotated that far change class (6 <-> 9).")
        try:
            s_lo, s_hi = scale_range
        except (TypeError, ValueError):
            raise ValueError(f"scale_range must be a pair (low, high), got {scale_range!r}.")
        s_lo = _check_real(s_lo, "scale_range[0]", strict=True)
        s_hi = _check_real(s_hi, "scale_range[1]", strict=True)
        if s_lo > s_hi:
            raise ValueError(f"scale_range must be (low, high) with low <= high, got "
                             f"{scale_range!r}; swap the two values.")
        self.scale_range = (s_lo, s_hi)
        self.elastic_alpha = _check_real(elastic_alpha, "elastic_alpha", hint="; 0 switches the "
                                         "elastic deformation off")
        self.elastic_sigma = _check_real(elastic_sigma, "elastic_sigma", strict=True)
        if not isinstance(include_originals, (bool, np.bool_)):
            raise ValueError(f"include_originals must be True or False, got "
                             f"{include_originals!r}.")
        self.include_originals = bool(include_originals)
        self.images = images
        self.labels = labels
        self.dtype = dtype
        self.image_shape = tuple(int(s) for s in image_shape)
        self.value_range = (float(lo), float(hi))
        self._volume = images.reshape((images.shape[0], *self.image_shape))

    # ------------------------------------------------------------------------------------------
    @property
    def n_base(self):
        """Number of base images n."""
        return self._volume.shape[0]

    @property
    def n_chunks(self):
        """Number of chunks, ``ceil(n_examples / chunk_size)``."""
        return -(-self.n_examples // self.chunk_size)

    def __len__(self):
        return self.n_examples

    def chunk_bounds(self, c):
        """``(start, stop)``: the stream indices of the examples of chunk ``c``."""
        c = self._check_chunk(c)
        start = c * self.chunk_size
        return start, min(start + self.chunk_size, self.n_examples)

    def _check_chunk(self, c):
        if isinstance(c, bool) or not isinstance(c, numbers.Integral):
            raise ValueError(f"the chunk index must be an integer, got {c!r}.")
        if not 0 <= c < self.n_chunks:
            raise IndexError(f"chunk index {c} is out of range; this stream has {self.n_chunks} "
                             f"chunks (0 .. {self.n_chunks - 1}).")
        return int(c)

    def chunk(self, c):
        """Chunk ``c`` as ``(X, y)``; X has the base images' layout (flattened or not).

        Regenerated from ``(seed, c)`` alone: the same call always returns the same bits.
        """
        c = self._check_chunk(c)
        start, stop = self.chunk_bounds(c)
        m = stop - start
        base = np.arange(start, stop) % self.n_base
        y = self.labels[base]
        h, w = self.image_shape
        layout = (m, *self.images.shape[1:])
        X = np.empty((m, h, w), dtype=self.dtype)
        keep = np.arange(start, stop) < self.n_base if self.include_originals else np.zeros(m, bool)
        if keep.all():  # a chunk of originals only: nothing random in it
            X[...] = self._volume[base]
            return X.reshape(layout), y

        rng = np.random.default_rng([self.seed, c])
        # the draws depend on m only, never on which rows are originals: fixed layout per chunk
        shift = rng.uniform(-self.max_shift, self.max_shift, size=(2, m))
        angle = np.deg2rad(rng.uniform(-self.max_rotation, self.max_rotation, size=m))
        scale = rng.uniform(*self.scale_range, size=m)
        field = None
        if self.elastic_alpha > 0:
            field = rng.random((m, 2, h, w), dtype=np.float32)

        if keep.any():
            X[keep] = self._volume[base[keep]]
        moved = np.flatnonzero(~keep)
        if moved.size == m:
            X = self._deform(base, shift, angle, scale, field)
        elif moved.size:
            f = None if field is None else field[moved]
            X[moved] = self._deform(base[moved], shift[:, moved], angle[moved], scale[moved], f)
        return X.reshape(layout), y

    def _deform(self, base, shift, angle, scale, field):
        """Resample the base images ``base`` through their affine + elastic maps (bilinear).

        Output pixel p samples the input at ``R(-angle) (p - centre - shift) / scale + centre``
        plus ``elastic_alpha`` times the smoothed field; samples outside the image read the
        background. The field (uniform in (-1, 1), Simard et al. 2003) is smoothed by a Gaussian
        of width ``elastic_sigma`` (truncated at 3 widths, reflected at the borders) as two
        matrix products per image with the filter's h x h and w x w matrices (one GEMM each over
        the chunk). With numba the resampling runs compiled (:func:`_resample`), else by scipy's
        ``map_coordinates``;
        both interpolate in float64 and agree to rounding.
        """
        if field is not None:
            field *= 2.0
            field -= 1.0
            h, w = self.image_shape
            field = (field.reshape(-1, w) @ _gaussian_matrix(w, self.elastic_sigma, field.dtype).T).reshape(field.shape)
            field = np.matmul(_gaussian_matrix(h, self.elastic_sigma, field.dtype), field)
        out = np.empty((base.size, *self.image_shape), dtype=self.dtype)
        # numba compiles native byte orders only
        resample = (_compiled_resample() if self._volume.dtype.isnative else None) or _resample_scipy
        resample(self._volume, base, np.asarray(shift, dtype=np.float64), np.cos(angle) / scale,
                 np.sin(angle) / scale, _NO_FIELD if field is None else field, self.elastic_alpha,
                 self.value_range[0], self.value_range[1], out)
        return out

    def iter_chunks(self, start=0, stop=None):
        """Yield ``chunk(c)`` for ``c`` in ``range(start, stop)`` (stop=None: to the end)."""
        stop = self.n_chunks if stop is None else stop
        for name, value in (("start", start), ("stop", stop)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not (
                    0 <= value <= self.n_chunks):
                raise ValueError(f"{name} must be an integer in 0 .. n_chunks={self.n_chunks}, "
                                 f"got {value!r}.")
        for c in range(start, stop):
            yield self.chunk(c)

    def take(self, n):
        """The first ``n`` examples of the stream as ``(X, y)`` (generates ceil(n / chunk_size)
        chunks; meant for small n)."""
        n = _check_int(n, "n", 0)
        if n > self.n_examples:
            raise ValueError(f"n={n} exceeds the stream's n_examples={self.n_examples}; pass "
                             f"n <= len(stream).")
        n_chunks = -(-n // self.chunk_size)
        parts = list(self.iter_chunks(0, n_chunks))
        if not parts:
            return (np.empty((0, *self.images.shape[1:]), dtype=self.dtype),
                    self.labels[:0].copy())
        X = np.concatenate([p[0] for p in parts])[:n]
        y = np.concatenate([p[1] for p in parts])[:n]
        return X, y

    def to_dask(self):
        """The whole stream as lazy dask arrays ``(X, y)`` with one row chunk per stream chunk.

        X's chunk ``c`` is a task that calls :meth:`chunk` on whichever worker computes it, so no
        process ever holds more than the chunks it works on. The stream (base images included)
        is one key of the graph; with a distributed client it is scattered to the workers once,
        so that the graphs of later computations do not carry it. y's chunks are the base labels
        indexed (no deformation needed). X is flattened to ``(n_examples, height * width)``.
        Needs dask (``pip install "kernelscale[dask]"``).
        """
        try:
            import dask
            import dask.array as da
        except ImportError:  # pragma: no cover - dask is in the test extra
            raise ImportError('VirtualDigits.to_dask needs dask: pip install "kernelscale[dask]"') from None
        rows = tuple(stop - start for start, stop in map(self.chunk_bounds, range(self.n_chunks)))
        stream = _shared(self)
        d = int(np.prod(self.image_shape))
        chunk = dask.delayed(_chunk_rows, pure=True)
        labels = dask.delayed(_chunk_labels, pure=True)
        X = da.concatenate([da.from_delayed(chunk(stream, c), shape=(m, d), dtype=self.dtype)
                            for c, m in enumerate(rows)])
        y = da.concatenate([da.from_delayed(labels(stream, c), shape=(m,), dtype=self.labels.dtype)
                            for c, m in enumerate(rows)])
        return X, y

    def __dask_tokenize__(self):
        from dask.base import normalize_token

        return (type(self).__name__, repr(self), self.dtype.str, normalize_token(self.images),
                normalize_token(self.labels))

    def __repr__(self):
        return (f"VirtualDigits(n_base={self.n_base}, n_examples={self.n_examples}, "
                f"chunk_size={self.chunk_size}, seed={self.seed}, max_shift={self.max_shift}, "
                f"max_rotation={self.max_rotation}, scale_range={self.scale_range}, "
                f"elastic_alpha={self.elastic_alpha}, elastic_sigma={self.elastic_sigma}, "
                f"include_originals={self.include_originals})")


@functools.lru_cache(maxsize=8)
def _gaussian_matrix(n, sigma, dtype):
    """The n x n matrix of scipy's 1-d Gaussian filter (width ``sigma``, truncated at 3 widths,
    mode "reflect"): ``G @ x`` equals ``gaussian_filter1d(x, sigma, truncate=3.0)``."""
    G = ndimage.gaussian_filter1d(np.eye(n), sigma, axis=0, truncate=3.0)
    G = G.astype(dtype)
    G.flags.writeable = False
    return G


#: the field argument of the resamplers when there is no elastic deformation
_NO_FIELD = np.zeros((0, 2, 1, 1), dtype=np.float32)


def _resample(volume, base, shift, cos, sin, field, alpha, lo, hi, out):
    """out[k] = the image ``volume[base[k]]`` resampled bilinearly at the coordinates of
    :meth:`VirtualDigits._deform` (``cos`` and ``sin`` already divided by the scale; ``field``
    of shape (k, 2, h, w) when it holds one field per image), clipped to [lo, hi]; samples
    outside the image read ``lo``, the background. Compiled by numba (:func:`_compiled_resample`)."""
    h, w = out.shape[1], out.shape[2]
    cr, cc = (h - 1) / 2.0, (w - 1) / 2.0
    elastic = field.shape[0] > 0
    for k in range(out.shape[0]):
        image = volume[base[k]]
        for i in range(h):
            u = (i - cr) - shift[0, k]
            for j in range(w):
                v = (j - cc) - shift[1, k]
                r = cos[k] * u + sin[k] * v + cr
                c = cos[k] * v - sin[k] * u + cc
                if elastic:
                    r += alpha * field[k, 0, i, j]
                    c += alpha * field[k, 1, i, j]
                r0 = math.floor(r)
                c0 = math.floor(c)
                fr = r - r0
                fc = c - c0
                value = 0.0
                for di in range(2):
                    ri = r0 + di
                    wr = fr if di else 1.0 - fr
                    for dj in range(2):
                        cj = c0 + dj
                        wc = fc if dj else 1.0 - fc
                        if 0 <= ri < h and 0 <= cj < w:
                            value += wr * wc * image[ri, cj]
                        else:
                            value += wr * wc * lo
                out[k, i, j] = min(max(value, lo), hi)


def _resample_scipy(volume, base, shift, cos, sin, field, alpha, lo, hi, out):
    """:func:`_resample` by one ``map_coordinates`` call for the whole chunk (without numba).

    The images are stacked into one tall 2-d image with a row of background between neighbours,
    and row coordinates are clipped into that row, so the interpolation never mixes two images
    (2-d bilinear reads 4 pixels per output pixel; the same on a 3-d (chunk, h, w) volume reads
    8 and takes twice as long)."""
    k, h, w = out.shape
    rows = h + 2
    cr, cc = (h - 1) / 2.0, (w - 1) / 2.0
    cos, sin = cos[:, None, None], sin[:, None, None]
    u = (np.arange(h) - cr)[None, :, None] - shift[0][:, None, None]
    v = (np.arange(w) - cc)[None, None, :] - shift[1][:, None, None]
    coords = np.empty((2, k, h, w))
    np.multiply(cos, u, out=coords[0])
    coords[0] += sin * v
    coords[0] += cr
    np.multiply(cos, v, out=coords[1])
    coords[1] -= sin * u
    coords[1] += cc
    if field.shape[0]:
        coords += np.multiply(field.transpose(1, 0, 2, 3), alpha, dtype=np.float64)  # as _resample
    tall = np.full((k, rows, w), lo, dtype=volume.dtype)
    tall[:, 1:-1] = volume[base]
    np.clip(coords[0], -1.0, h, out=coords[0])  # -1 and h are the background rows
    coords[0] += (np.arange(k) * rows + 1.0)[:, None, None]
    ndimage.map_coordinates(tall.reshape(k * rows, w), coords, output=out, order=1,
                            mode="grid-constant", cval=lo, prefilter=False)
    np.clip(out, lo, hi, out=out)


_compiled = {}


def _compiled_resample():
    """:func:`_resample` compiled by numba (on first use, cached on disk); None without numba or
    when ``USE_NUMBA`` is off."""
    if not (USE_NUMBA and NUMBA_AVAILABLE):
        return None
    if "resample" not in _compiled:
        import numba

        _compiled["resample"] = numba.njit(cache=True, nogil=True, fastmath=False)(_resample)
    return _compiled["resample"]


def _chunk_rows(stream, c):
    """Chunk ``c`` of ``stream`` with each image flattened to a row (a task of :meth:`VirtualDigits.to_dask`)."""
    X = stream.chunk(c)[0]
    return X.reshape(X.shape[0], -1)


def _chunk_labels(stream, c):
    start, stop = stream.chunk_bounds(c)
    return stream.labels[np.arange(start, stop) % stream.n_base]


def _shared(stream):
    """``stream`` as one key for dask graphs: scattered to every worker when a distributed client
    is current (the graph then holds only its future), else a delayed object."""
    import dask

    from ..dask.client import current_client

    client = current_client()
    if client is not None:
        return client.scatter(stream, broadcast=True, hash=True)
    return dask.delayed(stream, pure=True, name=f"virtual-digits-{dask.base.tokenize(stream)}")
