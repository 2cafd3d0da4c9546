"""Hostile inputs for every estimator of tests/estimator_list.py (issue 18, "one validation
boundary"); tests/test_estimator_fuzz.py runs a small budget of them in the suite and
benchmarks/tools/fuzz_estimators.py a long campaign of the same cases.

A case is one estimator configuration, optionally one hyperparameter changed with ``set_params``,
training data (X, y, sample_weight) and test data X_test, each either ordinary or mutated
(extreme-but-finite values, constant columns, duplicate rows, other dtypes, NaN/inf, wrong
shapes, empty arrays, one class, many classes, mismatched lengths...). :func:`run_case` fits
(``fit``, or ``partial_fit`` where there is one), then calls every public entry point that exists
(predict, decision_function, predict_proba, predict_log_proba, transform, score) and classifies
the outcome:

``refused``
    a *clear* refusal (see :func:`is_clear`) before or during ``fit``, or of ``X_test``;
``valid``
    every call returned outputs of the right shape that are finite, with probability rows on the
    simplex and predictions among ``classes_`` (two allowances: predict_log_proba may be -inf
    where a probability is 0, and the R^2 ``score`` of a single sample is NaN, as scikit-learn's);
``deep``
    any other exception: the wrong type, or a ValueError/TypeError raised from inside the
    arithmetic whose message does not name the argument (a LinAlgError, a ZeroDivisionError, a
    reshape error, numpy's "could not convert string to float"...);
``silent``
    a result that is wrong without an error: NaN/inf or wrongly-shaped outputs, probability rows
    that are not probabilities, or an invalid input (NaN in y, a negative sample weight, a
    one-class y, a nonsense hyperparameter...) that was accepted;
``timeout``
    (benchmarks only, with a ``time_limit``) a case that ran too long.

The rule for "clear" (:func:`is_clear`): the exception is a ValueError or TypeError (scikit-learn's
InvalidParameterError and NotFittedError are both) AND either the innermost frame of its
traceback (where it was raised) is in one of the validation modules of :data:`VALIDATION_FILES`,
or its message names an argument of the call (not necessarily the one the case mutated, which the
checker cannot always single out): ``X``, ``y``, ``sample_weight``, ``classes`` or a
hyperparameter of the estimator (nested ``kernel__sigma`` counts as ``sigma``; kernel parameter
names count for a kernel given by name), as a whole word (a one-letter hyperparameter such as C only
as ``C=`` or ``'C'``).
"""

from __future__ import annotations

import inspect
import math
import os
import re
import signal
import traceback
import warnings
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st
from sklearn.base import clone, is_classifier, is_regressor

from estimator_list import ESTIMATORS

#: the modules whose ValueError/TypeError is a validation refusal whatever its message
VALIDATION_FILES = (
    os.path.join("kernelscale", "base", "validation.py"),
    os.path.join("kernelscale", "base", "estimator.py"),
    os.path.join("kernelscale", "base", "classifier.py"),
    os.path.join("kernelscale", "base", "params.py"),
    os.path.join("sklearn", "utils", "validation.py"),
    os.path.join("sklearn", "utils", "_param_validation.py"),
    os.path.join("sklearn", "utils", "multiclass.py"),
    os.path.join("sklearn", "utils", "class_weight.py"),
)

#: the public entry points called on a fitted model (those it has)
METHODS = ("predict", "decision_function", "predict_proba", "predict_log_proba", "transform", "score")

#: hyperparameters that count iterations or sizes: their "huge" mutation is kept moderate so a
#: case stays short (10**15 iterations would run for ever rather than fail)
_LOOPS = re.compile(r"(n_iter|max_iter|n_stages|inner_iter|n_averaged)$")

ESTIMATOR_IDS = [f"{i:02d}-{type(e).__name__}" for i, e in enumerate(ESTIMATORS)]


def estimator_kind(estimator):
    if is_classifier(estimator):
        return "classifier"
    if is_regressor(estimator):
        return "regressor"
    return "transformer"


