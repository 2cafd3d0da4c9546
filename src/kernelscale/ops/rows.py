"""Row executors: the n-sized work of the least-squares solvers, on host arrays or over the row
chunks of dask arrays, behind one set of verbs.

Algorithms 1-3 (generalized and calibrated least squares, stagewise regression) touch n rows in
two ways only: sums over rows (weighted means, Gram matrices, X^T R, the objective) and per-row
updates (scores, residuals, predictions). A solver states both through an executor:

- ``rows.sum(fn, *arrays, **small)``: sum over row chunks of ``fn`` applied to the chunks of the
  row-aligned ``arrays`` (a float64 array, or a tuple of them); ``small`` are client-side values
  passed to every call unchanged;
- ``rows.map(fn, *arrays, width=..., dtype=...)``: the per-row array ``fn`` gives chunk by chunk;
- ``weighted_mean`` / ``weighted_gram``: the verbs of :class:`~kernelscale.ops.features.FeatureOperator`;
- ``DaskRows.taker(*arrays)(groups)``: the rows at given indices, of many index arrays at once,
  in one compute, brought to the client;
- ``rows.at(*arrays).sum(index, fn, **small)``: a sum over the rows at given indices (a mini-batch
  of the doubly stochastic solver), where their chunks are: ``fn(local, *chunks, **small)`` runs
  once per row chunk holding any of those rows (``local``: their positions in the chunk, in the
  order of ``index``) and the partial sums are reduced by the tree; ``hold(chunks)`` and
  ``release(chunks)`` keep some row chunks computed (persisted) while a run of such sums reads
  them, when the arrays are not kept whole (data larger than memory).
- ``rows.reduce(fn, *arrays, combine=...)``: as ``sum`` with another merge (maxima, concatenation).
- ``rows.compress(keep, *arrays)``: the rows where a per-row boolean is true (``numpy.compress``
  along the rows), such as the rows of positive sample weight; over dask chunks each chunk keeps
  its own rows (a chunk may become empty), and an executor of the result has the new chunks.

The fixed-point solver (paper 3) adds a product over pairs of rows: ``DaskRows.kernel_matvec``
computes K(X, X) V as one task per row chunk and group of column chunks (the groups summed by a
tree), and ``persist`` / ``value`` bring several lazy results of an iteration back in one round
trip.

:class:`HostRows` calls ``fn`` once on the whole arrays, so a solver written with it computes
exactly what it computed before on numpy input. :class:`DaskRows` (built by :func:`executor` when
an argument is a dask array) runs ``fn`` as ONE task per row chunk: sums are reduced by a tree
(``split_every`` chunks per node; the client receives one small array) and per-row results stay
where they were computed, persisted so that the graph of the next iteration starts from their
keys and does not grow. A sum whose row chunks are all persisted on a distributed cluster runs
one task per worker thread instead (:meth:`DaskRows._worker_groups`), whose chunks' results come
back apart and are merged in the tree's order: the same value. Summation order is the only
difference from numpy: partial sums per row chunk, added pairwise up the tree, rather than
numpy's pairwise sums over 4096-row chunks; each sum differs by rounding (a few ulps relative),
which the tests bound at 1e-8 on whole fits.
"""

from __future__ import annotations

import contextvars
import math

import numpy as np
import scipy.sparse as sp

from .features import FeatureOperator

__all__ = ["HostRows", "DaskRows", "RowsAt", "add_sums", "chunk_meta", "distributed_client", "executor", "is_dask",
           "is_persisted", "is_sparse_chunked", "row_weights", "stack_rows", "weighted_sum", "total"]

#: partial sums added per node of the tree reduction
SPLIT_EVERY = 8
#: the partial sums a node adds in this context: fewer when a distributed fit's plan finds its
#: workers' memory too small for SPLIT_EVERY of them (kernelscale.dask.memory)
SPLIT = contextvars.ContextVar("kernelscale_split_every", default=SPLIT_EVERY)
#: the most bytes of per-chunk results a grouped sum brings to the calling process
#: (:meth:`DaskRows._worker_groups`); larger sums are merged by the tree on the workers
GROUPED_RESULT_BYTES = 16 * 2**20
#: (function, merge, the arrays' row shapes and dtypes) -> bytes of one merged value, measured by
#: a sum of one task per chunk (the first of its kind in this process): a sum's value has the same
#: size whatever the values of its rows
_RESULT_BYTES: dict = {}
#: a map's client-side arguments of at least this many bytes of arrays go to the workers as one
#: key of their own (:func:`_shared_arguments`) rather than inside every task
SHARED_ARGUMENT_BYTES = 2**16


def is_dask(a):
    """True for a dask array (without importing dask)."""
    return type(a).__module__.split(".")[0] == "dask" and hasattr(a, "chunks") and hasattr(a, "map_blocks")


def is_sparse_chunked(a):
    """True for a dask array whose chunks are scipy.sparse matrices (its ``_meta`` is one)."""
    return sp.issparse(getattr(a, "_meta", None))


