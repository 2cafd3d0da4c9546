"""Input validation shared by every kernelscale function and estimator.

One place for the rules of docs/conventions.md: float32 stays float32, anything else numeric becomes
float64; NaN/inf, empty arrays, wrong shapes and non-positive hyperparameters raise a ValueError
(non-numeric data a TypeError) that names the argument and the fix. Nothing is altered silently.
"""

from __future__ import annotations

import math
import numbers
import traceback

import numpy as np
import scipy.sparse as sp
from sklearn.base import is_classifier
from sklearn.utils import check_array
from sklearn.utils.validation import _check_sample_weight
from sklearn.utils.validation import validate_data as _sklearn_validate_data

FLOAT_DTYPES = (np.float64, np.float32)


def is_tensor(a):
    """True for a torch tensor (without importing torch)."""
    return type(a).__module__.split(".")[0] == "torch" and hasattr(a, "detach")


def check_tensor(a, name):
    """Refuse, naming the argument, a torch tensor that has no values to copy to the host (on the
    "meta" device) or whose dtype numpy cannot hold (bfloat16, the float8 types)."""
    if not is_tensor(a):
        return a
    if a.device.type == "meta":
        raise ValueError(
            f"{name} is a torch tensor on the 'meta' device, which holds a shape but no values; pass {name} "
            f"with data, on 'cpu' or a CUDA device (e.g. a tensor created with device='cpu'), or a numpy array."
        )
    dtype = str(a.dtype)
    if "bfloat16" in dtype or "float8" in dtype:
        raise TypeError(
            f"{name} is a torch tensor of dtype {dtype}, which numpy (and so kernelscale) cannot hold; pass "
            f"{name}.float() (float32, computed in float32) or {name}.double() (float64)."
        )
    return a


def as_float_array(X, name="X", *, ensure_2d=True, allow_empty=False, copy=False, accept_sparse=False):
    """Validate `X` as a finite float32/float64 array (float32 is kept, other numbers -> float64).

    Raises a ValueError naming `name` for NaN/inf, empty input or a wrong number of dimensions,
    and a TypeError for non-numeric data (:func:`check_tensor`: for torch tensors numpy cannot hold).
    ``accept_sparse``: a scipy.sparse `X` is checked (:func:`check_sparse`) and returned as CSR
    (the same matrix when it already is one in float32/float64; its values are never changed),
    else refused with scikit-learn's message.
    """
    check_tensor(X, name)
    if accept_sparse and sp.issparse(X):
        return as_float_csr(X, name, allow_empty=allow_empty, copy=copy)
    dtype = getattr(X, "dtype", None)
    if dtype is not None and np.dtype(dtype).kind not in "biuf":
        raise TypeError(
            f"{name} has dtype {dtype}, which is not numeric; convert it to numbers first, "
            f"e.g. np.asarray({name}, dtype=np.float64)."
        )
    if type(X) is np.ndarray and X.ndim == 2 and X.dtype in FLOAT_DTYPES and min(X.shape) >= 1 and not copy:
        with np.errstate(over="ignore", invalid="ignore"):  # a sum overflowing: check_array decides
            finite = np.isfinite(X.sum())
        if finite:  # the common case without check_array's ~0.1 ms
            return X
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


def as_float_csr(X, name="X", *, allow_empty=False, copy=False):
    """A scipy.sparse `X` checked (:func:`check_sparse`) and returned as CSR of float32 (kept) or
    float64 (anything else), keeping its class (sparse matrix or sparse array)."""
    check_sparse(X, name)
    try:
        return check_array(X, accept_sparse="csr", dtype=FLOAT_DTYPES, ensure_min_samples=0 if allow_empty else 1,
                           ensure_min_features=0 if allow_empty else 1, ensure_all_finite=True, input_name=name,
                           copy=copy)
    except ValueError as err:
        raise _explain(err, name) from err


def array_bytes(a):
    """Bytes an array holds: ``a.nbytes``, or a scipy.sparse matrix's stored arrays."""
    if sp.issparse(a):
        return sum(getattr(a, name).nbytes for name in ("data", "indices", "indptr", "row", "col") if hasattr(a, name))
    return a.nbytes


def as_rows(X, dtype=None):
    """X as the row store the ops take: a C-ordered array of ``dtype`` (no copy when it already
    is one), or for scipy.sparse X a CSR matrix of ``dtype`` (kept sparse)."""
    if sp.issparse(X):
        X = X.tocsr() if X.format != "csr" else X
        return X if dtype is None or X.dtype == dtype else X.astype(dtype)
    return np.ascontiguousarray(X, dtype=dtype)


