"""The LS-SVM system Theta W = Z of paper 4 (docs/algorithms.md section 4.1, eqs. 16-19), evaluated
on demand under a memory budget.

    Theta W = Z,   Theta = [[0, 1^T], [1, K + D]],   W = [b; A],   Z = [0; Y],

with D = I / C (C is the paper's gamma). With sample weights s_i the squared errors are weighted,
min 1/2 |w|^2 + C/2 sum_i s_i |e_i|^2, whose optimality conditions give a_i = C s_i e_i, i.e.
D = diag(1 / (C s_i)) (:func:`lssvm_diagonal`; docs/algorithms.md section 4.4); samples with
s_i = 0 have a_i = 0 and are dropped before solving.

Theta has n + 1 rows: index 0 is the bias row [0, 1^T], index i >= 1 the row of sample i - 1. A
block s of J indices (bias index allowed) gives the rows Theta[s, :] (:class:`ThetaRows`), computed
from kernel rows (:meth:`kernelscale.ops.kernel.KernelOperator.row_block`, under the budget) plus
the diagonal D and the bias column; the bias row itself is never stored (its entries are known).
Theta is symmetric, so the J columns Theta[:, s] are the same numbers. :class:`ThetaSystem` hands
out these row blocks and the full product Theta W (one blocked pass over the kernel matrix).

:mod:`kernelscale.lssvm.distributed` implements the same two classes over the row chunks of dask
arrays; :mod:`kernelscale.lssvm.solvers` runs on either.
"""

from __future__ import annotations

import numpy as np

from ..base.validation import as_float_array
from ..kernels import make_kernel
from ..ops.kernel import KernelOperator, kernel_rows

__all__ = ["lssvm_diagonal", "lssvm_theta", "bias_border", "ThetaRows", "ThetaSystem"]


def lssvm_diagonal(n, C, sample_weight, dtype):
    """The diagonal D of eq. 17: 1/C, or 1 / (C s_i) with positive sample weights s_i."""
    if sample_weight is None:
        return np.full(n, 1.0 / C, dtype=dtype)
    return (1.0 / (C * np.asarray(sample_weight, dtype=np.float64))).astype(dtype)


def lssvm_theta(kernel, X, C, sample_weight=None, max_memory=None):
    """The dense (n + 1) x (n + 1) matrix Theta of eq. 17 (with the weighted diagonal).

    For tests and small problems only: it builds the n x n kernel matrix (through
    :func:`kernelscale.ops.kernel.kernel_rows`, which refuses when it does not fit ``max_memory``).
    """
    kernel = make_kernel(kernel)
    X = as_float_array(X, "X", accept_sparse=True)
    n = X.shape[0]
    K = kernel_rows(kernel, X, np.arange(n), max_memory=max_memory)
    theta = np.zeros((n + 1, n + 1), dtype=X.dtype)
    theta[0, 1:] = 1.0
    theta[1:, 0] = 1.0
    theta[1:, 1:] = K
    theta[np.arange(1, n + 1), np.arange(1, n + 1)] += lssvm_diagonal(n, C, sample_weight, X.dtype)
    return theta


def bias_border(T, m, has_bias):
    """T (J x J) with the bias row and column of Theta (eq. 17) after its m sample rows: ones, and
    a zero corner."""
    if has_bias:
        T[:m, m] = 1.0
        T[m, :m] = 1.0
        T[m, m] = 0.0
    return T


class ThetaRows:
    """The rows Theta[s, :] of one block, stored as kernel rows (with D added, a
    :class:`~kernelscale.ops.kernel.RowBlock`) for the sample indices and, when the bias index 0
    is in s, an implicit last row [0, 1^T].

    ``order`` is s rearranged so that the bias index (if any) comes last; every J-vector below
    is in this order.
    """

    def __init__(self, order, block, has_bias, n):
        self.order = order
        self.block = block
        self.has_bias = has_bias
        self.n = n
        self.m = block.shape[0]

    @property
    def nbytes(self):
        return self.block.nbytes

    def gram(self):
        """G = Theta[s, :] Theta[s, :]^T (J x J): 1 1^T + M M^T, plus the bias row's entries."""
        m, J = self.m, self.m + self.has_bias
        G = np.empty((J, J), dtype=self.block.dtype)
        G[:m, :m] = self.block.gram()
        G[:m, :m] += 1.0
        if self.has_bias:
            sums = self.block.row_sums()
            G[:m, m] = sums
            G[m, :m] = sums
            G[m, m] = self.n
        return G

    def dot(self, W):
        """Theta[s, :] W for W of shape (n + 1, k); shape (J, k)."""
        out = np.empty((self.m + self.has_bias, W.shape[1]), dtype=W.dtype)
        self.block.dot(W[1:], out=out[: self.m])
        out[: self.m] += W[0]
        if self.has_bias:
            out[self.m] = W[1:].sum(axis=0)
        return out

    def tdot(self, V):
        """Theta[s, :]^T V = Theta[:, s] V for V of shape (J, k); shape (n + 1, k)."""
        out = np.empty((self.n + 1, V.shape[1]), dtype=V.dtype)
        out[0] = V[: self.m].sum(axis=0)
        self.block.tdot(V[: self.m], out=out[1:])
        if self.has_bias:
            out[1:] += V[self.m]
        return out

    def square(self):
        """Theta[s, s] (J x J), in ``order``."""
        m, J = self.m, self.m + self.has_bias
        T = np.empty((J, J), dtype=self.block.dtype)
        T[:m, :m] = self.block.columns(self.order[:m] - 1)
        return bias_border(T, m, self.has_bias)


class ThetaSystem:
    """Theta of eq. 17 for the training set, evaluated on demand under a memory budget.

    ``budget`` (bytes) is the whole fit's; ``held_bytes`` what the solver holds besides the
    kernel blocks (its state arrays, see :func:`kernelscale.lssvm.memory.state_bytes`).
    """

    def __init__(self, kernel, X, diag, budget, held_bytes):
        self.op = KernelOperator(kernel, X, budget)
        self.diag = diag
        self.n = X.shape[0]
        self.budget = budget
        # X prepared once for every block and product (its copy counts as held)
        self.held = held_bytes + self.op.prepared_extra_bytes
        self._buffer = None  # one (J, n) block buffer reused across iterations

    def rows(self, block, dot=None):
        """The rows Theta[s, :] for the index block s (values in 0..n); the returned rows live
        in a buffer that the next call overwrites. ``dot``: the vector whose product Theta_s dot
        the solver asks for next (a distributed system computes it with the block; here it is
        computed when asked)."""
        samples = block[block > 0]
        has_bias = samples.size < block.size
        order = np.concatenate([samples, [0]]) if has_bias else block
        idx = samples - 1
        if self._buffer is None or self._buffer.shape[0] < idx.size:
            self._buffer = None
            self._buffer = np.empty((block.size, self.n), dtype=self.op.dtype)
        out = self._buffer[: idx.size]
        rows = self.op.row_block(idx, diag=self.diag, out=out, budget=self.budget - self.held - out.nbytes)
        return ThetaRows(order, rows, has_bias, self.n)

    def matvec(self, W, extra_bytes=0):
        """Theta W for W of shape (n + 1, k): one blocked pass over the kernel matrix."""
        out = np.empty_like(W)
        out[0] = W[1:].sum(axis=0)
        budget = self.budget - self.held - extra_bytes - out.nbytes
        out[1:] = self.op.matvec(W[1:], budget=budget)
        out[1:] += W[0]
        out[1:] += self.diag[:, None] * W[1:]
        return out
