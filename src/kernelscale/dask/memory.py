"""A distributed fit planned within the memory of the workers that will run it.

A worker process of ``distributed`` is watched by its nanny: at 60% of its ``memory_limit`` it
spills the data it holds to disk, at 80% it stops running tasks (paused), at 95% the nanny kills
it and starts a fresh one, and a task whose workers died four times fails the computation with
``KilledWorker``. A fit that plans its blocks with the client's budget (half of the client's
free memory by default) can ask each task for far more than a worker has. So, before it submits
anything, :func:`plan` asks each worker (one message, no task: :func:`worker_memory`) for its
``memory_limit``, threads, spill settings and memory now, and works out, per worker:

- the room for a fit: :data:`SAFE_FRACTION` of the smallest ``memory_limit``, less what the
  worker process takes before any work (the larger of :data:`WORKER_BASELINE`, a Python process
  with numpy, scipy, scikit-learn, numba and kernelscale imported, and the memory the worker
  reports for itself now);
- the worker's share of what the fit persists: X, the targets and weights (X only when the rest
  leaves room for the tasks; otherwise each pass reads X again from its source) and the
  estimator's per-row state (:func:`footprint`: scores, residuals, the LS-SVM's n x J block);
- what is left per thread is the budget of one task: the row chunk it reads and writes, the
  state every task of the fit holds (the M or J sampled rows, a partial sum of an M x M or J x J
  Gram matrix, and the partial sums a node of the tree reduction adds), and its kernel or feature
  blocks, which the estimator's planners size within the rest.

When the worker's share of what the fit persists leaves no room for its tasks, and the workers
spill (their ``distributed.worker.memory`` ``spill`` or ``target`` fraction is set), the persisted
state goes to the workers' local disks instead: the worker's memory monitor keeps the process
below its spill fraction of ``memory_limit`` by moving the least recently used data there, and
the tasks get what lies between that and the pause fraction (:attr:`WorkerMemory.spill_room`;
0.1 of ``memory_limit`` at distributed's defaults), so a worker's memory stays flat however many
rows it holds. A cache the fit keeps that the worker cannot spill (the doubly stochastic fit's
blocks) lies below the spill fraction with the process; only what of it exceeds that room
(:attr:`WorkerMemory.spill_slack`) comes out of the tasks'. Such a plan never keeps X (each pass
reads it again from its source), and needs the whole state on the smallest free disk of the
workers (they may share one; or within ``max-spill``).

The fit then runs with its budgets capped at the task budget (:func:`kernelscale.ops.memory.capped`:
``max_memory`` still applies when it is smaller), so that every block, every "auto" size that
follows the budget (SLKL's M, the LS-SVM's J) and every memory check of the estimator is
planned for the worker, not for the client. When the row chunks are too large for a task, X is
rechunked into smaller row chunks (lazily, before anything runs); when the state every task
needs, or what the fit must persist, does not fit, the fit is refused with a ValueError naming
max_memory, memory_limit, the row chunks and the fix, before any task is submitted.

Sparse chunks count what they store: a row of X is its mean stored values with their indices
(:func:`row_values`, counted by one small task per chunk), not d dense values, wherever the plan
counts rows of X (the chunks read, X persisted, the M or J sampled rows); the d x d sums and the
random features' frequencies stay d wide.
"""

from __future__ import annotations

import contextvars
import dataclasses
import math

import numpy as np
import scipy.sparse as sp
from sklearn.base import is_classifier

from ..ops.features import PIECE_ROWS
from ..ops.memory import format_bytes, parse_memory
from ..ops.rows import is_persisted

__all__ = ["SAFE_FRACTION", "WORKER_BASELINE", "Plan", "WorkerMemory", "active_plan", "footprint", "is_persisted",
           "plan", "worker_memory"]