@dataclass
class Case:
    """One fuzz case: what to fit and call, and why it must be refused (empty if it may succeed)."""

    index: int
    seed: int
    params: dict = field(default_factory=dict)
    X: object = None
    y: object = None
    sample_weight: object = None
    X_test: object = None
    y_test: object = None
    partial: bool = False
    #: after the fit, refit (warm_start=True in params) on all rows but the last ``refit_rows``
    refit_rows: int = 0
    must_refuse_fit: list = field(default_factory=list)
    must_refuse_test: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def describe(self):
        def shape(a):
            return f"{type(a).__name__}{getattr(a, 'shape', '')}{getattr(a, 'dtype', '')}"

        return (f"{ESTIMATOR_IDS[self.index]} seed={self.seed} params={self.params!r} X={shape(self.X)} y={shape(self.y)} "
                f"sample_weight={shape(self.sample_weight)} X_test={shape(self.X_test)} partial={self.partial} "
                f"refit_rows={self.refit_rows} "
                f"notes={self.notes} must_refuse={self.must_refuse_fit + self.must_refuse_test}")


# ----------------------------------------------------------------------------------------------
# values

_SCALES = {
    "normal": 1.0, "zero": 0.0, "tiny": 1e-300, "small": 1e-150, "huge150": 1e150, "huge300": 1e300,
    "unit": 1.0, "big": 1e8,
}


