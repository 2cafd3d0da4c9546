"""Kernel arithmetic under a memory budget: the only place kernelscale evaluates kernel blocks.

Two layers:

- :class:`KernelOperator` ``(kernel, X, max_memory)`` is K(X, X) for a fixed point set X (the
  training points, or a model's support/landmark points). It validates X and parses the budget
  once; its verbs never re-validate X, so solvers call them in hot loops. The verbs are what the
  methods use: ``matvec`` (K V, on any rows and columns of K), ``rows`` (K[idx, :]),
  ``row_block`` (K[idx, :] kept inside the operator, with its Gram matrix and products: the
  LS-SVM block solvers), ``column_gram`` (C^T C and C^T Y for the scaled columns C = K[:, cand]:
  SLKL), ``row_cache`` (an LRU cache of rows: fixed point and coordinate descent), ``predict``
  (K(Z, X) coef for new points Z) and ``diag``.
- functions with the same arithmetic for one-off calls on arrays a user hands in:
  :func:`kernel_matvec`, :func:`kernel_rows`, :func:`kernel_matrix` (the exact solvers only),
  :func:`kernel_diag`, :func:`iter_kernel_blocks`, :func:`matvec_memory`.

Memory: a call never allocates more than its budget for kernel work (the prepared point set, one
block of rows and its temporaries, gathered rows); results the caller asked for (a product, the
requested rows) are checked separately where they are kernel blocks themselves. A budget too
small for one row raises a ValueError saying how much one row needs. The point set X is
prepared (cast, centred, augmented: :meth:`Kernel.prepare`) once per operator; the verbs' default
budget is the operator's budget less that prepared copy.

Backends: the prepared point set, the blocks and their products live on the operator's backend
(:func:`~kernelscale.ops.backend.current_backend` when it is made, e.g. a GPU); arguments and
results are numpy arrays on the host, except a :class:`RowBlock`, which keeps its rows on the
device and hands back only its small products.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..base.validation import array_bytes, as_float_array, check_same_features, result_dtype
from ..kernels import make_kernel, sparse_nbytes
from .backend import NUMPY, current_backend, device_type, get_backend
from .memory import MAX_BLOCK_BYTES, PLAN_HEADROOM, check_fits, parse_memory, rows_per_block, ufunc_workspace_bytes
from .row_cache import KernelRowCache

__all__ = [
    "KernelOperator",
    "RowBlock",
    "iter_kernel_blocks",
    "kernel_matvec",
    "kernel_rows",
    "kernel_diag",
    "kernel_matrix",
    "matvec_memory",
]


#: a host product's kernel blocks stay within this size where that leaves them CACHE_BLOCK_MIN_ROWS
#: rows: their passes (distances, the kernel's function, the product) then run from the shared
#: cache, not memory (3125 x 3125 Gaussian products with 10 columns: 36 ms in blocks of 256
#: rows, 53 ms in one block; benchmarks/studies/compute_layer.md)
CACHE_BLOCK_BYTES = 8 * 2**20
CACHE_BLOCK_MIN_ROWS = 128


# ----------------------------------------------------------------------------------------------
# the block loop (no validation: callers have validated and prepared)


def row_width(A, n_cols=None):
    """Values a row of A counts in memory estimates of blocks against ``n_cols`` points (default:
    A's rows): d, or for scipy.sparse A its stored values per row and the sparse product's
    (:func:`_width`)."""
    return _width(A, A.shape[0] if n_cols is None else n_cols)


def _width(A, n_cols=0):
    """Values per row the block planning counts for the rows A: d for a dense array; for a
    scipy.sparse CSR A, its mean stored values per row (rounded up, plus one), because a sparse
    block is computed from the nonzeros (sparse products and row norms), never densified, plus
    ``n_cols`` (a block row against n_cols points: the sparse product's own result, up to n_cols
    stored values and indices a row, before it is scattered into the block)."""
    if not sp.issparse(A):
        return A.shape[1]
    return -(-A.nnz // max(A.shape[0], 1)) + 1 + n_cols


def _rows_bytes(X, n_rows):
    """Bytes of ``n_rows`` rows of X gathered (a dense copy, or CSR rows of X's mean density)."""
    if not sp.issparse(X):
        return n_rows * X.shape[1] * X.dtype.itemsize
    return sparse_nbytes(n_rows, n_rows * (_width(X) - 1), X.dtype, X.indices.dtype.itemsize)


def prepared_set_bytes(kernel, Z, dtype):
    """Bytes ``kernel.prepare(Z, dtype)`` allocates: for scipy.sparse Z its transpose, squared
    norms (and cast copy); for a dense Z the kernel's ``aux_bytes``."""
    if not sp.issparse(Z):
        return kernel.aux_bytes(Z.shape[0], Z.shape[1], dtype, Z.dtype)
    cast = array_bytes(Z) if np.dtype(dtype) != Z.dtype else 0
    return cast + 2 * sparse_nbytes(max(Z.shape), Z.nnz, dtype, Z.indices.dtype.itemsize) + 8 * Z.shape[0]


def _block_rows(kernel, n_rows, n_cols, n_features, dtype, budget, fixed_bytes):
    """Rows per kernel block against ``n_cols`` prepared points, within ``budget`` bytes."""
    per_row = kernel.bytes_per_row(n_cols, n_features, dtype)
    fixed = fixed_bytes + ufunc_workspace_bytes()
    step = rows_per_block(n_rows, per_row, budget, fixed_bytes=fixed)
    roomy = budget * (1 - PLAN_HEADROOM) - fixed  # blocks that would fill the budget leave its headroom
    if roomy >= per_row:
        step = min(step, int(roomy // per_row))
    return max(1, min(step, MAX_BLOCK_BYTES // per_row))


def _cache_rows(A, prepared, backend):
    """Rows of a host product's dense kernel block (numpy, or torch on the CPU) that keep it
    within CACHE_BLOCK_BYTES, or None when that is fewer than CACHE_BLOCK_MIN_ROWS (wide blocks:
    their GEMM needs the rows more)."""
    if device_type(backend) not in (None, "cpu") or sp.issparse(A) or prepared.sparse:
        return None
    rows = CACHE_BLOCK_BYTES // (max(prepared.n_points, 1) * np.dtype(prepared.dtype).itemsize)
    return rows if rows >= CACHE_BLOCK_MIN_ROWS else None


def _blocks(kernel, A, prepared, budget, fixed_bytes=0, backend=NUMPY, max_rows=None):
    """Yield ``(start, stop, K(A[start:stop], Z))`` for the prepared Z, on ``backend``, in blocks of
    at most ``max_rows`` rows; the block buffer is reused between iterations."""
    step = _block_rows(kernel, A.shape[0], prepared.n_points, _width(A, prepared.n_points), prepared.dtype, budget,
                       fixed_bytes)
    step = step if max_rows is None else min(step, max_rows)
    buffer = backend.empty((step, prepared.n_points), prepared.dtype)
    for start in range(0, A.shape[0], step):
        stop = min(start + step, A.shape[0])
        yield start, stop, kernel.block(A[start:stop], prepared, out=buffer[: stop - start])


def _fused_product(backend, kernel, A, prepared, V, budget):
    """K(A, Z) @ V (a host array) by the backend's fused product where it has one that pays for
    this case (the torch backend on a CUDA device: kernelscale.ops.fused), else None."""
    product = getattr(backend, "fused_product", None)
    return None if product is None else product(kernel, A, prepared, V, budget)


def _fill_step(kernel, n_rows, n_cols, n_features, dtype, budget, fixed_bytes):
    """Rows per block of :func:`_fill_rows` (the result is not a temporary: only per-row work
    counts); a ValueError naming max_memory when not even one row fits."""
    per_row = max(kernel.bytes_per_row(n_cols, n_features, dtype) - n_cols * np.dtype(dtype).itemsize, 1)
    return rows_per_block(max(n_rows, 1), per_row, budget, fixed_bytes=fixed_bytes + ufunc_workspace_bytes())


def _fill_rows(kernel, A, prepared, out, budget, fixed_bytes=0, backend=NUMPY):
    """Write K(A, Z) into ``out``, in row blocks of :func:`_fill_step` (straight into ``out``
    when it is on the backend; through a device block per step when it is a host array)."""
    if backend is NUMPY or not isinstance(out, np.ndarray):
        step = _fill_step(kernel, A.shape[0], prepared.n_points, _width(A, prepared.n_points), prepared.dtype, budget,
                          fixed_bytes)
        for start in range(0, A.shape[0], step):
            stop = min(start + step, A.shape[0])
            kernel.block(A[start:stop], prepared, out=out[start:stop])
        return out
    for start, stop, block in _blocks(kernel, A, prepared, budget, fixed_bytes, backend):
        out[start:stop] = backend.to_numpy(block)
    return out


def _check_result_fits(n_rows, n_cols, dtype, budget):
    return check_fits(n_rows * n_cols * np.dtype(dtype).itemsize, budget,
                      f"the requested {n_rows} kernel rows of length {n_cols}",
                      "request fewer rows at a time or increase max_memory")


def _check_out(out, shape, dtype):
    if out is not None and (out.shape != shape or out.dtype != dtype or not out.flags.c_contiguous):
        raise ValueError(f"out must be a C-ordered array of shape {shape} and dtype {dtype}.")


def _as_indices(idx, n, name="rows"):
    idx = np.asarray(idx)
    if idx.ndim != 1 or not (np.issubdtype(idx.dtype, np.integer) or idx.size == 0):
        raise ValueError(f"{name} must be a 1-d array of integer indices, got shape {idx.shape} dtype {idx.dtype}.")
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise ValueError(f"{name} must index the {n} points of X; got indices out of range.")
    return idx.astype(np.intp, copy=False)


# ----------------------------------------------------------------------------------------------
# the operator


class KernelOperator:
    """K(X, X) for the point set X under ``max_memory`` (see the module docstring).

    Parameters
    ----------
    kernel : Kernel or str (resolved: no ``sigma="median"`` left)
    X : array of shape (n, d); validated once here
    max_memory : int, str or None
        The budget of every verb (bytes; parsed once).
    dtype : float dtype or None
        The computation dtype (default: X's, float32 or float64).
    backend : backend, device string or None
        Where the blocks are computed (:func:`~kernelscale.ops.backend.get_backend`); None is
        the backend in use (:func:`~kernelscale.ops.backend.current_backend`).
    """

    def __init__(self, kernel, X, max_memory=None, *, dtype=None, backend=None, name="X"):
        self.kernel = make_kernel(kernel)
        self.X = as_float_array(X, name, accept_sparse=True)
        self.dtype = np.dtype(self.X.dtype if dtype is None else dtype)
        self.backend = current_backend() if backend is None else get_backend(backend)
        self.budget = parse_memory(max_memory)
        self._prepared = None
        self._row_buffer = None  # the device buffer of row_block on a non-numpy backend

    @property
    def n(self):
        return self.X.shape[0]

    @property
    def n_features(self):
        return self.X.shape[1]

    @property
    def _row_width(self):
        """Values a row of X counts in block planning (:func:`_width`: d, or a sparse row's)."""
        return _width(self.X, self.n)

    @property
    def prepared(self):
        """X prepared for kernel blocks (computed on first use and kept)."""
        if self._prepared is None:
            self._prepared = self.kernel.prepare(self.X, self.dtype, self.backend)
        return self._prepared

    @property
    def prepared_bytes(self):
        """Bytes the prepared X takes (whether or not it exists yet); on a CUDA device that
        includes X's copy there, which a host array in the computation dtype does not need."""
        if sp.issparse(self.X):
            return prepared_set_bytes(self.kernel, self.X, self.dtype)
        copy = device_type(self.backend) == "cuda" and self.X.dtype == self.dtype
        return self.kernel.aux_bytes(self.n, self.n_features, self.dtype, self.X.dtype) + (
            self.X.nbytes if copy else 0)

    @property
    def prepared_extra_bytes(self):
        """Bytes the prepared X holds beyond X itself (0 for a kernel that uses X as it is)."""
        prep = self.prepared
        return prep.nbytes - (array_bytes(self.X) if prep.data is self.X else 0)

    def _budget(self, budget, uses_prepared=True):
        """The bytes a verb may use: ``budget`` when the caller gives it, else the operator's
        budget less the prepared X when the verb uses it or it is already held."""
        if budget is not None:
            return int(budget)
        return self.budget - (self.prepared_bytes if uses_prepared or self._prepared is not None else 0)

    def _check_points(self, Z, name):
        Z = as_float_array(Z, name, accept_sparse=True)
        check_same_features(Z, self.n_features, name)
        return Z

    # -- verbs ------------------------------------------------------------------------------
    def diag(self):
        """k(x_i, x_i) for every point, O(n d)."""
        return self.kernel.diag(self.X)

    def blocks(self, rows=None, *, budget=None, fixed_bytes=0):
        """Yield ``(start, stop, K(X[rows][start:stop], X))``; the buffer is reused."""
        A = self.X if rows is None else self.X[_as_indices(rows, self.n)]
        gathered = 0 if rows is None else array_bytes(A)
        for start, stop, block in _blocks(self.kernel, A, self.prepared, self._budget(budget), fixed_bytes + gathered,
                                          self.backend):
            yield start, stop, self.backend.to_numpy(block)

    def rows(self, idx, *, out=None, budget=None):
        """K[idx, :] as a C-ordered (len(idx), n) array, written into ``out`` when given (the
        result counts against the budget unless ``out`` is the caller's)."""
        idx = _as_indices(idx, self.n)
        shape = (idx.size, self.n)
        _check_out(out, shape, self.dtype)
        budget = self._budget(budget)
        held = _rows_bytes(self.X, idx.size)
        if out is None:
            held += _check_result_fits(idx.size, self.n, self.dtype, budget)
        _fill_step(self.kernel, idx.size, self.n, self._row_width, self.dtype, budget, held)  # fail before allocating
        if out is None:
            out = np.empty(shape, dtype=self.dtype)
        return _fill_rows(self.kernel, self.X[idx], self.prepared, out, budget, held, self.backend)

    def matvec(self, V, *, rows=None, cols=None, budget=None, fixed_bytes=0):
        """K[rows, cols] @ V (all rows / columns when None), V of shape (len(cols),) or
        (len(cols), k), in the wider of the operator's and V's dtypes.

        With ``cols`` the column points are prepared for this call only (their copy counts
        against the budget); without, the operator's prepared X is used.
        """
        A = self.X if rows is None else self.X[_as_indices(rows, self.n)]
        cols = None if cols is None else _as_indices(cols, self.n, "cols")
        return self._product(A, V, cols, budget, fixed_bytes + (0 if rows is None else array_bytes(A)))

    def predict(self, Z, coef, *, budget=None):
        """K(Z, X) @ coef for new points Z (validated here), coef of shape (n,) or (n, k)."""
        return self._product(self._check_points(Z, "X"), np.asarray(coef), None, budget, 0)

    def _product(self, A, V, cols, budget, fixed_bytes):
        """K(A, X[cols]) @ V in blocks of rows of A, in the wider of A's, X's and V's dtypes;
        the operator's prepared X serves when the columns are all of X in its dtype."""
        Z = self.X if cols is None else self.X[cols]
        if V.shape[0] != Z.shape[0]:
            raise ValueError(f"V has {V.shape[0]} rows but the product has {Z.shape[0]} columns.")
        dtype = np.result_type(self.dtype, A.dtype, V.dtype)
        reuse = cols is None and dtype == self.dtype
        fixed = fixed_bytes
        if not reuse:
            fixed += (0 if cols is None else array_bytes(Z)) + prepared_set_bytes(self.kernel, Z, dtype)
        V_given, V = V, np.ascontiguousarray(V, dtype=dtype)
        fixed += V.nbytes if V is not V_given else 0
        budget = self._budget(budget, reuse)
        _block_rows(self.kernel, A.shape[0], Z.shape[0], _width(A, Z.shape[0]), dtype, budget, fixed)  # fail before preparing
        be = self.backend
        prepared = self.prepared if reuse else self.kernel.prepare(Z, dtype, be)
        fused = _fused_product(be, self.kernel, A, prepared, V, budget - fixed)
        if fused is not None:
            return fused
        V, out = be.asarray(V), be.empty((A.shape[0],) + V.shape[1:], dtype)
        for start, stop, block in _blocks(self.kernel, A, prepared, budget, fixed, be, _cache_rows(A, prepared, be)):
            be.matmul(block, V, out=out[start:stop])
        return be.to_numpy(out)

    def row_block(self, idx, *, diag=None, out=None, budget=None):
        """The rows K[idx, :] (plus ``diag[idx]`` on their diagonal entries when given), held in
        a :class:`RowBlock` whose products are the only way to use them. ``out`` (host) holds
        them on numpy; on another backend they stay on the device (a buffer kept for the next
        call of the same size)."""
        idx = _as_indices(idx, self.n)
        if self.backend is NUMPY:
            M = self.rows(idx, out=out, budget=budget)
            if diag is not None:
                M[np.arange(idx.size), idx] += diag[idx]
            return RowBlock(M, self.backend)
        be, shape, budget = self.backend, (idx.size, self.n), self._budget(budget)
        held = _rows_bytes(self.X, idx.size) + _check_result_fits(idx.size, self.n, self.dtype, budget)
        if self._row_buffer is None or tuple(self._row_buffer.shape) != shape:
            self._row_buffer = None
            _fill_step(self.kernel, idx.size, self.n, self._row_width, self.dtype, budget, held)  # fail before allocating
            self._row_buffer = be.empty(shape, self.dtype)
        M = _fill_rows(self.kernel, self.X[idx], self.prepared, self._row_buffer, budget, held, be)
        if diag is not None:
            positions = be.asarray(np.arange(idx.size)), be.asarray(idx)
            M[positions] += be.asarray(diag[idx], self.dtype)
        return RowBlock(M, be, self.dtype)

    def column_gram(self, cand, Y, *, scale=None, weights=None, dtype=np.float64, budget=None, fixed_bytes=0,
                    points=None):
        """Q = C^T C (M, M) and R = C^T Y (M, k) for the columns C[:, m] = w * K[:, cand[m]] *
        scale[m] (SLKL's candidate columns, docs/algorithms.md section 1.1), computed in row
        blocks of X against the candidates in ``dtype``, so C is never held whole and each column is computed once for
        every output. ``points``: the candidate rows themselves (then ``cand`` is ignored), for
        candidates that are not rows of this X (the row chunks of a distributed fit)."""
        Zc = self.X[_as_indices(cand, self.n, "cand")] if points is None else points
        Y_given, Y = Y, np.asarray(Y, dtype=np.float64).reshape(self.n, -1)
        fixed_bytes += 0 if np.shares_memory(Y, Y_given) else Y.nbytes
        M, k = Zc.shape[0], Y.shape[1]
        be = self.backend
        Q, R = be.zeros((M, M), np.float64), be.zeros((M, k), np.float64)
        prepared = self.kernel.prepare(Zc, dtype, be)
        fixed = fixed_bytes + 2 * Q.nbytes + R.nbytes + array_bytes(Zc) + prepared.nbytes  # + the product added to Q
        Y = be.asarray(Y)
        scale = None if scale is None else be.asarray(scale)[None, :]
        weights = None if weights is None else be.asarray(weights)
        for start, stop, B in _blocks(self.kernel, self.X, prepared, self._budget(budget, False), fixed, be):
            if scale is not None:
                B *= scale
            if weights is not None:
                B *= weights[start:stop, None]
            Q += be.matmul(B.T, B)
            R += be.matmul(B.T, Y[start:stop])
        return be.to_numpy(Q), be.to_numpy(R)

    def row_cache(self, *, reserved_bytes=0, max_rows=None, batch_rows=None):
        """An LRU cache of rows of K within the operator's budget (see :class:`KernelRowCache`)."""
        return KernelRowCache(self, reserved_bytes=reserved_bytes, max_rows=max_rows, batch_rows=batch_rows)


class RowBlock:
    """Rows M = K[idx, :] (J x n) held for a block solver (on the operator's backend), used only
    through its products, which take and return host arrays (``out``: a host array to fill)."""

    def __init__(self, M, backend, dtype=None):
        self._M = M
        self.backend = backend
        self.dtype = np.dtype(M.dtype if dtype is None else dtype)

    @property
    def shape(self):
        return tuple(self._M.shape)

    @property
    def nbytes(self):
        return self._M.nbytes

    def _host(self, result, out):
        if out is None:
            return self.backend.to_numpy(result)
        if result is not out:
            out[...] = self.backend.to_numpy(result)
        return out

    def gram(self, out=None):
        """M M^T (J x J); numpy runs it as a symmetric rank-k update."""
        if self.backend is NUMPY:
            return np.matmul(self._M, self._M.T, out=out)
        return self._host(self.backend.matmul(self._M, self._M.T), out)

    def row_sums(self):
        return self.backend.to_numpy(self._M.sum(axis=1))

    def columns(self, cols):
        """M[:, cols] (J x len(cols)): the square part K[idx, idx] when cols = idx."""
        if self.backend is NUMPY:
            return self._M[:, cols]
        return self.backend.to_numpy(self._M[:, self.backend.asarray(np.asarray(cols, dtype=np.intp))])

    def dot(self, W, out=None):
        """M W for W of shape (n, k)."""
        if self.backend is NUMPY:
            return np.matmul(self._M, W, out=out)
        return self._host(self.backend.matmul(self._M, self.backend.asarray(W)), out)

    def tdot(self, V, out=None):
        """M^T V for V of shape (J, k) (or (J,)).

        On numpy it is computed as (V^T M)^T: OpenBLAS's threaded product with the tall
        transposed M (n x J) as its left operand touches ~60 MiB more of its per-thread buffers
        (2 threads, J = 1000, n = 20000), resident for the rest of the process and counted by no
        plan; V^T M runs in the buffers the other products use, no slower
        (benchmarks/studies/compute_layer.md, "Memory of the first fit")."""
        if self.backend is NUMPY:
            V = np.asarray(V)
            if V.ndim == 1:
                return np.matmul(V, self._M, out=out)
            if out is not None:
                out[...] = np.matmul(V.T, self._M).T
                return out
            return np.ascontiguousarray(np.matmul(V.T, self._M).T)
        return self._host(self.backend.matmul(self._M.T, self.backend.asarray(V)), out)


# ----------------------------------------------------------------------------------------------
# one-off functions on user arrays


def _prepare_pair(kernel, X, Z, names=("X", "Z")):
    kernel = make_kernel(kernel)
    X = as_float_array(X, names[0], accept_sparse=True)
    Z = X if Z is None else as_float_array(Z, names[1], accept_sparse=True)
    check_same_features(Z, X.shape[1], names[1])
    return kernel, X, Z, result_dtype(X, Z)


def _fixed_bytes(kernel, Z, dtype):
    """Memory a blocked call holds besides its blocks: the prepared Z (and its cast copy)."""
    return prepared_set_bytes(kernel, Z, dtype)


def iter_kernel_blocks(kernel, X, Z=None, max_memory=None, *, dtype=None, prepared=None, fixed_bytes=0):
    """Yield ``(start, stop, K(X[start:stop], Z))`` over row blocks that fit the budget.

    The block array is reused between iterations: copy it if you keep it. ``dtype`` overrides
    the computation dtype (default: float32 only if X and Z are). ``prepared`` (from
    ``kernel.prepare``) skips re-preparing Z when the caller loops several times; ``fixed_bytes``
    is memory the caller holds that counts against the same budget.
    """
    kernel, X, Z, pair_dtype = _prepare_pair(kernel, X, Z)
    dtype = np.dtype(pair_dtype if dtype is None else dtype)
    budget = parse_memory(max_memory)
    if prepared is not None and prepared.dtype != dtype:
        raise ValueError(f"dtype={dtype} differs from the prepared point set's {prepared.dtype}; prepare Z in {dtype}.")
    backend = current_backend()
    for start, stop, block in _device_blocks(kernel, X, Z, dtype, budget, prepared, fixed_bytes, backend):
        yield start, stop, backend.to_numpy(block)


def _device_blocks(kernel, X, Z, dtype, budget, prepared, fixed_bytes, backend):
    if prepared is None:
        fixed_bytes += _fixed_bytes(kernel, Z, dtype)
        _block_rows(kernel, X.shape[0], Z.shape[0], _width(X, Z.shape[0]), dtype, budget, fixed_bytes)  # fail before preparing
        prepared = kernel.prepare(Z, dtype, backend)
    yield from _blocks(kernel, X, prepared, budget, fixed_bytes, backend)


def matvec_memory(kernel, n_rows, n_cols, n_features, dtype=np.float64, max_memory=None):
    """Bytes :func:`kernel_matvec` would allocate for kernel work (its temporaries).

    Raises the same ValueError as the product itself when the budget cannot hold one row.
    """
    kernel = make_kernel(kernel)
    budget = parse_memory(max_memory)
    fixed = kernel.aux_bytes(n_cols, n_features, dtype)
    step = _block_rows(kernel, n_rows, n_cols, n_features, dtype, budget, fixed)
    return fixed + ufunc_workspace_bytes() + step * kernel.bytes_per_row(n_cols, n_features, dtype)


def kernel_matvec(kernel, X, Z, V, max_memory=None):
    """Return K(X, Z) @ V without holding more than ``max_memory`` bytes of kernel blocks.

    Parameters
    ----------
    kernel : Kernel or str
    X : array of shape (n, d)
    Z : array of shape (m, d), or None for Z = X
    V : array of shape (m,) or (m, k)
    max_memory : int, str or None

    Returns
    -------
    array of shape (n,) or (n, k), in float32 only when X, Z and V are all float32.
    """
    kernel, X, Z, dtype = _prepare_pair(kernel, X, Z)
    V = as_float_array(V, "V", ensure_2d=False)
    if V.ndim not in (1, 2) or V.shape[0] != Z.shape[0]:
        raise ValueError(
            f"V must have shape ({Z.shape[0]},) or ({Z.shape[0]}, k) to match the {Z.shape[0]} "
            f"points of Z, got {V.shape}."
        )
    dtype = np.result_type(dtype, V.dtype)
    V_given, V = V, np.ascontiguousarray(V, dtype=dtype)
    copied = V.nbytes if V is not V_given else 0
    be, budget, fixed = current_backend(), parse_memory(max_memory), copied + _fixed_bytes(kernel, Z, dtype)
    _block_rows(kernel, X.shape[0], Z.shape[0], X.shape[1], dtype, budget, fixed)  # fail before preparing
    prepared = kernel.prepare(Z, dtype, be)
    fused = _fused_product(be, kernel, X, prepared, V, budget - fixed)
    if fused is not None:
        return fused
    V, out = be.asarray(V), be.empty((X.shape[0],) + V.shape[1:], dtype)
    for start, stop, block in _blocks(kernel, X, prepared, budget, fixed, be, _cache_rows(X, prepared, be)):
        be.matmul(block, V, out=out[start:stop])
    return be.to_numpy(out)


def kernel_rows(kernel, X, rows, Z=None, max_memory=None, *, out=None):
    """Return the rows K(X[rows], Z) (Z = X when None) as a (len(rows), m) array.

    The result is itself a kernel block, so it counts against ``max_memory`` unless ``out`` (a
    C-ordered (len(rows), m) array of the computation dtype) is given; ask for fewer rows at a
    time otherwise. Solvers that fetch rows repeatedly use :meth:`KernelOperator.rows`.
    """
    kernel, X, Z, dtype = _prepare_pair(kernel, X, Z)
    rows = _as_indices(rows, X.shape[0])
    shape = (rows.size, Z.shape[0])
    _check_out(out, shape, dtype)
    budget = parse_memory(max_memory)
    held = _fixed_bytes(kernel, Z, dtype) + _rows_bytes(X, rows.size)
    if out is None:
        held += _check_result_fits(rows.size, Z.shape[0], dtype, budget)
    _fill_step(kernel, rows.size, Z.shape[0], _width(X, Z.shape[0]), dtype, budget, held)  # fail before allocating
    if out is None:
        out = np.empty(shape, dtype=dtype)
    be = current_backend()
    return _fill_rows(kernel, X[rows], kernel.prepare(Z, dtype, be), out, budget, held, be)


def kernel_diag(kernel, X):
    """Return the diagonal k(x_i, x_i) of K(X, X), O(n d) work and O(n) memory."""
    return make_kernel(kernel).diag(as_float_array(X, "X", accept_sparse=True))


def kernel_matrix(kernel, X, Z=None, max_memory=None):
    """Return the full kernel matrix K(X, Z), for the exact solvers only.

    This is the one function that builds an n x m kernel matrix, and only when the caller asks:
    it refuses (ValueError) when the matrix does not fit in ``max_memory``.
    """
    kernel, X, Z, _ = _prepare_pair(kernel, X, Z)
    return kernel_rows(kernel, X, np.arange(X.shape[0]), Z, max_memory=max_memory)
