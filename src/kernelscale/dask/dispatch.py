"""Dask arrays as inputs of every estimator: the one place kernelscale handles them.

:func:`dispatching_dask` wraps every public method of an estimator (kernelscale.base.boundary)
and hands each call with a ``dask.array.Array`` argument to :func:`call`; no estimator knows about
dask. What happens depends on the method:

- ``predict``, ``decision_function``, ``predict_proba``, ``predict_log_proba``, ``transform``
  (:data:`MAPPED`): the result is a lazy dask array with X's row chunks. Each row chunk is one
  task that runs the estimator's ordinary numpy method on that chunk, so every row gets exactly
  the value numpy gives it. The fitted estimator is copied once when the method is called and
  enters the graph as ONE key that every chunk task depends on (shipped once per worker, never
  per chunk or per example).
- ``score``: y and sample_weight are gathered, the predictions are computed over X's chunks as
  above and gathered (n values, not n rows of X), and the estimator's score runs on them.
- ``fit`` of the estimators whose n-sized work is sums over rows, row-chunk products or
  mini-batches of rows (:data:`kernelscale.dask.fit.DISTRIBUTED`: generalized and calibrated
  least squares, stagewise regression, SLKL's Gram solver, the fixed-point solver of the
  regularized kernel estimators, the LS-SVM's block solvers, doubly stochastic gradients;
  :func:`kernelscale.dask.fit.supports` says which configurations): distributed over X's row
  chunks by :mod:`kernelscale.dask.fit` (one task per row chunk, or per pair of chunks, per
  pass, or per worker over the rows of a mini-batch; sums reduced by a tree, per-row state
  persisted on the workers; nothing n-sized gathered while fitting); the model equals numpy's up
  to the order of the sums.
- ``partial_fit`` of the doubly stochastic estimators: X streamed chunk by chunk, each
  mini-batch's sums computed where its rows are (:func:`kernelscale.dask.fit.partial_fit`),
  numpy's model up to the order of the sums.
- ``fit`` of the other estimators (and any other ``partial_fit``): the dask arrays are gathered into this
  process when their size fits the estimator's memory budget (``max_memory``), and the fit runs
  on numpy arrays, so the model is the one numpy gives. Otherwise the call is refused, naming the
  estimators whose fit is distributed.

Sparse chunks: a dask array of scipy.sparse row chunks (CSR, CSC, sparse arrays; e.g.
``da.from_array(csr, chunks=(rows, d), asarray=False)``) is taken by every method: each task gets
its chunk as CSR and runs the in-memory sparse code on it (kernel blocks and random features from
its nonzeros); a gathering fit stacks the chunks into one CSR matrix, counting their stored values
against ``max_memory`` as they arrive. Sparse chunks split by columns are refused (the fix: one
column chunk), as dask does not join sparse chunks side by side.

Input checks, each a ValueError naming the argument and the fix: unknown chunk sizes (call
``compute_chunk_sizes()``), y or sample_weight row chunks that differ from X's, and NaN or
infinity, found when the chunk holding it is computed and reported with the chunk's index and
rows. X split into several column chunks is rechunked to one column chunk (a row chunk is the
unit of work).

Detection (:func:`is_dask_array`) looks at the type's module name only, so ``import kernelscale``
never imports dask; dask is imported when a dask array arrives.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import inspect
import uuid
import warnings

import numpy as np
import scipy.sparse as sp

from ..ops.memory import format_bytes, parse_memory
from ..ops.rows import chunk_meta, is_dask, is_sparse_chunked

__all__ = ["is_dask_array", "is_sparse_chunked", "chunk_meta", "has_dask_input", "call", "dispatching_dask", "MAPPED",
           "GATHERED"]

#: methods whose result is computed row chunk by row chunk and stays lazy
MAPPED = ("predict", "decision_function", "predict_proba", "predict_log_proba", "transform")
#: methods that gather their dask arguments into this process (fit: unless kernelscale.dask.fit
#: distributes it)
GATHERED = ("fit", "partial_fit")

#: set while ``score`` runs on a dask X: the nested mapped call returns a computed numpy array
_GATHER_RESULTS = contextvars.ContextVar("kernelscale_dask_gather_results", default=False)


#: True for a ``dask.array.Array`` (checked without importing dask)
is_dask_array = is_dask


def has_dask_input(args, kwargs):
    """True when any positional or keyword argument is a dask array."""
    return any(map(is_dask_array, args)) or any(map(is_dask_array, kwargs.values()))


def dispatching_dask(method):
    """``method`` (a public estimator method taking numpy arrays) that hands calls with a dask
    array argument to :func:`call`, which calls it again on numpy arrays (row chunks, gathered
    arrays) or runs the distributed fit."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        if has_dask_input(args, kwargs):
            return call(self, run, args, kwargs)
        return method(self, *args, **kwargs)

    return run