def chunk_meta(a, dtype=None):
    """An empty chunk of ``a``'s kind (a CSR matrix for sparse chunks, else a numpy array), of
    ``dtype`` (default ``a``'s), for the ``meta=`` of dask calls that keep ``a``'s chunk type."""
    dtype = a.dtype if dtype is None else dtype
    if is_sparse_chunked(a):
        return sp.csr_matrix((0, 0), dtype=dtype)
    return np.empty((0,) * a.ndim, dtype=dtype)


def executor(budget, *arrays):
    """:class:`DaskRows` when one of ``arrays`` is a dask array, else :class:`HostRows`."""
    for a in arrays:
        if is_dask(a):
            return DaskRows(a.chunks[0], budget)
    return HostRows(budget)


def _scaled(w, total):
    return np.asarray(w, dtype=np.float64) / total


def _total(a):
    return float(np.sum(a))


def weighted_sum(A, w):
    """sum_i w_i a_i in float64 (of one row chunk, as a ``sum`` function)."""
    return w @ A.astype(np.float64)


def row_weights(rows, X, sample_weight, n):
    """Weights summing to 1 (:func:`kernelscale.base.validation.normalized_weights` on host arrays); over the
    row chunks of X for dask input, whose sample weights were checked chunk by chunk."""
    if not rows.distributed:
        from ..base.validation import normalized_weights

        return normalized_weights(sample_weight, n)
    if sample_weight is None:  # from the chunks' sizes alone: a pass over X here would compute its chunks
        import dask.array as da  # for the weights and hold them for the passes that follow

        return da.full(n, 1.0 / n, chunks=(rows.chunks,), dtype=np.float64).persist()
    total = rows.sum(_total, sample_weight)
    if not total > 0:
        raise ValueError("sample_weight sums to zero; give at least one sample a positive weight.")
    return rows.map(_scaled, sample_weight, total=total, dtype=np.float64)


def total(rows, a):
    """sum of the entries of the per-row array ``a`` (a float)."""
    return rows.sum(_total, a)


class HostRows:
    """Host arrays: every verb is one call on the whole arrays."""

    distributed = False

    def __init__(self, budget, op=None):
        self.op = FeatureOperator(None, budget) if op is None else op

    @classmethod
    def wrap(cls, op):
        """``op`` (a FeatureOperator, or an executor) as an executor."""
        return op if hasattr(op, "map") else cls(op.budget, op)

    @property
    def budget(self):
        """The bytes one call may take."""
        return self.op.budget

    def max_rows(self, n):
        """Rows one call holds at once (n: all of them)."""
        return n

    def weighted_mean(self, A, w):
        return self.op.weighted_mean(A, w)

    def weighted_gram(self, A, w, B=None, *, center=None, uniform=False):
        return self.op.weighted_gram(A, w, B, center=center, uniform=uniform)

    def weighted_grams(self, A, w, others, *, uniform=False):
        """``[weighted_gram(A, w, B) for B in others]`` (B None: A's own Gram matrix)."""
        return [self.weighted_gram(A, w, B, uniform=uniform) for B in others]

    def sum(self, fn, *arrays, **small):
        return fn(*arrays, **small)

    def reduce(self, fn, *arrays, combine=None, persist=True, **small):
        return fn(*arrays, **small)

    def map(self, fn, *arrays, width=None, dtype=None, persist=True, **small):
        return fn(*arrays, **small)

    def persist(self, *objects):
        return objects

    def value(self, *xs):
        return xs[0] if len(xs) == 1 else xs

    def index(self, n):
        """The row indices 0, ..., n - 1 (a per-row array)."""
        return np.arange(n)

    def compress(self, keep, *arrays):
        """The rows of each of ``arrays`` where the per-row boolean ``keep`` is true (None stays
        None); the arrays themselves when every row is kept."""
        keep = np.asarray(keep, dtype=bool)
        if keep.all():
            return arrays
        return tuple(None if a is None else a[keep] for a in arrays)

    def standard_normal(self, rng, n, dtype):
        """``rng.standard_normal(n)`` in ``dtype``."""
        return rng.standard_normal(n).astype(dtype)

    def at(self, *arrays):
        """The rows at given indices of the row-aligned ``arrays`` (see :class:`RowsAt`)."""
        return _HostRowsAt(arrays)


class _HostRowsAt:
    """:meth:`HostRows.at`: one call on the whole arrays; nothing to hold."""

    def __init__(self, arrays):
        self.arrays = arrays

    def sum(self, index, fn, **small):
        return fn(index, *self.arrays, **small)

    def hold(self, chunks):
        pass

    def release(self, chunks):
        pass


def _chunk_value(fn, small, *blocks):
    """One task of a sum: ``fn`` on one row chunk."""
    return fn(*blocks, **small)


def _chunk_values(fn, small, width, *blocks):
    """One task of a grouped sum (:meth:`DaskRows._worker_groups`): ``fn`` on each of several row
    chunks in turn (``blocks``: each chunk's ``width`` arrays one after the other), the results
    kept apart, so that they are merged in the same order as one task per chunk would be."""
    return [fn(*blocks[i : i + width], **small) for i in range(0, len(blocks), width)]


