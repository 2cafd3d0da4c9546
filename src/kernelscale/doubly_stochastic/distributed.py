"""A dask X on a distributed client: each mini-batch of a doubly stochastic fit scored by the workers.

What is particular to this family's distributed fit (the rest is the row executors of
:mod:`kernelscale.ops.rows` and :mod:`kernelscale.dask.fit`): nearly all of the work of an
iteration is scoring its mini-batch on the t earlier blocks, f(Xb) = sum_{j<t} phi_j(Xb) alpha_j
(batch x t x block_size x d multiply-adds at iteration t), and every block is a function of
(seed, block) alone (docs/algorithms.md section 2.3), so any process can regenerate it.
:class:`_DistributedScores` therefore sends the scoring to the workers:

- the batch rows are scattered once per iteration to the workers used;
- the runs of blocks that :meth:`kernelscale.ops.features.FeatureOperator.scores` evaluates
  together (groups of GROUP_COLUMNS columns for Fourier blocks, one GEMM per row chunk) are cut
  into one contiguous range per worker of about equal columns;
- each task (:func:`_worker_scores`) regenerates its blocks from (seed, block), kept for the fit
  in a cache of at most an eighth of its worker's memory limit (:func:`_worker_op`), and returns
  one (batch, k) term per run; a batch's features exist only one group at a time, in a task;
- the client adds the terms in the order ``scores`` adds them, so f, and the model, are numpy's
  bit for bit. Meanwhile it computes the new block's features on the batch (for the gradient)
  and keeps the O(t) coefficient update; it holds the batch rows, the new block's features and
  the k-column terms.

Without a distributed client (dask's synchronous or threaded scheduler), or with the blocks on a
torch device, every iteration runs on the client, on the fetched rows, exactly as on numpy
(:func:`_scoring_client`).

A small iteration (under :data:`_DISTRIBUTED_SCORE_WORK` multiply-adds of scoring: a round trip
costs milliseconds) is scored on the client, with the same result. The workers score only when
their threads outnumber the cores of the client's host (:func:`_workers_outnumber_cores`):
otherwise the client's own BLAS threads score a mini-batch faster, and the client scores, as
without a client. The measurements behind both rules are in benchmarks/studies/doubly_stochastic.md
("Dask").
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import uuid

import numpy as np

from ..ops.backend import NUMPY, current_backend
from ..ops.features import FeatureOperator
from ..ops.rows import is_dask

logger = logging.getLogger(__name__)

#: multiply-adds of a mini-batch's projection on the earlier blocks (batch x t x block_size x d)
#: below which the client scores it itself: a round trip to the workers costs a few milliseconds
_DISTRIBUTED_SCORE_WORK = 2e8
#: worker side: token of a fit -> its FeatureOperator (regenerated frequencies cached for the fit)
_WORKER_OPS = collections.OrderedDict()
_WORKER_LOCK = threading.Lock()
#: worker side: runs (groups of Fourier blocks, or blocks) and tasks scored by this process
_WORKER_STATS = collections.Counter()
_WORKER_OPS_KEPT = 2


def _worker_op(token, spec, budget, cache_bytes):
    with _WORKER_LOCK:
        op = _WORKER_OPS.get(token)
        if op is None:
            while len(_WORKER_OPS) >= _WORKER_OPS_KEPT:
                _WORKER_OPS.popitem(last=False)
            try:  # the frequencies cached on a worker: at most an eighth of its memory limit
                from distributed import get_worker

                limit = get_worker().memory_manager.memory_limit
                cache_bytes = min(cache_bytes, limit // 8) if limit else cache_bytes
            except (ImportError, ValueError, AttributeError):
                pass
            op = _WORKER_OPS[token] = FeatureOperator(spec, budget, cache_bytes=cache_bytes, backend=NUMPY)
        return op


def _worker_scores(token, spec, budget, cache_bytes, Xb, coef, first):
    """One task: the terms of f(Xb) of blocks [first, first + len(coef)) (whole runs), one
    (b, k) array per run, computed as :meth:`FeatureOperator.scores` computes them."""
    start = time.perf_counter()
    # arrays unpickled from a message can be unaligned (coef in 3 tasks of 4, measured); aligned
    # C-ordered copies (small: batch x d and blocks x D x k) keep every GEMM on BLAS's usual path
    Xb, coef = np.require(Xb, requirements="CA"), np.require(coef, requirements="CA")
    op = _worker_op(token, spec, budget, cache_bytes)
    parts = op.run_scores(Xb, coef, range(first, first + coef.shape[0]))
    with _WORKER_LOCK:
        _WORKER_STATS.update(runs=len(parts), tasks=1, seconds=time.perf_counter() - start)
        _WORKER_STATS["cached_bytes"] = op._used
    return parts


def _drop_worker_op(token):
    with _WORKER_LOCK:
        _WORKER_OPS.pop(token, None)


def _worker_stats():
    return dict(_WORKER_STATS)


def _scoring_client(X):
    """The distributed client that scores the mini-batches of a dask X, or None: no client is
    current, dask's scheduler is set to another, or the blocks run on a torch device."""
    if not is_dask(X) or current_backend() is not NUMPY:
        return None
    import dask

    from ..dask.client import current_client

    if dask.config.get("scheduler", None) not in (None, "dask.distributed", "distributed"):
        return None
    client = current_client()
    return client if client is not None and _workers_outnumber_cores(client) else None


