"""The first call in a process within its memory budget: compiled code loaded before planning.

An estimator whose methods run compiled code loaded on first use (numba's loops, scipy's and
LAPACK's modules; a class with ``_warm_params``) pays, on the first call of a method in a process,
for importing and loading (or compiling) that code: 50-150 MiB of resident memory that no plan of
blocks counts. So the first call of each
method per (class, dtype, sparse or dense input) first runs the same method on a few rows of the
caller's data (for ``fit``, a fresh estimator with the same parameters but the few iterations of
``_warm_params``), measures how much that
grew the resident set, and runs the real call under a budget smaller by that much
(:func:`kernelscale.ops.memory.budget_cap`). Later calls find the code loaded and keep the
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

from ..ops.memory import budget_cap, format_bytes, parse_memory, resident_bytes

__all__ = ["WARM_METHODS", "loaded_first"]

#: the methods whose first call loads compiled code
WARM_METHODS = ("fit", "partial_fit", "predict", "decision_function", "predict_proba", "transform")
#: rows of each class (of the first rows, for a regressor) the warm-up call runs on
WARM_ROWS = 64
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


def _fresh_copy(estimator):
    """An unfitted copy that neither prints, calls back, nor draws from the caller's generator,
    and stops after the few iterations of ``_warm_params``."""
    params = estimator.get_params(deep=False)
    quiet = {"verbose": 0, "callback": None, "random_state": 0, "warm_start": False, **estimator._warm_params}
    return clone(estimator).set_params(**{k: v for k, v in quiet.items() if k in params})


def _warm(estimator, method, X, y):
    Xs, ys = _sample(X, y, is_classifier(estimator))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method in ("fit", "partial_fit"):
            copy = _fresh_copy(estimator)
            copy.fit(Xs) if ys is None else copy.fit(Xs, ys)
            if hasattr(copy, "transform"):
                copy.transform(Xs)
        else:
            getattr(estimator, method)(Xs)


def _key(estimator, method, X):
    return type(estimator), method, np.dtype(X.dtype).str, sp.issparse(X)


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
    key = _key(estimator, method, X)
    with _LOCK:
        first = key not in _WARMED
        _WARMED.add(key)
    if not first:
        yield
        return
    y = args[1] if len(args) > 1 else kwargs.get("y")
    before = resident_bytes()
    token = _WARMING.set(True)
    try:
        _warm(estimator, method, X, y)
    except Exception:  # noqa: BLE001 - the real call reports what is wrong with its input
        pass
    finally:
        _WARMING.reset(token)
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
