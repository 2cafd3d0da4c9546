"""Distributed fits: the estimators whose n-sized work is sums over rows, or mini-batches of rows,
fit over dask row chunks.

:func:`kernelscale.dask.dispatch.call` hands ``fit`` with a dask X to :func:`fit` for the estimators of
:data:`DISTRIBUTED` in a configuration that fits over chunks (:func:`supports`: the estimator's
``_fits_over_chunks()``, when it has one), and ``partial_fit`` to :func:`partial_fit` for those
with a ``_partial_fit_prepared`` (the doubly stochastic ones):

- GeneralizedLeastSquaresClassifier, CalibratedLeastSquaresClassifier, StagewiseClassifier,
  StagewiseRegressor: every pass over rows is a sum or a per-row update;
- SLKLRegressor, SLKLClassifier (``columns="auto"`` or ``"gram"``): the M candidate rows are
  gathered, then one pass sums each chunk's C^T W C, C^T W y and y^T W y (one-vs-one: each
  class's C^T W C and C^T w); the coordinate descent runs on these M x M quantities on the client;
- RegularizedKernelClassifier, RegularizedKernelRegressor (``solver="fixed_point"``, a
  non-linear kernel): c and K c stay in X's row chunks, each iteration is one kernel product
  of one task per pair of row chunks; c and the support rows are gathered at the end (the model
  numpy holds);
- LSSVMClassifier, LSSVMRegressor: the block solvers through :mod:`kernelscale.lssvm.distributed` (the
  J sampled rows of X shipped to every chunk; the J x J block Gram matrix and products summed
  over the chunks; W and the residual partitioned like X; the J x J solves here); their fitted
  model holds the training rows and dual coefficients, as numpy's does, gathered once at the end;
- DoublyStochasticClassifier, DoublyStochasticRegressor: the mini-batch indices drawn as on numpy;
  each iteration is one sum over its mini-batch's rows where their row chunks are
  (:meth:`kernelscale.ops.rows.DaskRows.at`: one task per worker holding any of them scores its
  rows on the earlier blocks, regenerated there from their seeds, and returns its part of the new
  block's gradient, and of its covariance for the preconditioned solver); the step and the O(t)
  model stay here, as on numpy (:mod:`kernelscale.doubly_stochastic.distributed`); X is held
  whole, or window by window of row chunks (:mod:`kernelscale.doubly_stochastic.batches`).

With a distributed client whose workers have a ``memory_limit``, the fit is first planned within
the workers' memory (:mod:`kernelscale.dask.memory`), before any task is submitted: the row
chunks may be cut smaller, X may be left unpersisted, the tree's fan-in lowered, and every budget
of the fit is capped at what one task may take on a worker; when the fit cannot run within the
workers' memory it is refused then, with a ValueError naming memory_limit, max_memory, the row
chunks and the fixes (a classifier is planned for two classes first, and again once its labels,
one small task per chunk, are known).

Here the arguments are validated chunk by chunk, as the estimator's own validation does on numpy
arrays, without gathering anything n-sized:

- X: every chunk cast to float64 (float32 kept) and checked for NaN/inf (a scipy.sparse chunk
  becomes CSR, its structure and stored values checked; the solvers' per-chunk functions take
  CSR as in memory), then persisted with y and the weights, the smallest first, so that
  iterations read them from memory, while they fit the memory they would stay in: the workers'
  budgets added up with a distributed client, the estimator's ``max_memory`` in this process
  without one. What does not fit (data larger than memory: a dask array over a memmap or zarr
  store, or generated chunks) is read and checked again from the source by every pass, one chunk
  at a time (:func:`_keep`). A dense X persisted already in its dtype is checked by one pass and
  read as it is (:func:`_checked_X`). A stagewise fit with its PCA keeps the projection, not X;
- y (classifiers): the classes are the union of each chunk's unique labels (the same checks as
  numpy: at least two classes, not continuous); the one-hot targets are built per chunk; a
  regressor's y is cast to X's dtype, or to float64 where numpy's fit does (``_float64_targets``);
- sample_weight and class_weight: per chunk; "balanced" from class counts summed over chunks.

The estimator then runs its ordinary fit body (``_fit_prepared``) on these dask arrays: its
solvers route every pass over rows through :mod:`kernelscale.ops.rows`, which maps it over the
row chunks (one task per chunk, or per pair of chunks for a kernel product; sums reduced by a
tree, per-row state persisted where it was computed); the small solves stay here. :func:`fit`
returns NotImplemented for arguments it does not handle (a multi-label y); the caller then
gathers as for every other estimator. :func:`partial_fit` checks its arguments the same way
but persists nothing (a stream, read once).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import is_classifier

from ..base.classifier import check_class_memory, encode_classes, one_hot
from ..base.estimator import check_class_weight
from ..ops.rows import chunk_meta
from .client import cluster_budget, current_client
from .memory import CLASS_ARRAYS, active_plan, capped, client_budget, is_persisted, plan, worker_memory

__all__ = ["DISTRIBUTED", "class_weight_chunk", "fit", "hold_budget", "partial_fit", "persist_within", "sum_labels",
           "supports"]

#: estimators whose fit on a dask X runs over its row chunks
DISTRIBUTED = (
    "GeneralizedLeastSquaresClassifier",
    "CalibratedLeastSquaresClassifier",
    "StagewiseClassifier",
    "StagewiseRegressor",
    "SLKLRegressor",
    "SLKLClassifier",
    "RegularizedKernelClassifier",
    "RegularizedKernelRegressor",
    "LSSVMClassifier",
    "LSSVMRegressor",
    "DoublyStochasticClassifier",
    "DoublyStochasticRegressor",
)


def supports(estimator, method="fit"):
    """Whether ``estimator.method`` (fit or partial_fit) on a dask X runs over the row chunks: one of
    DISTRIBUTED, in a configuration that does (its ``_fits_over_chunks()``, True when it has none)."""
    return (type(estimator).__name__ in DISTRIBUTED and hasattr(estimator, f"_{method}_prepared")
            and getattr(estimator, "_fits_over_chunks", lambda: True)())


# -- per-chunk checks (one task per chunk) -------------------------------------------------------

def _location(block_info):
    info = (block_info or {}).get(0, {})
    index = info.get("chunk-location", ("?",))[0]
    start, stop = info.get("array-location", [(None, None)])[0]
    return index, (f" (rows {start} to {stop - 1})" if start is not None else "")


def _float_chunk(block, name, dtype, block_info=None):
    """The chunk in ``dtype``, or a ValueError naming the chunk when it is not finite. A
    scipy.sparse chunk becomes CSR of ``dtype`` (its structure checked as the in-memory boundary
    checks a sparse X: :func:`kernelscale.base.validation.check_sparse`)."""
    if sp.issparse(block):
        from ..base.validation import as_rows, check_sparse

        index, rows = _location(block_info)
        return as_rows(check_sparse(block, f"{name} (row chunk {index}{rows})"), dtype)
    try:
        out = np.asarray(block, dtype=dtype)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric: {err}") from None
    if not np.all(np.isfinite(out)):
        index, rows = _location(block_info)
        raise ValueError(
            f"{name} contains NaN or infinity in row chunk {index}{rows}; drop or impute those entries "
            f"before passing {name}."
        )
    return out


def _checked_X(X, dtype):
    """X's chunks in ``dtype``, checked by :func:`_float_chunk` as every pass reads them. A dense X
    persisted in ``dtype`` already is checked by one pass and used as it is: its chunks are in the
    workers' memory, where a converted copy would count its bytes a second time, and when that
    copy could not be kept, every pass would check X again."""
    if X.dtype == dtype and not sp.issparse(X._meta) and is_persisted(X):
        X.map_blocks(_checked_chunk, "X", dtype, chunks=tuple((1,) * len(c) for c in X.chunks), dtype=bool,
                     meta=np.empty((0,) * X.ndim, dtype=bool)).compute()
        return X
    return X.map_blocks(_float_chunk, "X", dtype, dtype=dtype, meta=chunk_meta(X, dtype))


def _checked_chunk(block, name, dtype, block_info=None):
    """True (one value a chunk) once :func:`_float_chunk` accepts the chunk as it is, in ``dtype``."""
    if block.dtype != dtype:
        index, rows = _location(block_info)
        raise ValueError(f"{name} is {np.dtype(dtype)} but its row chunk {index}{rows} holds {block.dtype}; "
                         f"persist {name}.astype({np.dtype(dtype).name}) instead.")
    _float_chunk(block, name, dtype, block_info)
    return np.ones((1,) * block.ndim, dtype=bool)


def _weight_chunk(block, block_info=None):
    w = _float_chunk(block, "sample_weight", np.float64, block_info)
    if np.any(w < 0):
        raise ValueError("Negative values in data passed to sample_weight")
    return w


def _unique(block):
    return np.unique(block)


def _one_hot_chunk(block, classes, dtype):
    return one_hot(np.searchsorted(classes, block), classes.size, dtype)


def class_weight_chunk(block, w, classes, weights):
    codes = np.searchsorted(classes, block)
    return (np.ones(codes.size) if w is None else w) * weights[codes]


def _counts(block, classes):
    return np.bincount(np.searchsorted(classes, block), minlength=classes.size).astype(np.float64)


# -- fit -------------------------------------------------------------------------------------------

def _as_rows(a, X, name):
    """``a`` (the argument ``name``) as a dask array with X's row chunks (a numpy y or
    sample_weight beside a dask X)."""
    import dask.array as da

    if a is None or hasattr(a, "dask"):
        return a
    a = np.asarray(a)
    if a.shape[:1] != X.shape[:1]:
        raise ValueError(f"{name} has shape {a.shape} but X has {X.shape[0]} rows; pass one entry per row of X.")
    return da.from_array(a, chunks=(X.chunks[0],) + tuple((s,) for s in a.shape[1:]))


def fit(estimator, X, y, sample_weight=None):
    """Fit ``estimator`` on the dask X (row chunks, one column chunk) and y over the chunks."""
    estimator._validate_params()
    n, d = X.shape
    if n < 1 or d < 1:
        raise ValueError(f"X of shape {X.shape}: need at least 1 sample and 1 feature.")
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the target y is None.")
    y, sample_weight = _as_rows(y, X, "y"), _as_rows(sample_weight, X, "sample_weight")
    if y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} rows but X has {n}; pass one label per row of X.")
    classifier = is_classifier(estimator)
    if classifier and y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]  # as numpy's column_or_1d (a regressor keeps a 2-d y: multi-output)
    if y.ndim != 1 and classifier:
        return NotImplemented  # multi-label: gathered
    X, y, sample_weight, plan_ = _plan(estimator, X, y, sample_weight, (y.shape[1] if y.ndim == 2 else 1)
                                       if not classifier else 2)
    classes = None
    if classifier:  # the checks of numpy's fit: labels, two classes at least
        classes, _ = encode_classes(sum_labels(y))
        if plan_ is not None and classes.size > 2:  # planned for two classes: again for k, from the
            # estimator's own budget (not the two-class plan's cap)
            X, y, sample_weight, plan_ = _plan(estimator, X, y, sample_weight, classes.size)
    if plan_ is None:
        return _fit_checked(estimator, X, y, sample_weight, classes)
    with capped(plan_):
        return _fit_checked(estimator, X, y, sample_weight, classes)


def _plan(estimator, X, y, sample_weight, k):
    """X, y and sample_weight in the row chunks of the fit's plan within the workers' memory
    (:func:`kernelscale.dask.memory.plan`) and the plan; the arrays as they are and None without
    a distributed client whose workers have a memory_limit. A ValueError before any task runs when
    the fit cannot run within the workers' memory."""
    client = current_client()
    workers = worker_memory(client) if client is not None else None
    if workers is None:
        return X, y, sample_weight, None
    reduces = getattr(estimator, "_dask_reduces_X", None)
    found = plan(estimator, X, k, client_budget(estimator), workers,
                 x_reduced=reduces is not None and bool(reduces(X.shape[1])))
    if found.rows is not None and found.rows < max(X.chunks[0]):
        X, y = X.rechunk({0: found.rows}), y.rechunk({0: found.rows})
        if sample_weight is not None:
            sample_weight = sample_weight.rechunk({0: found.rows})
    return X, y, sample_weight, found


