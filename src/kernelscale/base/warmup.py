"""The first call in a process within its memory budget: compiled code loaded before planning.

An estimator whose methods run compiled code loaded on first use (numba's loops, scipy's and
LAPACK's modules; a class with ``_warm_params``) pays, on the first call of a method in a process,
for importing and loading (or compiling) that code: 50-150 MiB of resident memory that no plan of
blocks counts. So the first call of each method per (class, dtype, sparse or dense input,
kernel) first runs the same method on a few rows of the
caller's data (for ``fit``, a fresh estimator with the same parameters but the few iterations of
``_warm_params``; a class with ``_compiled_cosine`` also loads the random features' compiled
cosine, which a few rows would not reach), measures how much that grew the resident set, and
runs the real call under a budget smaller by that much (:func:`kernelscale.ops.memory.budget_cap`).
Under a budget of which the compiled cosine would take more than a third, it is not loaded:
numpy's cosine serves (:func:`_numpy_cosine`). Later calls find the code loaded and keep the
whole budget. A budget smaller than the loading is refused before anything else is allocated.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone, is_classifier

from ..ops.memory import budget_cap, format_bytes, parse_memory, release_freed, resident_bytes

__all__ = ["WARM_METHODS", "loaded_first"]

#: the methods whose first call loads compiled code
WARM_METHODS = ("fit", "partial_fit", "predict", "decision_function", "predict_proba", "transform")
#: rows of each class (of the first rows, for a regressor) the warm-up call runs on
WARM_ROWS = 64
#: the compiled cosine loads only when its resident memory is at most this share of the budget
COSINE_BUDGET_SHARE = 1 / 3
#: growth of the resident set below this is the noise of a small call, not loaded code
NOISE_BYTES = 2**20

_WARMED = set()
_LOCK = threading.Lock()
_WARMING = contextvars.ContextVar("kernelscale_warming", default=False)


def _sample(X, y, classifier):
    """A few rows of X (and y): WARM_ROWS of each of two classes for a classifier."""
    y = None if y is None else np.asarray(y)
    if y is None or not classifier:
        rows = np.arange(min(WARM_ROWS, X.shape[0]))
    else:
        labels = y if y.ndim == 1 else y[:, 0]
        _, first = np.unique(labels, return_index=True)
        picked = [np.flatnonzero(labels == labels[i])[:WARM_ROWS] for i in np.sort(first)[:2]]
        rows = np.sort(np.concatenate(picked))
    return X[rows], (None if y is None else y[rows])


def _fresh_copy(estimator, n):
    """An unfitted copy that neither prints, calls back, nor draws from the caller's generator,
    and stops after the few iterations of ``_warm_params`` (plus what ``_warm_params_for(n)``
    adds for a fit on n rows: the solver a fit of all of them would run)."""
    params = estimator.get_params(deep=False)
    sized = getattr(estimator, "_warm_params_for", None)
    quiet = {"verbose": 0, "callback": None, "random_state": 0, "warm_start": False, **estimator._warm_params,
             **(sized(n) if sized is not None else {})}
    return clone(estimator).set_params(**{k: v for k, v in quiet.items() if k in params})


def _warm(estimator, method, X, y, cosine):
    if cosine and getattr(estimator, "_compiled_cosine", False):
        # the warm-up's few rows stay below the sizes where the compiled cosine starts
        # (kernelscale.ops.fast_cos.MIN_SIZE), and the real call would load it uncounted
        from ..ops import fast_cos

        fast_cos.load(sparse=sp.issparse(X))
    Xs, ys = _sample(X, y, is_classifier(estimator))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method in ("fit", "partial_fit"):
            copy = _fresh_copy(estimator, X.shape[0])
            copy.fit(Xs) if ys is None else copy.fit(Xs, ys)
            if hasattr(copy, "transform"):
                copy.transform(Xs)
        else:
            getattr(estimator, method)(Xs)


def _key(estimator, method, X):
    """A first call per class, method, dtype, sparse or dense X and kernel (each kernel has loops of its own)."""
    kernel = getattr(estimator, "kernel", None)
    return (type(estimator), method, np.dtype(X.dtype).str, sp.issparse(X),
            kernel if isinstance(kernel, str) or kernel is None else type(kernel).__name__)


def _numpy_cosine(estimator):
    """Whether the call leaves cosines to numpy: the compiled cosine is not loaded yet
    (:func:`_cosine_pending`; whether it is available is not asked, which would import numba), and
    its RESIDENT_BYTES are more than a third of the budget (COSINE_BUDGET_SHARE): beside the fit's
    own arrays it would not fit (the doubly stochastic fit at 200 MB needs 84 MiB of arrays at
    least, the loaded code and its runtime 100-130 MiB)."""
    if not _cosine_pending(estimator):
        return False  # before the budget is read: max_memory=None reads it once per call
    from ..ops import fast_cos

    budget = parse_memory(getattr(estimator, "max_memory", None))
    return fast_cos.RESIDENT_BYTES > COSINE_BUDGET_SHARE * budget


def _cosine_to_load(estimator):
    """Whether the estimator's compiled cosine is still to be loaded in this process."""
    from ..ops import fast_cos

    return _cosine_pending(estimator) and fast_cos.available()


