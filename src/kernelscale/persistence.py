"""Save and load kernelscale models without pickle: one .npz archive with JSON metadata.

File format (version 1)
-----------------------
A model file is an ordinary numpy ``.npz`` archive (``np.load(path, allow_pickle=False)`` reads
it) holding:

- ``__kernelscale__``: a 1-d uint8 array, the UTF-8 bytes of a JSON document
  (``json.loads(bytes(f["__kernelscale__"]).decode())``);
- ``a0``, ``a1``, ...: the model's arrays, referenced from the JSON.

The JSON document is::

    {"format": "kernelscale-model", "format_version": 1, "kernelscale_version": "0.1.0",
     "class": "kernelscale.module.ClassName", "params": {...}, "fitted": {...}}

``params`` are the constructor parameters (``get_params(deep=False)``), ``fitted`` the fitted
attributes (every attribute of the instance ending in "_" and not starting with "_"). Values are
JSON values (null, true/false, integers, finite floats, strings, lists, objects with string keys)
or objects with exactly one key naming a tag:

- ``{"__float__": "nan" | "inf" | "-inf"}``: a non-finite Python float;
- ``{"__tuple__": [...]}``: a tuple (lists are JSON arrays);
- ``{"__dict__": {...}}``: a dict some of whose keys start with "__" (others are plain objects);
- ``{"__ndarray__": {"key": "a3", "dtype": "<f4", "shape": [10, 2]}}``: the array stored under
  ``a3``; ``"object_str": true`` marks an object array of str (e.g. ``feature_names_in_``),
  stored as a unicode array; an array object referenced twice is stored once (and shared again
  after loading);
- ``{"__scalar__": {"key": "a4", "dtype": "<f4"}}``: a numpy scalar, stored as a 0-d array;
- ``{"__dtype__": "<f4"}``: a numpy dtype; ``{"__type__": "numpy.float32"}`` or
  ``{"__type__": "float"}``: a numpy scalar type or a builtin number type;
- ``{"__object__": {"class": ..., "params": {...}, "fitted": {...}}}``: a nested kernelscale object:
  a kernel or an estimator, or a dataclass defined in kernelscale (e.g. a random-feature block),
  whose ``params`` are its ``__init__`` fields and ``fitted`` is empty.

Loading (:func:`load`) never unpickles and never executes code from the file: it accepts only
classes defined in kernelscale that derive from ``sklearn.base.BaseEstimator`` (or are
dataclasses), builds them with ``cls(**params)`` (which only stores the parameters) and sets the
fitted attributes.

Saving refuses what the format cannot hold (TypeError naming the attribute), except two
constructor parameters: a callable ``callback`` and a ``random_state`` given as a
``RandomState``/``Generator`` are saved as None, with a :class:`PersistenceWarning`.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
import types
import warnings
import zipfile
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator

__all__ = ["save", "load", "describe", "FORMAT", "FORMAT_VERSION", "PersistenceWarning"]

FORMAT = "kernelscale-model"
FORMAT_VERSION = 1
#: format versions this kernelscale can read
READABLE_VERSIONS = (1,)
META_KEY = "__kernelscale__"

_ARRAY_KINDS = "biufcUS"
_TAGS = ("__float__", "__tuple__", "__dict__", "__ndarray__", "__scalar__", "__dtype__",
         "__type__", "__object__")
_BUILTIN_TYPES = {"float": float, "int": int, "bool": bool, "complex": complex, "str": str}


class PersistenceWarning(UserWarning):
    """A value could not be saved as is and was replaced (see :func:`save`)."""


def _version():
    from . import __version__

    return __version__


# ----------------------------------------------------------------------------------------------
# encoding


class _Encoder:
    def __init__(self):
        self.arrays = {}
        self._seen = {}  # id(array) -> key: an array referenced twice is stored once

    def _store(self, arr, original=None):
        if original is not None and id(original) in self._seen:
            return self._seen[id(original)][0]
        key = f"a{len(self.arrays)}"
        self.arrays[key] = arr
        if original is not None:
            self._seen[id(original)] = (key, original)  # keeps it alive, so the id stays unique
        return key

    def value(self, v, where):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int) and type(v) is int:
            return v
        if type(v) is float:
            if math.isfinite(v):
                return v
            return {"__float__": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
        if isinstance(v, np.generic):
            if v.dtype.kind not in _ARRAY_KINDS:
                raise self._unsupported(v, where)
            key = self._store(np.asarray(v))
            return {"__scalar__": {"key": key, "dtype": v.dtype.str}}
        if isinstance(v, np.ndarray):
            return self.array(v, where)
        if isinstance(v, np.dtype):
            if v.kind not in _ARRAY_KINDS or v.fields is not None:
                raise self._unsupported(v, where)
            return {"__dtype__": v.str}
        if isinstance(v, type):
            if v in _BUILTIN_TYPES.values():
                return {"__type__": v.__name__}
            if (issubclass(v, np.generic) and getattr(np, v.__name__, None) is v
                    and np.dtype(v).kind in _ARRAY_KINDS):
                return {"__type__": f"numpy.{v.__name__}"}
            raise self._unsupported(v, where)
        if isinstance(v, tuple) and type(v) is tuple:
            return {"__tuple__": [self.value(x, f"{where}[{i}]") for i, x in enumerate(v)]}
        if isinstance(v, list) and type(v) is list:
            return [self.value(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, dict) and type(v) is dict:
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    raise TypeError(
                        f"{where} is a dict with the non-string key {k!r}; kernelscale.save "
                        f"stores dicts with string keys only: convert the keys to str."
                    )
                out[k] = self.value(x, f"{where}[{k!r}]")
            return {"__dict__": out} if any(k.startswith("__") for k in out) else out
        if _is_own_class(type(v)) and (
            isinstance(v, BaseEstimator) or dataclasses.is_dataclass(v)
        ):
            return {"__object__": self.obj(v, where)}
        raise self._unsupported(v, where)

    def array(self, a, where):
        if type(a) is not np.ndarray and not isinstance(a, np.memmap):
            raise self._unsupported(a, where)
        original, a = a, np.asarray(a)
        ref = {"dtype": a.dtype.str, "shape": list(a.shape)}
        if a.dtype.kind == "O":
            if not all(isinstance(x, str) for x in a.flat):
                raise TypeError(
                    f"{where} is an object array holding something other than str, which "
                    f"kernelscale.save cannot store without pickle; convert it to a numeric, "
                    f"bool or str dtype."
                )
            a = a.astype(str) if a.size else a.astype("U1")
            ref = {"dtype": a.dtype.str, "shape": list(a.shape), "object_str": True}
        elif a.dtype.kind not in _ARRAY_KINDS or a.dtype.fields is not None:
            raise self._unsupported(a, where)
        return {"__ndarray__": {"key": self._store(a, original), **ref}}

    def obj(self, est, where):
        cls = type(est)
        path = f"{cls.__module__}.{cls.__qualname__}"
        try:
            found = _resolve_class(path)
        except ValueError:
            found = None
        if found is not cls:
            raise TypeError(
                f"{where} is a {path}, which cannot be found again under that name when loading "
                f"(a class defined locally or renamed); save only public kernelscale classes."
            )
        if dataclasses.is_dataclass(est):
            params = {
                fld.name: self.value(getattr(est, fld.name), f"{where} field {fld.name!r}")
                for fld in dataclasses.fields(est)
                if fld.init
            }
            return {"class": path, "params": params, "fitted": {}}
        params = {}
        for name, value in est.get_params(deep=False).items():
            if name == "callback" and callable(value):
                warnings.warn(
                    f"{where}: the callable callback={value!r} cannot be saved; it is stored as "
                    f"None. Pass a callback again after loading if you need one.",
                    PersistenceWarning, stacklevel=3,
                )
                value = None
            elif name == "random_state" and isinstance(
                value, (np.random.RandomState, np.random.Generator)
            ):
                warnings.warn(
                    f"{where}: random_state is a {type(value).__name__}, whose state is not "
                    f"saved; it is stored as None. Use an integer seed to keep it.",
                    PersistenceWarning, stacklevel=3,
                )
                value = None
            params[name] = self.value(value, f"{where} parameter {name!r}")
        fitted = {}
        for name, value in vars(est).items():
            if name.endswith("_") and not name.startswith("_"):
                fitted[name] = self.value(value, f"{where} attribute {name!r}")
        return {"class": path, "params": params, "fitted": fitted}

    @staticmethod
    def _unsupported(v, where):
        return TypeError(
            f"{where} holds a {type(v).__module__}.{type(v).__qualname__}, which kernelscale.save "
            f"cannot store (it saves None, bool, int, float, str, numpy scalars, dtypes and "
            f"numeric/bool/str arrays, lists, tuples, str-keyed dicts and kernelscale objects). "
            f"Convert it to one of those, or drop it before saving."
        )


def _is_own_class(cls):
    return cls.__module__ == "kernelscale" or cls.__module__.startswith("kernelscale.")


def save(model, path):
    """Save a kernelscale estimator or kernel to ``path`` (one .npz file; see the module docstring).

    The file is written as given (no ".npz" is appended). Returns the path. Raises TypeError
    for a model or attribute the format cannot hold.
    """
    if not (isinstance(model, BaseEstimator) and _is_own_class(type(model))):
        raise TypeError(
            f"kernelscale.save stores kernelscale estimators and kernels, got a "
            f"{type(model).__module__}.{type(model).__qualname__}; save the kernelscale "
            f"estimators inside it one by one."
        )
    enc = _Encoder()
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kernelscale_version": _version(),
        **enc.obj(model, type(model).__name__),
    }
    blob = json.dumps(meta, allow_nan=False, ensure_ascii=False).encode("utf-8")
    arrays = {META_KEY: np.frombuffer(blob, dtype=np.uint8), **enc.arrays}
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)  # object arrays were refused above: nothing is pickled
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


# ----------------------------------------------------------------------------------------------
# decoding


def _invalid(path, msg):
    return ValueError(f"{path} is not a valid kernelscale model file: {msg}")


def _read_meta(f, path):
    if META_KEY not in f.files:
        raise _invalid(path, f"it has no {META_KEY!r} entry (was it written by kernelscale.save?).")
    raw = _array(f, META_KEY, path)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise _invalid(path, f"{META_KEY!r} must be a 1-d uint8 array.")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _invalid(path, f"its metadata is not UTF-8 JSON ({err}).") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _invalid(path, f"its metadata does not declare format {FORMAT!r}.")
    return meta


def _array(f, key, path):
    try:
        a = f[key]
    except ValueError as err:  # numpy refuses object arrays when allow_pickle=False
        msg = f"entry {key!r} needs pickle or is corrupt ({err}); refused."
        raise _invalid(path, msg) from None
    if not isinstance(a, np.ndarray):  # a zip member that is not a .npy file
        raise _invalid(path, f"entry {key!r} is not a .npy array.")
    return a


def _open(path):
    try:
        f = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, zipfile.BadZipFile) as err:
        raise _invalid(path, f"it is not an .npz archive ({err}).") from None
    if not isinstance(f, np.lib.npyio.NpzFile):
        raise _invalid(path, "it is a single .npy array, not an .npz archive.")
    return f


def describe(path):
    """Return a model file's JSON metadata without building the model (for ``kernelscale report``).

    Works for any format version, so a report can show files this kernelscale cannot load.
    """
    with _open(path) as f:
        return _read_meta(f, path)


def load(path):
    """Load a model written by :func:`save`; never unpickles, never runs code from the file.

    Raises ValueError for files of another format or format version, and for classes that are
    not kernelscale estimators or kernels.
    """
    with _open(path) as f:
        meta = _read_meta(f, path)
        version = meta.get("format_version")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise ValueError(
                f"{path} has format_version {version!r}; this kernelscale ({_version()}) reads "
                f"format version(s) {', '.join(map(str, READABLE_VERSIONS))}. The file was written "
                f"by kernelscale {meta.get('kernelscale_version', '?')}: upgrade kernelscale "
                f"(pip install -U kernelscale) to load it."
            )
        return _Decoder(f, path).obj(meta, "model")


def _resolve_class(class_path):
    """The kernelscale BaseEstimator subclass (or dataclass) named ``class_path``, or ValueError."""

    def refuse(why):
        return ValueError(
            f"refusing to load class {class_path!r}: {why}. kernelscale.load only builds "
            f"kernelscale estimators and kernels."
        )

    if not isinstance(class_path, str):
        raise refuse("the class name is not a string")
    module_name, _, name = class_path.rpartition(".")
    parts = module_name.split(".")
    if parts[0] != "kernelscale" or not all(p.isidentifier() for p in parts + [name]):
        raise refuse("it is not in the kernelscale package")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise refuse(f"there is no module {module_name}") from None
    cls = getattr(module, name, None)
    if not (
        isinstance(cls, type)
        and (issubclass(cls, BaseEstimator) or dataclasses.is_dataclass(cls))
        and cls.__module__ == module_name
        and cls.__qualname__ == name
    ):
        raise refuse("it is not an estimator or kernel class defined in kernelscale")
    return cls


class _Decoder:
    def __init__(self, f, path):
        self.f = f
        self.path = path
        self._loaded = {}  # key -> array, so arrays shared when saved are shared again

    def fail(self, where, msg):
        return _invalid(self.path, f"{where}: {msg}")

    def value(self, v, where):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.value(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if not isinstance(v, dict):
            raise self.fail(where, f"unexpected JSON value {v!r}")
        tagged = [k for k in v if k.startswith("__")]
        if not tagged:
            return {k: self.value(x, f"{where}[{k!r}]") for k, x in v.items()}
        if len(v) != 1 or tagged[0] not in _TAGS:
            raise self.fail(where, f"unknown tag(s) {tagged}; expected one of {_TAGS}")
        tag, body = tagged[0], v[tagged[0]]
        if tag == "__float__":
            if body not in ("nan", "inf", "-inf"):
                raise self.fail(where, f"bad float {body!r}")
            return float(body)
        if tag == "__tuple__":
            if not isinstance(body, list):
                raise self.fail(where, "__tuple__ must hold a list")
            return tuple(self.value(x, f"{where}[{i}]") for i, x in enumerate(body))
        if tag == "__dict__":
            if not isinstance(body, dict):
                raise self.fail(where, "__dict__ must hold an object")
            return {k: self.value(x, f"{where}[{k!r}]") for k, x in body.items()}
        if tag == "__ndarray__":
            return self.array(body, where)
        if tag == "__scalar__":
            return self.array(body, where, scalar=True)
        if tag == "__dtype__":
            return self.dtype(body, where)
        if tag == "__type__":
            if body in _BUILTIN_TYPES:
                return _BUILTIN_TYPES[body]
            if isinstance(body, str) and body.startswith("numpy."):
                t = getattr(np, body[6:], None)
                if isinstance(t, type) and issubclass(t, np.generic) and (
                    np.dtype(t).kind in _ARRAY_KINDS
                ):
                    return t
            raise self.fail(where, f"unsupported type {body!r}")
        return self.obj(body, where)  # __object__

    def dtype(self, s, where):
        try:
            dt = np.dtype(s) if isinstance(s, str) else None
        except (TypeError, ValueError):
            dt = None
        if dt is None or dt.kind not in _ARRAY_KINDS or dt.fields is not None:
            raise self.fail(where, f"unsupported dtype {s!r}")
        return dt

    def array(self, ref, where, scalar=False):
        if not isinstance(ref, dict) or not isinstance(ref.get("key"), str):
            raise self.fail(where, "array reference without a key")
        key = ref["key"]
        if key == META_KEY or key not in self.f.files:
            raise self.fail(where, f"array {key!r} is missing from the archive")
        a = self._loaded.get(key)
        if a is None:
            a = self._loaded[key] = _array(self.f, key, self.path)
        want = self.dtype(ref.get("dtype"), where)
        if a.dtype != want or a.dtype.kind not in _ARRAY_KINDS:
            raise self.fail(where, f"array {key!r} has dtype {a.dtype}, metadata says {want}")
        if scalar:
            if a.ndim != 0:
                raise self.fail(where, f"scalar {key!r} is not 0-d")
            return a[()]
        if list(a.shape) != ref.get("shape"):
            raise self.fail(where, f"array {key!r} has shape {a.shape}, metadata says "
                                   f"{ref.get('shape')}")
        if ref.get("object_str") is True:
            return a.astype(object)
        return a

    def obj(self, body, where):
        if not isinstance(body, dict):
            raise self.fail(where, "object entry must be a JSON object")
        cls = _resolve_class(body.get("class"))
        params, fitted = body.get("params", {}), body.get("fitted", {})
        if not isinstance(params, dict) or not isinstance(fitted, dict):
            raise self.fail(where, "params and fitted must be JSON objects")
        if dataclasses.is_dataclass(cls):
            if fitted:
                raise self.fail(where, f"{cls.__name__} is a dataclass: no fitted attributes")
            allowed = {fld.name for fld in dataclasses.fields(cls) if fld.init}
        else:
            allowed = set(cls._get_param_names())
        unknown = set(params) - allowed
        if unknown:
            raise self.fail(
                where, f"{cls.__name__} has no parameter(s) {sorted(unknown)}; the file was "
                       f"written by another kernelscale version ({cls.__name__} takes "
                       f"{sorted(allowed)})"
            )
        est = cls(**{k: self.value(v, f"{where} parameter {k!r}") for k, v in params.items()})
        for name, value in fitted.items():
            if not (name.isidentifier() and name.endswith("_") and not name.startswith("_")):
                raise self.fail(where, f"refusing fitted attribute name {name!r}")
            if isinstance(getattr(cls, name, None), (property, types.FunctionType)):
                raise self.fail(where, f"fitted attribute {name!r} would replace a class member")
            setattr(est, name, self.value(value, f"{where} attribute {name!r}"))
        return est