def _explain(err, name):
    """Turn scikit-learn's validation message into one that names the argument and the fix."""
    msg = str(err)
    if "could not convert" in msg:
        return TypeError(f"{name} must hold numbers only ({msg}); encode non-numeric columns first.")
    if "NaN" in msg or "infinity" in msg:
        return _non_finite(name)
    if "minimum of" in msg:
        return ValueError(f"{name} is empty ({msg}); pass at least one sample and one feature.")
    if not msg.startswith(name):
        msg = f"{name}: {msg}"
    return ValueError(msg)


def _non_finite(name):
    return ValueError(
        f"{name} contains NaN or infinity; drop or impute those entries "
        f"(e.g. sklearn.impute.SimpleImputer) before passing {name}."
    )


def _conversion_error(err, default="X"):
    """The TypeError naming the argument for a failed float conversion inside scikit-learn's
    validation (numpy's "could not convert string to float" or "float() argument must be a string
    or a real number"), or None when `err` is something else. The argument is read from the
    validation frames the error went through (``_check_y``: y, ``_check_sample_weight``:
    sample_weight, else `default`); the original message is kept (scikit-learn's estimator checks
    match it)."""
    msg = str(err)
    if not ("could not convert" in msg or "argument must be" in msg or "invalid literal" in msg):
        return None
    frames = {frame.name for frame in traceback.extract_tb(err.__traceback__)}
    name = "sample_weight" if "_check_sample_weight" in frames else "y" if "_check_y" in frames else default
    return TypeError(f"{name} must hold numbers only ({msg}); encode non-numeric values as numbers first "
                     f"(e.g. np.asarray({name}, dtype=np.float64) for numeric strings).")


def validate_data(estimator, X="no_validation", y="no_validation", **kwargs):
    """scikit-learn's ``validate_data`` whose conversion errors name the argument (a TypeError
    naming X, y or sample_weight rather than numpy's bare "could not convert string to float"),
    that refuses a non-numeric y when ``y_numeric=True`` (scikit-learn converts only object
    arrays: a string array would reach the arithmetic), and a classifier's labels mixing strings
    with numbers (:func:`check_label_types`)."""
    check_tensor(X, "X")
    check_tensor(y, "y")
    if sp.issparse(X):  # every estimator takes scipy.sparse X as CSR (kernels and features from its nonzeros)
        check_sparse(X, "X")  # before scipy's conversions or compiled code read its indices
        kwargs.setdefault("accept_sparse", "csr")
    try:
        out = _sklearn_validate_data(estimator, X, y, **kwargs)
    except (ValueError, TypeError) as err:
        better = _conversion_error(err, "X")
        if better is None:
            raise
        raise better from err
    has_y = not (isinstance(y, str) and y == "no_validation") and y is not None
    if kwargs.get("y_numeric") and has_y:
        check_numeric_target(out[1], "y")
    if has_y and is_classifier(estimator):
        check_label_types(out[1], "y")
    return out


def check_numeric_target(y, name="y"):
    """Raise a TypeError naming `name` unless the (validated) array `y` holds numbers."""
    kind = np.asarray(y).dtype.kind
    if kind not in "biuf":
        raise TypeError(f"{name} has dtype {np.asarray(y).dtype}, but a regressor needs numeric targets; "
                        f"convert {name} to numbers first (e.g. np.asarray({name}, dtype=np.float64)).")
    return y


def check_sample_weight(sample_weight, X, dtype=None, ensure_non_negative=True):
    """scikit-learn's ``_check_sample_weight`` (non-negative, one finite weight per sample, at least
    one positive) whose conversion errors name sample_weight."""
    check_tensor(sample_weight, "sample_weight")
    try:
        return _check_sample_weight(sample_weight, X, dtype=dtype, ensure_non_negative=ensure_non_negative)
    except (ValueError, TypeError) as err:
        better = _conversion_error(err, "sample_weight")
        if better is None:
            raise
        raise better from err


def result_dtype(*arrays):
    """The float dtype computations on these arrays run in: float32 only if all are float32."""
    return np.result_type(*[a.dtype for a in arrays], np.float32)


def float_value(value):
    """``float(value)`` of a real number, +-inf for an integer beyond the float range (about
    1.8e308), where ``float`` raises OverflowError (and numpy's ufuncs a TypeError)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def number_repr(value):
    """A short repr of a number: an integer of hundreds of digits is shown by its magnitude
    (Python refuses to print one of more than 4300 digits)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(int(value)) > 10**20:
        return f"{'-' if value < 0 else ''}~10**{int(abs(int(value)).bit_length() * math.log10(2))}"
    return repr(value)


