"""SLKL's candidate columns and the column mode a fit runs in (docs/algorithms.md sections 1.1, 1.4).

For M candidate training points x_m the columns are c_m = sqrt(w) K[:, m] / sqrt(k(x_m, x_m))
(the normalised kernel columns of the paper's notation paragraph, rows scaled by the square
roots of the sample weights w). The solvers see them through a column provider:

- :class:`ArrayColumns`: all M columns held in memory (``columns="precompute"``, memory n M; the
  paper's precomputed mode of Sec. 4.2);
- :class:`KernelColumns`: a column recomputed from the kernel when it is visited
  (``columns="on_the_fly"``, O(n d) per visit; the paper's other mode);
- :func:`gram_of_columns`: the M x M Gram matrix Q = C^T C and R = C^T Y of either, which the
  Gram solver (``columns="gram"``, :func:`kernelscale.slkl.solver.slkl_gram`) runs on instead.

:func:`gram_sums` is the same Gram quantity stated as a sum over rows: a row executor of
:mod:`kernelscale.ops.rows` applies it to the whole arrays on the host, or to each row chunk of
dask arrays and adds the chunks' sums up a tree, so one code path serves both.
:func:`plan_columns` resolves ``columns="auto"`` within a budget in bytes and refuses a mode that
cannot fit.
"""

from __future__ import annotations

import numpy as np

from ..ops.backend import NUMPY
from ..ops.kernel import KernelOperator, RowBlock
from ..ops.memory import format_bytes

__all__ = ["ArrayColumns", "KernelColumns", "gram_of_columns", "gram_sums", "candidate_scale", "as_columns",
           "weighted_targets", "gram_state_bytes", "plan_columns", "COLUMN_MODES"]

COLUMN_MODES = ("auto", "gram", "precompute", "on_the_fly")


def candidate_scale(kernel, Z):
    """1 / sqrt(k(z, z)) for the candidate rows Z (0 where the diagonal is 0)."""
    diag = np.asarray(kernel.diag(Z), dtype=np.float64)
    return np.where(diag > 0, 1.0 / np.sqrt(np.where(diag > 0, diag, 1.0)), 0.0)


class ArrayColumns:
    """Candidate columns held in memory: ``C`` of shape (n, M) (stored transposed, row m = c_m).

    Any float dtype is stored as given; ``column`` returns the float64 copy the solver uses.
    """

    def __init__(self, C=None, *, rows=None):
        self.rows = np.ascontiguousarray(np.asarray(C).T if rows is None else rows)
        self.n_candidates, self.n_samples = self.rows.shape
        self.sqnorms = np.einsum("ij,ij->i", self.rows, self.rows, dtype=np.float64)

    def column(self, j):
        return self.rows[j].astype(np.float64)

    nbytes = property(lambda self: self.rows.nbytes)


class KernelColumns:
    """Candidate columns computed on demand from the kernel (``columns="on_the_fly"``).

    c_m = sqrt(w) * K(X, x_m) / sqrt(k(x_m, x_m)) for the candidate rows ``candidates`` of the
    operator's X; ``sqrt_w`` carries sample weights (None for unit weights). Costs O(n d) per
    call, with no re-validation of X.
    """

    def __init__(self, operator, candidates, sqrt_w=None):
        self.operator, self.candidates = operator, np.asarray(candidates)
        self.n_samples, self.n_candidates = operator.n, self.candidates.size
        self.scale = candidate_scale(operator.kernel, operator.X[self.candidates])
        self.sqrt_w = sqrt_w
        self._buf = np.empty((1, operator.n), dtype=operator.dtype)
        self.sqnorms = None  # computed per column in ``column``
        self.nbytes = operator.prepared_bytes + self._buf.nbytes

    def column(self, j):
        row = self.operator.rows(self.candidates[j:j + 1], out=self._buf)
        c = row[0].astype(np.float64)
        c *= self.scale[j]
        if self.sqrt_w is not None:
            c *= self.sqrt_w
        return c

    def materialise(self):
        """All M columns as an :class:`ArrayColumns` (``columns="precompute"``), in X's dtype."""
        rows = self.operator.rows(self.candidates)
        rows *= self.scale[:, None].astype(rows.dtype)
        if self.sqrt_w is not None:
            rows *= self.sqrt_w[None, :].astype(rows.dtype)
        return ArrayColumns(rows=rows)

    def gram(self, Y, budget=None):
        """Q = C^T C and R = C^T Y, in float64 row blocks (see :func:`gram_of_columns`)."""
        return self.operator.column_gram(self.candidates, Y, scale=self.scale, weights=self.sqrt_w, budget=budget)


