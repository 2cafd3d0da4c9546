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
     "class": "kernelscale.ClassName", "params": {...}, "fitted": {...}}

An optional ``"metadata"`` key holds a JSON object given to :func:`save` by its caller (plain
JSON values; ``kernelscale fit`` records the columns of the data file it read there, so that
``kernelscale predict`` reads new files the same way). :func:`load` ignores it; :func:`describe`
returns it with the rest.

``class`` is the shortest public path of the class (``kernelscale.SLKLRegressor``, not the module
defining it), so files outlive moves inside the package; files of 0.1.0 recorded the defining
module (``kernelscale.stagewise.StagewiseClassifier``) and load through
:data:`kernelscale.base.moved.MOVED`. ``params`` are the constructor parameters (``get_params(deep=False)``), ``fitted`` the fitted
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
- ``{"__sparse__": {"container", "shape", "data", "indices", "indptr"}}``: a CSR matrix or array;
- ``{"__dtype__": "<f4"}``: a numpy dtype; ``{"__type__": "numpy.float32"}`` or
  ``{"__type__": "float"}``: a numpy scalar type or a builtin number type;
- ``{"__object__": {"class": ..., "params": {...}, "fitted": {...}}}``: a nested kernelscale object:
  a kernel or an estimator, or a dataclass defined in kernelscale (e.g. a random-feature block),
  whose ``params`` are its ``__init__`` fields and ``fitted`` is empty; or an object of a
  scikit-learn class of :data:`kernelscale.sklearn_allowlist.ALLOWED` (a step of a pipeline);
- ``{"__slice__": [start, stop, step]}``: a slice of integers or nulls (a ColumnTransformer's
  ``output_indices_``);