def call(estimator, method, args, kwargs):
    """Run ``method`` (a public estimator method, taking numpy arrays) of ``estimator`` on
    arguments of which at least one is a dask array; see the module docstring."""
    name = method.__name__
    bound = inspect.signature(method).bind(estimator, *args, **kwargs)
    arguments = dict(list(bound.arguments.items())[1:])  # without self
    x_name = next(iter(arguments), "X")
    X = arguments.get(x_name)
    if name in MAPPED and is_dask_array(X):
        return _map_rows(estimator, name, _prepare_X(X, x_name), x_name)
    others = {k: v for k, v in arguments.items() if is_dask_array(v) and k != x_name}
    if is_dask_array(X):
        X = _prepare_X(X, x_name)
        for key, value in others.items():
            _check_rows_match(value, key, X, x_name)
    else:
        for key, value in others.items():
            _check_known_chunks(value, key)
    if name == "fit" and is_dask_array(X):
        from . import fit as _dask_fit

        if _dask_fit.supports(estimator):  # a distributed fit over X's row chunks
            names = list(arguments)
            y = arguments.get(names[1]) if len(names) > 1 else None
            result = _dask_fit.fit(estimator, X, y, arguments.get("sample_weight"))
            if result is not NotImplemented:
                return result
    if name == "partial_fit" and is_dask_array(X):
        from . import fit as _dask_fit

        if _dask_fit.supports(estimator, "partial_fit"):  # each mini-batch where its row chunks are
            rest = {k: v for k, v in arguments.items() if k not in (x_name, "y")}
            return _dask_fit.partial_fit(estimator, X, arguments.get("y"), **rest)
    if name == "score" and is_dask_array(X):  # predictions over X's chunks, y and weights gathered
        arguments.update(_gather(estimator, name, others))
        token = _GATHER_RESULTS.set(True)
        try:
            args, kwargs = _rebind(bound, arguments)
            return inspect.unwrap(method)(*args, **kwargs)  # the score itself, X still a dask array
        finally:
            _GATHER_RESULTS.reset(token)
    to_gather = {**({x_name: X} if is_dask_array(X) else {}), **others}
    arguments.update(_gather(estimator, name, to_gather))
    args, kwargs = _rebind(bound, arguments)
    return method(*args, **kwargs)


def _rebind(bound, arguments):
    """``bound``'s positional and keyword arguments with the values of ``arguments`` (by name)."""
    bound.arguments.update(arguments)
    return bound.args, bound.kwargs


# -- checks -----------------------------------------------------------------------------------

def _short(chunks):
    """A row-chunk tuple for a message: the first few sizes and the count."""
    chunks = tuple(int(c) if not np.isnan(c) else c for c in chunks)
    if len(chunks) <= 6:
        return str(chunks)
    return f"({', '.join(map(str, chunks[:4]))}, ..., {chunks[-1]}) ({len(chunks)} chunks)"


def _check_known_chunks(a, name):
    if any(np.isnan(c) for dim in a.chunks for c in dim):
        raise ValueError(
            f"{name} is a dask array with unknown chunk sizes (shape {a.shape}), as a boolean mask or "
            f"a filter leaves it; call {name}.compute_chunk_sizes() (or {name} = "
            f"{name}.compute_chunk_sizes()) before passing {name}, so that the rows of each chunk are known."
        )


