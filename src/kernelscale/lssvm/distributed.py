"""The LS-SVM system Theta of eq. 17 over the row chunks of dask arrays (docs/algorithms.md
section 4.1; the numpy system is :mod:`kernelscale.lssvm.system`).

:func:`kernelscale.lssvm.solvers.solve_lssvm` runs its block solvers unchanged on the objects here
when X is a dask array chunked by rows (:mod:`kernelscale.dask.fit`):

- the (n + 1) x k vectors W, R, Z and the committee are :class:`Split`: the bias row (k numbers)
  in this process, the n sample rows a dask array partitioned like X, persisted after every
  in-place update, so the graph of an iteration does not grow;
- :meth:`DaskSystem.rows` gathers the J sampled rows of X (J x d) and their diagonal entries by a
  tree on the workers, passes them to every chunk task (the client receives them with the Gram
  matrix, in the same round trip), and keeps each chunk's part of Theta[s, :]^T (K(X_c, X_J) + D,
  n_c x J: the J x n block of the numpy solver, partitioned) persisted with the chunk. The block
  Gram matrix Theta_s Theta_s^T (eqs. 35-37) and the products Theta_s W are sums over the chunks
  (tree-reduced, J x J and J x k); Theta_s^T V is per row; the J x J factorisation and solves
  stay here;
- the full product Theta W of the hybrid (and of a warm start's residual) is
  :meth:`~kernelscale.ops.rows.DaskRows.kernel_matvec`: one task per row chunk and group of
  column chunks (sum_j K(X_i, X_j) W_j).

Every pass is a verb of the row executor :class:`~kernelscale.ops.rows.DaskRows` (docs/contributing.md,
"Adding a Dask path"): ``map`` for the per-row results (the diagonal, the chunks' blocks, the
updates of W and R), ``sum`` for the tree sums, ``kernel_matvec`` for K(X, X) W and ``compress``
for the rows of positive weight. No pass calls dask's array functions itself (only
:meth:`Split.lazy`, the callback's view of W, concatenates the bias row to the lazy rows).

The blocks are numpy's (same random_state, same blocks) and every step is numpy's step on the
same numbers: only the order of the sums over rows differs (partial sums per chunk), so the
model equals numpy's to rounding. Nothing imports dask before a dask array arrives. Budgets are
bytes, resolved once by the estimator (or by ``solve_lssvm``'s entry).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..dask.fit import persist_within
from ..ops.kernel import kernel_rows
from ..ops.memory import format_bytes
from ..ops.rows import DaskRows
from .system import bias_border, lssvm_diagonal

__all__ = ["DaskSystem", "Split", "prepare"]


# -- one task per row chunk ------------------------------------------------------------------------

def _diagonal_chunk(X, w, *, C, fit_dtype):
    return lssvm_diagonal(X.shape[0], C, w, fit_dtype)


def _positive(w):
    return w > 0


def _as_dtype(a, *, to):
    return a.astype(to)


def _as_columns(a, *, to):
    """A chunk of the sample rows of a vector (1-d: one column) in the fit dtype."""
    return (a[:, None] if a.ndim == 1 else a).astype(to)


def _zeros(a):
    return np.zeros_like(a)


def _plus(a, b):
    return a + b


def _minus(a, b):
    return a - b


def _times(a, *, s):
    return a * s


def _divided(a, *, s):
    return a / s


def _local(index, idx):
    """Positions (in this chunk, in idx) of the sampled rows idx that lie in the chunk of ``index``."""
    if index.size == 0:
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp)
    local = idx - index[0]
    j = np.flatnonzero((local >= 0) & (local < index.size))
    return local[j], j


def _sampled_rows_chunk(index, *arrays, idx):
    """The rows idx of ``arrays`` that lie in this chunk, zeros elsewhere (summed over the chunks:
    the rows themselves, as x + 0 = x exactly)."""
    rows, j = _local(index, idx)
    return tuple(_placed_rows(a, rows, j, idx.size) for a in arrays)


def _placed_rows(a, rows, j, size):
    """The rows ``rows`` of ``a`` at positions ``j`` of ``size`` rows, zeros elsewhere; for sparse
    ``a`` a CSR matrix (a 0/1 placement times the rows: each row copied exactly)."""
    if sp.issparse(a):
        place = sp.csr_matrix((np.ones(j.size, dtype=a.dtype), (j, np.arange(j.size))), shape=(size, j.size))
        return sp.csr_matrix(place @ a[rows])
    out = np.zeros((size,) + a.shape[1:], dtype=a.dtype)
    out[j] = a[rows]
    return out


def _block_chunk(X, D, index, *, kernel, sampled, idx, budget):
    """K(X_c, X_J) plus D on the sampled rows' own entries: this chunk's rows of Theta[s, :]^T
    (``sampled``: the sampled rows X_J and their diagonal entries)."""
    XJ = sampled[0]
    if X.shape[0] == 0 or XJ.shape[0] == 0:
        return np.zeros((X.shape[0], XJ.shape[0]), dtype=X.dtype)
    Mt = kernel_rows(kernel, X, np.arange(X.shape[0]), Z=XJ, max_memory=budget)
    rows, cols = _local(index, idx)
    Mt[rows, cols] += D[rows]
    return Mt


def _gram_chunk(Mt):
    return Mt.T @ Mt, Mt.sum(axis=0)


def _dot_chunk(Mt, A):
    return Mt.T @ A, A.sum(axis=0)


def _tdot_chunk(Mt, *, V, bias):
    out = Mt @ V
    if bias is not None:
        out += bias
    return out


def _add_at_chunk(A, index, *, idx, Q):
    out = A.copy()
    rows, j = _local(index, idx)
    out[rows] += Q[j]
    return out


def _theta_chunk(KA, A, D, *, head):
    """This chunk's rows of Theta W = [1^T A; K A + b + D A] from its rows of K A."""
    out = KA + head
    return out + D[:, None] * A


