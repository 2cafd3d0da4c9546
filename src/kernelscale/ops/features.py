"""FeatureOperator: the n-sized products of seeded random-feature blocks with rows of X.

The random-feature methods (doubly stochastic gradients, stagewise regression, the least-squares
classifiers and the feature transformers) keep coefficients and small moment matrices; every
pass over rows goes through one of these verbs, in row chunks planned by
:func:`~kernelscale.ops.memory.plan_rows` within the operator's budget (bytes):

- ``transform(X, blocks)``: [phi_t(X) for t in blocks] side by side, (n, sum of block widths);
- ``scores(X, coef, blocks)``: f(X) = sum_j phi_{blocks[j]}(X) coef[j], (n, k) (the model of
  docs/algorithms.md section 2.2, f(x) = sum_t phi_t(x) . alpha_t);
- ``weighted_mean(A, w)``: sum_i w_i a_i, and ``weighted_gram(A, w, ...)``: sum_i w_i a_i b_i^T
  or the weighted covariance sum_i w_i (a_i - c)(a_i - c)^T (the Sigma of Algorithms 1-3 of
  section 5), float64 sums of products in A's dtype.

Fourier blocks ("cos", "cossin") are evaluated in groups of consecutive blocks of about
``GROUP_COLUMNS`` columns: one GEMM with the group's concatenated frequencies and one
trigonometric pass (a block of 256 columns alone is a small, slow GEMM). The grouping depends on
the block indices only and a group's buffer always has the same layout, so results are bit for
bit the same whether the regenerated parameters were cached or not (they are cached for the
operator's life, e.g. one ``fit`` call, while they fit in ``cache_bytes``); a budget that cuts
the rows into smaller chunks changes them by rounding only. ``transform`` of several consecutive
blocks of one group takes one GEMM and one trigonometric pass too: the features of block by
block calls up to rounding.

On a torch backend the row chunks, projections and products run on the device; block parameters
are drawn on the host (the same on every device) and copied over; verbs return host arrays.
"""

from __future__ import annotations

import math
import weakref

import numpy as np
import scipy.sparse as sp

from . import fast_cos
from .backend import NUMPY, current_backend
from .feature_blocks import FourierBlock
from .memory import MAX_CHUNK_ROWS, plan_rows

__all__ = ["FeatureOperator", "GROUP_COLUMNS", "GROUP_BYTES", "SINGLE_THREAD_PROJECTION_BYTES", "SUM_ROWS",
           "group_blocks"]