def _workers_outnumber_cores(client):
    """Whether the workers have more threads than this process's host has cores. Otherwise the
    client's own BLAS threads score a mini-batch faster than the workers (module docstring)."""
    threads = sum(client.nthreads().values())  # every worker (scheduler_info may list only a few)
    return threads > (os.cpu_count() or 1)


class _DistributedScores:
    """f(Xb) = sum_{j<t} phi_j(Xb) coef[j] of each mini-batch, split by runs of blocks (groups of
    GROUP_COLUMNS columns for Fourier blocks) into one task per worker over a contiguous range of
    runs with about equal columns; the batch rows are scattered once per iteration to the workers
    used; every task regenerates its blocks from (seed, block) (cached for the fit on its worker)
    and returns one (b, k) term per run, which the client adds in the order of
    :meth:`FeatureOperator.scores`: numpy's scores bit for bit."""

    def __init__(self, client, spec, budget, cache_bytes):
        self.client, self.spec, self.budget, self.cache_bytes = client, spec, int(budget), int(cache_bytes)
        self.workers = sorted(client.nthreads())
        self.token = f"kernelscale-dsg-{uuid.uuid4().hex}"
        self.planner = FeatureOperator(spec, budget)  # the runs only (nothing drawn)

    def worth(self, b, t):
        return bool(self.workers) and b * t * self.spec.block_size * self.spec.n_features_in >= _DISTRIBUTED_SCORE_WORK

    def ranges(self, t):
        """[(first, stop)] of blocks: the runs of range(t) cut into at most one contiguous range
        per worker of about t / workers blocks each (whole runs)."""
        runs = self.planner.runs(range(t))
        parts = min(len(self.workers), len(runs))
        out = []
        for start, stop in runs:
            slot = min(parts - 1, int((start + stop) / 2 * parts / t))
            if len(out) <= slot:
                out.append([start, stop])
            else:
                out[-1][1] = stop
        return [tuple(r) for r in out]

    def submit(self, Xb, coef, t):
        ranges = self.ranges(t)
        workers = self.workers[: len(ranges)]
        rows = self.client.scatter(np.ascontiguousarray(Xb), workers=workers, broadcast=True, hash=False)
        return [
            self.client.submit(_worker_scores, self.token, self.spec, self.budget, self.cache_bytes, rows,
                               np.ascontiguousarray(coef[a:b]), a, workers=[w], allow_other_workers=False,
                               pure=False, key=f"{self.token}-{t}-{a}")
            for (a, b), w in zip(ranges, workers)
        ]

    def gather(self, futures, shape, dtype):
        F = np.zeros(shape, dtype=dtype)
        for parts in self.client.gather(futures):
            for P in parts:
                F += P
        return F

    def close(self):
        try:
            self.client.run(_drop_worker_op, self.token)
        except Exception:  # noqa: BLE001 (the cache goes with the next fit anyway)
            logger.debug("could not drop the workers' block caches", exc_info=True)