def _prepare_X(X, name):
    """X with known chunks, 2-d, its columns in one chunk (each task sees whole rows)."""
    _check_known_chunks(X, name)
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-d dask array (n_samples, n_features), got shape {X.shape}; reshape it, "
            f"e.g. {name}.reshape(-1, 1) for a single feature."
        )
    if len(X.chunks[1]) > 1:
        if is_sparse_chunked(X):
            raise ValueError(
                f"{name} is a dask array of scipy.sparse chunks split into {len(X.chunks[1])} column chunks "
                f"{_short(X.chunks[1])}; kernelscale takes sparse chunks of whole rows (a row chunk is the unit "
                f"of work, and dask cannot join sparse chunks side by side); build {name} with one column chunk, "
                f"e.g. da.from_array(csr, chunks=(rows, {X.shape[1]}), asarray=False), or {name}.rechunk({{1: -1}}) "
                f"when your dask version joins them."
            )
        X = X.rechunk({1: -1})
    return X


def _check_rows_match(a, name, X, x_name):
    _check_known_chunks(a, name)
    if a.shape[:1] != X.shape[:1]:
        raise ValueError(
            f"{name} has {a.shape[0]} rows but {x_name} has {X.shape[0]}; pass one {name} entry per row of {x_name}."
        )
    if a.chunks[0] != X.chunks[0]:
        raise ValueError(
            f"the row chunks of {name} {_short(a.chunks[0])} do not match those of {x_name} "
            f"{_short(X.chunks[0])}; rechunk {name} like {x_name}: {name} = {name}.rechunk({{0: {x_name}.chunks[0]}})."
        )


def _check_finite_chunk(block, name, block_info):
    """Raise a ValueError naming ``name`` and the row chunk when a float chunk is not finite."""
    values = block.data if sp.issparse(block) else block
    if block.dtype.kind in "fc" and not np.all(np.isfinite(values)):
        info = (block_info or {}).get(0, {})
        index = info.get("chunk-location", ("?",))[0]
        start, stop = info.get("array-location", [(None, None)])[0]
        rows = f" (rows {start} to {stop - 1})" if start is not None else ""
        raise ValueError(
            f"{name} contains NaN or infinity in row chunk {index}{rows}; drop or impute those entries "
            f"(e.g. sklearn.impute.SimpleImputer, or {name}[da.isfinite({name}).all(axis=1)] followed by "
            f"compute_chunk_sizes()) before passing {name}."
        )


def _checked_chunk(block, name, block_info=None):
    _check_finite_chunk(block, name, block_info)
    return block


# -- fit: gather -------------------------------------------------------------------------------

def _gathered_bytes(a):
    """Bytes of ``a`` once gathered and validated (numbers other than float32 become float64); for
    sparse chunks a lower bound (the row pointers), the stored values being counted as they come."""
    if is_sparse_chunked(a):
        return (int(a.shape[0]) + 1) * 8
    itemsize = a.dtype.itemsize if a.dtype.kind not in "biuf" or a.dtype == np.float32 else 8
    return int(a.size) * max(itemsize, a.dtype.itemsize)


def _gather(estimator, method, arrays):
    """The dask arrays of ``arrays`` (a dict by argument name) computed into numpy arrays (one CSR
    matrix for sparse chunks), each chunk checked for NaN/inf as it is computed; refused when they
    exceed the memory budget (sparse chunks: once the values gathered so far exceed it)."""
    if not arrays:
        return {}
    budget = parse_memory(getattr(estimator, "max_memory", None))
    need = sum(_gathered_bytes(a) for a in arrays.values())
    refuse = functools.partial(_refuse_gather, estimator, method, arrays, budget)
    if need > budget:
        refuse(need)
    out = {}
    for key, a in arrays.items():
        checked = a.map_blocks(_checked_chunk, key, dtype=a.dtype, meta=chunk_meta(a))
        if is_sparse_chunked(a):
            out[key] = _compute_sparse_by_chunks(checked, need - _gathered_bytes(a), budget, refuse)
        else:
            out[key] = _compute_by_chunks(checked)
    return out


