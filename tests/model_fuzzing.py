"""Mutations of model files for fuzzing ``kernelscale.load`` (tests/test_persistence_fuzz.py and
the longer run benchmarks/tools/fuzz_persistence.py share them).

A mutation is either byte-level (the file's bytes changed in place: the zip's CRCs and sizes then
catch every change to data that is read, so loading must fail clearly or give back the original
model) or structural (a valid archive rebuilt around crafted content: loading must fail clearly
or give a kernelscale object). Either way the traced peak memory must stay within
``load_memory_bound(file size)``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import struct
import tracemalloc
import zipfile
from dataclasses import dataclass
from typing import Callable

import numpy as np
from hypothesis import strategies as st
from sklearn.base import BaseEstimator

from kernelscale.kernels import GaussianKernel
from kernelscale.persistence import META_KEY, load, load_memory_bound, save

_CENTRAL = b"PK\x01\x02"
_INTERESTING = (0, 1, 2, 7, 8, 63, 64, 127, 128, 255, 256, 2**16 - 1, 2**16, 2**31 - 1, 2**31,
                2**32 - 1)


def assert_same(a, b, where="value"):
    """Deep equality that also checks types, dtypes, tuple-ness and NaNs."""
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, BaseEstimator) or dataclasses.is_dataclass(a):
        if isinstance(a, BaseEstimator):
            assert_same(a.get_params(deep=False), b.get_params(deep=False), f"{where}.params")
        state = lambda o: {k: v for k, v in vars(o).items() if not k.startswith("_")}  # noqa: E731
        assert_same(state(a), state(b), f"{where}.state")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype, where
        assert a == b or (a != a and b != b), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b, where


def central_entries(data):
    """{member name: offset of its central-directory record} of zip bytes."""
    out = {}
    pos = bytes(data).find(_CENTRAL)
    while pos >= 0 and data[pos:pos + 4] == _CENTRAL and pos + 46 <= len(data):
        n, e, c = struct.unpack_from("<HHH", data, pos + 28)
        out[bytes(data[pos + 46:pos + 46 + n]).decode("cp437")] = pos
        pos += 46 + n + e + c
    return out


def local_headers(data):
    """Offsets of the local file headers in zip bytes."""
    pos, out = bytes(data).find(b"PK\x03\x04"), []
    while pos >= 0:
        out.append(pos)
        pos = bytes(data).find(b"PK\x03\x04", pos + 4)
    return out


def original_models():
    """Small models covering every value kind the format stores."""
    k = GaussianKernel(sigma=np.float32(1.5))
    k.w_ = np.arange(12.0).reshape(3, 4)
    k.f_ = np.asfortranarray(np.ones((2, 3), np.float32))
    k.names_ = np.array(["a", "b\u00e9"], dtype=object)
    k.shared_ = k.w_
    k.info_ = {"t": (1, 2.5, None), "nan": float("nan"), "s": np.int16(3), "d": np.dtype(">i4"),
               "__k": [np.bool_(True), np.float64], "inner": GaussianKernel(sigma="median")}
    plain = GaussianKernel(sigma=2.0)
    plain.coef_ = np.linspace(-1, 1, 50)
    return [k, plain]


def model_bytes(model, tmp_dir):
    path = tmp_dir / "original.ks"
    save(model, path)
    return path.read_bytes()


# ----------------------------------------------------------------------------------------------
# byte-level mutations: (name, function of the bytes)


@dataclass(frozen=True)
class Mutation:
    """``apply(data) -> bytes``; ``byte_level`` mutations must give an error or the original."""

    name: str
    apply: Callable[[bytes], bytes]
    byte_level: bool


def _positions(draw, data, k):
    return [draw(st.integers(0, max(len(data) - 1, 0))) for _ in range(k)]


@st.composite
def byte_mutations(draw, data):
    kind = draw(st.sampled_from(["flip", "overwrite", "truncate", "insert", "delete",
                                 "zip-field", "append"]))
    buf = bytearray(data)
    if kind == "flip":
        for pos in _positions(draw, buf, draw(st.integers(1, 8))):
            buf[pos] ^= draw(st.integers(1, 255))
    elif kind == "overwrite":
        pos = draw(st.integers(0, len(buf) - 1))
        chunk = draw(st.binary(min_size=1, max_size=64))
        buf[pos:pos + len(chunk)] = chunk
    elif kind == "truncate":
        del buf[draw(st.integers(0, len(buf) - 1)):]
    elif kind == "insert":
        pos = draw(st.integers(0, len(buf)))
        buf[pos:pos] = draw(st.binary(min_size=1, max_size=64))
    elif kind == "delete":
        pos = draw(st.integers(0, len(buf) - 1))
        del buf[pos:pos + draw(st.integers(1, 64))]
    elif kind == "append":
        buf += draw(st.binary(min_size=1, max_size=256))
    else:  # a numeric field of a zip record set to an interesting value
        records = list(central_entries(buf).values())
        fields = [(p, off, size) for p in records
                  for off, size in ((10, 2), (16, 4), (20, 4), (24, 4), (28, 2), (30, 2),
                                    (42, 4))]
        fields += [(p, off, size) for p in local_headers(buf)
                   for off, size in ((8, 2), (18, 4), (22, 4), (26, 2), (28, 2))]
        eocd = bytes(buf).rfind(b"PK\x05\x06")
        if eocd >= 0:
            fields += [(eocd, off, size) for off, size in ((8, 2), (10, 2), (12, 4), (16, 4))]
        if fields:
            pos, off, size = draw(st.sampled_from(fields))
            value = draw(st.sampled_from(_INTERESTING)) % (1 << (8 * size))
            if pos + off + size <= len(buf):
                struct.pack_into("<H" if size == 2 else "<I", buf, pos + off, value)
    return Mutation(kind, lambda _: bytes(buf), byte_level=True)


# ----------------------------------------------------------------------------------------------
# structural mutations: a valid archive around crafted content

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=20) | st.sampled_from(
        ["__tuple__", "__dict__", "__ndarray__", "__object__", "a0", "a1", "a9", "<f8", "<U3",
         "|O", "V8", ">i4", "nan", "kernelscale.kernels.GaussianKernel",
         "kernelscale.features.FourierBlock", "numpy.float32", "float", "os.system"]),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["key", "dtype", "shape", "class", "params", "fitted",
                                       "__tuple__", "__dict__", "__ndarray__", "__scalar__",
                                       "__dtype__", "__type__", "__object__", "__float__",
                                       "object_str", "sigma", "w_", "x"]) | st.text(max_size=5),
                      inner, max_size=4),
    max_leaves=12,
)


def _read_entries(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {info.filename: z.read(info) for info in z.infolist()}


def _write_entries(entries, compressed=()):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, payload in entries.items():
            method = zipfile.ZIP_DEFLATED if name in compressed else zipfile.ZIP_STORED
            z.writestr(name, payload, compress_type=method)
    return out.getvalue()


def npy_bytes(a=None, *, header=None, data=b""):
    """The bytes of a .npy entry: ``np.save`` of ``a``, or a crafted ``header`` dict + ``data``."""
    if a is not None:
        buf = io.BytesIO()
        np.save(buf, a, allow_pickle=False)
        return buf.getvalue()
    text = repr(header).encode("latin1")
    text += b" " * (-(len(text) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


def _json_paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _json_paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _json_paths(v, prefix + (i,))


def _set(value, path, new):
    if not path:
        return new
    target = value
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return value


@st.composite
def structural_mutations(draw, data):
    entries = _read_entries(data)
    meta_name = META_KEY + ".npy"
    meta = json.loads(np.load(io.BytesIO(entries[meta_name])).tobytes())
    kind = draw(st.sampled_from(["json-value", "json-delete", "json-deep", "npy-header",
                                 "array-swap", "compress", "extra-entry", "drop-entry"]))
    compressed = ()
    if kind in ("json-value", "json-delete", "json-deep"):
        path = draw(st.sampled_from(list(_json_paths(meta))))
        if kind == "json-value":
            meta = _set(meta, path, draw(json_values))
        elif kind == "json-delete" and path:
            parent = _set(meta, (), meta)
            for step in path[:-1]:
                parent = parent[step]
            del parent[path[-1]]
        else:
            depth = draw(st.integers(1, 3000))
            text = '{"k": ' * depth + "0" + "}" * depth
            meta = _set(meta, path, "@@DEEP@@")
            blob = json.dumps(meta).replace('"@@DEEP@@"', text).encode()
            entries[meta_name] = npy_bytes(np.frombuffer(blob, np.uint8))
        if kind != "json-deep":
            entries[meta_name] = npy_bytes(np.frombuffer(json.dumps(meta).encode(), np.uint8))
    else:
        arrays = sorted(name for name in entries if name != meta_name)
        name = draw(st.sampled_from(arrays))
        if kind == "npy-header":
            descr = draw(st.sampled_from(["<f8", "<f4", ">i4", "|u1", "|b1", "<U1", "<U999999999",
                                          "|O", "V8", "<c16", "|S3", "<M8[D]"]))
            shape = draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 12, 2**20, 2**40, 2**63]),
                                  max_size=3).map(tuple))
            payload = entries[name]
            keep = draw(st.integers(0, len(payload)))
            header = {"descr": descr, "fortran_order": draw(st.booleans()), "shape": shape}
            entries[name] = npy_bytes(header=header, data=payload[-keep:] if keep else b"")
        elif kind == "array-swap":
            a = draw(st.sampled_from([np.zeros(0), np.arange(3.0), np.ones((3, 4)), np.int8(1),
                                      np.array(["x", "yz"]), np.zeros((2, 3), np.float32).T]))
            entries[name] = npy_bytes(np.asarray(a))
        elif kind == "compress":
            compressed = (name, meta_name) if draw(st.booleans()) else (name,)
        elif kind == "extra-entry":
            entries[draw(st.sampled_from(["a9.npy", "raw", name, "../x.npy"]))] = draw(
                st.binary(max_size=64) | st.just(npy_bytes(np.zeros(10**6))))
            compressed = ("a9.npy",) if draw(st.booleans()) else ()
        else:
            del entries[draw(st.sampled_from([name, meta_name]))]
    blob = _write_entries(entries, compressed)
    return Mutation(kind, lambda _: blob, byte_level=False)


def mutations(data):
    """Byte-level and structural mutations of the model file ``data``."""
    return byte_mutations(data) | structural_mutations(data)


# ----------------------------------------------------------------------------------------------
# one fuzz case


def run_case(original, data, mutation, tmp_dir, same):
    """Load the mutated file; return (outcome, detail). Outcomes: "equal" (loaded the original),
    "loaded" (a structural mutation gave another kernelscale object), "refused" (ValueError
    naming the file); findings: "not-equal", "bad-error", "over-memory"."""
    path = tmp_dir / "fuzzed.ks"
    path.write_bytes(mutation.apply(data))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        try:
            result, error = load(path), None
        except Exception as err:  # every other type is a finding
            result, error = None, err
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    if peak > load_memory_bound(size):
        return "over-memory", f"{mutation.name}: peak {peak} B for a {size} B file"
    if error is not None:
        if isinstance(error, ValueError) and str(path) in str(error) and len(str(error)) < 1000:
            return "refused", str(error).split(": ", 1)[-1][:60]
        return "bad-error", f"{mutation.name}: {type(error).__name__}: {str(error)[:300]}"
    if mutation.byte_level:
        return ("equal", "") if same(original, result) else ("not-equal", mutation.name)
    if type(result).__module__.startswith("kernelscale."):
        return "loaded", mutation.name
    return "bad-error", f"{mutation.name}: loaded a {type(result)}"


def same_model(a, b):
    """True when ``b`` equals ``a`` in type, parameters and every fitted value."""
    try:
        assert_same(a, b)
    except AssertionError:
        return False
    return True