def _coldots_chunk(a, b):
    a, b = a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)
    return np.einsum("ij,ij->j", a, b), np.einsum("ij,ij->j", b, b)


def _sumsq_chunk(a):
    a = a.astype(np.float64, copy=False)
    return float(np.einsum("ij,ij->", a, a))


def _any_chunk(a):
    return float(np.any(a))


# -- the fit's inputs ------------------------------------------------------------------------------

def prepare(X, Y, sample_weight, dtype, budget):
    """X and Y in the fit dtype with the rows of zero weight dropped (as numpy's fit drops them),
    persisted within the memory they would stay in (:func:`kernelscale.dask.fit.persist_within`);
    the weights (checked by :mod:`kernelscale.dask.fit`) of the rows kept. Refused before any
    solve when the fitted model (the training rows and dual coefficients, as numpy's holds them)
    would not fit ``budget`` (bytes)."""
    ex = DaskRows(X.chunks[0], budget)
    X, Y = (a if a.dtype == dtype else ex.map(_as_dtype, a, to=dtype, width=None if a.ndim == 1 else a.shape[1],
                                               dtype=dtype, persist=False) for a in (X, Y))
    if sample_weight is not None:
        X, Y, sample_weight = ex.compress(ex.map(_positive, sample_weight, dtype=bool, persist=False), X, Y,
                                          sample_weight)
        if X.shape[0] == 0:
            raise ValueError("sample_weight has no positive entry: all weights are zero; pass at least one "
                             "non-zero weight.")
    model = X.nbytes + Y.nbytes
    if model > budget:
        raise ValueError(
            f"the fitted LS-SVM holds its training rows and dual coefficients ({format_bytes(model)}), more than "
            f"max_memory={format_bytes(budget)}; fit on a sample of the rows, or raise max_memory.")
    return persist_within(budget, X, Y, sample_weight)


# -- the system ------------------------------------------------------------------------------------