def _refuse_gather(estimator, method, arrays, budget, need):
    cls = type(estimator).__name__
    names = ", ".join(arrays)
    from .fit import DISTRIBUTED, supports

    if cls in DISTRIBUTED and method == "fit":
        why = (f"{cls} fits over dask row chunks, but not multi-label targets" if supports(estimator) else
               f"{cls} fits over dask row chunks only with {estimator._chunked_configuration}")
    else:
        why = f"{cls}.{method} does not run over dask chunks"
    raise ValueError(
        f"{cls}.{method} on dask input gathers {names} into this process: {format_bytes(need)}"
        f"{' or more' if any(map(is_sparse_chunked, arrays.values())) else ''}, more than "
        f"the memory budget of {format_bytes(budget)} (max_memory={getattr(estimator, 'max_memory', None)!r}). "
        f"{why}; the estimators whose fit is distributed (one task per row chunk, nothing n-sized "
        f"gathered) are {', '.join(DISTRIBUTED)} (predict, decision_function, predict_proba and "
        f"transform of every estimator run over the chunks). Fit one of those, or pass a numpy array "
        f"or a numpy.memmap, a smaller dask array, or a larger max_memory."
    )


#: row chunks computed at once while gathering
GATHER_CHUNKS = 4


def _compute_sparse_by_chunks(a, others, budget, refuse):
    """The sparse row chunks of ``a`` computed GATHER_CHUNKS at a time and stacked into one CSR
    matrix; ``refuse(bytes)`` is called as soon as ``others`` bytes plus those of the chunks
    gathered so far exceed ``budget``."""
    import dask

    from ..base.validation import array_bytes

    blocks = a.to_delayed().ravel()
    parts, held = [], others
    for first in range(0, len(blocks), GATHER_CHUNKS):
        for block in dask.compute(*blocks[first:first + GATHER_CHUNKS]):
            block = block.tocsr() if block.format != "csr" else block
            held += array_bytes(block)
            if held > budget:
                refuse(held)
            parts.append(block)
    return sp.vstack(parts, format="csr") if len(parts) > 1 else parts[0]


def _compute_by_chunks(a):
    """``a`` computed into one numpy array that this process allocates, GATHER_CHUNKS row chunks
    at a time. ``dask.compute(a)`` would concatenate the chunks in one task, which on a
    distributed cluster runs on a worker: the whole array inside one worker's memory_limit."""
    import dask

    if a.ndim > 1 and a.numblocks[1:] != (1,) * (a.ndim - 1):
        a = a.rechunk({axis: -1 for axis in range(1, a.ndim)})
    blocks = a.to_delayed().ravel()
    groups = (range(first, min(first + GATHER_CHUNKS, len(blocks))) for first in range(0, len(blocks), GATHER_CHUNKS))
    if np.isnan(a.shape[0]):  # unknown chunk sizes: the chunks, then one concatenation
        return np.concatenate([b for group in groups for b in dask.compute(*(blocks[i] for i in group))])
    out = np.empty(a.shape, dtype=a.dtype)
    ends = np.cumsum(a.chunks[0])
    for group in groups:
        for i, block in zip(group, dask.compute(*(blocks[i] for i in group))):
            out[ends[i] - block.shape[0]:ends[i]] = block
    return out


# -- predictions: map over row chunks ---------------------------------------------------------

def _apply_chunk(block, estimator, method, name, block_info=None):
    """One task: the estimator's numpy ``method`` on one row chunk."""
    _check_finite_chunk(block, name, block_info)
    return getattr(estimator, method)(block)


def _map_rows(estimator, method, X, name):
    """``estimator.method`` over the row chunks of the dask array X, lazily."""
    import dask
    import dask.array as da

    # the result's trailing shape and dtype from one row of zeros, computed here: an unfitted
    # estimator or a wrong number of features fails now with the estimator's own message
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sample = np.asarray(getattr(estimator, method)(np.zeros((1, X.shape[1]), dtype=X.dtype)))
    state = dask.delayed(copy.deepcopy(estimator), pure=False, traverse=False,
                         name=f"kernelscale-{type(estimator).__name__}-{uuid.uuid4().hex}")
    meta = np.empty((0,) + sample.shape[1:], dtype=sample.dtype)
    chunks = (X.chunks[0],) + tuple((s,) for s in sample.shape[1:])
    result = da.map_blocks(
        _apply_chunk, X, state, method, name,
        name=f"{type(estimator).__name__}-{method}-{uuid.uuid4().hex}",
        dtype=sample.dtype, meta=meta, chunks=chunks,
        drop_axis=[1] if sample.ndim == 1 else [],
    )
    if _GATHER_RESULTS.get():
        return result.compute()
    return result