- ``{"__objects__": {"shape": [3], "values": [0, null, "a"]}}``: an object array of nulls, integers,
  floats and strings (a OneHotEncoder's ``drop_idx_``).

Scikit-learn pipelines: the model may also be a ``Pipeline``, ``FeatureUnion`` or
``ColumnTransformer`` (``"class": "sklearn.pipeline.Pipeline"``) whose steps are kernelscale
estimators and the scikit-learn transformers of :mod:`kernelscale.sklearn_allowlist`; their
``fitted`` holds the attributes that module lists (private ones included), and the document gains
``"sklearn_version"``, the scikit-learn that saved it.

Every zip member is stored uncompressed (``ZIP_STORED``, what ``np.savez`` writes) as a .npy
file of format version 1.0 or 2.0.

Loading (:func:`load`) never unpickles and never executes code from the file: it accepts only
classes defined in kernelscale that derive from ``sklearn.base.BaseEstimator`` (or are
dataclasses) and the scikit-learn classes of the allow-list, builds them with ``cls(**params)``
(which only stores the parameters) and sets the fitted attributes (of an allowed scikit-learn
class: the ones its entry lists). Its memory is bounded by the file (:func:`load_memory_bound`): compressed
members are refused, the members' declared sizes must fit in the file, each .npy header's shape
and dtype must match its member's size (and the metadata) before the data is read, and the JSON
metadata is limited to :data:`MAX_META_BYTES` bytes and :data:`MAX_DEPTH` levels of nesting.
SECURITY.md states what this guarantees and what it does not.

Saving writes a new file next to the target under a unique name, created exclusively (never
through a symbolic link), fsyncs it and renames it over the target atomically: readers see the
old file or the new one, concurrent saves to one path all succeed (the last rename wins), and the
temporary file is removed on any exception, KeyboardInterrupt included, and on a SIGTERM whose
default action is in place when saving from the main thread (it is delivered again once the file
is removed). A symbolic link at the target is replaced by the file; the file it pointed to is not
written. Only SIGKILL or a crash leaves a temporary file (``.NAME.XXXXXXXX.tmp``) behind.

Saving refuses what the format cannot hold (TypeError naming the attribute), except two
constructor parameters: a callable ``callback`` and a ``random_state`` given as a
``RandomState``/``Generator`` are saved as None, with a :class:`PersistenceWarning`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import json
import math
import os
import reprlib
import secrets
import signal
import stat
import sys
import threading
import warnings
import zipfile
from pathlib import Path

import numpy as np
import sklearn
from sklearn.base import BaseEstimator

from . import sklearn_allowlist
from .base.moved import current_path
from .base.validation import csr_from_parts, csr_parts
from .base.version import __version__

__all__ = [
    "save", "load", "describe", "load_memory_bound", "FORMAT", "FORMAT_VERSION",
    "MAX_META_BYTES", "MAX_DEPTH", "PersistenceWarning",
]

FORMAT = "kernelscale-model"
FORMAT_VERSION = 1
#: format versions this kernelscale can read
READABLE_VERSIONS = (1,)
META_KEY = "__kernelscale__"

#: largest JSON metadata load/describe read (a model's is about 1.5 KB; lists stored as JSON,
#: e.g. a history of 10**5 floats, stay far below this)
MAX_META_BYTES = 4 * 2**20
#: deepest nesting of JSON containers load/describe accept (a model's is at most 8)
MAX_DEPTH = 32
#: largest .npy header read (numpy's own default limit)
MAX_HEADER_BYTES = 10_000
#: load_memory_bound(size) = LOAD_MEMORY_FACTOR * size + LOAD_MEMORY_OVERHEAD
LOAD_MEMORY_FACTOR = 64
LOAD_MEMORY_OVERHEAD = 2**20
_READ_CHUNK = 2**20

_ARRAY_KINDS = "biufcUS"
_TAGS = ("__float__", "__tuple__", "__dict__", "__ndarray__", "__scalar__", "__dtype__",
         "__type__", "__object__", "__slice__", "__objects__", "__sparse__")
#: what an object array of ``__objects__`` may hold (OneHotEncoder's drop_idx_, its categories_)
_OBJECT_ITEMS = (type(None), int, float, str)
_BUILTIN_TYPES = {"float": float, "int": int, "bool": bool, "complex": complex, "str": str}


class PersistenceWarning(UserWarning):
    """A value could not be saved as is and was replaced (see :func:`save`)."""


def _version():
    return __version__


# ----------------------------------------------------------------------------------------------
# encoding


class _Encoder:
    def __init__(self):
        self.arrays = {}
        self._seen = {}  # id(array) -> key: an array referenced twice is stored once
        self.sklearn = False  # whether a scikit-learn object was stored
        self._in_sklearn = 0  # scikit-learn objects are stored in a pipeline (a composite), not elsewhere

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
        if (parts := csr_parts(v)) is not None:  # the training rows of a model fitted on sparse X
            return {"__sparse__": {**parts[0], **{k: self.array(a, f"{where}.{k}") for k, a in parts[1].items()}}}
        if isinstance(v, np.dtype):  # "O" too: a SimpleImputer of str columns records it (no array has it)
            if v.kind not in _ARRAY_KINDS + "O" or v.fields is not None:
                raise self._unsupported(v, where)
            return {"__dtype__": v.str}
        if type(v) is slice:
            if not all(x is None or type(x) is int for x in (v.start, v.stop, v.step)):
                raise self._unsupported(v, where)
            return {"__slice__": [v.start, v.stop, v.step]}
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
        if isinstance(v, BaseEstimator) and self._in_sklearn and sklearn_allowlist.allowed_path(type(v)):
            return {"__object__": self.sklearn_obj(v, where)}
        if isinstance(v, BaseEstimator):
            raise sklearn_allowlist.not_allowed(public_path(type(v)), where)
        raise self._unsupported(v, where)

    def sklearn_obj(self, est, where):
        """An object of an allowed scikit-learn class: its parameters and the fitted attributes its
        entry of the allow-list names (a step list's entries are named in messages by step)."""
        path, params, fitted = sklearn_allowlist.saved_state(est, where)
        self.sklearn = True

        def step(item, at):  # (name, step, ...) named by its name: "Pipeline step 'scaler'"
            if type(item) is not tuple or not item or not isinstance(item[0], str):
                return self.value(item, at)
            at = f"{where} step {item[0]!r}"
            return {"__tuple__": [self.value(x, at if j == 1 else f"{at}[{j}]") for j, x in enumerate(item)]}

        def encode(name, value, kind):
            if name in sklearn_allowlist.STEP_LISTS and type(value) is list:
                return [step(item, f"{where} {kind} {name!r}[{i}]") for i, item in enumerate(value)]
            return self.value(value, f"{where} {kind} {name!r}")

        self._in_sklearn += 1
        try:
            return {"class": path, "params": {k: encode(k, v, "parameter") for k, v in params.items()},
                    "fitted": {k: encode(k, v, "attribute") for k, v in fitted.items()}}
        finally:
            self._in_sklearn -= 1

    def array(self, a, where):
        if type(a) is not np.ndarray and not isinstance(a, np.memmap):
            raise self._unsupported(a, where)
        original, a = a, np.asarray(a)
        ref = {"dtype": a.dtype.str, "shape": list(a.shape)}
        if a.dtype.kind == "O":
            items = [x.item() if isinstance(x, (np.integer, np.floating)) else x for x in a.flat]
            if not all(isinstance(x, str) for x in items) and all(type(x) in _OBJECT_ITEMS for x in items):
                return {"__objects__": {"shape": list(a.shape), "values": [
                    self.value(x, f"{where}[{i}]") for i, x in enumerate(items)]}}
            if not all(isinstance(x, str) for x in a.flat):
                raise TypeError(
                    f"{where} is an object array holding something other than str, int, float or None, which "
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
        path = public_path(cls)
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


def save(model, path, *, metadata=None):
    """Save a kernelscale estimator or kernel, or a scikit-learn Pipeline, FeatureUnion or
    ColumnTransformer of them and of the transformers of :mod:`kernelscale.sklearn_allowlist`,
    to ``path`` (one .npz file; see the module docstring).

    The file is written as given (no ".npz" is appended), atomically: a unique temporary file in
    the same directory is written, fsynced and renamed over ``path``. A symbolic link at
    ``path`` is replaced, not written through. Returns the path. Raises TypeError for a model or
    attribute the format cannot hold.

    ``metadata``: an optional dict of plain JSON values (str keys; str, int, finite float, bool,
    None, lists and dicts of them), stored as the file's ``"metadata"``; :func:`load` ignores it
    and :func:`describe` returns it.
    """
    composite = isinstance(model, BaseEstimator) and sklearn_allowlist.allowed_path(type(model)) in (
        sklearn_allowlist.COMPOSITES)
    if not (isinstance(model, BaseEstimator) and _is_own_class(type(model)) or composite):
        raise TypeError(
            f"kernelscale.save stores kernelscale estimators and kernels, and scikit-learn Pipelines, "
            f"FeatureUnions and ColumnTransformers of them and of allowed scikit-learn transformers; got a "
            f"{type(model).__module__}.{type(model).__qualname__}: put it in a Pipeline, or save the "
            f"kernelscale estimators inside it one by one."
        )
    enc = _Encoder()
    body = enc.sklearn_obj(model, type(model).__name__) if composite else enc.obj(model, type(model).__name__)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kernelscale_version": _version(),
        **({"sklearn_version": sklearn.__version__} if enc.sklearn else {}),
        **body,
    }
    if metadata is not None:
        meta["metadata"] = _plain_json(metadata)
    blob = json.dumps(meta, allow_nan=False, ensure_ascii=False).encode("utf-8")
    arrays = {META_KEY: np.frombuffer(blob, dtype=np.uint8), **enc.arrays}
    path = Path(path)
    # object arrays were refused above: nothing is pickled
    _write_atomically(path, lambda f: np.savez(f, **arrays))
    return path


class _Terminated(BaseException):
    """Raised in the main thread by SIGTERM while :func:`save` writes (see _sigterm_raises)."""


@contextlib.contextmanager
def _sigterm_raises():
    """Within the block, a SIGTERM with its default action raises _Terminated (main thread only),
    so cleanup runs; on leaving, the old handler is back and the signal is delivered again."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    received = []

    def handler(signum, frame):
        received.append(signum)
        raise _Terminated

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if received:
            signal.raise_signal(signal.SIGTERM)
            raise SystemExit(128 + signal.SIGTERM)  # only if SIGTERM is blocked in this thread


def _create_temp(directory, name):
    """Create and open ``directory/.NAME.RANDOM.tmp`` exclusively (O_EXCL, O_NOFOLLOW): an
    existing file or symbolic link there is never opened. Returns (fd, path)."""
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    for _ in range(100):
        tmp = directory / f".{name[:100]}.{secrets.token_hex(8)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp  # the umask applies, as for open(path, "wb")
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a unique temporary file in {directory}")


def _write_atomically(path, write):
    """Call ``write(file)`` on a new temporary file next to ``path``, fsync it, rename it to
    ``path``; the temporary file is removed if anything (or a SIGTERM) interrupts."""
    directory = path.parent
    if not directory.is_dir():
        raise FileNotFoundError(f"cannot save to {path}: the directory {directory} does not exist.")
    with _sigterm_raises():
        tmp = None
        try:
            fd, tmp = _create_temp(directory, path.name)
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            raise
    with contextlib.suppress(OSError, AttributeError):  # make the rename durable (POSIX)
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


# ----------------------------------------------------------------------------------------------
# decoding


def load_memory_bound(file_size):
    """The most bytes :func:`load` or :func:`describe` allocates for a file of ``file_size``
    bytes: ``LOAD_MEMORY_FACTOR * file_size + LOAD_MEMORY_OVERHEAD`` (64 x size + 1 MiB).

    The arrays take at most the file's size (entries are stored uncompressed and their sizes
    must fit in the file); the factor covers the Python objects built from the JSON metadata
    (measured worst case 43 bytes per byte of JSON, for nested empty lists) and str arrays that
    become object arrays (23 bytes per byte, for 4-byte characters).
    """
    return LOAD_MEMORY_FACTOR * int(file_size) + LOAD_MEMORY_OVERHEAD


def _invalid(path, msg):
    return ValueError(f"{path} is not a valid kernelscale model file: {msg}")


def _short(value):
    """A repr of bounded length, for messages about values read from a file."""
    return reprlib.repr(value)


class _Archive:
    """A model file opened for bounded reading: zip members checked before any data is read."""

    def __init__(self, path):
        self.path = path
        # O_NONBLOCK: opening a FIFO must not wait for a writer (no effect on regular files)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        self._file = os.fdopen(fd, "rb")
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self):
        info = os.fstat(self._file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise self.invalid("it is not a regular file.")
        self.size = info.st_size
        if self._file.read(6) == b"\x93NUMPY":
            raise self.invalid("it is a single .npy array, not an .npz archive.")
        try:
            self.zip = zipfile.ZipFile(self._file)
            members = self.zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
                NotImplementedError) as err:
            raise self.invalid(f"it is not an .npz archive ({_short(str(err))}).") from None
        self.members = {}
        total = 0
        for m in members:
            if m.compress_type != zipfile.ZIP_STORED or m.flag_bits & 0x61:  # encrypted/patch
                raise self.invalid(
                    f"entry {_short(m.filename)} is compressed or encrypted; kernelscale model "
                    f"files store entries uncompressed, which bounds the memory loading takes "
                    f"by the file's size. Re-save the model with kernelscale.save."
                )
            if m.compress_size != m.file_size:
                raise self.invalid(f"entry {_short(m.filename)} declares {m.file_size} bytes "
                                   f"but stores {m.compress_size}.")
            key = m.filename[:-4] if m.filename.endswith(".npy") else m.filename
            if key in self.members:
                raise self.invalid(f"entry {_short(m.filename)} appears twice.")
            self.members[key] = m
            total += m.file_size
        if total > self.size:
            raise self.invalid(
                f"its entries declare {total} bytes in all, more than the file's {self.size} "
                f"bytes (forged or overlapping entries)."
            )

    def invalid(self, msg):
        return _invalid(self.path, msg)

    def close(self):
        if getattr(self, "zip", None) is not None:
            self.zip.close()
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __contains__(self, key):
        return key in self.members

    def array(self, key, check=None):
        """The array stored under ``key``. ``check(dtype, shape)`` may raise before any data is
        read; the declared dtype and shape must account for the entry's size exactly."""
        member = self.members[key]
        if not member.filename.endswith(".npy"):
            raise self.invalid(f"entry {_short(key)} is not a .npy array.")
        try:
            with self.zip.open(member) as fp:
                dtype, shape, fortran = self._header(fp, key)
                if check is not None:
                    check(dtype, shape)
                nbytes = math.prod(shape) * dtype.itemsize
                if fp.tell() + nbytes != member.file_size:
                    raise self.invalid(
                        f"entry {_short(key)} declares shape {shape} and dtype {dtype.str} "
                        f"({nbytes} bytes of data) but holds {member.file_size - fp.tell()} "
                        f"bytes; refused before reading it."
                    )
                a = np.empty(shape, dtype=dtype, order="F" if fortran else "C")
                if nbytes:
                    self._read_into(fp, a.reshape(-1, order="A").view(np.uint8), key)
                if fp.read(1):  # also makes zipfile check the CRC when it has not yet
                    raise self.invalid(f"entry {_short(key)} holds more data than declared.")
        except (zipfile.BadZipFile, OSError, EOFError, UnicodeDecodeError, NotImplementedError,
                RuntimeError) as err:  # what zipfile raises for a corrupt local header or data
            raise self.invalid(f"entry {_short(key)} is corrupt ({_short(str(err))}).") from None
        return a

    def _header(self, fp, key):
        """dtype, shape and Fortran order of a .npy header, refusing what the format excludes."""
        fmt = np.lib.format
        try:
            version = fmt.read_magic(fp)
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(fp, MAX_HEADER_BYTES)
            elif version == (2, 0):
                shape, fortran, dtype = fmt.read_array_header_2_0(fp, MAX_HEADER_BYTES)
            else:
                raise ValueError(f"unsupported .npy format version {version}")
        except (zipfile.BadZipFile, OSError, EOFError, UnicodeDecodeError):
            raise
        except Exception as err:  # numpy's header parser raises several types on bad input
            msg = f"entry {_short(key)} has no valid .npy header ({_short(str(err))})"
            raise self.invalid(msg) from None
        if not (isinstance(shape, tuple)
                and all(type(n) is int and n >= 0 for n in shape) and isinstance(fortran, bool)):
            raise self.invalid(f"entry {_short(key)} has an invalid .npy shape {_short(shape)}.")
        if (dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or dtype.subdtype
                or dtype.itemsize == 0):
            raise self.invalid(
                f"entry {_short(key)} has dtype {dtype}, which needs pickle or is not one "
                f"kernelscale stores (numeric, bool or str); refused."
            )
        return dtype, shape, fortran

    def _read_into(self, fp, out, key):
        view = memoryview(out)
        pos = 0
        while pos < len(view):
            chunk = fp.read(min(_READ_CHUNK, len(view) - pos))
            if not chunk:
                raise self.invalid(f"entry {_short(key)} is truncated.")
            view[pos:pos + len(chunk)] = chunk
            pos += len(chunk)