#: share of a worker's memory_limit a fit plans to use at most: well below the pause (80%) and the
#: nanny's kill (95%) with room for the rounding of the estimates and the allocator's slack
SAFE_FRACTION = 0.5
#: a worker process before any work: Python, numpy, scipy, scikit-learn, numba and kernelscale
#: imported (measured: 169 MiB resident on Linux, numpy 2.4, distributed 2026.8)
WORKER_BASELINE = 176 * 2**20
#: row chunks are never cut below this many rows by the planner (smaller chunks only add tasks)
MIN_CHUNK_ROWS = 256
#: a plan that leaves its tasks less than this (and less than the estimator's max_memory) gives way
#: to a later mode that leaves more: the state spilled to disk rather than tasks of a few rows
#: (4M virtual digits held in memory left the doubly stochastic tasks 1.5 MiB, and took 7x the
#: time of 1M)
STARVED_BUDGET = 16 * 2**20
#: partial sums a node of the tree reduction adds (kernelscale.ops.rows.SPLIT_EVERY), at most
SPLIT_MAX, SPLIT_MIN = 8, 2
#: arrays of one column per class a classifier's fit holds per row of a chunk (one-hot targets,
#: scores, residuals), within its budget (kernelscale.dask.fit checks them before it starts)
CLASS_ARRAYS = 7

#: the plan of the distributed fit running in this context (None outside one)
_PLAN = contextvars.ContextVar("kernelscale_dask_plan", default=None)


def active_plan():
    """The :class:`Plan` of the distributed fit running now, or None."""
    return _PLAN.get()


@dataclasses.dataclass(frozen=True)
class WorkerMemory:
    """The workers of a distributed client: their count, the smallest memory_limit, the most
    threads one runs, and the largest memory one process takes now (bytes)."""

    n_workers: int
    memory_limit: int
    nthreads: int
    process: int
    #: bytes the tasks of one worker may take while it spills the fit's data (0: it does not spill)
    spill_room: int = 0
    #: bytes one worker may spill (its free local disk, or ``max-spill``)
    spill_disk: int = 0
    #: bytes of memory a spilling worker cannot move to disk (a cache of the fit's) that it holds
    #: below its spill level without taking from its tasks' room: that level less the process
    spill_slack: int = 0

    @property
    def room(self):
        """Bytes a fit may use in one worker (:data:`SAFE_FRACTION` less the baseline)."""
        return int(SAFE_FRACTION * self.memory_limit) - max(WORKER_BASELINE, self.process)


#: when a worker's nanny kills it at its terminate fraction and the worker never pauses, its tasks
#: stop this far below that fraction while it spills
SPILL_MARGIN = 0.05


def _worker_state(dask_worker):
    """A worker's memory_limit (0: none), threads, target, spill, pause and terminate fractions,
    the bytes it may spill, and its process memory and the bytes of data it manages, now: run on
    the worker."""
    import shutil

    import dask

    manager = dask_worker.memory_manager
    disk = shutil.disk_usage(dask_worker.local_directory).free
    if manager.max_spill is not False:
        disk = min(disk, int(manager.max_spill))
    return {"memory_limit": int(manager.memory_limit or 0), "nthreads": int(dask_worker.state.nthreads),
            "fractions": (manager.memory_target_fraction, manager.memory_spill_fraction,
                          manager.memory_pause_fraction, dask.config.get("distributed.worker.memory.terminate", False)),
            "disk": disk, "process": int(dask_worker.monitor.get_process_memory()),
            "managed": int(dask_worker.state.nbytes)}


def spill_room(memory_limit, baseline, target, spill, pause, terminate):
    """Bytes a worker's tasks may take while it spills the data it holds: from the memory its
    monitor keeps the process within (the ``spill`` fraction of ``memory_limit``; with only a
    ``target`` fraction, the process baseline plus that much data) to where the worker stops
    running tasks (``pause``; else :data:`SPILL_MARGIN` below ``terminate``). 0 when the worker
    does not spill or nothing lies between."""
    if spill is False and target is False:
        return 0
    held = spill * memory_limit if spill is not False else baseline + target * memory_limit
    top = pause if pause is not False else (terminate if terminate is not False else 1.0) - SPILL_MARGIN
    return int(max(0.0, top * memory_limit - max(held, baseline)))


