"""How a doubly stochastic model is fitted: the logic the regressor and the classifier share.

:class:`_DoublyStochasticBase` turns the estimators' parameters into a run of
:func:`~.solver.dsg_iterations` (docs/algorithms.md section 2.2) and keeps its state. It resolves
the "auto" parameters once, when a model starts (:mod:`.defaults`; kept in ``solver_``, ``t0_``
and ``step_size_``), draws the mini-batches (:mod:`.batches`), checks the memory before
allocating, and commits a run's state only when it succeeds: a failed or diverging run leaves
the previous model (or none). ``fit`` starts a model or, with ``warm_start``, continues its
iteration counter, seeds and step sizes; ``partial_fit`` continues them over its data's chunks.

Running scores (:mod:`.solver`, "Running scores"): ``fit`` keeps the scores of every training row
when it starts a model on numpy X, 4 n <= batch * n_iter (:func:`~.solver._use_running_scores`:
at least twice cheaper than rescoring the mini-batches) and the n x k scores plus one block's
features over n rows fit in half the memory left beside the iteration. ``partial_fit`` and warm
starts rescore.

Memory: the budget (``max_memory``) is read once per call, and the iteration's need
(:func:`~.solver.dsg_memory`) is checked before anything is allocated. Of what it leaves spare,
half goes to the cache of regenerated blocks (on dask workers: at most an eighth of a worker's
memory limit).

Streaming on a GPU. With ``device="cuda"`` the products run on the GPU and the draws on the host
(the same blocks on every device), so redrawing all t earlier blocks at every ``partial_fit``
call of a stream would cost far more than the GPU's arithmetic. There a stream of
``partial_fit`` calls shares one operator (:meth:`_DoublyStochasticBase._device_operator`): each
group of blocks is drawn once, moved to the GPU when complete and kept there while it fits in the
cache budget (half of what a call leaves spare of ``max_memory``, itself half the GPU's free
memory by default). Host memory stays flat; GPU memory grows with the blocks kept, O(t d), until
the budget is reached, after which the remaining blocks are redrawn per call. Predictions on the
GPU keep theirs likewise (a second operator, evaluating block by block as numpy does; within half
of ``max_memory``): the first call draws, later ones run the device's arithmetic only. The two
share the budget: a call counts what the other operator keeps, first cut to a quarter of the
call's budget. On numpy and on torch's CPU kernels every call redraws its blocks (there the draws
cost little beside the products, and host memory stays flat). The kept blocks are not part of the
model: save, pickle and copies drop them, a fresh fit drops them, and results are the same with
or without them.

Dask input. ``fit`` and ``partial_fit`` take a dask X chunked by rows (:mod:`kernelscale.dask.fit`).
The n-sized inputs of the fit come from the chunks: n, the weights' total, the labels, the median
bandwidth (numpy's subsample gathered). The iterations run where the row chunks are
(:mod:`.distributed`: each one a sum over its mini-batch's rows), for both solvers; X, the coded
targets and the weights are persisted when the workers can hold them (:meth:`_dask_windows`),
else held window by window of row chunks. The model is numpy's up to the order of the sums.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..base.boundary import BoundaryMixin
from ..base.estimator import commit_fit, resolve_kernel, warm_start_iterations
from ..base.monitor import IterationMonitor
from ..base.params import DEVICE_CONSTRAINT, KERNEL_CONSTRAINT, MEMORY_CONSTRAINT
from ..base.validation import check_finite_result, validate_data, as_rows
from ..kernels import make_kernel
from ..ops.backend import current_backend, device_type
from ..ops.feature_blocks import FeatureBlockSpec, kernel_family, seed_from
from ..ops.features import FeatureOperator
from ..ops.memory import format_bytes, parse_memory
from ..ops.rows import executor, is_dask, total
from .batches import _batch_len, _batch_rows, _chunk_windows, _draw_batches
from .defaults import (
    AUTO_BATCH, AUTO_BATCH_PER_FEATURE, AUTO_BLOCK, AUTO_PRECONDITIONED_STEP_SQUARED, AUTO_T0_SGD, auto_sgd_step,
    auto_solver, auto_t0, curvature_step, dsg_auto_sizes,
)
from .distributed import chunk_iterations, piece_work
from .solver import _use_running_scores, dsg_iterations, dsg_memory, dsg_predict

__all__ = ["SOLVERS"]


def _dask_plan():
    """The plan of the distributed fit running now (kernelscale.dask.memory), or None."""
    from ..dask.memory import active_plan

    return active_plan()

SOLVERS = ("auto", "sgd", "preconditioned")
#: torch device types on which partial_fit and predictions keep their drawn blocks between calls
#: (module docstring, "Streaming on a GPU"); elsewhere the host's draws cost little beside the
#: products, and kept blocks would grow host memory with the stream
_KEEP_ON_DEVICES = frozenset({"cuda"})
_FLOAT_DTYPES = [np.float64, np.float32]


class _DoublyStochasticBase(BoundaryMixin, BaseEstimator):
    """Fit / partial_fit / predict logic shared by the regressor and the classifier."""

    #: its first call in a process loads numba code: warmed up with these parameters (base/warmup.py)
    _warm_params = {"n_iter": 1}
    #: its random features' cosine is compiled code the warm-up's few rows would not load
    _compiled_cosine = True

    #: the preconditioned solver's "auto" step (the classifier's is its own: :mod:`.defaults`)
    _PRECONDITIONED_STEP = AUTO_PRECONDITIONED_STEP_SQUARED

    _parameter_constraints: dict = {
        "kernel": KERNEL_CONSTRAINT,
        "alpha": [Interval(Real, 0, None, closed="left")],
        "n_iter": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "batch_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "block_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "step_size": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "t0": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions(set(SOLVERS))],
        "feature_method": [StrOptions({"cos", "cossin", "tensorsketch", "maclaurin", "gaussian"}), None],
        "precond_ridge": [Interval(Real, 0, None, closed="neither")],
        "shuffle": ["boolean"],
        "warm_start": ["boolean"],
        "max_memory": MEMORY_CONSTRAINT,
        "device": DEVICE_CONSTRAINT,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callback": [callable, None],
    }

    # subclasses: _loss_name(k) and _targets(y, first) -> (Y coded, k)

    def _warm_params_for(self, n):
        """The warm-up copy runs the solver of a fit on all n rows (base/warmup.py): its few
        rows alone would pick "sgd", and the preconditioned solver's LAPACK would load uncounted."""
        return {"solver": self._solver(n)}

    def _solver(self, n=None):
        """The solver in use: a named one; for "auto", the one a ``fit`` on ``n`` samples starts
        a model with (given n), else the one the model started with (``solver_``; "sgd" before a
        model exists: ``partial_fit``)."""
        if self.solver != "auto":
            return self.solver
        if n is not None:
            return auto_solver(n)
        return getattr(self, "solver_", "sgd")

    def _block_size(self, n=None, solver=None):
        """The block size; ``n``: the samples of a ``fit`` that starts a model (with n_iter and
        block_size "auto", the block then scales with n: :func:`dsg_auto_sizes`); ``solver``:
        the solver to size for (default: :meth:`_solver`)."""
        if hasattr(self, "coef_"):
            return self.coef_.shape[1]
        if self.block_size != "auto":
            return self.block_size
        solver = solver or self._solver()
        if n is not None and self.n_iter == "auto":
            return dsg_auto_sizes(n, solver, self.batch_size, "auto", self._loss_name(1))[2]
        return AUTO_BLOCK[solver]

    def _n_iter(self, n):
        """The total iterations of ``fit`` on n samples (n_iter="auto": :func:`dsg_auto_sizes`)."""
        if self.n_iter != "auto":
            return self.n_iter
        return dsg_auto_sizes(n, self._solver(), self.batch_size, self._block_size())[0]

    def _batch_size(self, solver=None, block=None):
        """The batch size; ``block``: the block it goes with (default: :meth:`_block_size`)."""
        if self.batch_size != "auto":
            return self.batch_size
        solver = solver or self._solver()
        return AUTO_BATCH if solver == "sgd" else AUTO_BATCH_PER_FEATURE * (block or self._block_size(solver=solver))

    def _step(self):
        if self.step_size != "auto":
            return float(self.step_size)
        if self._solver() == "preconditioned":
            return self._PRECONDITIONED_STEP
        if self._loss_name(1) == "squared":
            # resolved from the data when the model started (_run); a model started with a
            # numeric step and continued with "auto" keeps 1
            return float(getattr(self, "step_size_", 1.0))
        k = self.coef_.shape[2] if hasattr(self, "coef_") else 1
        return auto_sgd_step(self._loss_name(k))

    #: whether ``fit`` and ``partial_fit`` subtract an offset from the targets (the regressor's ``intercept_``)
    _centres_targets = False

    def _centred_targets(self, Y, first, fresh):
        """Y as the iterations take it (the regressor: less its ``intercept_``); ``first``: the
        targets and weights of the first mini-batch of a ``fresh`` model."""
        return Y

    def _uses_curvature_step(self, k):
        return self.step_size == "auto" and self._solver() == "sgd" and self._loss_name(k) == "squared"

    def _t0(self):
        if self.t0 != "auto":
            return float(self.t0)
        return float(getattr(self, "t0_", AUTO_T0_SGD))

    def _auto_t0(self, n, block=None):
        """t0="auto" for a model started on n samples with blocks of ``block`` (default:
        :meth:`_block_size`; :func:`.defaults.auto_t0`)."""
        return auto_t0(self._solver(), n, self._batch_size(block=block))

    def _spec(self, dtype=None):
        dtype = self.coef_.dtype if dtype is None else dtype
        return FeatureBlockSpec(self.kernel_, self.n_features_in_, self._block_size(), self.seed_, dtype,
                                self.feature_method_)

    def _check_first_step(self, gamma0):
        if gamma0 * self.alpha >= 1:
            step = f"step_size={self.step_size!r}"
            if self.step_size == "auto":
                step += f" (resolved to {gamma0:g})"
            raise ValueError(
                f"{step} times alpha={self.alpha:g} is {gamma0 * self.alpha:g} >= 1, which would flip or zero "
                f"every coefficient (the decay factor 1 - gamma_t nu must stay positive); pass a "
                f"smaller step_size or alpha."
            )

    def _start(self, X, sample_weight, rng, n_auto=None):
        """Fresh state: resolved kernel, seed, empty coefficient store (``n_auto``: the samples
        that size an "auto" block, ``fit`` only)."""
        for name in ("coef_", "solver_"):  # "auto" sizes and solver come from the parameters again
            self.__dict__.pop(name, None)
        self.solver_ = self._solver(n_auto)
        kernel = make_kernel(self.kernel, "kernel")
        kernel_family(kernel)  # a clear error for kernels without random features
        if not kernel.is_resolved and X.shape[0] < 2:
            raise ValueError(
                f"sigma='median' needs at least 2 samples to pick a bandwidth, got n_samples="
                f"{X.shape[0]}; pass more data or a number as sigma."
            )
        self.kernel_ = resolve_kernel(kernel, X, rng, sample_weight)  # dask X: numpy's subsample gathered
        self.seed_ = seed_from(self.random_state if isinstance(self.random_state, Integral) else rng)
        # validates block_size / feature_method against the kernel now
        block = self._block_size(n_auto)
        spec = FeatureBlockSpec(self.kernel_, X.shape[1], block, self.seed_, X.dtype, self.feature_method)
        self.feature_method_ = spec.method
        self.scale_ = 1.0
        self.t0_ = self._auto_t0(X.shape[0], block) if self.t0 == "auto" else float(self.t0)
        self.n_iter_ = 0
        self.objective_history_ = np.zeros(0)

    def _buffer_view(self):
        """The coefficient store with its spare rows: ``coef_`` is its leading rows (a view), so
        no other attribute holds it and a failed run's writes past ``n_iter_`` change no state."""
        buf = self.coef_.base
        if (not isinstance(buf, np.ndarray) or buf.shape[1:] != self.coef_.shape[1:] or buf.shape[0] < self.n_iter_
                or buf.strides != self.coef_.strides or buf.ctypes.data != self.coef_.ctypes.data
                or not buf.flags.writeable):
            return self.coef_  # e.g. after load: dsg_iterations grows it
        return buf

    def _run(self, X, Y, sw, batches, fit=False, windows=None):
        """Run the iterations of ``batches`` and commit the state (only on success); ``fit``:
        the batches are those of a ``fit`` over all rows of X (running scores may be used);
        ``windows`` (dask X): the windows of row chunks held while the batches read them
        (:func:`.batches._residency`), or None: X, Y and the weights are persisted whole."""
        dtype = self.coef_.dtype if self.n_iter_ else X.dtype
        distributed = is_dask(X)
        if distributed:  # cast per chunk, as numpy casts the whole array
            X, Y = X.astype(dtype), Y.astype(dtype)
        else:
            X = as_rows(X, dtype)
            Y = np.ascontiguousarray(Y, dtype=dtype)
        spec = self._spec(dtype)
        n = X.shape[0]
        budget = parse_memory(self.max_memory)
        held, need = dsg_memory(max(_batch_len(b, n) for b in batches) if batches else 1, spec, Y.shape[1],
                                self.n_iter_ + len(batches), self._solver())
        # planned within the workers' memory (kernelscale.dask.memory): the plan counted this need
        # in every task (_dask_task_need) and capped ``budget`` at what a task has left beside it
        planned = distributed and _dask_plan() is not None
        if need > budget and not planned:
            raise ValueError(
                f"max_memory={format_bytes(budget)} is too small for {len(batches)} doubly stochastic "
                f"iterations, which need {format_bytes(need)} ({need} bytes: the coefficient store "
                f"plus batch x block_size features); increase max_memory, or use a smaller "
                f"batch_size, block_size or n_iter."
            )
        if fit or distributed:  # no kept blocks (a fit draws each block once anyway); old ones go
            self.__dict__.pop("_device_ops", None)
            operator = None
        else:
            operator, kept = self._device_operator(spec, min(budget // 4, budget - need))
            budget -= kept
        fresh = not self.n_iter_
        curvature = self._uses_curvature_step(Y.shape[1])
        first = None  # the first mini-batch's targets and weights (Y stands for X: its rows alone are fetched)
        if fresh and batches and self._centres_targets:
            first = next(_batch_rows(Y, None, sw, batches[:1]))[::2]
        Y = self._centred_targets(Y, first, fresh)
        if fresh and curvature and batches:
            Xb, _, wb = next(_batch_rows(X, None, sw, batches[:1]))
            step = curvature_step(Xb, wb, spec, budget, self.alpha)
        else:
            step = self._step()
        self._check_first_step(step)
        spare = budget - need  # half for the cache of regenerated blocks
        running = fit and fresh and not distributed and _use_running_scores(
            n, max((_batch_len(b, n) for b in batches), default=1), len(batches))
        if running:  # the n x k running scores, and the rows of one block's product over n rows
            extra = n * Y.shape[1] * spec.dtype.itemsize
            running = extra + n * spec.dtype.itemsize * (spec.n_features_out * (spec.workspace + 1)
                                                        + 2 * Y.shape[1]) <= spare // 2
            if running:
                held += extra
                spare -= extra
        cache = spare // 2
        common = dict(loss=self._loss_name(Y.shape[1]), batches=batches,
                      coef=self._buffer_view() if self.n_iter_ else None, n_done=self.n_iter_, scale=self.scale_,
                      sample_weight=sw, nu=self.alpha, step_size=step, t0=self._t0(), solver=self._solver(),
                      precond_ridge=self.precond_ridge, cache_bytes=cache)
        with IterationMonitor(self.verbose, self.callback, total=len(batches), desc="doubly stochastic") as mon:
            if distributed:  # where the row chunks are (.distributed)
                if windows is None:  # the workers hold them: coded, centred and weighted once
                    import dask

                    X, Y, common["sample_weight"] = dask.persist(X, Y, sw)
                if planned:  # the tasks' operators get what the plan left them and the least their pieces
                    # need (counted in the plan); their caches are planned apart
                    common["cache_bytes"] = budget
                room = budget if planned else budget - held - cache
                work = piece_work(spec, max(_batch_len(b, n) for b in batches)) if planned and batches else 0
                coef, n_done, scale, history, _ = chunk_iterations(
                    X, Y, spec, monitor=mon, budget=room - room // 4 + work, ahead_bytes=room // 4, windows=windows,
                    **common)
            else:
                coef, n_done, scale, history, _ = dsg_iterations(
                    X, Y, spec, monitor=mon, max_memory=budget - held - cache, running_scores=running,
                    operator=operator, **common)
        self.solver_ = self._solver()  # a warm start may name another solver
        if not curvature:
            self.__dict__.pop("step_size_", None)
        elif fresh:
            self.step_size_ = step
        self.coef_ = coef[:n_done]
        self.scale_ = float(scale)
        self.n_iter_ = n_done
        self.objective_history_ = np.concatenate([self.objective_history_, history])
        return self

    def _device_operator(self, spec, room, group=True):
        """The FeatureOperator that ``partial_fit`` and prediction calls share on a torch device,
        or None (numpy: each call redraws its blocks, so host memory stays flat in the stream's
        length). On a device the host's draws would cost more than the device's products, so the
        blocks are drawn once and kept there, within the cache budget of each call (module
        docstring, "Streaming on a GPU"). Not saved, pickled or copied; a fresh start drops it.
        ``group``: blocks evaluated in groups (fits) or one by one (predictions, as on numpy, so
        that both backends sum the same terms in the same order): one kept operator each.

        Returns (operator or None, bytes the other kept operator holds, after cutting it to at
        most ``room``): the caller takes them off its budget. With ``max_memory=None`` the budget
        comes from the GPU's free memory, which already excludes them: then nothing is taken
        off. Operators of another device (or of none: numpy) are dropped."""
        backend = current_backend()
        ops = {g: o for g, o in self.__dict__.get("_device_ops", {}).items() if o.backend == backend}
        if device_type(backend) not in _KEEP_ON_DEVICES:
            self.__dict__.pop("_device_ops", None)
            return None, 0
        op = ops.get(group)
        if op is None or repr(op.spec) != repr(spec):
            op = FeatureOperator(spec, 0, backend=backend, group=group)
        self._device_ops = {**ops, group: op}
        kept = 0
        for other in (o for g, o in self._device_ops.items() if g != group):
            other.limit(other.budget, min(other.cache_bytes, max(room, 0)))
            kept += other._used
        return op, 0 if self.max_memory is None else kept

    def __getstate__(self):
        state = dict(super().__getstate__())  # may be this estimator's own __dict__
        state.pop("_device_ops", None)
        return state

    def _commit_run(self, run, *args, **kwargs):
        """``run(estimator, *args, **kwargs)`` (``_fit`` or ``_partial_fit``) on a scratch copy of
        this estimator, then its state committed here in one step: until the run completes, this
        estimator keeps its previous model (or stays unfitted). The copy shares the fitted arrays,
        which a run never changes in place (new blocks go past ``n_iter_`` of the store)."""
        scratch = object.__new__(type(self))
        scratch.__dict__ = dict(vars(self))
        run(scratch, *args, **kwargs)
        return commit_fit(self, vars(scratch), stale=tuple(vars(self)))

    def _fit_batches(self, n, n_iter, start, row_chunks=None, window_rows=None):
        """(mini-batches of fit, windows or None): :func:`.batches._draw_batches` with this
        model's batch size, seed and ``shuffle``, from iteration ``start``; ``row_chunks`` and
        ``window_rows``: those of a dask X that the workers cannot hold whole, and of a window."""
        return _draw_batches(n, self._batch_size(), n_iter, self.seed_, start, self.shuffle, row_chunks, window_rows)

    def _fit(self, X, y, sample_weight):
        first = not (self.warm_start and hasattr(self, "coef_"))
        if not first:
            if X.shape[1] != self.n_features_in_:
                raise ValueError("warm_start=True but X has a different number of features; set warm_start=False.")
        Y, sw = self._targets(X, y, sample_weight, first=first, partial=False)
        return self._fit_coded(X, Y, sw, first)

    def _fit_coded(self, X, Y, sw, first):
        """The fit on X, coded targets Y (n, k) and weights sw: numpy arrays, or dask arrays with
        X's row chunks (the weights' total summed over the chunks)."""
        if sw is not None:
            weight = total(executor(0, sw), sw)
            if not weight > 0:
                raise ValueError("sample_weight sums to zero; give at least one sample a positive weight.")
            sw = sw * (X.shape[0] / weight)
        if first:
            rng = check_random_state(self.random_state)
            self._start(X, sw, rng, n_auto=X.shape[0])
            self.coef_ = np.zeros((0, self._block_size(X.shape[0]), Y.shape[1]), dtype=X.dtype)
        elif Y.shape[1] != self.coef_.shape[2]:
            raise ValueError("warm_start=True but the number of targets changed; set warm_start=False.")
        n_total = self._n_iter(X.shape[0])
        n_new = n_total if first else warm_start_iterations(n_total, self.n_iter_)
        row_chunks, window_rows = self._dask_windows(X, Y, sw)
        batches, windows = self._fit_batches(X.shape[0], n_new, self.n_iter_, row_chunks, window_rows)
        if row_chunks is not None and windows is None:  # unshuffled: the chunks one after the other
            windows = _chunk_windows(row_chunks, sum(_batch_len(b, X.shape[0]) for b in batches))
        return self._run(X, Y, sw, batches, fit=True, windows=windows)

    def _dask_task_need(self, n, d, k, dtype):
        """(bytes, partial sum's bytes, batch_size, block_size): the most one task of a distributed
        ``fit`` on n samples of d features and k target columns holds
        (:func:`kernelscale.dask.memory.footprint`): an iteration's need (:func:`~.solver.dsg_memory`)
        on the whole mini-batch (all its rows may be on one worker), and the coefficients it
        receives in parts beside their joined copy, and the next batch's features computed ahead;
        and the size of its partial sum (the block's
        gradient, and the preconditioned solver's covariance in float64)."""
        solver = self._solver(n)
        block = self._block_size(n, solver)
        batch = min(n, int(self._batch_size(solver, block)))
        n_iter = self.n_iter if self.n_iter != "auto" else dsg_auto_sizes(
            n, solver, self.batch_size, self.block_size, self._loss_name(1))[0]
        warm = self.warm_start and hasattr(self, "coef_")
        blocks = (self.n_iter_ if warm else 0) + n_iter
        kernel = make_kernel(self.kernel, "kernel")
        if not kernel.is_resolved:  # the sizes do not depend on the bandwidth the median trick picks
            kernel = clone(kernel).set_params(sigma=1.0)
        method = self.feature_method_ if warm else self.feature_method
        spec = FeatureBlockSpec(kernel, d, block, 0, np.dtype(dtype), method)
        # the batch's scores and gradients are whole; the new block's features are computed in
        # pieces, of PIECE_ROWS rows at least (distributed.piece_work; the tasks' budget, what the
        # plan leaves beside this need, takes larger pieces)
        held, _ = dsg_memory(batch, spec, k, blocks, solver)
        item = np.dtype(dtype).itemsize
        part = block * k * item + (8 * block * block if solver == "preconditioned" else 0)
        # kept on the worker beside the iteration: the next batch's scores and covariance
        # (distributed._partial_scores; its features, when kept, within a quarter of the budget)
        ahead = batch * k * item + (8 * block * block if solver == "preconditioned" else 0)
        return held + piece_work(spec, batch) + ahead + blocks * block * k * item, part, batch, block

    def _dask_windows(self, X, Y, sw):
        """(row chunks, rows of a window) of a dask X whose rows, targets and weights the workers
        cannot hold whole (:func:`kernelscale.dask.fit.hold_budget`; a window is at most half of
        it); (None, None) for numpy, or when they can (:meth:`_run` persists them)."""
        if not is_dask(X):
            return None, None
        from ..dask.fit import hold_budget

        dtype = self.coef_.dtype if self.n_iter_ else X.dtype  # _run casts X and Y to it
        row = dtype.itemsize * (X.shape[1] + Y.shape[1]) + 8 * (sw is not None)
        hold = hold_budget(self.max_memory)
        # kept whole: X, and the targets and weights twice (as given, and as the iterations take them)
        if X.shape[0] * (row + dtype.itemsize * Y.shape[1] + 8 * (sw is not None)) <= hold:
            return None, None
        return X.chunks[0], max(hold // 2 // row, 1)

    def _partial_fit(self, X, y, sample_weight, **target_kw):
        first = not hasattr(self, "coef_")
        X = validate_data(self, X, dtype=_FLOAT_DTYPES, reset=first)
        y = np.asarray(y)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} samples but X has {X.shape[0]}; pass one target per row.")
        Y, sw = self._targets(X, y, sample_weight, first=first, partial=True, **target_kw)
        return self._partial_fit_coded(X, Y, sw, first)

    def _partial_fit_coded(self, X, Y, sw, first):
        """``partial_fit`` on X, coded targets Y and weights sw (numpy, or dask: the batches' rows
        fetched group by group, :func:`_batch_rows`)."""
        if first:
            self._start(X, sw, check_random_state(self.random_state))
            self.coef_ = np.zeros((0, self._block_size(), Y.shape[1]), dtype=X.dtype)
        n = X.shape[0]
        bs = self._batch_size()
        batches = [slice(s, min(s + bs, n)) for s in range(0, n, bs)]
        row_chunks, _ = self._dask_windows(X, Y, sw)
        return self._run(X, Y, sw, batches, windows=None if row_chunks is None else _chunk_windows(row_chunks, n))

    # -- dask input (kernelscale.dask.fit; module docstring, "Dask input")

    def _fit_prepared(self, X, Y, classes, sw, fitted):
        """``fit`` on dask arrays validated chunk by chunk by :mod:`kernelscale.dask.fit`: Y one-hot
        over ``classes`` (classifier) or the targets (regressor), sw with the class weights."""
        return self._commit_run(type(self)._fit_dask, X, Y, classes, sw, fitted["n_features_in_"])

    def _fit_dask(self, X, Y, classes, sw, d):
        first = not (self.warm_start and hasattr(self, "coef_"))
        if not first and d != self.n_features_in_:
            raise ValueError("warm_start=True but X has a different number of features; set warm_start=False.")
        self.n_features_in_ = d
        return self._fit_coded(X, self._dask_fit_targets(Y, classes, first), sw, first)

    def _partial_fit_prepared(self, X, y, sw, **target_kw):
        """``partial_fit`` on dask arrays validated chunk by chunk (:func:`kernelscale.dask.fit.partial_fit`)."""
        first = not hasattr(self, "coef_")
        if first:
            self._validate_params()
        elif X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")
        return self._commit_run(type(self)._partial_fit_dask, X, y, sw, first, **target_kw)

    def _partial_fit_dask(self, X, y, sw, first, **target_kw):
        self.n_features_in_ = X.shape[1]
        Y, sw = self._dask_partial_targets(y, sw, first, X.dtype, **target_kw)
        return self._partial_fit_coded(X, Y, sw, first)

    def _outputs(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=_FLOAT_DTYPES, reset=False)
        spec = self._spec(X.dtype)
        budget = parse_memory(self.max_memory)
        operator, kept = self._device_operator(spec, budget // 4, group=False)
        F = dsg_predict(X, spec, self.coef_, self.scale_, budget - kept, operator=operator)
        return check_finite_result(F, "decision values" if hasattr(self, "classes_") else "predictions")
