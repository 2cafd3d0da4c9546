"""Input validation shared by every kernelscale function and estimator.

One place for the conventions of DESIGN.md: float32 stays float32, anything else numeric becomes
float64; NaN/inf, empty arrays, wrong shapes and non-positive hyperparameters raise a ValueError
(non-numeric data a TypeError) that names the argument and the fix. Nothing is altered silently.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils import check_array

FLOAT_DTYPES = (np.float64, np.float32)


def as_float_array(X, name="X", *, ensure_2d=True, allow_empty=False, copy=False):
    """Validate `X` as a finite float32/float64 array (float32 is kept, other numbers -> float64).

    Raises a ValueError naming `name` for NaN/inf, empty input or a wrong number of dimensions,
    and a TypeError for non-numeric data.
    """
    dtype = getattr(X, "dtype", None)
    if dtype is not None and np.dtype(dtype).kind not in "biuf":
        raise TypeError(
            f"{name} has dtype {dtype}, which is not numeric; convert it to numbers first, "
            f"e.g. np.asarray({name}, dtype=np.float64)."
        )
    try:
        return check_array(
            X,
            dtype=FLOAT_DTYPES,
            ensure_2d=ensure_2d,
            ensure_min_samples=0 if allow_empty else 1,
            ensure_min_features=0 if allow_empty else 1,
            ensure_all_finite=True,
            input_name=name,
            copy=copy,
        )
    except ValueError as err:
        raise _explain(err, name) from err


def _explain(err, name):
    """Turn scikit-learn's validation message into one that names the argument and the fix."""
    msg = str(err)
    if "could not convert" in msg:
        return TypeError(f"{name} must hold numbers only ({msg}); encode non-numeric columns first.")
    if "NaN" in msg or "infinity" in msg:
        return ValueError(
            f"{name} contains NaN or infinity; drop or impute those entries "
            f"(e.g. sklearn.impute.SimpleImputer) before passing {name}."
        )
    if "minimum of" in msg:
        return ValueError(f"{name} is empty ({msg}); pass at least one sample and one feature.")
    if not msg.startswith(name):
        msg = f"{name}: {msg}"
    return ValueError(msg)


def result_dtype(*arrays):
    """The float dtype computations on these arrays run in: float32 only if all are float32."""
    return np.result_type(*[a.dtype for a in arrays], np.float32)


def check_positive(value, name, *, allow_zero=False, integer=False):
    """Return `value` if it is a positive (or non-negative) finite number, else raise naming it."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        what = "an integer" if integer else "a number"
        raise TypeError(f"{name} must be {what}, got {value!r} of type {type(value).__name__}.")
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}; pass a value {bound}.")
    return value


def check_same_features(X, n_features, name="X"):
    """Raise if `X` does not have the `n_features` columns seen at fit time."""
    if X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but {n_features} were expected (the number seen "
            f"when fitting); pass data with the same columns as the training data."
        )