def _merged(parts, combine):
    """``parts`` (one per row chunk, in row order) merged as :func:`_tree` merges them: nodes of
    SPLIT consecutive parts, level by level, to one."""
    split = SPLIT.get()
    while len(parts) > 1:
        parts = [combine(*parts[i : i + split]) for i in range(0, len(parts), split)]
    return parts[0]


def _nbytes(value):
    """The bytes of a sum's value (an array, a float, or a tuple of them)."""
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 8))


def _add(*parts):
    """A node of the tree reduction: the sum of partial sums (arrays, floats or tuples of them)."""
    if isinstance(parts[0], tuple):
        return tuple(_add(*p) for p in zip(*parts))
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


#: the merge of partial sums (arrays, floats or tuples of them) that the tree reduction adds: for
#: a caller that computes the last few partial sums of :meth:`RowsAt.sum_parts` itself
add_sums = _add


def stack_rows(parts):
    """The row blocks ``parts`` one under the other: ``numpy.concatenate``, or one CSR matrix when
    they are scipy.sparse (the row chunks of a dask array of sparse chunks)."""
    if any(sp.issparse(p) for p in parts):
        return sp.vstack([p if sp.issparse(p) else sp.csr_matrix(p) for p in parts], format="csr")
    return np.concatenate(parts)


def _take_chunk(index, *blocks):
    """One task of :meth:`DaskRows.taker`: the rows ``index`` of one row chunk of each array."""
    return tuple(None if b is None else b[index] for b in blocks)


def _take(chunks, blocks, shapes, groups):
    """:meth:`DaskRows.taker`'s function."""
    import dask

    offsets = np.cumsum((0,) + chunks)
    index = np.concatenate([np.asarray(g, dtype=np.int64) for g in groups])
    chunk = np.searchsorted(offsets, index, side="right") - 1
    order = np.argsort(chunk, kind="stable")
    present, starts = np.unique(chunk[order], return_index=True)
    places = np.split(order, starts[1:])  # positions in ``index`` of the rows of each present chunk
    task = dask.delayed(_take_chunk, pure=True)
    parts = dask.compute(*(task(index[p] - offsets[c], *(b[c] for b in blocks)) for c, p in zip(present, places)))
    out = []
    for j, shape in enumerate(shapes):
        full = None
        if shape is not None and parts and sp.issparse(parts[0][j]):  # sparse rows: stacked, then in index order
            full = stack_rows([part[j] for part in parts])[np.argsort(np.concatenate(places), kind="stable")]
        elif shape is not None:
            full = np.empty((index.size,) + shape[0], dtype=shape[1])
            for p, part in zip(places, parts):
                full[p] = part[j]
        out.append(full)
    bounds = np.cumsum([0] + [len(g) for g in groups])
    return [tuple(None if f is None else f[s:e] for f in out) for s, e in zip(bounds[:-1], bounds[1:])]


def is_persisted(X):
    """Whether every chunk of the dask X is a persisted key (its data in the workers' memory
    already, and in their process memory)."""
    try:
        from distributed import futures_of
    except ImportError:
        return False
    from dask.core import flatten

    keys = {future.key for future in futures_of(X)}
    return bool(keys) and all(key in keys for key in flatten(X.__dask_keys__()))


def _chunk_at(fn, small, local, *blocks):
    """One task of :meth:`RowsAt.sum`: ``fn`` on the rows ``local`` of one row chunk."""
    return fn(local, *blocks, **small)


def _chunks_at(fn, small, locals_, width, *blocks):
    """One task of :meth:`RowsAt.sum` over several row chunks (those one worker holds): ``fn`` on
    their rows ``locals_``, side by side (``blocks``: each chunk's ``width`` arrays in turn)."""
    rows = []
    for j in range(width):
        parts = blocks[j::width]
        rows.append(None if parts[0] is None else stack_rows([p[i] for p, i in zip(parts, locals_)]))
    return fn(slice(None), *rows, **small)


def _balanced(where, sizes, nthreads):
    """chunk -> worker for the chunks whose worker ``where`` knows: each on the worker holding it,
    unless that worker would then hold more than its share of their rows (by threads, half a
    chunk of slack); those go to the workers furthest below their shares (a worker that holds
    nothing gets its share too). The tasks of a sum over rows then balance the workers' rows."""
    threads = {w: max(int(n), 1) for w, n in nthreads.items()}
    total, count = sum(sizes[c] for c in where), sum(threads.values())
    share = {w: total * n / count for w, n in threads.items()}
    load = dict.fromkeys(threads, 0)
    out, over = {}, []
    for c in sorted(where):
        w = where[c]
        if w in load and load[w] + sizes[c] / 2 <= share[w]:
            out[c] = w
            load[w] += sizes[c]
        else:
            over.append(c)
    for c in over:
        w = min(load, key=lambda v: (load[v] - share[v], v))
        out[c] = w
        load[w] += sizes[c]
    return out