class DaskSystem:
    """Theta of eq. 17 for the rows of the dask array X; the diagonal D per chunk. The methods
    are those of :class:`kernelscale.lssvm.system.ThetaSystem`; ``budget`` is in bytes."""

    def __init__(self, kernel, X, C, sample_weight, budget):
        self.kernel, self.X, self.n, self.budget = kernel, X, X.shape[0], int(budget)
        self.ex = DaskRows(X.chunks[0], budget)
        self.diag = self.ex.map(_diagonal_chunk, X, sample_weight, C=C, fit_dtype=X.dtype, dtype=X.dtype)
        (self.index,) = self.ex.persist(self.ex.index(self.n))

    def vector(self, head, body):
        """The (n + 1) x k vector [head; body] (head: k numbers; body: n x k or, for k = 1, n
        numbers; numpy or dask)."""
        dtype = self.X.dtype
        head = np.asarray(head, dtype=dtype)
        return Split(head, self.ex.map(_as_columns, body, to=dtype, width=head.size, dtype=dtype), self)

    def rows(self, block, dot=None):
        """The rows Theta[s, :] for the index block s (values in 0..n), as :class:`ChunkRows`,
        waiting for one round trip: a tree gathers the sampled rows on the workers, one pass
        computes and keeps each chunk's part of the block, and one more sums its Gram matrix and, given
        ``dot`` (a :class:`Split` the solver will ask the product Theta_s dot of next), that
        product; the sums and the sampled rows come back together."""
        import dask

        samples = block[block > 0]
        has_bias = samples.size < block.size
        order = np.concatenate([samples, [0]]) if has_bias else block
        idx = samples - 1
        # persisted on its own: the block's tasks and the compute below read the same kept result
        # (a key computed inside the block's persist and asked for again by the compute was lost
        # on a real cluster: "lost dependencies")
        sampled, = self.ex.persist(self.ex.sum_parts(_sampled_rows_chunk, self.index, self.X, self.diag, idx=idx))
        Mt = self.ex.map(_block_chunk, self.X, self.diag, self.index, kernel=self.kernel, sampled=sampled, idx=idx,
                         budget=self.budget, width=idx.size, dtype=self.X.dtype)
        sums = [self.ex.sum_parts(_gram_chunk, Mt), sampled]
        if dot is not None:
            sums.append(self.ex.sum_parts(_dot_chunk, Mt, dot.body))
        gram, (XJ, DJ), *product = dask.compute(*sums)
        rows = ChunkRows(self, order, Mt, gram, has_bias, XJ, DJ)
        if dot is not None:
            rows.known_dot = (dot.body.name, dot.head.copy(), product[0])
        return rows

    def matvec(self, W, extra_bytes=0):
        """Theta W: K(X, X) W_body (sum_j K(X_i, X_j) W_j per row chunk i), then the bias and the
        diagonal per row chunk."""
        A = W.body
        KA = self.ex.kernel_matvec(self.kernel, self.X, A, persist=False)
        body = self.ex.map(_theta_chunk, KA, A, self.diag, head=W.head, width=A.shape[1], dtype=A.dtype)
        return Split(self.ex.sum(_colsum, A).astype(A.dtype), body, self)


def _colsum(A):
    return A.sum(axis=0)


class ChunkRows:
    """Theta[s, :] with its transpose held per row chunk (``Mt``, persisted); the J sampled rows
    X_J and their diagonal entries D_J here. The methods are those of
    :class:`kernelscale.lssvm.system.ThetaRows`."""

    nbytes = 0  # nothing n-sized is held here
    known_dot = None  # (W's body key, W's head, Theta_s W's sums) computed with the block

    def __init__(self, system, order, Mt, gram, has_bias, XJ, DJ):
        self.system, self.order, self.Mt, self._gram, self.has_bias = system, order, Mt, gram, has_bias  # gram: sums
        self.XJ, self.DJ = XJ, DJ
        self.n, self.m = system.n, XJ.shape[0]

    def gram(self):
        m, J = self.m, self.m + self.has_bias
        MMt, sums = self._gram
        G = np.empty((J, J), dtype=self.Mt.dtype)
        G[:m, :m] = MMt
        G[:m, :m] += 1.0
        if self.has_bias:
            G[:m, m] = sums
            G[m, :m] = sums
            G[m, m] = self.n
        return G

    def dot(self, W):
        known = self.known_dot
        if known is not None and known[0] == W.body.name and np.array_equal(known[1], W.head):
            P, sums = known[2]  # computed with the block (DaskSystem.rows)
        else:
            P, sums = self.system.ex.sum(_dot_chunk, self.Mt, W.body)
        out = np.empty((self.m + self.has_bias, W.head.size), dtype=W.dtype)
        out[: self.m] = P
        out[: self.m] += W.head
        if self.has_bias:
            out[self.m] = sums
        return out

    def tdot(self, V):
        m, k = self.m, V.shape[1]
        # lazy: every pass that reads it computes M_c V (2 J k flops per row, against the J^2 of
        # the Gram matrix), which saves the pass that would persist it
        body = self.system.ex.map(_tdot_chunk, self.Mt, V=V[:m], bias=V[m] if self.has_bias else None, width=k,
                                  dtype=V.dtype, persist=False)
        return Split(V[:m].sum(axis=0), body, self.system)

    def square(self):
        m, J = self.m, self.m + self.has_bias
        T = np.empty((J, J), dtype=self.Mt.dtype)
        if m:
            T[:m, :m] = kernel_rows(self.system.kernel, self.XJ, np.arange(m), Z=self.XJ)
            T[np.arange(m), np.arange(m)] += self.DJ
        return bias_border(T, m, self.has_bias)