def spill_slack(memory_limit, baseline, target, spill):
    """Bytes between the process ``baseline`` and the memory a spilling worker's monitor keeps the
    process within (:func:`spill_room`): memory the worker cannot spill (a fit's cache of blocks)
    fits there, the monitor spilling data instead. 0 when the worker does not spill."""
    if spill is False and target is False:
        return 0
    held = spill * memory_limit if spill is not False else baseline + target * memory_limit
    return int(max(0.0, held - baseline))


def worker_memory(client):
    """:class:`WorkerMemory` of ``client``'s workers, from one message to each worker (no task):
    its memory_limit, threads, spill settings, free disk and memory now; None when there are none
    or one has no memory_limit (nothing to plan within). Asked of the workers themselves: the
    scheduler's metrics date from a worker's last heartbeat (before data persisted since), and the
    client's copy of the scheduler's information is refreshed in the background without the
    workers, so that reading it may find none."""
    if not hasattr(client, "run"):
        return None
    states = list(client.run(_worker_state).values())
    limits = [state["memory_limit"] for state in states]
    if not states or 0 in limits:
        return None
    limit = min(limits)
    process = max(state["process"] for state in states)
    # what a spilling worker cannot move to disk: the process less the data it manages (an earlier
    # fit's state still referenced, a warm start's)
    baseline = max(WORKER_BASELINE, max(state["process"] - state["managed"] for state in states))
    room = min(spill_room(limit, baseline, *state["fractions"]) for state in states)
    slack = min(spill_slack(limit, baseline, *state["fractions"][:2]) for state in states)
    return WorkerMemory(len(states), limit, max(state["nthreads"] for state in states), process, room,
                        min(state["disk"] for state in states), slack if room else 0)


@dataclasses.dataclass(frozen=True)
class Footprint:
    """What a distributed fit of one estimator holds, in bytes: ``state_row`` persisted per row
    (beyond X, the targets and the weights), ``task_row`` per row of the chunk one task reads and
    writes, ``block_row`` per row of the blocks the estimator plans within its budget for one
    task's whole chunk (a stagewise feature block, the LS-SVM's n_c x J block), ``block`` of the
    blocks it plans within its budget whatever the chunk's rows (features regenerated in pieces),
    ``fixed`` held by every task whatever its rows (sampled rows, a partial sum), ``part`` one
    partial sum of the tree reduction; ``what`` names the fixed state and ``knob`` its parameter."""

    state_row: int = 0
    task_row: int = 0
    block_row: int = 0
    block: int = 0
    fixed: int = 0
    part: int = 0
    what: str = ""
    knob: str = ""