def distributed_client():
    """The distributed client that runs dask's computations now, or None (never imports distributed)."""
    import sys

    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    import dask

    if dask.config.get("scheduler", None) not in (None, "dask.distributed", "distributed"):
        return None
    try:
        return distributed.get_client()
    except ValueError:
        return None


class RowsAt:
    """Sums over the rows at given indices of row-aligned dask ``arrays`` (None stays None),
    computed where their row chunks are (:meth:`DaskRows.at`).

    ``sum(index, fn, **small)`` runs ``fn(local, *chunks, **small)`` as one task per row chunk
    holding any row of ``index`` (``local``: the positions of those rows in the chunk, in the
    order of ``index``), reduced by the executor's tree (``combine``, default: added) up to its
    root, which adds the last few partial sums here, and returns the sum: one compute, whose only
    results on the client are those few partial sums.
    ``small`` values may be dask collections (persisted keys): each task depends on them. On a
    distributed client the row chunks assigned to one worker make ONE task, run there (its rows
    side by side, ``local`` then a slice of all of them): fewer, larger products and partial sums
    to add. A chunk is assigned to the worker that holds it, unless that worker holds more than
    its share of the rows (:func:`_balanced`): the scheduler places persisted chunks unevenly
    (7 and 9 of 16 were measured), and the worker with more rows would be the one every
    iteration waits for; such a chunk is copied to a worker below its share once.

    The chunks are read from the arrays as they are (persisted: from the workers' memory;
    otherwise recomputed from their source by every sum that reads them), unless held:
    ``hold(chunks)`` persists those row chunks of every array (one call, no wait), so that
    the sums read them from the workers' memory until ``release(chunks)``."""

    def __init__(self, rows, arrays):
        self.chunks = rows.chunks
        self.offsets = np.cumsum((0,) + self.chunks)
        self.lazy = [rows._blocks(a) for a in arrays]  # once: to_delayed optimizes the graph
        self.held = {}
        self.where = {}  # chunk -> the worker holding its first array's block (distributed client)
        self.assigned = {}  # chunk -> the worker its tasks run on (_balanced), for the chunks in ``where``

    def locate(self, index):
        """[(chunk, positions in ``index``, rows in the chunk)] of the chunks holding rows of
        ``index`` (an index array or a slice), in chunk order."""
        n = int(self.offsets[-1])
        index = np.arange(*index.indices(n)) if isinstance(index, slice) else np.asarray(index, dtype=np.int64)
        chunk = np.searchsorted(self.offsets, index, side="right") - 1
        order = np.argsort(chunk, kind="stable")
        present, starts = np.unique(chunk[order], return_index=True)
        return [(int(c), p, index[p] - self.offsets[c]) for c, p in zip(present, np.split(order, starts[1:]))]

    def blocks(self, c):
        """The delayed row chunk ``c`` of each array (the held one when held)."""
        return self.held.get(c) or tuple(b[c] for b in self.lazy)

    def hold(self, chunks):
        import dask

        new = [int(c) for c in chunks if int(c) not in self.held]
        if new:
            kept = dask.persist(*(tuple(b[c] for b in self.lazy) for c in new))
            self.held.update(zip(new, kept))

    def release(self, chunks):
        for c in chunks:
            self.held.pop(int(c), None)
            self.where.pop(int(c), None)
            self.assigned.pop(int(c), None)

    def _groups(self, located):
        """The located chunks (:meth:`locate`) in groups of one task each: on a distributed
        client, the chunks that one worker holds (asked of the scheduler once a chunk is in
        memory, then remembered); otherwise one chunk a group."""
        client = distributed_client()
        if client is None:
            return [[item] for item in located]
        unknown = {self.blocks(c)[0].key: c for c, _, _ in located if c not in self.where}
        if unknown:  # one round trip, only while some chunks' places are not known (not yet in memory)
            found = False
            for key, workers in client.sync(client.scheduler.who_has, keys=list(unknown)).items():
                if workers and key in unknown:
                    self.where[unknown[key]] = sorted(workers)[0]
                    found = True
            if found or not self.assigned:
                self.assigned = _balanced(self.where, self.chunks, client.nthreads())
        groups = {}
        for item in located:
            groups.setdefault(self.assigned.get(item[0], ("chunk", item[0])), []).append(item)
        return list(groups.values())

    def select(self, index):
        """The tasks of a sum over the rows of ``index`` (an index array or a slice): groups of
        (chunk, positions in ``index``, rows in the chunk), one task each (:meth:`_groups`).
        :meth:`sum_parts` and :meth:`map_parts` of one selection give each group's task the same
        rows in the same order."""
        return self._groups(self.locate(index))

    def _tasks(self, groups, fn, name, parts=None, **small):
        """One lazy task per group; ``parts``: one value per group, passed to ``fn`` as ``part``."""
        import dask

        task, tasks = dask.delayed(_chunk_at, pure=True), dask.delayed(_chunks_at, pure=True)
        out = []
        for i, group in enumerate(groups):
            kwargs = small if parts is None else {**small, "part": parts[i]}
            worker = self.assigned.get(group[0][0])
            with dask.annotate(**({} if worker is None else {"workers": [worker], "allow_other_workers": True})):
                if len(group) == 1:
                    c, _, local = group[0]
                    out.append(task(fn, kwargs, local, *self.blocks(c), dask_key_name=f"{name}-{c}"))
                else:
                    blocks = [b for c, _, _ in group for b in self.blocks(c)]
                    out.append(tasks(fn, kwargs, [local for _, _, local in group], len(self.lazy), *blocks,
                                     dask_key_name=f"{name}-{group[0][0]}"))
        return out

    def sum_parts(self, index, fn, combine=_add, groups=None, parts=None, **small):
        """The lazy tree reduction of :meth:`sum` but its root: at most ``SPLIT_EVERY`` partial
        sums (dask delayed objects), which the caller computes and merges with ``combine`` (the
        root runs in the calling process: a root task would wait on a worker busy with other
        work). ``groups``: the :meth:`select` of ``index`` when already made; ``parts``: one value
        per group, passed to its task's ``fn`` as ``part`` (a lazy result of :meth:`map_parts`
        of the same groups)."""
        import uuid

        name = f"kernelscale-at-{fn.__name__}-{uuid.uuid4().hex}"
        parts = self._tasks(self.select(index) if groups is None else groups, fn, name, parts, **small)
        return _tree(parts, combine, f"{name}-tree", until=SPLIT.get())

    def map_parts(self, groups, fn, **small):
        """``fn``'s result for each group of a :meth:`select`, lazily (persisted, each stays on
        the worker that computed it, where the group's chunks are)."""
        import uuid

        return self._tasks(groups, fn, f"kernelscale-at-{fn.__name__}-{uuid.uuid4().hex}", **small)

    def sum(self, index, fn, combine=_add, **small):
        import dask

        return combine(*dask.compute(*self.sum_parts(index, fn, combine=combine, **small)))