class Split:
    """An (n + 1) x k vector: the bias row ``head`` (k,) here, the sample rows ``body`` (n x k)
    a dask array with X's row chunks. Supports the arithmetic the solvers use on numpy arrays."""

    def __init__(self, head, body, system):
        self.head, self.body, self.system = head, body, system

    @property
    def dtype(self):
        return self.head.dtype

    @property
    def shape(self):
        return (self.system.n + 1, self.head.size)

    def _like(self, head, body):
        return Split(head, body, self.system)

    def copy(self):
        return self._like(self.head.copy(), self.body)

    def _map(self, fn, *bodies, persist=False, **small):
        """The sample rows ``fn`` gives chunk by chunk (lazy unless ``persist``)."""
        dtype = np.result_type(*(b.dtype for b in bodies), *small.values())
        return self.system.ex.map(fn, *bodies, width=self.head.size, dtype=dtype, persist=persist, **small)

    def zeros_like(self):
        return self._like(np.zeros_like(self.head), self._map(_zeros, self.body))

    def any(self):
        return bool(self.head.any()) or self.system.ex.sum(_any_chunk, self.body) > 0

    def __add__(self, other):
        return self._like(self.head + other.head, self._map(_plus, self.body, other.body))

    def __sub__(self, other):
        return self._like(self.head - other.head, self._map(_minus, self.body, other.body))

    def __mul__(self, s):
        return self._like(self.head * s, self._map(_times, self.body, s=s))

    __rmul__ = __mul__

    def __truediv__(self, s):
        return self._like(self.head / s, self._map(_divided, self.body, s=s))

    def __iadd__(self, other):
        self.head += other.head
        self.body = self._map(_plus, self.body, other.body, persist=True)
        return self

    def __isub__(self, other):
        self.head -= other.head
        self.body = self._map(_minus, self.body, other.body, persist=True)
        return self

    def __imul__(self, alpha):
        self.head *= alpha
        self.body = self._map(_times, self.body, s=alpha)  # lazy: applied by the next pass over the rows
        return self

    def __getitem__(self, order):
        """The rows ``order`` (indices 0..n, 0 the bias row) as a numpy (len(order), k) array."""
        mask = order > 0
        out = np.empty((order.size, self.head.size), dtype=self.dtype)
        (out[mask],) = self.system.ex.sum(_sampled_rows_chunk, self.system.index, self.body, idx=order[mask] - 1)
        out[~mask] = self.head
        return out

    def add_at(self, order, Q):
        """self[order] += Q (order without repeats)."""
        mask = order > 0
        if not mask.all():
            self.head += Q[~mask][0]
        self.body = self.system.ex.map(_add_at_chunk, self.body, self.system.index, idx=order[mask] - 1,
                                       Q=Q[mask], width=self.head.size, dtype=self.dtype)

    def coldots(self, other):
        """(sum_i a_i b_i, sum_i b_i^2) per column, in one pass (float64 partial sums, returned in
        the fit dtype) for a = self, b = other."""
        a, b = self.head.astype(np.float64), other.head.astype(np.float64)
        ab, bb = self.system.ex.sum(_coldots_chunk, self.body, other.body)
        return (a * b + ab).astype(self.dtype), (b * b + bb).astype(self.dtype)

    def norm(self):
        """||.||_F (float64 partial sums)."""
        head = self.head.astype(np.float64)
        return float(np.sqrt(head @ head + self.system.ex.sum(_sumsq_chunk, self.body)))

    def to_numpy(self):
        """The whole (n + 1) x k array in this process (the fitted model's dual coefficients)."""
        return np.concatenate([self.head[None], self.system.ex.value(self.body)]).astype(self.dtype, copy=False)

    def lazy(self):
        """The whole (n + 1) x k array as a lazy dask array (a callback's "coef")."""
        import dask.array as da

        return da.concatenate([da.from_array(self.head[None]), self.body])