def footprint(estimator, n, d, k, itemsize, budget, width=None):
    """:class:`Footprint` of a distributed fit of ``estimator`` on n rows of d features and k
    target columns of ``itemsize`` bytes, its budgets capped at ``budget`` bytes (the "auto"
    sizes that follow the budget are resolved with it). ``width``: values of ``itemsize`` a row
    of X takes (:func:`row_values`; default d, dense rows)."""
    name = type(estimator).__name__
    f = 8  # sums and per-row state in float64
    w = d if width is None else width
    io = 3 * (w + k) * itemsize  # a task's chunk: read, cast or copied, and its per-row output
    if name in ("GeneralizedLeastSquaresClassifier", "CalibratedLeastSquaresClassifier"):
        # scores at three points, the residual and the normalised weights per row; d x d sums
        part = (d + 1) * (d + k + 1) * f
        return Footprint(state_row=(6 * k + 2) * f, task_row=io + 4 * k * f, fixed=part, part=part,
                         what=f"the {d} x {d} Gram sums of the features", knob="the number of features (PCA)")
    if name in ("StagewiseClassifier", "StagewiseRegressor"):
        b = estimator._block_size(n)
        p = estimator._n_pca(d) or w  # the PCA's dense projection, or X's rows
        if estimator._n_pca(d):  # the stages read the projection (the PCA's passes: plan)
            io = 3 * (p + k) * itemsize
        # the projection, predictions, targets and residuals kept; b x b Gram sums per task; the
        # chunk's n_c x k arrays and the feature block (cosines, their centred copy) regenerated
        # per pass: by pieces of PIECE_ROWS rows for the least-squares updates, for the task's
        # whole chunk (and persisted) for softmax stages
        part = b * (b + k + 1) * f
        piece = 0 if estimator.update == "softmax" else PIECE_ROWS * 6 * b * f
        return Footprint(state_row=(p + 4 * k + 2) * f, task_row=io + p * f,
                         block_row=7 * k * f + (0 if piece else 6 * b * f), block=piece, fixed=part, part=part,
                         what=f"the {b} x {b} Gram sums of a feature block" + (f" and its features of {PIECE_ROWS} rows"
                                                                               if piece else ""),
                         knob="block_size")
    if name in ("SLKLRegressor", "SLKLClassifier"):
        M = min(n, estimator._n_components(n, budget))
        part = M * (M + k + 1) * f * (1 if name == "SLKLRegressor" else max(1, k))
        # the M candidate rows shipped to every task, the task's own C^T W C and a block of
        # kernel columns of a few hundred rows (the blocks are planned within the budget)
        return Footprint(task_row=io, fixed=M * w * itemsize + part + 256 * M * f, part=part,
                         what=f"the {M} x {M} Gram sums of the candidates", knob="n_components")
    if name in ("RegularizedKernelClassifier", "RegularizedKernelRegressor"):
        # c, K c, the diagonal, the loss weights and the iterates' temporaries per row; a pair of
        # row chunks per task, its kernel block within the budget
        return Footprint(state_row=(8 * k + 4) * f, task_row=2 * io + 4 * k * f, fixed=0, part=0)
    if name in ("LSSVMClassifier", "LSSVMRegressor"):
        J = estimator._dask_block(n, w, k, np.dtype(f"f{itemsize}"), budget)
        if J >= n + 1:  # one block is the whole system: solved on the rows gathered by the client
            return Footprint(task_row=io)
        part = J * (J + k + 1) * f
        # W, R, Z, the committee and the diagonal per row, and each chunk's n_c x J block of Theta
        return Footprint(state_row=(J + 5 * k + 2) * itemsize, task_row=io, block_row=2 * J * itemsize,
                         fixed=J * w * itemsize + part, part=part,
                         what=f"the {J} sampled rows and their {J} x {J} Gram sums", knob="batch_size")
    if name in ("DoublyStochasticClassifier", "DoublyStochasticRegressor"):
        need, _, batch, block = estimator._dask_task_need(n, d, k, np.dtype(f"f{itemsize}"))
        # the coded targets and weights, persisted beside X; a task holds its rows of a mini-batch
        # (at most all of them), their scores and the new block's features, the coefficients of
        # every earlier block and its partial sums (the D x k gradient, and the preconditioned
        # solver's D x D covariance): an iteration's need as the estimator plans it; plus the
        # regenerated blocks its worker caches (an eighth of its memory_limit, counted by the
        # caller). The fit then skips its own check of that need against the capped budget. Its
        # partial sums are one per worker, added by the client (RowsAt.sum_parts): no tree node
        # runs on a worker below 9 workers, so none is planned (part=0), and the fan-in does not
        # eat the budget the tasks' products plan their row chunks in
        return Footprint(state_row=(k + 1) * f, task_row=io, fixed=need, part=0,
                         what=f"an iteration on a mini-batch of {batch} rows with blocks of {block} features",
                         knob="batch_size")
    return Footprint(state_row=4 * k * f, task_row=io)