def _cosine_pending(estimator):
    """Whether the estimator's random features use the compiled cosine, not loaded yet."""
    if not getattr(estimator, "_compiled_cosine", False):
        return False
    from ..ops import fast_cos

    return not fast_cos.loaded()


@contextlib.contextmanager
def loaded_first(estimator, method, args, kwargs):
    """Run the block after loading the compiled code of ``estimator.method`` when this is its
    first call in the process (see the module docstring), under the budget that leaves."""
    X = args[0] if args else kwargs.get("X")
    if (getattr(estimator, "_warm_params", None) is None or method not in WARM_METHODS or _WARMING.get()
            or not (isinstance(X, np.ndarray) or sp.issparse(X)) or X.ndim != 2 or X.shape[0] == 0
            or getattr(estimator, "device", None) not in (None, "cpu")):
        yield
        return
    if _numpy_cosine(estimator):
        from ..ops import fast_cos

        with fast_cos.numpy_only(), _first_call(estimator, method, X, args, kwargs, cosine=False):
            yield
    else:
        with _first_call(estimator, method, X, args, kwargs, cosine=True):
            yield


@contextlib.contextmanager
def _first_call(estimator, method, X, args, kwargs, cosine):
    """:func:`loaded_first` once the cosine is settled (``cosine``: the compiled one may load;
    a call that may load it, not loaded yet, is a first call again after calls that left it to numpy)."""
    key = _key(estimator, method, X)
    with _LOCK:
        first = key not in _WARMED or (cosine and _cosine_to_load(estimator))
        _WARMED.add(key)
    if not first:
        yield
        return
    y = args[1] if len(args) > 1 else kwargs.get("y")
    release_freed()  # both readings without the heap's free pages
    before = resident_bytes()
    token = _WARMING.set(True)
    try:
        _warm(estimator, method, X, y, cosine)
    except Exception:  # noqa: BLE001 - the real call reports what is wrong with its input
        pass
    finally:
        _WARMING.reset(token)
    release_freed()  # what the few rows' arrays left in the heap is not loaded code
    grown = max(0, resident_bytes() - before)
    if grown < NOISE_BYTES:
        yield
        return
    budget = parse_memory(getattr(estimator, "max_memory", None))
    if grown >= budget:
        raise ValueError(
            f"max_memory={format_bytes(budget)} is too small for the first {method} of "
            f"{type(estimator).__name__} in this process: loading its compiled loops took {format_bytes(grown)} "
            f"of memory; increase max_memory (later calls in this process do not pay for it again).")
    with budget_cap(budget - grown):
        yield