#: feature columns of Fourier blocks evaluated together (one GEMM)
GROUP_COLUMNS = 4096
#: ... and at most this many bytes of their frequencies (d x columns): on wide inputs (d beyond
#: about 1000 in float64, e.g. sparse text) a group of GROUP_COLUMNS columns would take gigabytes.
#: A function of d and the block size only, so the grouping stays the same for every budget
GROUP_BYTES = 32 * 2**20
#: a row chunk's feature projection stays below this many bytes. Smaller chunks keep the
#: trigonometric pass nearer the cache (on one thread 8 MB predicted 20% faster than 256 MB),
#: larger ones make fewer threaded BLAS calls (on two threads 256 MB was twice as fast as 8 MB);
#: at 64 MB predictions were as fast as before grouping, or faster, on one and on two threads
PROJECTION_BYTES = 64 * 2**20
#: ... in a process whose BLAS runs one thread (a dask worker's task: distributed's nannies start
#: their workers with one BLAS thread): one task scoring 2048 rows on 10 blocks of 1024 features,
#: d = 30, took 76 ms at 64 MB, 58 ms at 8 MB, 64 ms at 2 MB; two such processes at once on the
#: 2 cores 95-107 / 80 / 73-75 ms (they share the memory bandwidth)
SINGLE_THREAD_PROJECTION_BYTES = 8 * 2**20
#: float64 rows on the host with at most this fraction of nonzeros take the "cos" blocks of
#: ``scores`` (and of a one-block ``transform``) from their nonzeros: one AXPY per nonzero, the
#: cosine and the products with the coefficients (or the scale) in one tiled loop
#: (:func:`~kernelscale.ops.fast_cos.sparse_cos_scores`, ``sparse_cos_features``), not a GEMM, a
#: cosine pass and a GEMV. Measured on 2 cores (8192 random rows, 4096 features), as a fraction of
#: the dense time: d = 123: 0.27 / 0.36 / 0.59 / 0.73 / 0.90 at 5 / 11 / 25 / 35 / 50% nonzeros;
#: d = 784: 0.34 / 0.71 / 0.81 / 1.09 / 1.64 at 5 / 11 / 19 / 25 / 35% (the GEMM's arithmetic
#: grows with d, the sparse loops' with the nonzeros).
SPARSE_DENSITY = 0.25
#: ... and float32 rows with at most this fraction take the same float64 loops for ``scores``
#: (their float32 GEMM and numpy's SIMD float32 cosine take half the float64 time): the float64
#: sparse scores took 0.60 / 0.65 / 0.84 / 0.95 of the float32 dense time at 5 / 8 / 11 / 15%
#: nonzeros for d = 123, 0.59 / 0.69 / 0.98 / 1.13 for d = 784
SPARSE_DENSITY_FLOAT32 = 0.12
#: ... and whose run of blocks has at most this many bytes of frequencies: the loops take a copy
#: of them in tiles (:func:`~kernelscale.ops.fast_cos.weight_tiles`; MNIST's run of 4096 features:
#: 25 MB)
SPARSE_WEIGHTS_BYTES = 32 * 2**20
#: rows per partial sum of the weighted means and cross moments: products in A's dtype (float32
#: sums of more rows lose digits), partial sums added in float64
SUM_ROWS = 4096
#: rows whose features a pass over a row chunk regenerates at once (a distributed stagewise stage,
#: :mod:`kernelscale.least_squares.stagewise_solver`), so that what its task holds does not grow with
#: the chunk's rows (:mod:`kernelscale.dask.memory` plans them as ``Footprint.block``)
PIECE_ROWS = 1024
_FIX = "increase max_memory or use a smaller block_size"