def as_columns(columns):
    """``columns`` as a column provider (an (n, M) array becomes :class:`ArrayColumns`)."""
    if isinstance(columns, (ArrayColumns, KernelColumns)):
        return columns
    C = np.asarray(columns)
    if C.ndim != 2:
        raise ValueError(f"columns must be an (n, M) array or a column source, got shape {C.shape}.")
    return ArrayColumns(C)


def gram_of_columns(columns, Y, budget=None):
    """Q = C^T C (M, M) and R = C^T Y (M, k) in float64 (BLAS-3), for the Gram solver.

    ``columns``: an (n, M) array, ArrayColumns or KernelColumns. KernelColumns are evaluated in
    kernel row blocks of the training points against the candidates, so C is never held whole
    and every candidate column is computed once, for all outputs. Memory O(M^2 + M k) besides
    the blocks, which fit ``budget`` bytes (default: the columns' own budget).
    """
    cols = as_columns(columns)
    Y = np.asarray(Y, dtype=np.float64)
    Y2 = Y.reshape(Y.shape[0], -1)
    if Y2.shape[0] != cols.n_samples:
        raise ValueError(f"Y has {Y2.shape[0]} rows but the columns have length {cols.n_samples}.")
    if isinstance(cols, ArrayColumns):
        rows = RowBlock(cols.rows.astype(np.float64, copy=False), NUMPY)  # (M, n)
        return rows.gram(), rows.dot(Y2)
    return cols.gram(Y2, budget)


def weighted_targets(Y, w):
    """Yw = sqrt(w) Y (Y itself for w None), sqrt(w), yy = Yw^T Yw per output and whether each
    output of Yw has a non-zero entry: what the sparsity rule and the solvers take of the targets."""
    sqrt_w = None if w is None else np.sqrt(w)
    Yw = Y if w is None else Y * sqrt_w[:, None]
    with np.errstate(over="ignore", under="ignore"):
        yy = np.einsum("ij,ij->j", Yw, Yw)
    return Yw, sqrt_w, yy, np.any(Yw != 0, axis=0)


def gram_sums(X, Y, w, *, kernel, points, scale, budget):
    """The Gram solver's sums over the rows X (n, d), targets Y (n, k) and weights w (None for
    ones), as a row executor's ``sum`` function: C^T C, C^T Yw, Yw^T Yw per output and whether
    Yw has a non-zero entry (as 0/1, so that the chunks' values add up), with Yw = sqrt(w) Y and
    the candidate columns C = sqrt(w) K(X, points) scale of these rows."""
    Yw, sqrt_w, yy, nonzero = weighted_targets(Y, w)
    Q, R = KernelOperator(kernel, X, budget).column_gram(None, Yw, scale=scale, weights=sqrt_w, budget=budget,
                                                         points=points)
    return Q, R, yy, nonzero.astype(np.float64)


def gram_state_bytes(M, k):
    """float64 bytes of the Gram solver for k outputs: Q (M x M), R (M x k), and G with its
    temporaries (<= 3 m0^2, m0 <= M: the compiled visits keep G in an M x M buffer and update
    it in place; a refresh turns its copy of Q_AA into the new G in place; the Python loop's
    updates make one new G at a time)."""
    return 8 * (4 * M * M + 2 * M * k)


def plan_columns(columns, M, n, *, gram_bytes, precomputed_bytes, budget, distributed):
    """The column mode of a fit with M candidates on n rows: ``columns`` with "auto" resolved
    ("gram" when ``gram_bytes`` take at most half of ``budget`` or on dask chunks, else
    "precompute" when the M columns' ``precomputed_bytes`` take at most a quarter, else
    "on_the_fly"); a ValueError naming the fixes when the mode's state exceeds ``budget`` (bytes)."""
    mode = columns
    if mode == "auto":
        if 2 * gram_bytes <= budget or distributed:
            mode = "gram"
        else:
            mode = "precompute" if 4 * precomputed_bytes <= budget else "on_the_fly"
    if mode == "gram" and gram_bytes > budget:
        raise ValueError(
            f"columns='gram' needs {format_bytes(gram_bytes)} for the {M} x {M} Gram matrix of the candidates "
            f"and its solver state, more than max_memory={format_bytes(budget)}; "
            + ("lower n_components or increase max_memory (over dask chunks only the Gram solver runs "
               "without gathering X)." if distributed else
               "use columns='on_the_fly', lower n_components or increase max_memory.")
        )
    if mode == "precompute" and precomputed_bytes > budget:
        raise ValueError(
            f"columns='precompute' needs {format_bytes(precomputed_bytes)} for {M} columns of length "
            f"{n}, more than max_memory={format_bytes(budget)}; use columns='on_the_fly', lower "
            f"n_components or increase max_memory."
        )
    return mode