def finite_matrix(r, n, d):
    """A finite float64 (n, d) matrix of one value regime (see _SCALES), maybe with mixed column
    scales, constant columns, duplicate rows or rounded to integers."""
    regime = r.choice(sorted(_SCALES))
    seed = r.integers(0, 2**16)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * _SCALES[regime]
    if r.booleans():
        with np.errstate(over="ignore"):
            X *= np.array([r.choice([1.0, 1e-300, 1e-150, 1e150, 1e300, 1e-8, 1e8]) for _ in range(d)])
    if d > 0 and r.integers(0, 3) == 0:
        X[:, r.integers(0, d - 1)] = r.choice([0.0, 1.0, 1e300, -1e-300])
    X = np.clip(X, -1.7e308, 1.7e308)  # mixed scales may overflow: keep the extreme values finite
    if n > 1 and r.integers(0, 3) == 0:
        X[n // 2:] = X[0]
    if r.integers(0, 5) == 0:
        X = np.round(X)
    return X


def _cast(X, dtype, notes, must_refuse, name):
    """X (float64) in the dtype named ``dtype``; records why the result must be refused."""
    if dtype == "float64":
        return X
    if dtype == "float32":
        with np.errstate(over="ignore"):
            out = np.asarray(X).astype(np.float32)
        if not np.all(np.isfinite(out)):
            must_refuse.append(f"{name} overflows float32 to inf")
        return out
    if dtype == "int":
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(np.clip(X, -2**62, 2**62)).astype(np.int64)
    if dtype == "bool":
        return np.asarray(X > 0)
    if dtype == "object":
        return np.asarray(X).astype(object)
    if dtype == "list":
        return np.asarray(X).tolist()
    if dtype == "numeric-string":
        return np.asarray(X).astype(str)
    if dtype in ("torch-meta", "torch-bfloat16"):  # issue 39: refused naming the argument
        try:
            import torch
        except ImportError:
            return X  # float64: nothing to refuse without torch
        if dtype == "torch-meta":
            out = torch.empty(np.shape(X), device="meta")
        else:
            with np.errstate(over="ignore"):
                out = torch.as_tensor(np.asarray(X, dtype=np.float32)).to(torch.bfloat16)
        must_refuse.append(f"{name} is a {dtype} tensor")
        return out
    if dtype == "string":
        out = np.asarray(X).astype(str).astype(object)
        if out.size == 0:
            return out
        out.flat[0] = "abc"
        must_refuse.append(f"{name} holds a non-numeric string")
        return out
    raise AssertionError(dtype)


_DTYPES = (["float64"] * 12 + ["float32"] * 4 + ["int", "bool", "object", "list", "numeric-string", "string"]
           + ["torch-meta", "torch-bfloat16"])


def features(r, n, d, name, must_refuse, notes, hostile=True):
    """X of n rows and d columns, maybe mutated (must_refuse collects the reasons to refuse)."""
    X = finite_matrix(r, n, d)
    if hostile and r.integers(0, 7) == 0:
        kind = r.choice(["nan", "inf", "1d", "3d", "empty-rows", "empty-cols", "scalar"])
        notes.append(f"{name}:{kind}")
        if kind in ("nan", "inf"):
            X.flat[r.integers(0, X.size - 1)] = np.nan if kind == "nan" else -np.inf
            must_refuse.append(f"{name} has {kind}")
        elif kind == "1d":
            X = X[:, 0]
            must_refuse.append(f"{name} is 1-d")
        elif kind == "3d":
            X = X[:, :, None]
            must_refuse.append(f"{name} is 3-d")
        elif kind == "empty-rows":
            X = X[:0]
            must_refuse.append(f"{name} has no rows")
        elif kind == "empty-cols":
            X = X[:, :0]
            must_refuse.append(f"{name} has no columns")
        else:
            X = X[0, 0]
            must_refuse.append(f"{name} is a scalar")
    dtype = r.choice(_DTYPES)
    if not np.all(np.isfinite(X)) and dtype in ("int", "bool"):
        dtype = "float64"  # the cast would hide the NaN/inf
    notes.append(f"{name}:{dtype}")
    return _cast(X, dtype, notes, must_refuse, name)


def targets(r, kind, n, must_refuse, notes):
    """y for a classifier (labels) or a regressor (numbers); None for a transformer."""
    if kind == "transformer":
        return None
    if kind == "classifier":
        mode = r.choice(["two", "two", "few", "many", "one", "strings", "bools", "negative", "nan",
                                     "column", "floats", "mixed"])
        notes.append(f"y:{mode}")
        rng = np.random.default_rng(r.integers(0, 2**16))
        if mode in ("two", "bools", "nan"):
            y = np.arange(n) % 2
        elif mode == "few":
            y = np.arange(n) % 3
        elif mode == "many":
            y = np.arange(n) % max(1, r.integers(2, 40))
        elif mode == "one":
            y = np.zeros(n, dtype=int)
        elif mode == "strings":
            y = np.array(["cat", "dog", "emu"])[np.arange(n) % 3]
        elif mode == "mixed":  # issue 39: ints and strings, which cannot be sorted into classes
            y = np.array([1, "a", 2], dtype=object)[np.arange(n) % 3]
        elif mode == "negative":
            y = np.where(np.arange(n) % 2, -1, 1)
        elif mode == "floats":
            y = (np.arange(n) % 2).astype(float) * 2.0 - 1.0
        else:  # column
            y = (np.arange(n) % 2)[:, None]
        y = y[rng.permutation(n)] if y.ndim == 1 else y
        if mode == "bools":
            y = y.astype(bool)
        if mode == "nan":
            y = y.astype(float)
            y[0] = np.nan
            must_refuse.append("y has NaN")
        if mode == "mixed":
            if n > 1:
                must_refuse.append("y mixes ints and strings")
            else:
                must_refuse.append("y has a single class")
        elif np.unique(np.asarray(y, dtype=object if mode == "strings" else None)).size < 2 and mode != "nan":
            must_refuse.append("y has a single class")
        return y
    mode = r.choice(["normal", "normal", "column", "two-columns", "constant", "huge", "tiny", "int",
                                 "nan", "inf", "strings", "bool"])
    notes.append(f"y:{mode}")
    rng = np.random.default_rng(r.integers(0, 2**16))
    y = rng.normal(size=n)
    if mode == "column":
        y = y[:, None]
    elif mode == "two-columns":
        y = np.c_[y, -2 * y]
    elif mode == "constant":
        y = np.full(n, r.choice([0.0, 3.0, 1e300]))
    elif mode == "huge":
        y = y * r.choice([1e150, 1e300])
    elif mode == "tiny":
        y = y * 1e-300
    elif mode == "int":
        y = np.round(y * 10).astype(int)
    elif mode in ("nan", "inf"):
        y[r.integers(0, n - 1)] = np.nan if mode == "nan" else np.inf
        must_refuse.append(f"y has {mode}")
    elif mode == "strings":
        y = np.array(["a", "b"])[np.arange(n) % 2]
        must_refuse.append("y holds strings for a regressor")
    else:
        y = y > 0
    return y


def weights(r, n, must_refuse, notes):
    mode = r.choice(["none"] * 12 + ["ones", "positive", "some-zero", "all-zero", "huge", "tiny",
                                              "negative", "nan", "inf", "short", "2d", "scalar", "string"])
    notes.append(f"sample_weight:{mode}")
    if mode == "none":
        return None
    rng = np.random.default_rng(r.integers(0, 2**16))
    w = rng.uniform(0.5, 2.0, size=n)
    if mode == "ones":
        w = np.ones(n)
    elif mode == "some-zero":
        w[: n // 2] = 0.0
    elif mode == "all-zero":
        w[:] = 0.0
    elif mode == "huge":
        w *= 1e300
    elif mode == "tiny":
        w *= 1e-300
    elif mode == "negative":
        w[r.integers(0, n - 1)] = -1.0
        must_refuse.append("sample_weight is negative")
    elif mode in ("nan", "inf"):
        w[r.integers(0, n - 1)] = np.nan if mode == "nan" else np.inf
        must_refuse.append(f"sample_weight has {mode}")
    elif mode == "short":
        w = w[:-1] if n > 1 else np.ones(2)
        must_refuse.append("sample_weight has the wrong length")
    elif mode == "2d":
        w = w[:, None] * np.ones((1, 2))
        must_refuse.append("sample_weight is 2-d")
    elif mode == "scalar":
        w = 2.0
    else:
        w = np.array(["x"] * n, dtype=object)
        must_refuse.append("sample_weight holds strings")
    return w


# ----------------------------------------------------------------------------------------------
# hyperparameters


def _parameter_values(name, value):
    """(value, must_refuse) pairs to try for the hyperparameter ``name`` whose current value is
    ``value``."""
    out = [("abc", True), ("1.0", None), (None, None), (-1, None), (0, None), (-2.5, None), (0.5, None),
           (2.5, None), (1e-300, None), (1e300, None), (float("nan"), True), (float("inf"), None), (True, None),
           ([1, 2], None), (np.float32(2.0), None), (np.int64(3), None)]
    out.append((10**3, None) if _LOOPS.search(name) else (10**15, None))
    if not _LOOPS.search(name):
        out.append((10**30, None))  # issue 39: ExactKernelRidge(alpha=10**30), an int numpy cannot take as is
    out.append((10**400, True))  # beyond the float range: refused naming the parameter
    if isinstance(value, bool) or value is None or callable(value):
        out = [("abc", True), (2, None), (None, None), (1.5, None), (True, None), (False, None)]
    return out


def mutable_parameters(estimator):
    """Hyperparameters the fuzzer may change (nested kernel parameters included)."""
    params = estimator.get_params(deep=True)
    return sorted(name for name in params if name not in ("device",))


def hyperparameters(r, estimator, must_refuse, notes):
    if not mutable_parameters(estimator) or r.integers(0, 3) != 0:
        return {}
    params = estimator.get_params(deep=True)
    name = r.choice(mutable_parameters(estimator))
    value, refuse = r.choice(_parameter_values(name, params[name]))
    notes.append(f"param:{name}={value!r}")
    if refuse:
        must_refuse.append(f"{name}={value!r}")
    return {name: value}


# ----------------------------------------------------------------------------------------------
# cases


class Choices:
    """The random choices of one case, from a seed (hypothesis draws the seed: every choice is
    then uniform among its options, rather than biased towards the first ones)."""

    def __init__(self, seed):
        self._rng = np.random.default_rng(seed)

    def choice(self, options):
        return options[int(self._rng.integers(len(options)))]

    def integers(self, low, high):
        """An integer in [low, high], both included."""
        return int(self._rng.integers(low, high + 1))

    def booleans(self):
        return bool(self._rng.integers(2))


def cases(index):
    """The hypothesis strategy of the :class:`Case` s of ``ESTIMATORS[index]``."""
    return st.integers(0, 2**63 - 1).map(lambda seed: make_case(index, seed))


def make_case(index, seed):
    """The :class:`Case` number ``seed`` for ``ESTIMATORS[index]``."""
    r = Choices([index, seed])
    estimator = ESTIMATORS[index]
    kind = estimator_kind(estimator)
    must_fit, must_test, notes = [], [], []
    params = hyperparameters(r, estimator, must_fit, notes)
    n = r.integers(1, 40)
    d = r.integers(1, 6)
    X = features(r, n, d, "X", must_fit, notes)
    y = targets(r, kind, n, must_fit, notes)
    if y is not None and r.integers(0, 11) == 0:
        y = y[:-1] if n > 1 else np.concatenate([y, y])
        must_fit.append("len(y) != len(X)")
        notes.append("y:mismatched")
    if "class_weight" in estimator.get_params() and r.integers(0, 7) == 0:
        weight = bad_class_weight(r, y)
        if weight is not None:
            params["class_weight"], reason = weight
            notes.append(f"param:class_weight={params['class_weight']!r}")
            must_fit.append(reason)
    sample_weight = None
    fit_args = inspect.signature(type(estimator).fit).parameters
    if "sample_weight" in fit_args and y is not None:
        sample_weight = weights(r, n, must_fit, notes)
    n_test = r.integers(1, 40)
    d_test = d if r.integers(0, 9) else r.integers(1, 7)
    if d_test != d:
        must_test.append("X_test has another number of features")
    X_test = features(r, n_test, d_test, "X_test", must_test, notes)
    y_test = None
    if y is not None:
        y_arr = np.asarray(y)
        y_test = y_arr[np.arange(n_test) % y_arr.shape[0]] if y_arr.ndim and y_arr.shape[0] else None
    partial = hasattr(estimator, "partial_fit") and r.integers(0, 3) == 0
    refit_rows = 0
    if "warm_start" in estimator.get_params() and not partial and n > 2 and r.integers(0, 7) == 0:
        params["warm_start"] = True  # issue 39: a warm-started refit on fewer rows
        refit_rows = r.integers(1, n - 2)
        notes.append(f"refit:{refit_rows} rows fewer")
    return Case(index, seed, params, X, y, sample_weight, X_test, y_test, partial, refit_rows, must_fit, must_test,
                notes)


_BAD_CLASS_WEIGHTS = ("negative", "nan", "inf", "huge-int", "all-zero")


def bad_class_weight(r, y):
    """(class_weight, reason) that must be refused for the labels y (issue 39: negative, NaN, inf,
    beyond the float range, or 0 for every class), or None when y has no usable label."""
    try:
        labels = np.unique(np.asarray(y).ravel())
    except TypeError:  # labels that cannot be sorted: refused for that already
        return None
    if labels.size == 0:
        return None
    labels = [label.item() if isinstance(label, np.generic) else label for label in labels]
    kind = r.choice(_BAD_CLASS_WEIGHTS)
    if kind == "all-zero":
        return {label: 0.0 for label in labels}, "class_weight is 0 for every class"
    value = {"negative": -1.0, "nan": float("nan"), "inf": float("inf"), "huge-int": 10**400}[kind]
    return {labels[r.integers(0, len(labels) - 1)]: value}, f"class_weight is {kind}"


def regression_cases(index):
    """The inputs of issue 39 (item 4) that ``ESTIMATORS[index]`` takes, on ordinary data, as
    explicit cases (tests/test_estimator_fuzz.py runs them before the drawn ones): bad class
    weights and mixed labels (classifiers), alpha=10**30 and 10**400, a warm-started refit on
    fewer rows, meta and bfloat16 tensors as X and X_test."""
    estimator = ESTIMATORS[index]
    kind = estimator_kind(estimator)
    params = estimator.get_params()
    rng = np.random.default_rng(39)
    n = 30
    X = rng.normal(size=(n, 3))
    y = {"classifier": np.arange(n) % 2, "regressor": np.sin(X[:, 0])}.get(kind)

    def case(note, params=None, must_fit=(), must_test=(), **changes):
        fields = dict(X=X, y=y, X_test=X[:7], y_test=None if y is None else y[:7])
        fields.update(changes)
        return Case(index, -1, dict(params or {}), must_refuse_fit=list(must_fit), must_refuse_test=list(must_test),
                    notes=[f"regression:{note}"], **fields)

    out = []
    if "class_weight" in params:
        for weight, why in (({0: -1.0}, "negative"), ({0: float("nan")}, "NaN"), ({1: float("inf")}, "inf"),
                            ({0: 0, 1: 0}, "all zero")):
            out.append(case(f"class_weight {why}", {"class_weight": weight}, [f"class_weight {why}"]))
    if kind == "classifier":
        mixed = np.array([1, "a"], dtype=object)[np.arange(n) % 2]
        out.append(case("mixed labels", must_fit=["y mixes ints and strings"], y=mixed, y_test=mixed[:7]))
    if "alpha" in params and not isinstance(params["alpha"], str):
        out.append(case("alpha=10**30", {"alpha": 10**30}))
        out.append(case("alpha=10**400", {"alpha": 10**400}, ["alpha beyond the float range"]))
    if "warm_start" in params and y is not None:
        out.append(case("warm-started refit on fewer rows", {"warm_start": True}, refit_rows=9))
    for dtype in ("torch-meta", "torch-bfloat16"):
        must = []
        tensor = _cast(X, dtype, [], must, "X")
        if must:  # torch is installed
            out.append(case(f"{dtype} X", must_fit=must, X=tensor))
            out.append(case(f"{dtype} X_test", must_test=[f"X_test is a {dtype} tensor"],
                            X_test=_cast(X[:7], dtype, [], [], "X_test")))
    return out


# ----------------------------------------------------------------------------------------------
# running a case


class CaseTimeout(BaseException):
    """A case ran past its time limit (benchmarks only)."""


def innermost_frame(err):
    tb = err.__traceback__
    if tb is None:
        return "?", 0, "?"
    last = traceback.extract_tb(tb)[-1]
    return last.filename, last.lineno, last.name


def _short(path):
    parts = path.replace("\\", "/").split("/")
    for root in ("kernelscale", "sklearn", "numpy", "scipy"):
        if root in parts:
            return "/".join(parts[parts.index(root):])
    return "/".join(parts[-2:])


def argument_names(case, estimator):
    names = {"X", "y", "sample_weight", "classes", "X_test", "kernel", "sigma", "nu", "degree", "gamma", "coef0"}
    for name in estimator.get_params(deep=True):
        names.add(name)
        names.add(name.split("__")[-1])
    return names


def is_clear(err, names):
    """The rule of the module docstring: a ValueError/TypeError raised by validation code, or
    naming one of ``names``."""
    if not isinstance(err, (ValueError, TypeError)):
        return False
    filename = innermost_frame(err)[0]
    if any(filename.endswith(f) for f in VALIDATION_FILES):
        return True
    message = str(err)
    return any(re.search(_name_pattern(name), message) for name in names)


def _name_pattern(name):
    """A whole-word match of ``name``; a one-letter hyperparameter (C, L) only as ``C=`` or ``'C'``
    (a bare "C" is too common: "C-contiguous")."""
    if len(name) == 1 and name not in ("X", "y"):
        return rf"(?<![\w.]){name}=|'{name}'"
    return rf"(?<![\w.]){re.escape(name)}(?![\w-])"


def describe_error(err):
    filename, lineno, func = innermost_frame(err)
    message = str(err).splitlines()[0][:160] if str(err) else ""
    return f"{type(err).__name__} at {_short(filename)}:{lineno} ({func}): {message}"


def _check_outputs(method, out, estimator, case, n_test):
    """A list of problems with the output of ``method`` (empty when it is valid)."""
    problems = []
    kind = estimator_kind(estimator)
    if method == "score":
        value = float(out)
        # R^2 of fewer than two samples is undefined: scikit-learn's r2_score returns NaN
        if not math.isfinite(value) and not (kind == "regressor" and n_test < 2):
            problems.append(f"score {value}")
        return problems
    out = np.asarray(out)
    if method == "predict" and kind == "classifier":
        if out.shape != (n_test,):
            problems.append(f"predict shape {out.shape} != ({n_test},)")
        elif not np.all(np.isin(out, estimator.classes_)):
            problems.append("predict returns labels outside classes_")
        return problems
    if out.dtype.kind not in "fiub":
        return [f"{method} dtype {out.dtype}"]
    if out.shape[:1] != (n_test,):
        problems.append(f"{method} shape {out.shape}, expected {n_test} rows")
    if method == "predict_log_proba":
        if np.any(np.isnan(out)) or np.any(out > 1e-6):
            problems.append(f"{method} has NaN or positive values")
        return problems
    if not np.all(np.isfinite(out)):
        problems.append(f"{method} returns NaN or infinity")
        return problems
    if kind == "classifier":
        n_classes = len(estimator.classes_)
        if method == "predict_proba":
            if out.shape != (n_test, n_classes):
                problems.append(f"predict_proba shape {out.shape} != ({n_test}, {n_classes})")
            tol = 1e-4 if out.dtype == np.float32 else 1e-8
            if out.min(initial=0) < -tol or out.max(initial=0) > 1 + tol:
                problems.append(f"predict_proba outside [0, 1]: [{out.min()}, {out.max()}]")
            if out.size and np.max(np.abs(out.sum(axis=1) - 1)) > tol * max(1, n_classes):
                problems.append(f"predict_proba rows sum to {out.sum(axis=1).min()}..{out.sum(axis=1).max()}")
        if method == "decision_function":
            expected = (n_test,) if n_classes == 2 else (n_test, n_classes)
            if out.shape != expected:
                problems.append(f"decision_function shape {out.shape} != {expected}")
    elif kind == "regressor" and method == "predict":
        y_shape = np.shape(case.y)
        expected = (n_test,) if len(y_shape) == 1 else (n_test, y_shape[1])
        if out.shape != expected and not (len(y_shape) == 2 and y_shape[1] == 1 and out.shape == (n_test,)):
            problems.append(f"predict shape {out.shape} != {expected}")
    elif method == "transform" and out.ndim != 2:
        problems.append(f"transform shape {out.shape}")
    return problems


def _fit(estimator, case):
    kwargs = {} if case.sample_weight is None else {"sample_weight": case.sample_weight}
    if case.y is None:
        return estimator.fit(case.X)
    if case.partial:
        if is_classifier(estimator):
            try:
                classes = np.unique(np.asarray(case.y))
            except TypeError:
                classes = None
            kwargs["classes"] = classes
        estimator.partial_fit(case.X, case.y, **kwargs)
        kwargs.pop("classes", None)
        return estimator.partial_fit(case.X, case.y, **kwargs)
    estimator.fit(case.X, case.y, **kwargs)
    if case.refit_rows:  # warm_start=True: the same model refitted on fewer rows
        keep = np.shape(case.X)[0] - case.refit_rows
        if np.ndim(case.sample_weight) == 1 and np.shape(case.sample_weight)[0] == np.shape(case.X)[0]:
            kwargs["sample_weight"] = case.sample_weight[:keep]
        estimator.fit(case.X[:keep], case.y[:keep], **kwargs)
    return estimator


def run_case(case, time_limit=None):
    """Run ``case``; return (outcome, detail) with outcome in refused/valid/deep/silent/timeout."""
    estimator = clone(ESTIMATORS[case.index])
    names = argument_names(case, estimator)
    if time_limit:
        def _alarm(signum, frame):
            raise CaseTimeout()
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, time_limit)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                estimator.set_params(**case.params)
                _fit(estimator, case)
            except CaseTimeout:
                return "timeout", f"fit ran past {time_limit} s"
            except Exception as err:  # noqa: BLE001 - classified here
                if is_clear(err, names):
                    return "refused", describe_error(err)
                return "deep", "fit: " + describe_error(err)
            if case.must_refuse_fit:
                return "silent", f"fit accepted invalid input: {case.must_refuse_fit}"
            n_test = np.shape(case.X_test)[0] if np.ndim(case.X_test) else 0
            problems, refused = [], []
            for method in METHODS:
                if not hasattr(estimator, method):
                    continue
                args = (case.X_test, case.y_test) if method == "score" else (case.X_test,)
                if method == "score" and case.y_test is None:
                    continue
                try:
                    out = getattr(estimator, method)(*args)
                except CaseTimeout:
                    return "timeout", f"{method} ran past {time_limit} s"
                except Exception as err:  # noqa: BLE001
                    if is_clear(err, names):
                        refused.append(f"{method}: {describe_error(err)}")
                        continue
                    return "deep", f"{method}: " + describe_error(err)
                if case.must_refuse_test:
                    return "silent", f"{method} accepted invalid X_test: {case.must_refuse_test}"
                problems += _check_outputs(method, out, estimator, case, n_test)
            if problems:
                return "silent", "; ".join(problems)
            if refused:
                return "refused", refused[0]
            return "valid", ""
    except CaseTimeout:
        return "timeout", f"ran past {time_limit} s"
    finally:
        if time_limit:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