def _fit_checked(estimator, X, y, sample_weight, classes):
    """The body of :func:`fit` once the arrays are in the chunks of the plan, with a classifier's
    ``classes`` (None for a regressor)."""
    n, d = X.shape
    dtype = np.float32 if X.dtype == np.float32 else np.float64
    X = _checked_X(X, dtype)
    if sample_weight is not None:
        if sample_weight.ndim != 1 or sample_weight.shape[0] != n:
            raise ValueError(f"sample_weight must have shape ({n},), got {sample_weight.shape}.")
        sample_weight = sample_weight.map_blocks(_weight_chunk, dtype=np.float64, meta=np.empty(0))
    fitted = {"n_features_in_": d}
    if classes is None:
        ydtype = np.float64 if getattr(estimator, "_float64_targets", False) else dtype
        Y = y.map_blocks(_float_chunk, "y", ydtype, dtype=ydtype, meta=np.empty((0,) * y.ndim, dtype=ydtype))
        X, Y, sample_weight = _keep(estimator, X, Y, sample_weight)
        return estimator._fit_prepared(X, Y, None, sample_weight, fitted)
    return _fit_classes(estimator, X, y, sample_weight, classes, dtype, fitted)


def _fit_classes(estimator, X, y, sample_weight, classes, dtype, fitted):
    """The classifier's part of :func:`_fit_checked`, once its classes are known."""
    k = classes.size
    check_class_memory(CLASS_ARRAYS * np.dtype(dtype).itemsize * max(X.chunks[0]) * k, estimator.max_memory, k,
                       "the one-hot targets, scores and residuals of one row chunk")
    Y = y.map_blocks(_one_hot_chunk, classes, dtype, dtype=dtype, chunks=(y.chunks[0], (k,)), new_axis=1,
                     meta=np.empty((0, 0), dtype=dtype))
    class_weight = getattr(estimator, "class_weight", None)
    sw = sample_weight
    if class_weight is not None:
        check_class_weight(class_weight, classes)
        if isinstance(class_weight, str):  # "balanced": n / (k * counts), as scikit-learn
            counts = _sum_counts(y, classes)
            weights = counts.sum() / (k * counts)
        else:
            from sklearn.utils.class_weight import compute_class_weight

            weights = compute_class_weight(class_weight, classes=classes, y=classes)
        sw = y.map_blocks(class_weight_chunk, sample_weight, classes, weights, dtype=np.float64, meta=np.empty(0))
    X, Y, sw = _keep(estimator, X, Y, sw)
    return estimator._fit_prepared(X, Y, classes, sw, fitted)


