"""A dask X: the iterations of a doubly stochastic fit computed where the row chunks are.

Iteration t of :func:`kernelscale.doubly_stochastic.solver.dsg_iterations` reads n-sized data in
one way only: the rows of its mini-batch B_t are scored on the t earlier blocks,
f(x_b) = scale * sum_{j<t} phi_j(x_b) a_j, and the new block's gradient (and, for the
preconditioned solver, its covariance) are sums over those rows:

    grad = sum_b phi_t(x_b)^T w_b l'(f(x_b), y_b),   C = sum_b w_b phi_t(x_b)^T phi_t(x_b).

So on a dask X (:func:`chunk_iterations`) each iteration is ONE sum of the row executor over the
rows of its mini-batch (:meth:`kernelscale.ops.rows.DaskRows.at`): one task per worker holding
any of them (per row chunk without a distributed client; :func:`_batch_moments`) scores its rows,
computes the new block's features on them and returns its part of grad (block_size x k), of C
(block_size x block_size, preconditioned), of the weighted loss, of the loss of f = 0 and the
count of non-finite scores; the client receives only those small sums and adds them. It divides
by the batch size, takes the step (the sgd step, or the preconditioned ridge solve) and stores
the new block as on numpy, so the model is numpy's up to the order of the sums (each row's scores
are computed as numpy computes them; the gradient is added task by task instead of in one
product: tested to 1e-8 relative).

On a distributed client the tasks of iteration t are followed by the next batch's scores on the
blocks before t, its features of block t + 1 and (preconditioned) their covariance
(:func:`_partial_scores`), kept on the workers: they run while the client takes its step and
builds the next graph, and iteration t + 1 adds block t to the scores (times the factor of a
renormalisation in between) and takes its gradient, the one product left that needs block t's
coefficients. The client's part of an iteration, and the chain of iterations itself (t + 1 needs
block t), is what stays serial.

A task holds its rows' scores and gradients whole (b x k), but the new block's features (b x D,
and their workspace) only for as many rows as its budget holds (:func:`piece_rows`): on a large
batch and workers of little memory, the gradient and covariance are summed piece by piece, and
the features computed ahead are kept only within a quarter of the budget (else computed again by
the iteration, piece by piece). The fit's plan (:mod:`kernelscale.dask.memory`) counts one piece
of :data:`~kernelscale.ops.features.PIECE_ROWS` rows (:func:`piece_work`), not the whole batch.

Every block is a function of (seed, block) (docs/algorithms.md section 2.3): a task regenerates
the blocks it needs, kept for the fit in a cache on its worker (:func:`_worker_op`, at most an
eighth of the worker's memory limit). The coefficients a_j travel as O(log t) persisted keys
(:class:`_CoefficientKeys`: a block is added as a key of its own; two keys of equal length are
replaced by one), put in the graph as data, so a worker that dies with some of them costs their
recomputation from the graph, not the fit.

The rows stay where they are. When X, the targets and the weights fit what the workers may hold
for the fit (:func:`kernelscale.dask.fit.hold_budget`: the fit's plan within the workers' memory),
they are persisted once (the targets coded and centred for the iterations) and the mini-batches
are numpy's, in numpy's order. When they do not (data larger than memory, a generated stream),
every row chunk would be recomputed by nearly every iteration; instead the fit holds only the
chunks that the coming iterations read (:func:`.batches._residency`): with ``shuffle=True`` each
pass is drawn window by window of row chunks (:func:`.batches._epoch_windows`, a window at most
half of what the workers may hold), each window persisted when its first batch comes and
released after its last, so each chunk is computed once per pass and the order is not numpy's;
with ``shuffle=False`` (and ``partial_fit``) the batches are numpy's consecutive rows and each
chunk is held while they read it.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import uuid

import numpy as np

from ..base.validation import as_rows
from ..ops.backend import NUMPY
from ..ops.features import PIECE_ROWS, SINGLE_THREAD_PROJECTION_BYTES, FeatureOperator
from ..ops.rows import DaskRows, add_sums, distributed_client
from .batches import _batch_len, _residency
from .solver import (_block_moments, _check_step, _loss_and_grad, _new_block, _step_size, _store_block, _zero_loss,
                     dsg_memory, grown_coef)

logger = logging.getLogger(__name__)

#: worker side: token of a fit -> its FeatureOperator (regenerated blocks cached for the fit)
_WORKER_OPS = collections.OrderedDict()
_WORKER_LOCK = threading.Lock()
#: worker side: tasks and rows of mini-batches this process scored, and their seconds
_WORKER_STATS = collections.Counter()
_WORKER_OPS_KEPT = 2


def _worker_op(token, spec, budget, cache_bytes):
    """The FeatureOperator of the fit ``token`` in this process: its regenerated blocks are kept
    for the fit within ``cache_bytes``, at most an eighth of a worker's memory limit; on a worker
    (one BLAS thread) its projections in smaller row chunks (SINGLE_THREAD_PROJECTION_BYTES)."""
    with _WORKER_LOCK:
        op = _WORKER_OPS.get(token)
        if op is None:
            while len(_WORKER_OPS) >= _WORKER_OPS_KEPT:
                _WORKER_OPS.popitem(last=False)
            projection = None
            try:
                from distributed import get_worker

                limit = get_worker().memory_manager.memory_limit
                cache_bytes = min(cache_bytes, limit // 8) if limit else cache_bytes
                projection = SINGLE_THREAD_PROJECTION_BYTES
            except (ImportError, ValueError, AttributeError):
                pass
            op = _WORKER_OPS[token] = FeatureOperator(spec, budget, cache_bytes=cache_bytes, backend=NUMPY,
                                                      projection_bytes=projection)
        return op


def _drop_worker_op(token):
    with _WORKER_LOCK:
        _WORKER_OPS.pop(token, None)


def _worker_stats():
    return dict(_WORKER_STATS)


def _joined(coef, spec, k, dtype):
    """The coefficient blocks received in parts (:class:`_CoefficientKeys`), as one array."""
    return np.concatenate(coef) if len(coef) else np.zeros((0, spec.block_size, k), dtype=dtype)


def piece_rows(spec, budget):
    """Rows of the pieces in which a task computes the new block's features on its rows of a
    mini-batch: as many as its ``budget`` holds with their workspace, beside the block's
    parameters; 1 at least. A task whose rows are more (a large batch on workers of little
    memory) never holds the block's features on all of them."""
    item, D = spec.dtype.itemsize, spec.block_size
    return max(1, (int(budget) - spec.block_bytes) // (item * D * (spec.workspace + 2)))


def piece_work(spec, batch):
    """Bytes a task's FeatureOperator needs at least: the new block's features on a piece of
    PIECE_ROWS rows of its mini-batch (fewer for a smaller batch) with their workspace, and the
    parameters of a group of blocks. A distributed fit's plan counts them in the iteration's need
    (:meth:`~.fitting._DoublyStochasticBase._dask_task_need`), and the tasks get them beside the
    budget the plan leaves."""
    _, work = dsg_memory(min(batch, PIECE_ROWS), spec, 0, 0)
    return work


def _partial_scores(local, X, Y, w, *, token, spec, budget, cache_bytes, ahead_bytes, coef, t, preconditioned=False):
    """One task of the pipeline (:func:`chunk_iterations`) for the NEXT mini-batch, whose
    iteration adds block t + 1, on the rows ``local`` of a row chunk (or of a worker's chunks side
    by side): their unscaled scores sum_{j<t} phi_j(x) a_j, the features of block t + 1 on them
    (None when they take more than ``ahead_bytes``: :func:`_batch_moments` computes them again,
    piece by piece), and for the preconditioned solver their part of its covariance
    (none of these needs the coefficients of block t, which the client is computing meanwhile),
    kept on the worker for its :func:`_batch_moments`."""
    start = time.perf_counter()
    Xb = as_rows(X[local])
    wb = None if w is None else np.ascontiguousarray(w[local])
    op = _worker_op(token, spec, budget, cache_bytes)
    S = op.scores(Xb, _joined(coef, spec, Y.shape[1], Xb.dtype), range(t))
    rows = piece_rows(spec, budget)
    if Xb.shape[0] * spec.block_size * Xb.dtype.itemsize <= ahead_bytes and Xb.shape[0] <= rows:
        Phi = op.transform(Xb, [t + 1])
        C = _covariance(Phi, wb) if preconditioned else 0.0
    else:
        Phi = None
        C = _piece_sums(op, Xb, None, wb, t + 1, rows, True)[1] if preconditioned else 0.0
    with _WORKER_LOCK:
        _WORKER_STATS.update(ahead=1, seconds=time.perf_counter() - start)
    return S, Phi, C


def _covariance(Phi, wb):
    """sum_b w_b phi(x_b)^T phi(x_b) (float64) of a task's rows: the preconditioned solver's part
    of :func:`~.solver._block_moments` that does not depend on the scores."""
    if wb is not None:
        Phi = Phi * np.sqrt(wb).astype(Phi.dtype)[:, None]
    return (Phi.T @ Phi).astype(np.float64)


def _piece_sums(op, Xb, G, wb, t, rows, covariance):
    """(Phi^T G, or None without G; the covariance of :func:`_covariance`, or 0.0 without
    ``covariance``) of block t's features Phi on the rows Xb, computed ``rows`` rows at a time."""
    grad, C = None, 0.0
    for start in range(0, Xb.shape[0], rows):
        piece = slice(start, start + rows)
        Phi = op.transform(Xb[piece], [t])
        if G is not None:
            part = Phi.T @ G[piece]
            grad = part if grad is None else grad + part
        if covariance:
            C = C + _covariance(Phi, None if wb is None else wb[piece])
    with _WORKER_LOCK:
        _WORKER_STATS.update(pieces=-(-Xb.shape[0] // rows))
    return grad, C


def _batch_moments(local, X, Y, w, *, token, spec, budget, cache_bytes, coef, scale, t, loss, preconditioned,
                   part=None, part_scale=1.0):
    """One task: the rows ``local`` of one row chunk of a mini-batch (or of a worker's chunks side
    by side) scored on the blocks before ``t`` (``coef``: their unscaled coefficients, in parts)
    as numpy scores them, or, given ``part`` (their :func:`_partial_scores`: scores on the blocks
    before t - 1, times ``part_scale``, and block t's features and covariance), block t - 1 added
    to the scores; returns their sums (grad (D, k) in X's dtype, C (D, D) float64 or 0.0, the
    weighted loss, the loss of f = 0 (squared loss: 0.5 |y|^2; else 0.0), the count of
    non-finite scores)."""
    start = time.perf_counter()
    Xb, Yb = as_rows(X[local]), np.ascontiguousarray(Y[local])
    wb = None if w is None else np.ascontiguousarray(w[local])
    op = _worker_op(token, spec, budget, cache_bytes)
    dtype = Xb.dtype
    coef = _joined(coef, spec, Yb.shape[1], dtype)
    rows = piece_rows(spec, budget)
    if part is None:
        F = op.scores(Xb, coef, range(t))
        Phi = op.transform(Xb, [t]) if Xb.shape[0] <= rows else None
        C = _covariance(Phi, wb) if preconditioned and Phi is not None else 0.0
    else:
        S, Phi, C = part
        F = op.scores(Xb, coef[t - 1:t], range(t - 1, t))
        F += S * np.asarray(part_scale, dtype=dtype) if part_scale != 1.0 else S
    F *= np.asarray(scale, dtype=dtype)
    values, G = _loss_and_grad(loss, F, Yb)
    if wb is not None:
        values = values * wb
        G = G * wb.astype(dtype)[:, None]
    if Phi is not None:
        grad, _ = _block_moments(NUMPY, Phi, G, wb, False, divisor=1)
    else:  # more rows than one piece: block t's features a piece at a time
        grad, pieces_C = _piece_sums(op, Xb, G, wb, t, rows, preconditioned and part is None)
        C = pieces_C if part is None else C
    zero = 0.5 * float(np.einsum("ij,ij->", Yb, Yb, dtype=np.float64)) if loss == "squared" else 0.0
    bad = int(F.size - np.count_nonzero(np.isfinite(F)))
    with _WORKER_LOCK:
        _WORKER_STATS.update(tasks=1, rows=Xb.shape[0], seconds=time.perf_counter() - start)
    return grad, C, float(values.sum(dtype=np.float64)), zero, bad


class _CoefficientKeys:
    """The unscaled blocks coef[:t] of a fit as persisted dask keys, O(log t) of them: block t is
    added as a key of its own, then every two keys of equal length are replaced by one key of
    both (a binary counter), so a task depends on few keys and the client sends each block
    O(log t) times. Each key holds its blocks as data in the graph: recomputed, not lost, when
    the worker holding it dies."""

    def __init__(self, coef, n):
        self.parts = []  # [(first, stop, persisted delayed)]
        self.reset(coef, n)

    @staticmethod
    def _key(coef, first, stop):
        import dask

        data = np.array(coef[first:stop])  # a copy: coef's buffer is written again later
        (kept,) = dask.persist(dask.delayed(data, name=f"kernelscale-dsg-coef-{uuid.uuid4().hex}"))
        return first, stop, kept

    def reset(self, coef, n):
        """The keys of coef[:n] (after a renormalisation changed every block)."""
        self.parts, first = [], 0
        for bit in reversed(range(int(n).bit_length())):
            if n >> bit & 1:
                self.parts.append(self._key(coef, first, first + (1 << bit)))
                first += 1 << bit

    def add(self, coef, t):
        """Block t (coef[:t] already held)."""
        self.parts.append(self._key(coef, t, t + 1))
        while len(self.parts) > 1 and self._size(-1) == self._size(-2):
            first, stop = self.parts[-2][0], self.parts[-1][1]
            del self.parts[-2:]
            self.parts.append(self._key(coef, first, stop))

    def _size(self, i):
        return self.parts[i][1] - self.parts[i][0]

    def values(self):
        return [kept for _, _, kept in self.parts]


def chunk_iterations(
    X, Y, spec, *, loss, batches, coef, n_done, scale, sample_weight, nu, step_size, t0, solver, precond_ridge,
    monitor, cache_bytes, budget, ahead_bytes=0, windows=None,
):
    """:func:`kernelscale.doubly_stochastic.solver.dsg_iterations` on dask X, Y (coded targets) and
    ``sample_weight`` with X's row chunks (module docstring): one sum over each mini-batch's rows,
    where their chunks are, per iteration. ``windows``: the row index arrays (whole row chunks)
    whose chunks are held together while the batches read them (None: X, Y and the weights are
    persisted, or read from where they are). ``budget``: the bytes of one task's products;
    ``ahead_bytes``: what the next batch's features computed ahead may take on a worker beside them.
    Returns what dsg_iterations returns."""
    k = Y.shape[1]
    D = spec.block_size
    dtype = X.dtype
    n = X.shape[0]
    n_new = len(batches)
    coef = grown_coef(coef, n_done, n_new, D, k, dtype)
    rows = DaskRows(X.chunks[0], budget).at(X, Y, sample_weight)
    schedule = _residency(batches, windows, X.chunks[0], n) if windows is not None else None
    keys = _CoefficientKeys(coef, n_done)
    token = f"kernelscale-dsg-{uuid.uuid4().hex}"
    history, stopped, zero_loss = [], False, 0.0
    client = distributed_client()  # the pipeline needs asynchronous computations
    task = dict(token=token, spec=spec, budget=int(budget), cache_bytes=int(cache_bytes))
    groups, ahead, ahead_scale = None, None, 1.0
    try:
        for i, batch in enumerate(batches):
            t = n_done
            b = _batch_len(batch, n)
            if schedule is not None:
                rows.hold(schedule[i][0])
            moments = rows.sum_parts(
                batch, _batch_moments, groups=groups, parts=ahead, coef=keys.values(), scale=float(scale), t=t,
                loss=loss, preconditioned=solver == "preconditioned", part_scale=ahead_scale, **task)
            # the scores computed ahead stay referenced until the tasks using them are submitted:
            # the graph names their keys only, and a released key is lost to the tasks
            using, groups, ahead, ahead_scale = ahead, None, None, 1.0
            if client is None:
                import dask

                grad, C, value, zero, bad = add_sums(*dask.compute(*moments))
            else:  # submitted first, then the next batch's scores on blocks < t: they run while this process steps
                future = client.compute(moments)
                if i + 1 < len(batches) and t:
                    if schedule is not None:
                        rows.hold(schedule[i + 1][0])
                    groups = rows.select(batches[i + 1])
                    ahead = client.persist(rows.map_parts(groups, _partial_scores, coef=keys.values(), t=t,
                                                          preconditioned=solver == "preconditioned",
                                                          ahead_bytes=int(ahead_bytes), **task))
                grad, C, value, zero, bad = add_sums(*client.gather(future))
                del future
            del using
            if schedule is not None:
                rows.release(schedule[i][1])
            grad = (grad / b).astype(dtype, copy=False)
            C = None if solver != "preconditioned" else C / b
            history.append(value / b)
            zero_loss = max(zero_loss, zero / b if loss == "squared" else _zero_loss(loss, np.zeros((1, k))))
            gamma = _step_size(step_size, t0, t)
            alpha = _new_block(NUMPY, grad, C, gamma, solver, precond_ridge, D, dtype)
            _check_step(alpha, bad == 0, history[-1], zero_loss, t, step_size)
            coef, scale, factor = _store_block(coef, t, alpha, scale, 1.0 - gamma * nu)
            if factor is None:
                keys.add(coef, t)
            else:  # every block changed: so do the scores computed ahead with them
                keys.reset(coef, t + 1)
                ahead_scale = float(factor)
            n_done = t + 1
            if monitor is not None and monitor.update(
                objective=history[-1], step_size=gamma, scale=scale, n_blocks=n_done
            ):
                stopped = True
                break
    finally:
        _drop_ops(token)
    return coef, n_done, scale, history, stopped


def _drop_ops(token):
    """Drop the fit's block caches: on every worker of a distributed client, and in this process
    (dask's local schedulers run the tasks here)."""
    _drop_worker_op(token)
    from ..dask.client import current_client

    client = current_client()
    if client is not None:
        try:
            client.run(_drop_worker_op, token)
        except Exception:  # noqa: BLE001 (the cache goes with the next fits anyway)
            logger.debug("could not drop the workers' block caches", exc_info=True)