def check_positive(value, name, *, allow_zero=False, integer=False):
    """Return `value` if it is a positive (or non-negative) finite number, else raise naming it.
    A Python integer counts as finite when it is within the float range."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        what = "an integer" if integer else "a number"
        raise TypeError(f"{name} must be {what}, got {value!r} of type {type(value).__name__}.")
    number = float_value(value)
    if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound} (within the float range, about 1.8e308), got "
                         f"{number_repr(value)}; pass a value {bound}.")
    return value


def check_label_types(y, name="y"):
    """Return the labels `y`, or raise a ValueError naming `name` when they mix strings with other
    values (1 and "a"): such labels cannot be sorted into ``classes_`` (numpy's sort raises
    "'<' not supported between instances of 'int' and 'str'")."""
    y = np.asarray(y) if not hasattr(y, "dtype") else y
    if y.dtype != object or y.size == 0:
        return y  # a numeric or a str array holds one kind of label
    flat = np.asarray(y).ravel()
    is_str = np.fromiter((isinstance(v, (str, bytes)) for v in flat), dtype=bool, count=flat.size)
    if is_str.any() and not is_str.all():
        raise ValueError(
            f"{name} mixes strings with other labels (e.g. {flat[np.argmax(is_str)]!r} and "
            f"{flat[np.argmin(is_str)]!r}), which cannot be ordered into classes; give every label one "
            f"type, e.g. {name} = np.asarray({name}).astype(str)."
        )
    return y


def check_finite_result(values, what, name="X"):
    """Return `values`, or raise a ValueError if computing them from the finite `name` overflowed."""
    if not np.all(np.isfinite(values)):
        raise ValueError(
            f"{what} for {name} contain NaN or infinity although {name} is finite: its values are too "
            f"large for the model's arithmetic (e.g. a polynomial kernel overflows); rescale {name} "
            f"(e.g. sklearn.preprocessing.StandardScaler in a Pipeline) and refit."
        )
    return values


def check_same_features(X, n_features, name="X"):
    """Raise if `X` does not have the `n_features` columns seen at fit time."""
    if X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but {n_features} were expected (the number seen "
            f"when fitting); pass data with the same columns as the training data."
        )


_REBUILD = ("build it with the scipy.sparse constructors (e.g. scipy.sparse.csr_matrix((data, indices, indptr), "
            "shape=shape)) rather than by editing its arrays")


def check_sparse(X, name="X"):
    """Check the structure of a scipy.sparse `X` before any compiled code reads it; return `X`.

    CSR/CSC/BSR: int32/int64 index arrays, ``indptr`` of length n_major + 1 starting at 0,
    non-decreasing and ending at len(indices) == len(data), every index in [0, n_minor). COO: row
    and column indices in range. Other formats are checked through ``tocoo()``. Data must be
    finite numbers. Raises a ValueError (TypeError for non-numeric data) naming `name`; anything
    that is not scipy.sparse is returned unchecked.
    """
    if not sp.issparse(X):
        return X
    shape = X.shape
    if len(shape) != 2 or min(shape) < 0:
        raise ValueError(f"{name} must be a 2-d sparse matrix, got shape {shape}; {_REBUILD}.")
    if X.format in ("csr", "csc", "bsr", "coo") and not isinstance(X.data, np.ndarray):
        raise ValueError(f"{name}.data must be a numpy array, got {type(X.data).__name__}; {_REBUILD}.")
    if X.format in ("csr", "csc", "bsr"):
        _check_compressed(X, name)
    elif X.format == "coo":
        if X.data.ndim != 1:
            raise ValueError(f"{name}.data must be 1-d, got shape {X.data.shape}; {_REBUILD}.")
        for axis, index in enumerate((X.row, X.col)):
            _check_indices(index, shape[axis], X.data.shape[0], f"{name}.{('row', 'col')[axis]}", name)
    else:  # lil, dok, dia: converted by numpy-level code that checks its indices
        try:
            coo = X.tocoo()
        except (ValueError, IndexError, TypeError) as err:
            raise ValueError(f"{name} is not a valid {X.format} matrix ({err}); {_REBUILD}.") from err
        check_sparse(coo, name)
        return X
    _check_sparse_data(X.data, name)
    return X


def csr_parts(X):
    """For a scipy.sparse CSR matrix or array X, ``({"container", "shape"}, {"data", "indices",
    "indptr"})`` as kernelscale.save stores it (:func:`csr_from_parts` rebuilds it); else None."""
    if type(X) not in (sp.csr_matrix, sp.csr_array):
        return None
    header = {"container": "array" if isinstance(X, sp.sparray) else "matrix", "shape": list(X.shape)}
    return header, {"data": X.data, "indices": X.indices, "indptr": X.indptr}


def csr_from_parts(body, decoder, name="X"):
    """The CSR matrix (or array) a saved ``{"container", "shape", "data", "indices", "indptr"}``
    describes (:func:`csr_parts`), its three ``{"__ndarray__": ...}`` read by the persistence
    decoder's ``array(ref, where)`` and checked (:func:`check_sparse`) before anything reads them;
    otherwise the decoder's ``fail(name, message)`` is raised."""
    fail = decoder.fail
    shape = body.get("shape") if isinstance(body, dict) else None
    if not (isinstance(body, dict) and set(body) == {"container", "shape", "data", "indices", "indptr"}
            and body["container"] in ("matrix", "array") and isinstance(shape, list) and len(shape) == 2
            and all(type(n) is int and n >= 0 for n in shape)):
        raise fail(name, "__sparse__ must hold container ('matrix' or 'array'), shape, data, indices and indptr")
    matrix = (sp.csr_array if body["container"] == "array" else sp.csr_matrix)(tuple(shape))
    refs = [body[k].get("__ndarray__") if isinstance(body[k], dict) else None for k in ("data", "indices", "indptr")]
    if any(ref is None for ref in refs):
        raise fail(name, "__sparse__ data, indices and indptr must each be an __ndarray__")
    matrix.data, matrix.indices, matrix.indptr = (decoder.array(ref, f"{name}.{k}") for ref, k in
                                                  zip(refs, ("data", "indices", "indptr")))
    try:
        return check_sparse(matrix, name)
    except (ValueError, TypeError) as err:
        raise fail(name, f"invalid sparse matrix ({err})") from err