def partial_fit(estimator, X, y, sample_weight=None, **kwargs):
    """``partial_fit`` of ``estimator`` on the dask X and y, checked chunk by chunk as in :func:`fit`
    but never persisted (a stream read once); the labels of a classifier are passed as they are."""
    n, dtype = X.shape[0], (np.float32 if X.dtype == np.float32 else np.float64)
    if y is None:
        raise ValueError(f"{type(estimator).__name__}.partial_fit requires y, but the target y is None.")
    y, sample_weight = _as_rows(y, X, "y"), _as_rows(sample_weight, X, "sample_weight")
    X = X.map_blocks(_float_chunk, "X", dtype, dtype=dtype, meta=chunk_meta(X, dtype))
    if is_classifier(estimator):
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"y must be 1-d (one label per row), got shape {y.shape}.")
    else:
        y = y.map_blocks(_float_chunk, "y", dtype, dtype=dtype, meta=np.empty((0,) * y.ndim, dtype=dtype))
    if sample_weight is not None:
        if sample_weight.ndim != 1 or sample_weight.shape[0] != n:
            raise ValueError(f"sample_weight must have shape ({n},), got {sample_weight.shape}.")
        sample_weight = sample_weight.map_blocks(_weight_chunk, dtype=np.float64, meta=np.empty(0))
    return estimator._partial_fit_prepared(X, y, sample_weight, **kwargs)