def _check_depth(meta, path):
    """Refuse JSON nested deeper than MAX_DEPTH containers (iteratively: no recursion)."""
    stack = [(meta, 1)] if isinstance(meta, (dict, list)) else []
    while stack:
        v, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _invalid(path, f"its metadata nests deeper than {MAX_DEPTH} levels (the limit "
                                 f"kernelscale.persistence.MAX_DEPTH).")
        children = v.values() if isinstance(v, dict) else v
        stack.extend((x, depth + 1) for x in children if isinstance(x, (dict, list)))


def _read_meta(archive):
    path = archive.path
    if META_KEY not in archive:
        raise _invalid(path, f"it has no {META_KEY!r} entry (was it written by kernelscale.save?).")

    def check(dtype, shape):
        if dtype != np.uint8 or len(shape) != 1:
            raise _invalid(path, f"{META_KEY!r} must be a 1-d uint8 array.")
        if shape[0] > MAX_META_BYTES:
            raise _invalid(path, f"its metadata is {shape[0]} bytes, more than the limit "
                                 f"{MAX_META_BYTES} (kernelscale.persistence.MAX_META_BYTES).")

    text = archive.array(META_KEY, check).tobytes()
    try:
        text = text.decode("utf-8")
        meta = json.loads(text)
    except RecursionError:
        raise _invalid(path, f"its metadata nests deeper than {MAX_DEPTH} levels.") from None
    except ValueError as err:  # bad UTF-8, bad JSON, an integer of more than 4300 digits
        raise _invalid(path, f"its metadata is not UTF-8 JSON ({_short(str(err))}).") from None
    del text
    _check_depth(meta, path)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _invalid(path, f"its metadata does not declare format {FORMAT!r}.")
    return meta