def _check_compressed(X, name):
    """The CSR/CSC/BSR part of :func:`check_sparse`."""
    block = X.blocksize if X.format == "bsr" else (1, 1)
    major, minor = (0, 1) if X.format != "csc" else (1, 0)
    n_major, n_minor = X.shape[major] // block[major], X.shape[minor] // block[minor]
    indptr = _index_array(X.indptr, f"{name}.indptr", name)
    if indptr.shape[0] != n_major + 1:
        raise ValueError(f"{name}.indptr has {indptr.shape[0]} entries but {name} has {n_major} "
                         f"{'rows' if major == 0 else 'columns'} (needs {n_major + 1}); {_REBUILD}.")
    nnz = int(indptr[-1])
    if indptr[0] != 0 or np.any(indptr[1:] < indptr[:-1]):
        raise ValueError(f"{name}.indptr must start at 0 and never decrease; {_REBUILD}.")
    if X.data.shape[:1] != (nnz,) or X.data.shape[1:] != (block if X.format == "bsr" else ()):
        raise ValueError(f"{name}.data has shape {X.data.shape} but {name}.indptr ends at {nnz} stored entries; "
                         f"{_REBUILD}.")
    _check_indices(X.indices, n_minor, nnz, f"{name}.indices", name)


def _index_array(index, what, name):
    """`index` as a 1-d int32/int64 array, or a ValueError naming `what`."""
    if not isinstance(index, np.ndarray) or index.ndim != 1 or index.dtype not in (np.int32, np.int64):
        raise ValueError(f"{what} must be a 1-d int32 or int64 array, got "
                         f"{getattr(index, 'dtype', type(index).__name__)} of shape {np.shape(index)}; {_REBUILD}.")
    return index


def _check_indices(index, bound, length, what, name):
    """Raise unless `index` is a 1-d int32/int64 array of `length` entries in [0, bound)."""
    index = _index_array(index, what, name)
    if index.shape[0] != length:
        raise ValueError(f"{what} has {index.shape[0]} entries but {name} stores {length}; {_REBUILD}.")
    if length and (index.min() < 0 or index.max() >= bound):
        raise ValueError(f"{what} holds indices outside [0, {bound}) (min {index.min()}, max {index.max()}), "
                         f"which do not fit the shape of {name}; {_REBUILD}.")


def _check_sparse_data(data, name):
    """Raise unless the stored values of a sparse matrix are finite numbers."""
    if data.dtype.kind not in "biuf":
        raise TypeError(f"{name} has dtype {data.dtype}, which is not a real number type; "
                        f"convert it first, e.g. {name}.astype(np.float64).")
    if data.dtype.kind == "f" and not np.all(np.isfinite(data)):
        raise _non_finite(name)


def normalized_weights(sample_weight, n):
    """float64 weights summing to 1 (uniform 1/n when None)."""
    if sample_weight is None:
        return np.full(n, 1.0 / n)
    w = as_float_array(sample_weight, "sample_weight", ensure_2d=False).astype(np.float64, copy=False)
    if w.shape != (n,) or np.any(w < 0):
        raise ValueError(f"sample_weight must be a non-negative array of shape ({n},), got shape {w.shape}.")
    total = w.sum()
    if not total > 0:
        raise ValueError("sample_weight sums to zero; give at least one sample a positive weight.")
    return w / total