def _keep(estimator, X, *arrays):
    """X and the per-row arrays persisted (module docstring) when their bytes fit the memory they
    would stay in: with a distributed client, the workers' budgets added up (:func:`kernelscale.dask.client.cluster_budget`);
    else the estimator's ``max_memory`` in this process. Otherwise they stay as they are, and each
    pass recomputes its chunks from the source. X is not kept when the estimator reduces it to a
    smaller per-row array before its passes (``_dask_reduces_X``: a stagewise fit with its PCA reads
    X twice, for the PCA and its projection, and keeps the projection)."""
    reduces = getattr(estimator, "_dask_reduces_X", None)
    arrays = (X, *arrays)
    keep = [a is not None for a in arrays]
    plan_ = active_plan()
    keep[0] = not (reduces is not None and reduces(X.shape[1])) and (plan_ is None or plan_.keep_x)
    kept = iter(persist_within(estimator.max_memory, *(a for a, k in zip(arrays, keep) if k)))
    return tuple(next(kept) if k else a for a, k in zip(arrays, keep))


def hold_budget(max_memory):
    """The bytes a distributed fit's data may take in the memory they would stay in: what the
    fit's plan lets the workers hold (:mod:`kernelscale.dask.memory`), else the workers' budgets
    added up with a distributed client, else ``max_memory`` (this process)."""
    from ..ops.memory import parse_memory

    plan_ = active_plan()
    return plan_.hold if plan_ is not None else cluster_budget() if current_client() is not None else \
        parse_memory(max_memory)


def persist_within(max_memory, *arrays):
    """The dask ``arrays`` persisted, the smallest first, while their bytes fit the memory they
    would stay in (:func:`hold_budget`); the others as they are: each pass then recomputes their
    chunks from the source. An array persisted already stays as it is and counts nothing (its
    chunks are in the workers' memory, from which the plan's budget is measured)."""
    import dask

    room = hold_budget(max_memory)
    chosen = []
    for i in sorted(range(len(arrays)), key=lambda i: 0 if arrays[i] is None else arrays[i].nbytes):
        a = arrays[i]
        if a is None or is_persisted(a):
            continue
        if a.nbytes > room:
            break
        room -= a.nbytes
        chosen.append(i)
    out = list(arrays)
    for i, a in zip(chosen, dask.persist(*(arrays[i] for i in chosen))):
        out[i] = a
    return tuple(out)


def sum_labels(y):
    """The sorted unique labels of y: the union of each row chunk's (one compute)."""
    import dask

    return np.unique(np.concatenate(dask.compute(*map(dask.delayed(_unique), y.to_delayed().ravel()))))


def _sum_counts(y, classes):
    """Samples per class, summed over the row chunks of y by a tree reduction."""
    from ..ops.rows import DaskRows

    return DaskRows(y.chunks[0], 0).sum(_counts, y, classes=classes)