@dataclasses.dataclass(frozen=True)
class Plan:
    """The plan of one distributed fit: ``budget`` caps every budget of the fit (bytes per task);
    ``rows`` the rows of a row chunk (None: X's chunks as they are); ``keep_x`` whether X is
    persisted; ``hold`` the bytes the workers may hold for the fit's data; ``split_every`` the
    partial sums a node of a tree reduction adds; ``spills`` whether the workers spill the fit's
    state to disk (module docstring)."""

    budget: int
    rows: int | None
    keep_x: bool
    hold: int
    split_every: int
    workers: WorkerMemory
    spills: bool = False


#: bytes a stored value of a sparse chunk takes besides its value (a CSR index, int64 at most),
#: and a row's pointer
SPARSE_INDEX_BYTES = 8


def row_values(X):
    """Values of X's dtype one row of the dask X takes in memory: d for dense chunks; for
    scipy.sparse chunks, the mean stored values per row with their indices and the row's
    pointer, rounded up. The stored values are counted by one task per chunk (a number each),
    before anything of the fit is submitted."""
    if not sp.issparse(getattr(X, "_meta", None)):
        return X.shape[1]
    counts = X.map_blocks(lambda block: np.full((1, 1), block.nnz, dtype=np.int64), dtype=np.int64,
                          chunks=((1,) * len(X.chunks[0]), (1,) * len(X.chunks[1])),
                          meta=np.empty((0, 0), dtype=np.int64))
    stored = int(counts.sum().compute())
    item = X.dtype.itemsize
    per_row = stored / max(X.shape[0], 1) * (item + SPARSE_INDEX_BYTES) + SPARSE_INDEX_BYTES
    return int(math.ceil(per_row / item))


def _share(chunks, n_workers):
    """The largest fraction of n-row data one worker holds: its even share of the row chunks and
    one more chunk (the scheduler places chunks where they are computed, not evenly)."""
    n = sum(chunks)
    return min(1.0, (math.ceil(len(chunks) / n_workers) + 1) * max(chunks) / max(n, 1))