def _normals(state, size, dtype):
    rng = np.random.RandomState()
    rng.set_state(state)
    return rng.standard_normal(size).astype(dtype)


def _kernel_block(Xi, Xj, kernel, budget):
    from .kernel import kernel_matrix

    return kernel_matrix(kernel, Xi, Xj, max_memory=budget)


def _block_product(Kij, Vj):
    """K_ij V_j of one pair of row chunks, as an (n_i, 1, k) block."""
    return (Kij @ np.asarray(Vj, dtype=np.result_type(Kij.dtype, Vj.dtype)))[:, None, :]


def _group_product(Xi, Xs, Vs, kernel, budget):
    """sum_j K(X_i, X_j) V_j over a group of column chunks j, as an (n_i, k) block (zeros where
    a chunk has no rows, as after :meth:`DaskRows.compress`)."""
    from .kernel import kernel_matvec

    out = np.zeros((Xi.shape[0], Vs[0].shape[1]), dtype=np.result_type(Xi.dtype, *(V.dtype for V in Vs)))
    for Xj, Vj in zip(Xs, Vs):
        if Xi.shape[0] and Xj.shape[0]:
            out += kernel_matvec(kernel, Xi, Xj, Vj, max_memory=budget)
    return out


def _tree(parts, combine, prefix, until=1):
    """The delayed partial results ``parts`` merged by ``combine`` up a tree of SPLIT-wide nodes
    (keys ``prefix-level-i``, in row order) until at most ``until`` remain (at least one): those."""
    import dask

    add, level, split = dask.delayed(combine, pure=True), 0, SPLIT.get()
    while len(parts) > max(until, 1):
        level += 1
        parts = [add(*parts[i : i + split], dask_key_name=f"{prefix}-{level}-{i}") for i in range(0, len(parts), split)]
    return parts


def _count(keep):
    """The rows kept in one row chunk (a 1-tuple, concatenated by :func:`_concatenate`)."""
    return (int(np.count_nonzero(keep)),)


def _concatenate(*parts):
    return sum(parts, ())


def _kept_rows(a, keep):
    return a[keep]


def _map_chunk(fn, small, *blocks):
    return fn(*blocks, **small)


def _array_bytes(value):
    """The bytes of the numpy arrays in ``value``: an array, or an object's array attributes."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    return sum(v.nbytes for v in getattr(value, "__dict__", {}).values() if isinstance(v, np.ndarray))


def _shared_arguments(small):
    """``small`` as it goes into the tasks of a map: inline where it is small, else one delayed
    key. An argument inline is a copy per task on the workers, and a worker keeps a task's
    arguments as long as it holds the task's result: a persisted map of a PCA's components over
    10M rows kept 472 copies of them (70 MB a worker); one key is one copy per worker, released
    when the map's tasks are done."""
    if sum(_array_bytes(v) for v in small.values()) < SHARED_ARGUMENT_BYTES:
        return small
    import dask

    return dask.delayed(small, pure=True)