def describe(path):
    """Return a model file's JSON metadata without building the model (for ``kernelscale report``).

    Works for any format version, so a report can show files this kernelscale cannot load. The
    same limits as :func:`load` apply.
    """
    with _Archive(path) as archive:
        return _read_meta(archive)


def load(path):
    """Load a model written by :func:`save`; never unpickles, never runs code from the file.

    Allocates at most :func:`load_memory_bound` of the file's size. Raises ValueError naming the
    file for files of another format or format version, for classes that are not kernelscale
    estimators or kernels (or scikit-learn classes of :mod:`kernelscale.sklearn_allowlist`), and
    for files that are corrupt or exceed a limit. Warns (:class:`PersistenceWarning`) when
    scikit-learn objects were saved with another scikit-learn version.
    """
    with _Archive(path) as archive:
        meta = _read_meta(archive)
        version = meta.get("format_version")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise ValueError(
                f"{path} has format_version {_short(version)}; this kernelscale ({_version()}) "
                f"reads format version(s) {', '.join(map(str, READABLE_VERSIONS))}. The file was "
                f"written by kernelscale {_short(meta.get('kernelscale_version', '?'))}: upgrade "
                f"kernelscale (pip install -U kernelscale) to load it."
            )
        if meta.get("sklearn_version", sklearn.__version__) != sklearn.__version__:
            warnings.warn(f"{path} holds scikit-learn objects saved with scikit-learn {_short(meta['sklearn_version'])}; "
                          f"this is {sklearn.__version__}, whose fitted attributes may differ. Check its predictions, "
                          f"or refit.", PersistenceWarning, stacklevel=2)
        return _Decoder(archive).obj(meta, "model")


