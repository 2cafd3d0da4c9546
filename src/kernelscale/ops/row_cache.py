"""An LRU cache of kernel rows within a memory budget (fixed point and coordinate descent).

Paper 3's solvers need K c (fixed point, step 1) or single rows of K (coordinate descent). The
cache keeps as many rows of K as the budget allows, computes missing rows in batches, and
evaluates the rest of K c with blocked kernel products restricted to the columns where c is
non-zero (the paper's remark on sparse c).
"""

from __future__ import annotations

import numpy as np

from .memory import format_bytes, ufunc_workspace_bytes

__all__ = ["KernelRowCache", "DEFAULT_BATCH_ROWS"]

DEFAULT_BATCH_ROWS = 256


class KernelRowCache:
    """Rows of K(X, X) of a :class:`~kernelscale.ops.kernel.KernelOperator`, computed on demand
    in batches and kept (least recently used first out) within the operator's budget.

    The budget holds: ``reserved_bytes`` (the caller's vectors), the prepared point set, the
    working memory of one batch of rows and of one blocked product, and the cache itself, which
    gets what is left (at most ``max_rows`` rows). Construction fails at once, naming
    ``max_memory``, when not even one row fits.

    Parameters
    ----------
    operator : KernelOperator
    reserved_bytes : int
        Memory the caller holds that counts against the same budget.
    max_rows : int or None
        At most this many rows are cached (the number of rows the solver can ever ask for).
    batch_rows : int or None
        Rows computed per kernel block when several are missing (default 256).
    """

    def __init__(self, operator, *, reserved_bytes=0, max_rows=None, batch_rows=None):
        self.operator = op = operator
        n, d = op.n, op._row_width  # d, or the stored values of a sparse row (ops.kernel._width)
        self.n = n
        self.dtype = op.dtype
        item = self.dtype.itemsize
        budget = op.budget
        per_row = op.kernel.bytes_per_row(n, d, self.dtype)
        row_bytes = n * item
        ws = ufunc_workspace_bytes()
        held = reserved_bytes + op.prepared_bytes  # + the cache
        # transient work: a batch of rows (blocks), or a blocked product of a subset of X against
        # another (their copies and preparation, one block row, the coefficients)
        product = 2 * n * d * item + op.kernel.aux_bytes(n, d, self.dtype) + ws + per_row + n * item
        need = held + max(product, ws + per_row) + row_bytes
        if need > budget:
            raise ValueError(
                f"max_memory={format_bytes(budget)} is too small for this solver on {n} points: "
                f"it needs at least {format_bytes(need)} ({need} bytes) for one kernel row, its "
                f"work space and O(n) vectors; increase max_memory (or pass float32 data, which "
                f"halves it)."
            )
        max_rows = n if max_rows is None else max(1, min(int(max_rows), n))
        batch_rows = DEFAULT_BATCH_ROWS if batch_rows is None else batch_rows
        room = budget - held
        # batches may take a quarter of what the minimal work space leaves, the cache the rest
        spare = room - max(product, ws + per_row)
        batch = max(1, min(int(batch_rows), max_rows, spare // (4 * per_row)))
        work = max(product, ws + batch * per_row)
        capacity = int(max(1, min(max_rows, (room - work) // row_bytes)))
        self.capacity = capacity
        self.batch_rows = min(batch, capacity)
        self._work_budget = room - capacity * row_bytes
        self.rows = np.empty((capacity, n), dtype=self.dtype)
        self.slot_of = np.full(n, -1, dtype=np.intp)
        self.owner = np.full(capacity, -1, dtype=np.intp)
        self.last_used = np.zeros(capacity, dtype=np.int64)
        self.clock = 0
        self.n_used = 0
        self.n_computed = 0  # rows evaluated so far (statistics)
        op.prepared  # noqa: B018  (prepared now, inside the budget counted above)

    @property
    def nbytes(self):
        return self.rows.nbytes

    def fetch(self, idx):
        """Make sure rows ``idx`` (distinct, at most ``capacity``) are cached; return their slots."""
        idx = np.asarray(idx, dtype=np.intp)
        if idx.size > self.capacity:
            raise ValueError(f"cannot hold {idx.size} rows in a cache of {self.capacity}.")
        missing = idx[self.slot_of[idx] < 0]
        if missing.size:
            slots = self._allocate(missing.size, idx)
            if slots[-1] - slots[0] == slots.size - 1 and np.all(np.diff(slots) == 1):
                # fresh slots in a row: the kernel writes straight into the cache (no copy)
                self.operator.rows(missing, out=self.rows[slots[0] : slots[-1] + 1], budget=self._work_budget)
            else:
                for start, stop, block in self.operator.blocks(missing, budget=self._work_budget):
                    self.rows[slots[start:stop]] = block
            self.owner[slots] = missing
            self.slot_of[missing] = slots
            self.n_computed += missing.size
        self.clock += 1
        out = self.slot_of[idx]
        self.last_used[out] = self.clock
        return out

    def _allocate(self, k, protect):
        free = min(k, self.capacity - self.n_used)
        slots = np.arange(self.n_used, self.n_used + free, dtype=np.intp)
        self.n_used += free
        if free < k:
            age = self.last_used[: self.n_used].copy()
            age[slots] = np.iinfo(np.int64).max  # just handed out above
            kept = self.slot_of[protect]
            age[kept[kept >= 0]] = np.iinfo(np.int64).max
            victims = np.argpartition(age, k - free - 1)[: k - free].astype(np.intp)
            self.slot_of[self.owner[victims]] = -1
            self.owner[victims] = -1
            slots = np.concatenate([slots, victims])
        return slots

    def matvec(self, c):
        """Return K c (c of shape (n,) or (n, k)).

        Dense c: cached rows give their entries of K c by one product (row form); the other
        entries come from blocked kernel products against the points where c != 0. Sparse c:
        K c = sum_j c_j k_j over the non-zero c_j (K is symmetric: row j is column j), from the
        cached rows where possible and blocked kernel products for the other columns.
        """
        dtype = self.dtype  # the working precision (a float64 c against float32 rows would copy them)
        c = np.asarray(c, dtype=dtype)
        out = np.zeros(c.shape, dtype=dtype)
        nz = np.flatnonzero(c if c.ndim == 1 else np.any(c != 0, axis=1))
        if nz.size == 0:
            return out
        used = self.n_used
        if 4 * nz.size >= self.n:  # dense: row form
            if used:
                out[self.owner[:used]] = self.rows[:used] @ c
            rows = np.flatnonzero(self.slot_of < 0)
            if rows.size:
                out[rows] = self.operator.matvec(c[nz], rows=rows, cols=nz, budget=self._work_budget)
            return out
        slots = self.slot_of[nz]
        hit = slots >= 0
        if hit.any():  # sparse: gather the needed cached rows a batch at a time
            cached_nz, cached_slots = nz[hit], slots[hit]
            step = max(1, self.batch_rows)
            for start in range(0, cached_nz.size, step):
                out += self.rows[cached_slots[start : start + step]].T @ c[cached_nz[start : start + step]]
        if (~hit).any():
            cols = nz[~hit]
            out += self.operator.matvec(c[cols], cols=cols, budget=self._work_budget)
        return out