class FeatureOperator:
    """Products of the seeded feature map ``spec`` with rows of X, within ``budget`` bytes.

    Parameters
    ----------
    spec : FeatureBlockSpec or None
        The map (block t regenerated from (spec.seed, t)); None for an operator used only for
        the weighted moments of arrays that are already features.
    budget : int
        Bytes the operator's temporaries may take (parsed by the caller, once).
    cache_bytes : int, default=0
        Regenerated block parameters are kept while they fit in this many bytes; 0 regenerates
        every block at every use (same results either way).
    blocks : dict or None
        Parameters already drawn, by block index (a fitted transformer's), used as they are.
    backend : Backend or None
        Where the products run; None is :func:`~kernelscale.ops.backend.current_backend`.
    group : bool, default=True
        Fourier blocks of one group of ``GROUP_COLUMNS`` columns share one GEMM in ``scores``
        (small mini-batches against many blocks) and in ``transform`` (within half of the budget
        left beside its output); False takes them one block at a time over all rows, which was
        faster for predictions on many rows (benchmarks/perf/refactor.py's adult predict).
    projection_bytes : int or None
        The most bytes of a row chunk's projection in ``scores`` (None: ``PROJECTION_BYTES``);
        a single-thread process (a dask worker's task) scores faster in smaller chunks
        (``SINGLE_THREAD_PROJECTION_BYTES``). The same scores up to rounding.
    """

    def __init__(self, spec, budget, *, cache_bytes=0, blocks=None, backend=None, group=True, projection_bytes=None):
        self.spec = spec
        self.projection_bytes = PROJECTION_BYTES if projection_bytes is None else int(projection_bytes)
        self.budget = int(budget)
        self.backend = current_backend() if backend is None else backend
        self.cache_bytes = max(int(cache_bytes), 0)
        self._used = 0
        # block index -> block, or ("group", g) -> _Group of Fourier blocks
        self._cache = dict(blocks or {})
        self._kept = {}  # key -> bytes of what _keep added to the cache (not the given blocks)
        # (a weak reference to X, its SparseRows or None): _sparse_rows of the last X. Weak, and
        # forgotten with X: an operator may outlive its rows (a dask worker keeps the arguments
        # of the tasks whose results it holds, and a strong reference kept each task's chunk)
        self._nonzeros = None
        fourier = spec is not None and spec.method in ("cos", "cossin")
        self._m = (spec.block_size // 2 if spec.method == "cossin" else spec.block_size) if fourier else 0
        self._group = (group_blocks(spec) if group else 1) if fourier else 0

    # -- block parameters ------------------------------------------------------------------------

    def _keep(self, key, value, nbytes):
        """Cache ``value`` when it fits; True when it was kept."""
        if self._used + nbytes > self.cache_bytes:
            return False
        self._cache[key] = value
        self._kept[key] = nbytes
        self._used += nbytes
        return True

    def limit(self, budget, cache_bytes):
        """Set the budget and the cache's size for the next calls (an operator kept between
        calls); cached parameters beyond the new size are dropped, the latest first."""
        self.budget, self.cache_bytes = int(budget), max(int(cache_bytes), 0)
        self._nonzeros = None
        for key in reversed(list(self._kept)):
            if self._used <= self.cache_bytes:
                break
            self._cache.pop(key, None)  # pop, not del: another thread may have dropped it already
            self._used -= self._kept.pop(key, 0)

    def block(self, t):
        """The parameters of block t (given, cached, or regenerated from (seed, t))."""
        block = self._cache.get(t)
        if block is not None:
            return block
        if self._group:
            weights_t, offset, _ = self._fourier_run(t, t + 1)
            return FourierBlock(weights_t.T, offset)
        block = self.spec.block(t)
        self._keep(t, block, block.nbytes)
        return block

    def _fourier_run(self, start, stop, on_device=False):
        """Frequencies^T ((stop - start) m, d), phases (or None) and [frequencies^T, phases]
        ((stop - start) m, d + 1; None on a device or without phases) of the blocks [start,
        stop), which lie in one group; from the group's cached buffer, or drawn for this call only.

        ``on_device``: the caller takes the backend's arrays. On a torch backend a cached group,
        once all its blocks are drawn, then moves to the device and stays there (its host copy
        released): the frequencies cross to the device once, not at every use."""
        key = ("group", start // self._group)
        group = self._cache.get(key)
        if group is None:
            group = _Group(self.spec, key[1] * self._group, self._group, self._m)
            if not self._keep(key, group, group.nbytes):  # transient: draw the run only
                group = _Group(self.spec, start, stop - start, self._m)
        group.fill(stop)
        if on_device and self.backend is not NUMPY and group.full and self._cache.get(key) is group:
            group.move_to(self.backend)
        lo, hi = (start - group.first) * self._m, (stop - group.first) * self._m
        weights_t, offset, augmented = group.weights_t[lo:hi], group.offset, group.augmented
        offset = None if offset is None else offset[lo:hi]
        augmented = None if augmented is None else augmented[lo:hi]  # one read: move_to may reset it
        if not on_device and group.device is not None:
            weights_t = self.backend.to_numpy(weights_t)
            offset = None if offset is None else self.backend.to_numpy(offset)
        return weights_t, offset, augmented

    def _runs(self, blocks):
        """(position in ``blocks``, first block, stop): runs of consecutive blocks of one group
        (one block each for other methods)."""
        runs = []
        for j, t in enumerate(blocks):
            if runs and self._group and t == runs[-1][2] and t // self._group == runs[-1][1] // self._group:
                runs[-1][2] = t + 1
            else:
                runs.append([j, t, t + 1])
        return runs

    # -- verbs over rows ---------------------------------------------------------------------------

    def _rows(self, X):
        """X as a C-ordered host array of the map's dtype, checked against its input dimension
        (row chunks go to the backend's device one at a time)."""
        if sp.issparse(X):  # kept sparse: products X W are sparse products, one row chunk at a time
            if self.backend is not NUMPY:
                raise ValueError("scipy.sparse X is computed on the host only; pass device=None (numpy), or "
                                 "a dense X (X.toarray()) for a torch device.")
            X = X.tocsr() if X.format != "csr" else X
            X = X if X.dtype == self.spec.dtype else X.astype(self.spec.dtype)
        else:
            X = np.ascontiguousarray(X, dtype=self.spec.dtype)
        if X.ndim != 2 or X.shape[1] != self.spec.n_features_in:
            raise ValueError(
                f"X has shape {X.shape}, but the feature map takes {self.spec.n_features_in} "
                f"features per row; pass X with that many columns."
            )
        return X

    def _chunk(self, n, columns, k=0, fixed=0, max_rows=None):
        item = self.spec.dtype.itemsize
        per_row = item * (columns * (self.spec.workspace + 1) + 2 * k)
        max_rows = n if max_rows is None else max_rows
        return plan_rows(n, per_row, fixed, self.budget, f"{columns} random features per row", _FIX, max_rows=max_rows)

    def transform(self, X, blocks, on_device=False, out=None, count_out=True):
        """[phi_t(X) for t in blocks] side by side: (n, len(blocks) * width), in the map's dtype.

        Each block alone estimates the kernel without bias (module docstring of
        :mod:`~kernelscale.ops.feature_blocks`); the concatenation is not rescaled.
        ``on_device``: returned as the backend's array (for further products on the device),
        not copied to the host. ``out``: a C-contiguous array of the backend, of that shape and
        dtype, written and returned instead of a new one. ``count_out=False``: the given ``out`` is
        the caller's result, outside the budget, which then bounds the work beside it (a
        transformer's ``transform``: peak memory about the output plus the budget).
        """
        X = self._rows(X)
        blocks = list(blocks)
        n, width = X.shape[0], self.spec.n_features_out
        shape = (n, len(blocks) * width)
        if out is None:
            out = self.backend.empty(shape, dtype=X.dtype)
        elif tuple(out.shape) != shape or self.backend.to_numpy(out[:0]).dtype != X.dtype:
            raise ValueError(f"out must have shape {shape} and dtype {X.dtype}, got shape {tuple(out.shape)} and "
                             f"dtype {self.backend.to_numpy(out[:0]).dtype}.")
        fixed = out.nbytes if count_out else 0
        # one block's features fill whole rows of out: from X's nonzeros where they are few
        sparse = (self._sparse_rows(X) if len(blocks) == 1 and self.backend is NUMPY and out.flags.c_contiguous
                  and X.dtype == np.float64 and self._tiles_fit(width, X.shape[1]) else None)
        # blocks evaluated together: their parameters take at most half of the budget left
        together = max(0, self.budget - fixed) // max(1, 2 * self.spec.block_bytes)
        for j, start, stop in self._runs(blocks):
            if stop - start > 1 and together > 1 and not any(t in self._cache for t in range(start, stop)):
                # a run of one group's Fourier blocks: one GEMM and one trigonometric pass per piece,
                # written in place (block by block up to rounding: the GEMM's, and the threaded
                # cosine's on large pieces)
                for first in range(start, stop, together):
                    last = min(first + together, stop)
                    cols = slice((j + first - start) * width, (j + last - start) * width)
                    chunk = self._chunk(n, (last - first) * width,
                                        fixed=fixed + (last - first) * self.spec.block_bytes)
                    params = self._fourier_run(first, last, on_device=True)
                    for s in range(0, n, chunk):
                        self._group_features(self.backend.asarray(X[s : s + chunk]), params, out[s : s + chunk, cols])
                continue
            # the features are written in place, so rows are cut only where the budget requires
            chunk = self._chunk(n, width, fixed=fixed + self.spec.block_bytes)
            for i, t in enumerate(range(start, stop), start=j):
                block = self.block(t)
                if sparse is not None and type(block) is FourierBlock and block.offset is not None:
                    tiles, offset = fast_cos.weight_tiles(block.weights), np.ascontiguousarray(block.offset)
                    scale = math.sqrt(2.0 / block.weights.shape[1])
                    if all(fast_cos.sparse_cos_features(sparse.rows(s, s + chunk), tiles, offset, scale,
                                                        out[s : s + chunk]) is not None for s in range(0, n, chunk)):
                        continue
                for s in range(0, n, chunk):
                    rows = self.backend.asarray(X[s : s + chunk])
                    block.apply(rows, self.backend, out=out[s : s + chunk, i * width : (i + 1) * width])
        return out if on_device else self.backend.to_numpy(out)

    def _group_features(self, X, params, out):
        """phi_t(X) of consecutive Fourier blocks side by side into ``out`` (rows, count width):
        :meth:`FourierBlock.apply` of each block, with one GEMM for all of them."""
        be, m = self.backend, self._m
        weights_t, offset, augmented = params
        if offset is not None:
            if self._phase_in_gemm(X, augmented):
                proj = _project_with_phase(X, augmented, out)
                be.cos(proj, out=proj)
                proj *= np.asarray(math.sqrt(2.0 / m), dtype=proj.dtype)
                return
            proj = be.matmul(X, weights_t.T, out=out)
            be.phase_cos(proj, be.asarray(offset), math.sqrt(2.0 / m))
            return
        proj = be.matmul(X, weights_t.T)
        for i in range(proj.shape[1] // m):
            be.cos(proj[:, i * m : (i + 1) * m], out=out[:, 2 * i * m : (2 * i + 1) * m])
            be.sin(proj[:, i * m : (i + 1) * m], out=out[:, (2 * i + 1) * m : (2 * i + 2) * m])
        out *= math.sqrt(1.0 / m)

    def scores(self, X, coef, blocks):
        """f(X) = sum_j phi_{blocks[j]}(X) coef[j]: (n, k) in the map's dtype.

        ``coef`` (len(blocks), width, k). Fourier blocks of one group take one GEMM,
        cos(X W_g + b_g) C_g sqrt(2/m) (or [cos, sin] with sqrt(1/m)); other blocks phi_t(X) C_t.
        """
        X = self._rows(X)
        F = self.backend.zeros((X.shape[0], coef.shape[2]), X.dtype)
        for _, rows, part in self._parts(X, coef, blocks):
            F[rows] += part
        return self.backend.to_numpy(F)

    def _parts(self, X, coef, blocks):
        """(run number, row slice, phi_run(X[rows]) coef_run) for each run of ``blocks`` and each
        row chunk of X (a host array of the map's dtype)."""
        n, k = X.shape[0], coef.shape[2]
        coef = self.backend.asarray(coef, dtype=X.dtype)
        runs = self._runs(list(blocks))
        width, params = self.spec.n_features_out, self.spec.block_bytes
        counts = {stop - start for _, start, stop in runs}
        item = X.dtype.itemsize
        # on a device the rows cross once for all runs, not once per run (X within an eighth of the budget)
        held = X.nbytes if self.backend is not NUMPY and len(runs) > 1 and X.nbytes <= self.budget // 8 else 0
        chunks = {
            count: self._chunk(n, count * width, k, count * params + held,
                               max(1, self.projection_bytes // (count * width * item)))
            for count in counts
        }
        rows = self.backend.asarray(X) if held else X
        # X's nonzeros, when a run is small enough to take them (SPARSE_WEIGHTS_BYTES)
        small = self._group and any(self._tiles_fit(count * self._m, X.shape[1]) for count in counts)
        sparse = self._sparse_rows(X) if small else None
        # one projection buffer for the GEMM runs of one block count and their chunks (the
        # chunk's projection the budget counts): a fresh array per chunk (64 MB, beyond malloc's
        # reuse) was faulted in page by page each time, 8-9% of adult's prediction
        buf, buf_count = None, 0
        for i, (j, start, stop) in enumerate(runs):
            chunk, c = chunks[stop - start], coef[j : j + stop - start]
            run_buf, sparse_run = None, None
            if self._group:
                part, params = self._group_scores, self._fourier_run(start, stop, on_device=True)
                if sparse is not None and self._tiles_fit(*params[0].shape):
                    # the frequencies as tiles, the phases and the coefficients as the kernel
                    # takes them: once per run
                    sparse_run = (fast_cos.weight_tiles(params[0].T), np.ascontiguousarray(params[1], np.float64),
                                  c.reshape(c.shape[0] * self._m, k))
                else:
                    if stop - start != buf_count:
                        buf, buf_count = None, stop - start  # the former buffer goes before the next comes
                        buf = self.backend.empty((min(chunk, n) * buf_count * self._m,), X.dtype)
                    run_buf = buf
            else:
                part, params = self._block_scores, self.block(start)
            for s in range(0, n, chunk):
                nonzeros = None if sparse_run is None else (sparse.rows(s, s + chunk), *sparse_run)
                yield i, slice(s, s + chunk), part(self.backend.asarray(rows[s : s + chunk]), params, c, run_buf,
                                                   nonzeros)

    def _tiles_fit(self, columns, d):
        """Whether the sparse loops may take a run of ``columns`` features of d inputs: its
        frequencies as float64 tiles (a copy) within SPARSE_WEIGHTS_BYTES and an eighth of the
        budget."""
        return columns * d * 8 <= min(SPARSE_WEIGHTS_BYTES, self.budget // 8)

    def _sparse_rows(self, X):
        """X's nonzeros (:class:`SparseRows`) when ``scores`` (and, float64, ``transform``) take
        its "cos" blocks by sparse AXPYs (SPARSE_DENSITY, SPARSE_DENSITY_FLOAT32; on the host,
        numba installed, the nonzeros' arrays within an eighth of the budget), else None."""
        density = {np.dtype(np.float64): SPARSE_DENSITY, np.dtype(np.float32): SPARSE_DENSITY_FLOAT32}.get(X.dtype)
        if not (self.backend is NUMPY and density and self.spec.method == "cos" and X.size and fast_cos.available()):
            return None
        # the last X's, by the array object (the doubly stochastic fit transforms one X per block):
        # an operator's rows are not changed in place between its calls (operators live for one
        # fit or prediction on the host; limit(), the door of a kept operator, forgets them)
        cached = self._nonzeros
        if cached is not None and cached[0]() is X:
            return cached[1]
        if sp.issparse(X):  # scipy.sparse rows: their CSR arrays are the loops' input, whatever the density
            fits = SparseRows.bytes(X.shape[0], X.nnz) <= self.budget // 8
            sparse = SparseRows.from_csr(X) if fits else None
        else:
            nnz = np.count_nonzero(X)
            fits = nnz <= density * X.size and SparseRows.bytes(X.shape[0], nnz) <= self.budget // 8
            sparse = SparseRows(X) if fits else None
        self._nonzeros = (weakref.ref(X, self._forget_rows), sparse)
        return sparse

    def _forget_rows(self, ref):
        """Drop the cached nonzeros of rows that no longer exist (the weak reference's callback)."""
        cached = self._nonzeros
        if cached is not None and cached[0] is ref:
            self._nonzeros = None

    def __getstate__(self):
        # the last rows' nonzeros belong to this process's calls; a copy starts without them
        return {**self.__dict__, "_nonzeros": None}

    def _block_scores(self, X, block, c, buf=None, nonzeros=None):
        return self.backend.matmul(block.apply(X, self.backend), c[0])

    def _group_scores(self, X, params, c, buf=None, nonzeros=None):
        """cos(X W + b) C sqrt(2/m), or (cos(X W) C_cos + sin(X W) C_sin) sqrt(1/m), for the
        concatenated frequencies W, phases b and coefficients C of consecutive Fourier blocks;
        the projection X W written into ``buf`` (flat, at least that long) when given.
        ``nonzeros``: (X's rows as CSR arrays, W's tiles, b, C as (D, k)) for the sparse AXPYs
        (:func:`~kernelscale.ops.fast_cos.sparse_cos_scores`)."""
        be, mm, m = self.backend, self.backend.matmul, self._m
        weights_t, offset, augmented = params
        rows = c.shape[0] * m
        shape = (X.shape[0], weights_t.shape[0])
        out = None if buf is None else buf[: shape[0] * shape[1]].reshape(shape)
        if offset is not None:
            scores = None
            if nonzeros is not None:  # None back: numba's loops unavailable here (a forked process)
                scores = fast_cos.sparse_cos_scores(*nonzeros)
            if scores is not None:  # float64, also for float32 rows
                return (scores * math.sqrt(2.0 / m)).astype(X.dtype, copy=False)
            if self._phase_in_gemm(X, augmented):
                proj = _project_with_phase(X, augmented, out)
                be.cos(proj, out=proj)
            else:
                proj = mm(X, weights_t.T, out=out)
                be.phase_cos(proj, be.asarray(offset))
            return mm(proj, c.reshape(rows, -1)) * math.sqrt(2.0 / m)
        proj = mm(X, weights_t.T, out=out)
        part = mm(be.cos(proj), c[:, :m].reshape(rows, -1))
        be.sin(proj, out=proj)
        part += mm(proj, c[:, m:].reshape(rows, -1))
        return part * math.sqrt(1.0 / m)

    def _phase_in_gemm(self, X, augmented):
        """Whether the phases go into the projection's GEMM (:func:`_project_with_phase`): for
        float32 rows on the host, where the cosine is numpy's own pass (float64 has one pass for
        phase and cosine: :func:`~kernelscale.ops.fast_cos.cos_inplace`)."""
        return augmented is not None and self.backend is NUMPY and X.dtype == np.float32 and not sp.issparse(X)

    def _sum_chunk(self, A, per_row, max_rows=SUM_ROWS):
        what = "a weighted sum over rows"
        return plan_rows(A.shape[0], per_row, 0, self.budget, what, "increase max_memory", max_rows=max_rows)

    def weighted_mean(self, A, w):
        """sum_i w_i a_i (float64) of the rows of A (n, p), without a float64 copy of A."""
        be = self.backend
        mean = np.zeros(A.shape[1])
        wd = be.asarray(w.astype(A.dtype))
        chunk = self._sum_chunk(A, A.dtype.itemsize)
        for s in range(0, A.shape[0], chunk):
            mean += be.to_numpy(be.matmul(wd[s : s + chunk], be.asarray(A[s : s + chunk])))
        return mean

    def weighted_gram(self, A, w, B=None, *, center=None, uniform=False):
        """Weighted second moments (float64) of the rows of A (n, p), per chunk in A's dtype.

        - ``center`` (p,) given: the weighted covariance sum_i w_i (a_i - c)(a_i - c)^T, as
          C^T C of the centred rows scaled by sqrt(w_i) (a symmetric rank-k update);
        - otherwise sum_i w_i a_i b_i^T with B (n, q) (default A); ``uniform``: all weights are
          equal, so the rows are not scaled and w_0 multiplies the sum.
        """
        be = self.backend
        dot = np.dot if be is NUMPY else be.matmul  # np.dot runs C^T C as a symmetric rank-k update
        other = A if B is None else B
        out = np.zeros((A.shape[1], other.shape[1]))
        per_row = A.shape[1] * A.dtype.itemsize
        if center is not None:
            chunk = self._sum_chunk(A, per_row, MAX_CHUNK_ROWS)  # a centred copy of the chunk
            center = be.asarray(np.asarray(center, dtype=A.dtype))
            root = be.asarray(np.sqrt(w).astype(A.dtype))
            for s in range(0, A.shape[0], chunk):
                C = _dense_chunk(be, A, s, chunk) - center
                C *= root[s : s + chunk, None]
                out += be.to_numpy(dot(C.T, C))
            return out
        wd = be.asarray(w.astype(A.dtype))
        chunk = self._sum_chunk(A, per_row)
        for s in range(0, A.shape[0], chunk):
            a = _dense_chunk(be, A, s, chunk)
            b = a if B is None else _dense_chunk(be, B, s, chunk)
            if not uniform:  # scale the narrower side: B (n, k) is usually far narrower than A
                if B is None or b.shape[1] > a.shape[1]:
                    a = a * wd[s : s + chunk, None]
                else:
                    b = b * wd[s : s + chunk, None]
            out += be.to_numpy(dot(a.T, b))
        if uniform:
            out *= w[0]
        return out


class SparseRows:
    """The nonzeros of a 2-d host array by rows (CSR arrays: indptr int64, indices int64, values
    float64)."""

    def __init__(self, X):
        n, d = X.shape
        flat = np.flatnonzero(X)  # row-major positions r d + j, in order
        self.indptr = np.searchsorted(flat, np.arange(n + 1, dtype=np.int64) * d).astype(np.int64, copy=False)
        self.values = X.reshape(-1)[flat].astype(np.float64, copy=False)
        flat %= d
        self.indices = flat.astype(np.int64, copy=False)

    @classmethod
    def from_csr(cls, X):
        """The nonzeros of a scipy.sparse CSR X (its arrays as int64 / float64, copied only where
        their types differ)."""
        rows = cls.__new__(cls)
        rows.indptr = X.indptr.astype(np.int64, copy=False)
        rows.indices = X.indices.astype(np.int64, copy=False)
        rows.values = X.data.astype(np.float64, copy=False)
        return rows

    @staticmethod
    def bytes(n, nnz):
        """The bytes of the arrays of n rows holding nnz nonzeros."""
        return 8 * (n + 1) + 16 * nnz

    def rows(self, start, stop):
        """(indptr, indices, values) of rows start .. stop - 1: indptr's slice into the whole arrays."""
        return self.indptr[start : stop + 1], self.indices, self.values


def group_blocks(spec):
    """Fourier blocks of ``spec`` evaluated together: GROUP_COLUMNS columns, and at most
    GROUP_BYTES of frequencies (at least one block)."""
    return max(1, min(GROUP_COLUMNS // spec.block_size, GROUP_BYTES // max(1, spec.block_bytes)))


def _dense_chunk(backend, A, start, rows):
    """Rows start .. start + rows of A on the backend; of a scipy.sparse A, densified (one chunk,
    which the sums' planning counts at A's width)."""
    chunk = A[start : start + rows]
    return backend.asarray(chunk.toarray() if sp.issparse(chunk) else chunk)


def _project_with_phase(X, augmented, out=None):
    """X W + b as one GEMM, [X, 1] [W^T, b]^T, for ``augmented`` = [W^T, b] (D, d + 1): a
    float32 pass of adding the phases saved (11% of adult's predictions in float32); the sum
    differs from the two steps' by the rounding of b's term."""
    n, d = X.shape
    rows = np.empty((n, d + 1), dtype=X.dtype)
    rows[:, :d] = X
    rows[:, d] = 1
    return np.matmul(rows, augmented.T, out=out)


class _Group:
    """Concatenated frequencies^T (count m, d) and phases of the Fourier blocks [first, first +
    count), drawn in order up to the blocks asked for so far."""

    def __init__(self, spec, first, count, m):
        self.spec, self.first, self.m = spec, first, m
        d = spec.n_features_in
        if spec.method == "cos":  # the phases as a last column: [W^T, b], the GEMM operand of [X, 1]
            self.augmented = np.empty((count * m, d + 1), dtype=spec.dtype)
            self.weights_t, self.offset = self.augmented[:, :d], self.augmented[:, d]
        else:
            self.augmented, self.offset = None, None
            self.weights_t = np.empty((count * m, d), dtype=spec.dtype)
        self.filled = first
        self.stop = first + count
        self.device = None  # the backend holding the arrays once moved (move_to); None: the host
        self.nbytes = (self.weights_t if self.augmented is None else self.augmented).nbytes

    @property
    def full(self):
        return self.filled >= self.stop

    def move_to(self, backend):
        """Hold the (fully drawn) arrays on ``backend``'s device instead of the host; the
        frequencies as the transpose of a C-ordered (d, count m) array, so the GEMM of a whole
        group takes them as they are (no copy per use)."""
        if self.device is None:
            self.weights_t = backend.asarray(np.ascontiguousarray(self.weights_t.T)).T
            self.offset = None if self.offset is None else backend.asarray(self.offset)
            self.augmented, self.device = None, backend

    def fill(self, stop):
        m = self.m
        for t in range(self.filled, stop):
            block = self.spec.block(t)
            i = t - self.first
            self.weights_t[i * m : (i + 1) * m] = block.weights.T
            if self.offset is not None:
                self.offset[i * m : (i + 1) * m] = block.offset
        self.filled = max(self.filled, stop)