def _gram_chunk(A, w, B=None, *, budget, center, uniform):
    return FeatureOperator(None, budget).weighted_gram(A, w, B, center=center, uniform=uniform)


def _grams_chunk(A, w, *others, budget, uniform):
    op = FeatureOperator(None, budget)
    return tuple(op.weighted_gram(A, w, B, uniform=uniform) for B in others)


def _mean_chunk(A, w, *, budget):
    return FeatureOperator(None, budget).weighted_mean(A, w)


class DaskRows:
    """Dask arrays with the row chunks ``chunks``: one task per row chunk, sums reduced by a
    tree, per-row results persisted. ``budget`` is the bytes one task's products may take."""

    distributed = True

    def __init__(self, chunks, budget):
        self.chunks = tuple(int(c) for c in chunks)
        self.budget = int(budget)
        self._places = {}  # a persisted array's name -> {chunk: worker}
        self._threads = None  # worker -> threads, asked once

    def max_rows(self, n):
        return max(self.chunks)

    def _dask(self, a):
        """``a`` as a dask array with this executor's row chunks and one column chunk."""
        if not is_dask(a):
            import dask.array as da

            a = np.asarray(a)
            a = da.from_array(a, chunks=(self.chunks,) + tuple((s,) for s in a.shape[1:]))
        if a.chunks[0] != self.chunks:
            raise ValueError(f"row chunks {a.chunks[0]} differ from the executor's {self.chunks}")
        if a.ndim == 2 and len(a.chunks[1]) > 1:
            a = a.rechunk({1: -1})
        return a

    def _blocks(self, a):
        """The row chunks of ``a`` as one delayed object each (None for None)."""
        if a is None:
            return [None] * len(self.chunks)
        return list(self._dask(a).to_delayed().ravel())

    def sum_parts(self, fn, *arrays, combine=_add, **small):
        """The lazy tree reduction of :meth:`sum` (a dask delayed object): one task per row
        chunk, then nodes of ``SPLIT_EVERY`` partial sums (or partial results merged by
        ``combine``, which takes them in row order)."""
        import dask
        from dask.base import tokenize

        blocks = [self._blocks(a) for a in arrays]
        name = f"kernelscale-sum-{fn.__name__}-{tokenize(fn, combine, small, *blocks)}"
        task = dask.delayed(_chunk_value, pure=True)
        parts = [task(fn, small, *(b[i] for b in blocks), dask_key_name=f"{name}-{i}") for i in range(len(self.chunks))]
        return _tree(parts, combine, f"kernelscale-tree-{name[16:]}")[0]

    def sum(self, fn, *arrays, **small):
        return self._reduced(fn, arrays, small, _add)

    def reduce(self, fn, *arrays, combine, persist=True, **small):
        """``fn`` over the row chunks, its results merged by ``combine(*parts)`` up the tree
        (parts in row order): a maximum, a concatenation, or several of them at once. With
        ``persist=False``: lazy (see :meth:`persist`)."""
        if persist:
            return self._reduced(fn, arrays, small, combine)
        return self.sum_parts(fn, *arrays, combine=combine, **small)

    def _reduced(self, fn, arrays, small, combine):
        """The value of :meth:`sum_parts`, computed by one task per worker thread where
        :meth:`_worker_groups` allows it: the chunks' results come back apart and are merged
        here in the tree's order, so the value is the same, bit for bit, however the chunks are
        placed. A function's first sum runs one task per chunk and measures its value, which
        decides whether the chunks' results are small enough to bring here."""
        import dask

        key = (fn, combine, tuple(None if a is None else (tuple(a.shape[1:]), str(a.dtype)) for a in arrays))
        size = _RESULT_BYTES.get(key)
        groups = None
        if size is not None and size * len(self.chunks) <= GROUPED_RESULT_BYTES:
            groups = self._worker_groups(arrays)
        if groups is None:
            value = self.sum_parts(fn, *arrays, combine=combine, **small).compute()
            if len(_RESULT_BYTES) > 4096:  # bounded: shapes of many past fits
                _RESULT_BYTES.clear()
            _RESULT_BYTES[key] = _nbytes(value)
            return value
        from dask.base import tokenize

        blocks = [self._blocks(a) for a in arrays]
        name = f"kernelscale-sum-{fn.__name__}-{tokenize(fn, small, *blocks)}"
        task, tasks = dask.delayed(_chunk_values, pure=True), []
        for worker, chunks in groups:
            with dask.annotate(workers=[worker], allow_other_workers=True):
                tasks.append(task(fn, small, len(blocks), *(b[c] for c in chunks for b in blocks),
                                  dask_key_name=f"{name}-{chunks[0]}"))
        parts = [None] * len(self.chunks)
        for (_, chunks), values in zip(groups, dask.compute(*tasks)):
            for c, value in zip(chunks, values):
                parts[c] = value
        return _merged(parts, combine)

    def _worker_groups(self, arrays):
        """[(worker, row chunks)], a task each: each worker's chunks (placed by :func:`_balanced`)
        split among its threads, and further where a task's chunks of ``arrays`` would take more
        than a quarter of the task budget (a worker that spilled them loads them all for the
        task), when a distributed client runs the computations and every chunk of ``arrays`` is
        persisted (a task then reads chunks its worker holds already); None otherwise. A pass then
        costs the scheduler a task per thread instead of one per chunk (tasks of a few
        milliseconds cost it as much as they compute: docs/dask.md)."""
        client = distributed_client()
        present = [self._dask(a) for a in arrays if a is not None]
        if client is None or len(self.chunks) < 2 or not present or not all(is_persisted(a) for a in present):
            return None
        first = present[0]
        places = self._places.get(first.name)
        if places is None:
            keys = [first.__dask_keys__()[c] for c in range(len(self.chunks))]
            keys = [k[0] if isinstance(k, list) else k for k in keys]  # a 2-d array's one column chunk
            held = client.sync(client.scheduler.who_has, keys=keys)
            where = {c: sorted(held[key])[0] for c, key in enumerate(keys) if held.get(key)}
            if len(where) < len(keys):
                return None
            self._threads = self._threads or client.nthreads()
            places = self._places[first.name] = _balanced(where, self.chunks, self._threads)
        row_bytes = sum(math.prod(a.shape[1:]) * a.dtype.itemsize for a in present)
        groups = []
        for worker in sorted(set(places.values())):
            chunks = [c for c in range(len(self.chunks)) if places[c] == worker]
            nbytes = row_bytes * sum(self.chunks[c] for c in chunks)
            count = max(int(self._threads.get(worker, 1)), 1, -(-4 * nbytes // max(self.budget, 1)))
            for piece in np.array_split(chunks, min(count, len(chunks))):
                groups.append((worker, [int(c) for c in piece]))
        return groups

    def index(self, n):
        import dask.array as da

        return da.arange(n, chunks=(self.chunks,))

    def compress(self, keep, *arrays):
        """The rows of each of ``arrays`` where the per-row boolean ``keep`` is true (None stays
        None), lazy dask arrays whose row chunks are the rows each chunk keeps (a chunk may
        become empty; :func:`executor` of a result has its chunks): one pass counts the rows kept
        per chunk, the rows are selected by one task per chunk where they are. The arrays
        themselves when every row is kept."""
        import dask.array as da

        keep = self._dask(keep)
        counts = self.reduce(_count, keep, combine=_concatenate)
        if sum(counts) == sum(self.chunks):
            return arrays
        out = []
        for a in arrays:
            if a is not None:
                a = self._dask(a)
                index = "r" + "abcdefgh"[: a.ndim - 1]
                a = da.blockwise(_kept_rows, index, a, index, keep, "r", adjust_chunks={"r": counts},
                                 dtype=a.dtype, meta=np.empty((0,) * a.ndim, dtype=a.dtype),
                                 token="kernelscale-compress")
            out.append(a)
        return tuple(out)

    def standard_normal(self, rng, n, dtype):
        """``rng.standard_normal(n)`` in ``dtype``, the same numbers, generated chunk by chunk on
        the workers from ``rng``'s state at each chunk's first row (``rng`` advances as by the
        one call; the client holds one chunk of draws at a time)."""
        import dask
        import dask.array as da

        parts = []
        for size in self.chunks:
            state = rng.get_state()
            rng.standard_normal(size)
            parts.append(da.from_delayed(dask.delayed(_normals, pure=True)(state, size, dtype), (size,), dtype=dtype,
                                         meta=np.empty(0, dtype=dtype)))
        return da.concatenate(parts).persist()

    def kernel_blocks(self, kernel, X):
        """K(X, X) as a persisted dask array of blocks K(X_i, X_j), one per pair of row chunks:
        the distributed counterpart of a kernel row cache holding every row."""
        import dask.array as da

        X = self._dask(X)
        return da.blockwise(_kernel_block, "ij", X, "id", X, "jd", kernel=kernel, budget=self.budget,
                            concatenate=True, dtype=X.dtype, meta=np.empty((0, 0), dtype=X.dtype),
                            token="kernelscale-kernel-blocks").persist()

    def kernel_matvec(self, kernel, X, V, *, blocks=None, persist=True):
        """K(X, X) V for V (n,) or (n, k) with X's row chunks; persisted, so an iteration's graph
        starts from the keys of V and does not grow.

        From ``blocks`` (the persisted :meth:`kernel_blocks`): one task per block, K_ij V_j,
        summed over j by a tree. Otherwise row chunk i's products with the column chunks j are
        made in groups: one task computes sum_j K(X_i, X_j) V_j over as many chunks j as half of
        the executor's budget holds (all of them on most data; the products take what the group
        leaves), and the groups' sums are added by a tree. A task per pair would put n_chunks^2
        tasks through the scheduler per product: at 16 chunks its CPU took a tenth of two
        workers' time (benchmarks/studies/compute_layer.md)."""
        import dask.array as da

        V = self._dask(V)
        V2 = V[:, None] if V.ndim == 1 else V
        if blocks is not None:
            dtype = np.result_type(blocks.dtype, V.dtype)
            parts = da.blockwise(_block_product, "ijk", blocks, "ij", V2, "jk", adjust_chunks={"j": 1},
                                 dtype=dtype, meta=np.empty((0, 0, 0), dtype=dtype), token="kernelscale-block-matvec")
            Z = parts.sum(axis=1, split_every=SPLIT.get(), dtype=dtype)
        else:
            Z = self._grouped_matvec(kernel, self._dask(X), V2)
        Z = Z[:, 0] if V.ndim == 1 else Z
        return Z.persist() if persist else Z

    def _grouped_matvec(self, kernel, X, V):
        import dask
        import dask.array as da
        from dask.base import tokenize
        from dask.highlevelgraph import HighLevelGraph

        dtype, k = np.result_type(X.dtype, V.dtype), V.shape[1]
        chunk_bytes = max(max(self.chunks), 1) * (X.shape[1] + k) * max(X.dtype.itemsize, V.dtype.itemsize)
        n_chunks = len(self.chunks)
        size = max(1, min(n_chunks, 1 + int(self.budget // 2 // chunk_bytes)))
        budget = self.budget - (size - 1) * chunk_bytes
        Xb, Vb = self._blocks(X), self._blocks(V)
        name = f"kernelscale-kernel-matvec-{tokenize(kernel, X, V, budget, size)}"
        task = dask.delayed(_group_product, pure=True)
        rows = [_tree([task(Xb[i], Xb[g : g + size], Vb[g : g + size], kernel, budget, dask_key_name=f"{name}-{i}-{g}")
                       for g in range(0, n_chunks, size)], _add, f"{name}-sum-{i}")[0]
                for i in range(n_chunks)]
        # each row chunk's sum is the array's block (i, 0): the executor's chunks, empty ones kept
        graph = HighLevelGraph.from_collections(name, {(name, i, 0): r.key for i, r in enumerate(rows)},
                                                dependencies=rows)
        return da.Array(graph, name, (self.chunks, (k,)), dtype=dtype, meta=np.empty((0, 0), dtype=dtype))

    def persist(self, *objects):
        """The lazy arrays and sums (:meth:`map` and :meth:`reduce` with ``persist=False``)
        computed in one call, kept where they were computed."""
        import dask

        return dask.persist(*objects)

    def value(self, *xs):
        """The values of (persisted) lazy sums, in one call."""
        import dask

        values = dask.compute(*xs)
        return values[0] if len(xs) == 1 else values

    def map(self, fn, *arrays, width=None, dtype=None, persist=True, **small):
        """The per-row result of ``fn`` (``width`` columns, or 1-d when None) as a persisted
        dask array with the executor's row chunks (lazy with ``persist=False``)."""
        import dask.array as da

        args, letters = [], iter("abcdefghijklmnop")
        for a in arrays:
            if a is None:
                args += [None, None]
            else:
                a = self._dask(a)
                args += [a, "r" + "".join(next(letters) for _ in range(a.ndim - 1))]
        out = "r" if width is None else "rz"
        result = da.blockwise(
            _map_chunk, out, fn, None, _shared_arguments(small), None, *args,
            new_axes={} if width is None else {"z": width}, concatenate=True, dtype=dtype,
            meta=np.empty((0,) * len(out), dtype=dtype), token=f"kernelscale-{fn.__name__}",
        )
        return result.persist() if persist else result

    def taker(self, *arrays):
        """A function ``take(groups)`` of a list of index arrays giving
        ``[tuple(a[g] for a in arrays) for g in groups]`` (None for a None array) as numpy arrays:
        per call, ONE compute of one task per row chunk holding any of the rows (it returns just
        those rows). The rows are copied, so their values are exactly the chunk's."""
        blocks = [self._blocks(a) for a in arrays]  # once, not per call: to_delayed optimizes the graph
        shapes = [None if a is None else (tuple(a.shape[1:]), a.dtype) for a in arrays]
        return lambda groups: _take(self.chunks, blocks, shapes, groups)

    def at(self, *arrays):
        """Sums over the rows at given indices, where their chunks are (:class:`RowsAt`)."""
        return RowsAt(self, arrays)

    def weighted_mean(self, A, w):
        return self.sum(_mean_chunk, A, w, budget=self.budget)

    def weighted_gram(self, A, w, B=None, *, center=None, uniform=False):
        return self.sum(_gram_chunk, A, w, B, budget=self.budget, center=center, uniform=uniform)

    def weighted_grams(self, A, w, others, *, uniform=False):
        """The Gram matrices of :meth:`HostRows.weighted_grams` in ONE pass over the row chunks
        (a lazy A, such as features regenerated per chunk, is computed once for all of them);
        each chunk's products are the ones the separate passes would sum."""
        return list(self.sum(_grams_chunk, A, w, *others, budget=self.budget, uniform=uniform))