def plan(estimator, X, k, client_budget, workers, *, x_reduced=False):
    """The :class:`Plan` of a distributed fit of ``estimator`` on the dask X (row chunks) with k
    target columns on ``workers`` (:class:`WorkerMemory`), within ``client_budget`` bytes per
    task; a ValueError before anything runs when it cannot fit. ``x_reduced``: the fit keeps a
    reduction of X (a stagewise PCA), never X itself. An X persisted already is in the workers'
    process memory (:attr:`WorkerMemory.process`): keeping it costs nothing more. A classifier's
    budget holds its CLASS_ARRAYS arrays of a chunk's rows at least."""
    n, d = X.shape
    itemsize = X.dtype.itemsize
    width = row_values(X)
    cls = type(estimator).__name__
    chunks = tuple(int(c) for c in X.chunks[0])
    W, T, room = workers.n_workers, workers.nthreads, workers.room
    data_row = k * itemsize + 8  # targets and weights
    x_row = 0 if x_reduced else width * itemsize
    kept_row = 0 if is_persisted(X) else x_row
    class_row = CLASS_ARRAYS * k * itemsize if is_classifier(estimator) else 0
    extra = workers.memory_limit // 8 if cls.startswith("DoublyStochastic") else 0  # its workers' block cache

    def attempt(rows, keep_x, budget, spills=False):
        """(task room, footprint) with row chunks of ``rows``, X kept or not, within ``budget``;
        ``spills``: the workers spill the fit's state (kept on disk, not in their memory)."""
        cut = chunks if rows is None else _cut(n, rows)
        share = _share(cut, W)
        fp = footprint(estimator, n, d, k, itemsize, budget, width)
        held = share * n * (data_row + fp.state_row + (kept_row if keep_x else 0))
        if spills:  # all of it on the disk (the workers may share one); the block cache stays
            fits = n * (data_row + fp.state_row) <= workers.spill_disk
            return (_spilling_room(workers, extra) / T if fits else 0), fp, cut
        return (room - extra - held) / T, fp, cut

    # a fit that reduces X (a stagewise PCA) reads X's own row chunks whole in the PCA's passes,
    # d x d sums a task; its later passes read the reduction in the same chunks. Its chunks are
    # never cut: cutting an X that is read again from its source does not shrink what a task
    # reads (the source chunk is made whole), and each source chunk is then held until every
    # piece cut from it is read (measured: 1M virtual digits cut from 10000 into 1610 rows spilled
    # 2.3 GB of their 3.1 GB to disk at once)
    source = max(chunks) * 3 * (width + k) * itemsize + (SPLIT_MIN + 1) * (d + 1) ** 2 * 8 if x_reduced else 0

    def need(fp, rows):
        return max(source, fp.fixed + fp.block + (SPLIT_MIN + 1) * fp.part
                   + rows * (fp.task_row + fp.block_row + class_row))

    # the estimator's "auto" sizes follow the task budget and the task budget what they hold: the
    # budget only decreases from the client's until the sizes it gives fit it
    last = starved = None
    modes = [(True, False)] if x_row else []
    modes += [(False, False)] + ([(False, True)] if workers.spill_room > 0 else [])
    for keep_x, spills in modes:
        rows, budget = None, int(client_budget)
        for _ in range(40):
            task_room, fp, cut = attempt(rows, keep_x, budget, spills)
            if not spills and (last is None or need(fp, max(cut)) - task_room < need(last[1], max(last[2])) - last[0]):
                last = (task_room, fp, cut)  # the nearest miss in memory, for the message
            if task_room <= 0 or need(fp, max(cut)) > task_room:
                smaller = min(budget // 2, int(task_room) if task_room > 2**20 else budget // 2)
                while smaller > 2**20 and footprint(estimator, n, d, k, itemsize, smaller, width) == fp:
                    smaller //= 2
                if smaller > 2**20:
                    budget = smaller  # an "auto" size (M, J) that holds less
                    continue
            if task_room <= 0:
                break
            if need(fp, max(cut)) > task_room:
                fit_rows = int((task_room - fp.fixed - fp.block - (SPLIT_MIN + 1) * fp.part)
                               // max(fp.task_row + fp.block_row + class_row, 1))
                if x_reduced or fit_rows < MIN_CHUNK_ROWS or fit_rows >= max(cut):
                    break
                rows = fit_rows  # smaller row chunks
                continue
            split = int(max(SPLIT_MIN, min(SPLIT_MAX, (task_room - fp.fixed - fp.block
                                                       - max(cut) * (fp.task_row + fp.block_row + class_row))
                                           // max(fp.part, 1) - 1)))
            # the estimator's blocks (and a classifier's class arrays) take what the chunk, the
            # fixed state and the tree leave
            cap = int(min(client_budget, task_room - fp.fixed - (split + 1) * fp.part - max(cut) * fp.task_row))
            if cap < budget and footprint(estimator, n, d, k, itemsize, cap, width) != fp:
                budget = cap  # a smaller "auto" size: plan again with it
                continue
            floor = getattr(estimator, "_budget_floor", None)
            if floor is not None:  # what the estimator's own checks ask of its budget (its d x d
                # state lives on the client; its per-row arrays are the task's, counted above)
                cap = max(cap, min(int(client_budget), floor(max(cut), d, k, itemsize)))
            hold = int(W * (room - extra - T * (fp.fixed + fp.block + (split + 1) * fp.part
                                                + max(cut) * (fp.task_row + fp.block_row + class_row))))
            if spills:  # the targets and weights are kept, spilled with the state
                hold = n * data_row
            found = Plan(budget=cap, rows=rows, keep_x=keep_x, hold=max(hold, 0), split_every=split,
                         workers=workers, spills=spills)
            if cap >= min(STARVED_BUDGET, client_budget):
                return found if starved is None or cap >= starved.budget else starved
            starved = found if starved is None or cap > starved.budget else starved
            break  # the next mode may leave the tasks more
    if starved is not None:
        return starved
    task_room, fp, cut = last
    raise ValueError(_refusal(estimator, X, workers, client_budget, task_room, fp, cut, extra, n, data_row, source))


def _cut(n, rows):
    """Row chunks of ``rows`` rows (the last one shorter) for n rows."""
    full, rest = divmod(n, rows)
    return (rows,) * full + ((rest,) if rest else ())


def _spilling_room(workers, extra):
    """A spilling worker's room for its tasks when the fit also keeps ``extra`` bytes it cannot
    spill (the doubly stochastic fit's block cache): only what exceeds the slack below the spill
    level comes out of the tasks' room."""
    return workers.spill_room - max(0, extra - workers.spill_slack)


def _refusal(estimator, X, workers, client_budget, task_room, fp, chunks, extra, n, data_row, source=0):
    cls = type(estimator).__name__
    W, T = workers.n_workers, workers.nthreads
    base = max(WORKER_BASELINE, workers.process)
    per_row = data_row + fp.state_row
    state = (f"its share of what the fit keeps there ({format_bytes(per_row)} per row: targets, weights"
             + (", per-row state" if fp.state_row else "") + ")")
    needs = [f"{format_bytes(fp.fixed + fp.block + (SPLIT_MIN + 1) * fp.part)} for {fp.what}" if fp.what else None,
             f"{format_bytes(fp.task_row + fp.block_row)} per row of its row chunk"]
    if source:
        needs.append(f"{format_bytes(source)} to read one of X's own row chunks whole (its PCA; X's chunks are "
                     f"not cut, make them smaller where X is made)")
    fixes = []
    if fp.knob:
        fixes.append(f"lower {fp.knob}")
    fixes += [f"rechunk X into smaller row chunks (X.rechunk({{0: {max(MIN_CHUNK_ROWS, max(chunks) // 4)}}}))",
              "raise the workers' memory_limit (e.g. LocalCluster(memory_limit=...)) or give each worker fewer "
              "threads", "add workers", "or fit a numpy array"]
    return (
        f"{cls}.fit on dask input cannot run within the workers' memory: each of the {W} workers has "
        f"memory_limit={format_bytes(workers.memory_limit)} for {T} thread(s), of which a fit may use "
        f"{SAFE_FRACTION:.0%} less the worker process itself ({format_bytes(base)})"
        + (f" and its cache of feature blocks ({format_bytes(extra)})" if extra else "")
        + f" and {state}, leaving {format_bytes(max(task_room, 0))} per task"
        + (f" ({format_bytes(max(_spilling_room(workers, extra), 0) // T)} with that state spilled to disk)"
           if workers.spill_room else "")
        + "; one task needs "
        + " and ".join(x for x in needs if x) + f" (row chunks of up to {max(chunks)} rows, "
        f"max_memory={getattr(estimator, 'max_memory', None)!r}: {format_bytes(client_budget)} per task). "
        f"Nothing was submitted to the workers. To fit, " + ", ".join(fixes) + "."
    )


def capped(plan_):
    """Context manager: the budgets parsed inside (:func:`kernelscale.ops.memory.parse_memory`)
    are at most ``plan_.budget`` bytes, and :data:`active_plan` is ``plan_``."""
    import contextlib

    from ..ops.memory import budget_cap
    from ..ops.rows import SPLIT

    @contextlib.contextmanager
    def run():
        token, split = _PLAN.set(plan_), SPLIT.set(plan_.split_every)
        try:
            with budget_cap(plan_.budget):
                yield plan_
        finally:
            SPLIT.reset(split)
            _PLAN.reset(token)

    return run()


def client_budget(estimator):
    """The estimator's ``max_memory`` in bytes (the client's budget; per task on the workers)."""
    return parse_memory(getattr(estimator, "max_memory", None))