def public_path(cls):
    """The shortest dotted path under which ``cls`` can be imported: ``kernelscale.SLKLRegressor``
    rather than the module that defines it, so that model files outlive moves inside the package."""
    parts = cls.__module__.split(".")
    for i in range(1, len(parts) + 1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is not None and getattr(module, cls.__qualname__, None) is cls:
            return f"{module.__name__}.{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def _resolve_class(class_path):
    """The kernelscale BaseEstimator subclass (or dataclass) named ``class_path``, or ValueError."""

    def refuse(why):
        return ValueError(
            f"refusing to load class {_short(class_path)}: {why}. kernelscale.load only builds "
            f"kernelscale estimators and kernels, and the scikit-learn classes of "
            f"kernelscale.sklearn_allowlist.ALLOWED."
        )

    if not isinstance(class_path, str):
        raise refuse("the class name is not a string")
    allowed = sklearn_allowlist.resolve(class_path)  # imports only the allow-list's modules
    if allowed is not None:
        return allowed
    module_name, _, name = class_path.rpartition(".")
    parts = module_name.split(".")
    if parts[0] != "kernelscale" or not all(
        p.isidentifier() and not p.startswith("__") for p in parts + [name]
    ):
        raise refuse("it is not in the kernelscale package")
    try:
        module = importlib.import_module(current_path(module_name))  # files of 0.1.0: old paths
    except ImportError:
        raise refuse(f"there is no module {_short(module_name)}") from None
    cls = getattr(module, name, None)
    if not (
        isinstance(cls, type)
        and (issubclass(cls, BaseEstimator) or dataclasses.is_dataclass(cls))
        and (cls.__module__ == "kernelscale" or cls.__module__.startswith("kernelscale."))
        and cls.__qualname__ == name
    ):
        raise refuse("it is not an estimator or kernel class defined in kernelscale")
    return cls


class _Decoder:
    """Builds the model from the metadata; every message names the file and where in it."""

    def __init__(self, archive):
        self.archive = archive
        self._loaded = {}  # (key, how) -> value: read once, and shared again if saved shared

    def fail(self, where, msg):
        return _invalid(self.archive.path, f"{where}: {msg}")

    def value(self, v, where):
        """The Python value of JSON value ``v``; lists and plain dicts are decoded in place, so
        the model's containers reuse the parsed ones (memory: see load_memory_bound)."""
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            for i, x in enumerate(v):
                v[i] = self.value(x, f"{where}[{i}]")
            return v
        if not isinstance(v, dict):
            raise self.fail(where, f"unexpected JSON value {_short(v)}")
        tagged = [k for k in v if k.startswith("__")]
        if not tagged:
            return self._dict(v, where)
        if len(v) != 1 or tagged[0] not in _TAGS:
            raise self.fail(where, f"unknown tag(s) {_short(tagged)}; expected one of {_TAGS}")
        tag, body = tagged[0], v[tagged[0]]
        if tag == "__float__":
            if body not in ("nan", "inf", "-inf"):
                raise self.fail(where, f"bad float {_short(body)}")
            return float(body)
        if tag == "__tuple__":
            if not isinstance(body, list):
                raise self.fail(where, "__tuple__ must hold a list")
            return tuple(self.value(x, f"{where}[{i}]") for i, x in enumerate(body))
        if tag == "__dict__":
            if not isinstance(body, dict):
                raise self.fail(where, "__dict__ must hold an object")
            return self._dict(body, where)
        if tag == "__ndarray__":
            return self.array(body, where)
        if tag in ("__scalar__", "__sparse__"):  # a CSR matrix is checked (csr_from_parts) before it is read
            return self.array(body, where, True) if tag == "__scalar__" else csr_from_parts(body, self, where)
        if tag == "__dtype__":
            return self.dtype(body, where, allow_object=True)
        if tag == "__objects__":  # an object array of None, int, float and str values
            shape, values = (body.get("shape"), body.get("values")) if isinstance(body, dict) else (None, None)
            if not (isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape)
                    and isinstance(values, list) and len(values) == math.prod(shape)):
                raise self.fail(where, "__objects__ must hold a shape and that many values")
            out = np.empty(len(values), dtype=object)
            for i, x in enumerate(values):
                out[i] = self.value(x, f"{where}[{i}]")
                if type(out[i]) not in _OBJECT_ITEMS:
                    raise self.fail(where, f"__objects__ holds a {type(out[i]).__name__}")
            return out.reshape(shape)
        if tag == "__slice__":
            if not (isinstance(body, list) and len(body) == 3
                    and all(x is None or (type(x) is int) for x in body)):
                raise self.fail(where, f"bad slice {_short(body)}")
            return slice(*body)
        if tag == "__type__":
            if isinstance(body, str) and body in _BUILTIN_TYPES:
                return _BUILTIN_TYPES[body]
            if isinstance(body, str) and body.startswith("numpy."):
                t = getattr(np, body[6:], None)
                if isinstance(t, type) and issubclass(t, np.generic) and (
                    np.dtype(t).kind in _ARRAY_KINDS
                ):
                    return t
            raise self.fail(where, f"unsupported type {_short(body)}")
        return self.obj(body, where)  # __object__

    def _dict(self, d, where):
        for k, x in d.items():
            d[k] = self.value(x, f"{where}[{_short(k)}]")
        return d

    def dtype(self, s, where, allow_object=False):
        """The dtype ``s``; the object dtype only as a value (``allow_object``), never of an array."""
        try:
            dt = np.dtype(s) if isinstance(s, str) and len(s) <= 32 else None
        except Exception:  # numpy raises several types for strings that are not dtypes
            dt = None
        kinds = _ARRAY_KINDS + ("O" if allow_object else "")
        if dt is None or dt.kind not in kinds or dt.fields is not None or dt.subdtype:
            raise self.fail(where, f"unsupported dtype {_short(s)}")
        return dt

    def array(self, ref, where, scalar=False):
        if not isinstance(ref, dict) or not isinstance(ref.get("key"), str):
            raise self.fail(where, "array reference without a key")
        key = ref["key"]
        if key == META_KEY or key not in self.archive:
            raise self.fail(where, f"array {_short(key)} is missing from the archive")
        want = self.dtype(ref.get("dtype"), where)
        shape = ref.get("shape")
        if scalar:
            shape = []
        elif not (isinstance(shape, list) and all(type(n) is int for n in shape)):
            raise self.fail(where, f"array {_short(key)} has no valid shape in the metadata")

        def check(dtype, stored_shape):  # before the data is read
            if dtype != want:
                raise self.fail(where, f"array {_short(key)} has dtype {dtype}, metadata says "
                                       f"{want}")
            if list(stored_shape) != shape:
                raise self.fail(where, f"array {_short(key)} has shape {stored_shape}, metadata "
                                       f"says {_short(shape)}")

        a = self._loaded.get((key, "array"))
        if a is None:
            a = self._loaded[key, "array"] = self.archive.array(key, check)
        else:
            check(a.dtype, a.shape)
        how = "scalar" if scalar else "object" if ref.get("object_str") is True else None
        if how is None:
            return a
        if (key, how) not in self._loaded:  # converted once: a reference costs no memory
            self._loaded[key, how] = a[()] if scalar else a.astype(object)
        return self._loaded[key, how]

    def obj(self, body, where):
        if not isinstance(body, dict):
            raise self.fail(where, "object entry must be a JSON object")
        try:
            cls = _resolve_class(body.get("class"))
        except ValueError as err:
            raise self.fail(where, str(err)) from None
        params, fitted = body.get("params", {}), body.get("fitted", {})
        if not isinstance(params, dict) or not isinstance(fitted, dict):
            raise self.fail(where, "params and fitted must be JSON objects")
        sklearn_path = body.get("class") if not _is_own_class(cls) else None
        if dataclasses.is_dataclass(cls):
            if fitted:
                raise self.fail(where, f"{cls.__name__} is a dataclass: no fitted attributes")
            allowed = {fld.name for fld in dataclasses.fields(cls) if fld.init}
        else:
            allowed = set(cls._get_param_names())
        unknown = set(params) - allowed
        if unknown:
            raise self.fail(
                where, f"{cls.__name__} has no parameter(s) {_short(sorted(unknown))}; the file "
                       f"was written by another kernelscale version ({cls.__name__} takes "
                       f"{sorted(allowed)})"
            )
        values = {k: self.value(v, f"{where} parameter {k!r}") for k, v in params.items()}
        why = sklearn_path and sklearn_allowlist.check_params(sklearn_path, values)
        if why:
            raise self.fail(where, f"refusing {sklearn_path}: {why}")
        try:
            est = cls(**values)
        except Exception as err:  # a dataclass's __post_init__ validates its fields
            raise self.fail(where, f"{cls.__name__}(...) refused the stored parameters "
                                   f"({_short(str(err))})") from None
        for name, value in fitted.items():
            if sklearn_path is not None:  # only the names of its entry in the allow-list
                if name not in sklearn_allowlist.fitted_names(sklearn_path):
                    raise self.fail(where, f"refusing fitted attribute name {_short(name)} of {sklearn_path}")
            elif not (name.isidentifier() and name.endswith("_") and not name.startswith("_")):
                raise self.fail(where, f"refusing fitted attribute name {_short(name)}")
            if hasattr(inspect.getattr_static(cls, name, None), "__get__"):
                raise self.fail(where, f"fitted attribute {name!r} would replace a class member")
            setattr(est, name, self.value(value, f"{where} attribute {name!r}"))
        return est


def _plain_json(metadata):
    """``metadata`` of :func:`save` as plain JSON values (stored as given, never decoded into
    objects); TypeError for anything else."""
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict of JSON values, got {type(metadata).__name__}.")
    try:
        return json.loads(json.dumps(metadata, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise TypeError(f"metadata must hold plain JSON values only: {err}") from None
