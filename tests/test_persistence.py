"""Tests of kernelscale.persistence: round trips of every estimator, value fidelity, tampering."""

import json
import math
import os
import pickle
import re
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from estimator_list import ESTIMATORS
from memcheck import peak_bytes
from model_fuzzing import assert_same, central_entries, local_headers, npy_bytes
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.preprocessing import StandardScaler

import kernelscale
from kernelscale import kernels
from kernelscale.kernels import GaussianKernel, LaplacianKernel, PolynomialKernel
from kernelscale.persistence import (
    FORMAT,
    FORMAT_VERSION,
    MAX_DEPTH,
    MAX_META_BYTES,
    META_KEY,
    PersistenceWarning,
    describe,
    load,
    load_memory_bound,
    save,
)

METHODS = ("predict", "transform", "decision_function", "predict_proba")


def roundtrip(obj, tmp_path, name="model.ks"):
    path = tmp_path / name
    save(obj, path)
    return load(path)


# ----------------------------------------------------------------------------------------------
# every estimator of the package (tests/estimator_list.py)


def _fit(est, dtype):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)).astype(dtype)
    if is_classifier(est):
        return clone(est).fit(X, (X[:, 0] + X[:, 1] > 0).astype(int)), X
    if is_regressor(est):
        return clone(est).fit(X, np.sin(X.sum(axis=1))), X
    return clone(est).fit(X), X


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_every_estimator_round_trips(estimator, dtype, tmp_path):
    fitted, X = _fit(estimator, dtype)
    loaded = roundtrip(fitted, tmp_path)
    assert type(loaded) is type(fitted)
    assert_same(fitted, loaded, type(fitted).__name__)  # params and every fitted attribute
    X_new = np.random.default_rng(1).normal(size=(15, X.shape[1])).astype(dtype)
    used = [m for m in METHODS if hasattr(fitted, m)]
    assert used, f"{type(fitted).__name__} has none of {METHODS}"
    for method in used:
        expected = getattr(fitted, method)(X_new)
        got = getattr(loaded, method)(X_new)
        assert got.dtype == expected.dtype
        assert np.array_equal(got, expected), method


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_unfitted_estimator_round_trips(estimator, tmp_path):
    loaded = roundtrip(clone(estimator), tmp_path)
    assert_same(clone(estimator), loaded)


# ----------------------------------------------------------------------------------------------
# values


def test_values_survive_with_their_types(tmp_path):
    k = GaussianKernel(sigma=np.float32(1.5))
    k.values_ = {
        "tuple": (1, 2.5, "a", (None, True)),
        "list": [1, [2, 3], []],
        "nan": float("nan"),
        "inf": float("inf"),
        "-inf": float("-inf"),
        "float": 0.1,
        "int_like_float": 2.0,
        "big": 2**70,
        "f32": np.float32(1.1),
        "f64nan": np.float64("nan"),
        "i8": np.int8(-3),
        "u64": np.uint64(2**64 - 1),
        "bool": np.bool_(True),
        "none": None,
        "dtype": np.dtype("float32"),
        "be_dtype": np.dtype(">i4"),
        "np_type": np.float32,
        "py_type": float,
        "__dunder_key": {"__tuple__": 1},
        "unicode": np.array(["ab", "cé"]),
        "f32_array": np.ones((2, 3), np.float32),
        "f64_nan_array": np.array([np.nan, np.inf, -np.inf, 1.0]),
        "bools": np.array([True, False]),
        "complex": np.array([1 + 2j], np.complex64),
        "empty": np.zeros((0, 3)),
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        "nested": {"x": (np.arange(3),)},
        "text": "é ☃",
    }
    loaded = roundtrip(k, tmp_path)
    assert_same(k, loaded)
    v = loaded.values_
    assert isinstance(v["tuple"], tuple) and isinstance(v["tuple"][3], tuple)
    assert isinstance(v["list"], list)
    assert math.isnan(v["nan"]) and v["inf"] == math.inf and v["-inf"] == -math.inf
    assert type(v["int_like_float"]) is float and type(v["big"]) is int
    assert v["f32_array"].dtype == np.float32 and v["f32"].dtype == np.float32
    assert v["np_type"] is np.float32 and v["py_type"] is float
    assert loaded.sigma.dtype == np.float32


def test_object_arrays_of_str_survive_as_object_arrays(tmp_path):
    k = GaussianKernel(sigma=1.0)
    k.feature_names_in_ = np.array(["a", "bb"], dtype=object)
    loaded = roundtrip(k, tmp_path)
    assert loaded.feature_names_in_.dtype == object
    assert loaded.feature_names_in_.tolist() == ["a", "bb"]


def test_nested_kernel_objects_survive(tmp_path):
    outer = GaussianKernel(sigma=2.0)
    outer.parts_ = [PolynomialKernel(degree=2, gamma=0.5), LaplacianKernel(sigma=np.float32(3))]
    outer.parts_[0].inner_ = GaussianKernel(sigma="median")
    loaded = roundtrip(outer, tmp_path)
    assert_same(outer, loaded)
    assert isinstance(loaded.parts_[0], PolynomialKernel)
    assert isinstance(loaded.parts_[0].inner_, GaussianKernel)
    X = np.random.default_rng(0).normal(size=(5, 2))
    np.testing.assert_array_equal(loaded.parts_[0](X), outer.parts_[0](X))


def test_an_array_referenced_twice_is_stored_once(tmp_path):
    k = GaussianKernel(sigma=1.0)
    k.a_ = k.b_ = np.arange(5.0)
    path = tmp_path / "m.ks"
    save(k, path)
    with np.load(path, allow_pickle=False) as f:
        assert sorted(f.files) == sorted([META_KEY, "a0"])
    loaded = load(path)
    assert loaded.a_ is loaded.b_


def test_file_is_plain_npz_with_json_and_written_at_the_given_path(tmp_path):
    k = GaussianKernel(sigma=1.0)
    k.w_ = np.arange(4, dtype=np.float32)
    path = tmp_path / "model.kernelscale"
    assert save(k, path) == path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.kernelscale"]
    with np.load(path, allow_pickle=False) as f:  # readable without kernelscale
        meta = json.loads(bytes(f[META_KEY]).decode("utf-8"))
        ref = meta["fitted"]["w_"]["__ndarray__"]
        np.testing.assert_array_equal(f[ref["key"]], k.w_)
    assert meta["format"] == FORMAT and meta["format_version"] == FORMAT_VERSION
    assert meta["class"] == "kernelscale.GaussianKernel"
    assert meta["params"] == {"sigma": 1.0}
    assert describe(path) == meta


# ----------------------------------------------------------------------------------------------
# what save refuses or replaces


class CallbackKernel(GaussianKernel):
    """A kernelscale-registered stand-in with a callback and a random_state parameter."""

    def __init__(self, sigma=1.0, callback=None, random_state=None):
        self.sigma = sigma
        self.callback = callback
        self.random_state = random_state


CallbackKernel.__module__ = "kernelscale.kernels"


@pytest.fixture
def callback_kernel(monkeypatch):
    monkeypatch.setattr(kernels, "CallbackKernel", CallbackKernel, raising=False)
    return CallbackKernel


def test_callback_and_random_state_objects_are_saved_as_none(callback_kernel, tmp_path):
    k = callback_kernel(sigma=2.0, callback=print, random_state=np.random.RandomState(0))
    with pytest.warns(PersistenceWarning) as record:
        loaded = roundtrip(k, tmp_path)
    messages = " ".join(str(w.message) for w in record)
    assert "callback" in messages and "random_state" in messages
    assert loaded.callback is None and loaded.random_state is None and loaded.sigma == 2.0
    k2 = callback_kernel(random_state=np.random.default_rng(0))
    with pytest.warns(PersistenceWarning, match="Generator"):
        assert roundtrip(k2, tmp_path).random_state is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert roundtrip(callback_kernel(random_state=7), tmp_path).random_state == 7


@pytest.mark.parametrize(
    "attr, value",
    [
        ("hook_", lambda x: x),
        ("rng_", np.random.RandomState(0)),
        ("objects_", np.array([{"a": 1}, 2], dtype=object)),
        ("scaler_", StandardScaler()),
        ("keys_", {1: "int key"}),
        ("when_", np.datetime64("2020-01-01")),
        ("masked_", np.ma.array([1.0, 2.0], mask=[0, 1])),
        ("set_", {1, 2}),
    ],
)
def test_unsupported_fitted_values_raise_naming_the_attribute(attr, value, tmp_path):
    k = GaussianKernel(sigma=1.0)
    setattr(k, attr, value)
    with pytest.raises(TypeError, match=attr):
        save(k, tmp_path / "m.ks")
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_unsupported_parameter_raises_naming_it(tmp_path):
    with pytest.raises(TypeError, match="sigma"):
        save(GaussianKernel(sigma=lambda: 1.0), tmp_path / "m.ks")


def test_save_refuses_foreign_and_local_classes(tmp_path):
    with pytest.raises(TypeError, match="kernelscale"):
        save(StandardScaler(), tmp_path / "m.ks")

    class Local(GaussianKernel):
        pass

    Local.__module__ = "kernelscale.kernels"
    with pytest.raises(TypeError, match="cannot be found"):
        save(Local(sigma=1.0), tmp_path / "m.ks")


# ----------------------------------------------------------------------------------------------
# tampered and foreign files


def saved_kernel(tmp_path):
    k = GaussianKernel(sigma=1.0)
    k.w_ = np.arange(3.0)
    path = tmp_path / "m.ks"
    save(k, path)
    return path


def rewrite(path, mutate=None, **entries):
    """Rewrite a model file with its metadata passed through `mutate` and entries replaced."""
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(bytes(arrays[META_KEY]).decode())
    if mutate is not None:
        mutate(meta)
    arrays[META_KEY] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    arrays.update(entries)
    with open(path, "wb") as f:
        np.savez(f, **arrays)  # pickles object arrays, as an attacker's file would


class Evil:
    """Unpickling this creates the file `marker`: proof that code from the file ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("version", [2, 0, "1", True, None])
def test_unknown_format_version_is_refused(version, tmp_path):
    path = saved_kernel(tmp_path)
    rewrite(path, lambda m: m.__setitem__("format_version", version))
    with pytest.raises(ValueError, match="format_version") as info:
        load(path)
    assert "reads format version(s) 1" in str(info.value) and "upgrade" in str(info.value)
    assert describe(path)["format_version"] == version  # describe still shows it


def test_other_format_is_refused(tmp_path):
    path = saved_kernel(tmp_path)
    rewrite(path, lambda m: m.__setitem__("format", "something-else"))
    with pytest.raises(ValueError, match="kernelscale-model"):
        load(path)


@pytest.mark.parametrize(
    "class_path",
    [
        "os.system",
        "builtins.eval",
        "sklearn.svm.SVC",
        "kernelscale.kernels.BaseEstimator",  # imported into kernelscale, defined elsewhere
        "kernelscale.kernels.make_kernel",  # a function
        "kernelscale.kernels.np",  # a module
        "kernelscale.kernels.__builtins__",
        "kernelscale.no_such_module.Thing",
        "kernelscale..GaussianKernel",
        "kernelscale.kernels.GaussianKernel.__init__",
        42,
    ],
)
@pytest.mark.parametrize("nested", [False, True])
def test_foreign_classes_are_refused(class_path, nested, tmp_path):
    path = saved_kernel(tmp_path)
    marker = tmp_path / "marker"
    evil = {"class": class_path, "params": {"command": f"touch {marker}"}, "fitted": {}}

    def mutate(meta):
        if nested:
            meta["fitted"]["inner_"] = {"__object__": evil}
        else:
            meta.update(evil)

    rewrite(path, mutate)
    with pytest.raises(ValueError, match="refusing to load class"):
        load(path)
    assert not marker.exists()


@pytest.mark.parametrize("name", ["__class__", "fit", "_private_", "a.b_", "diag"])
def test_bad_fitted_attribute_names_are_refused(name, tmp_path):
    path = saved_kernel(tmp_path)
    rewrite(path, lambda m: m["fitted"].__setitem__(name, 1))
    with pytest.raises(ValueError, match="attribute"):
        load(path)


def test_unknown_parameter_and_unknown_tag_are_refused(tmp_path):
    path = saved_kernel(tmp_path)
    rewrite(path, lambda m: m["params"].__setitem__("gamma", 1.0))
    with pytest.raises(ValueError, match="gamma"):
        load(path)
    path = saved_kernel(tmp_path)
    rewrite(path, lambda m: m["fitted"].__setitem__("x_", {"__eval__": "1+1"}))
    with pytest.raises(ValueError, match="unknown tag"):
        load(path)


def test_object_array_with_pickle_inside_is_refused(tmp_path):
    marker = tmp_path / "marker"
    path = saved_kernel(tmp_path)
    rewrite(path, a0=np.array([Evil(marker)], dtype=object))
    with pytest.raises(ValueError, match="pickle"):
        load(path)
    path = saved_kernel(tmp_path)
    rewrite(path, **{META_KEY: np.array([Evil(marker)], dtype=object)})
    with pytest.raises(ValueError, match="pickle"):
        load(path)
    with pytest.raises(ValueError, match="pickle"):
        describe(path)
    assert not marker.exists()


def test_pickle_file_is_refused(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(Evil(marker)))
    with pytest.raises(ValueError, match="not a valid kernelscale model"):
        load(path)
    assert not marker.exists()


def test_other_non_model_files_are_refused(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("hello")
    npy = tmp_path / "a.npy"
    np.save(npy, np.arange(3))
    plain = tmp_path / "p.npz"
    np.savez(plain, x=np.arange(3))
    for path in (text, npy, plain):
        with pytest.raises(ValueError, match="not a valid kernelscale model"):
            load(path)


def test_inconsistent_arrays_are_refused(tmp_path):
    path = saved_kernel(tmp_path)
    rewrite(path, a0=np.arange(3, dtype=np.float32))  # metadata says <f8
    with pytest.raises(ValueError, match="dtype"):
        load(path)
    path = saved_kernel(tmp_path)
    rewrite(path, a0=np.arange(4.0))
    with pytest.raises(ValueError, match="shape"):
        load(path)
    path = saved_kernel(tmp_path)
    rewrite(path, lambda m: m["fitted"]["w_"]["__ndarray__"].__setitem__("key", "a9"))
    with pytest.raises(ValueError, match="missing"):
        load(path)
    path = saved_kernel(tmp_path)
    rewrite(path, lambda m: m["fitted"]["w_"]["__ndarray__"].__setitem__("dtype", "O"))
    with pytest.raises(ValueError, match="dtype"):
        load(path)


def test_zip_member_that_is_not_npy_is_refused(tmp_path):
    path = saved_kernel(tmp_path)
    rewrite(path, lambda m: m["fitted"]["w_"]["__ndarray__"].__setitem__("key", "raw"))
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("raw", b"\x80\x04payload")
    with pytest.raises(ValueError, match="not a .npy"):
        load(path)


# ----------------------------------------------------------------------------------------------
# loading is bounded by the file (issue 19, item 2)


def model_file(path, fitted=None, arrays=None, compressed=(), meta_text=None):
    """Write a GaussianKernel model file by hand: ``fitted`` metadata, ``arrays`` as .npy bytes
    or arrays, the entries named in ``compressed`` deflated. Returns the path."""
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "kernelscale_version": "0.1.0",
            "class": "kernelscale.kernels.GaussianKernel", "params": {"sigma": 1.0},
            "fitted": fitted or {}}
    text = json.dumps(meta) if meta_text is None else meta_text
    entries = {META_KEY: np.frombuffer(text.encode(), np.uint8), **(arrays or {})}
    with zipfile.ZipFile(path, "w") as z:
        for key, value in entries.items():
            method = zipfile.ZIP_DEFLATED if key in compressed else zipfile.ZIP_STORED
            z.writestr(key + ".npy", value if isinstance(value, bytes) else npy_bytes(value),
                       compress_type=method)
    return path


def outcome(fn, *args):
    """fn(*args), or the ValueError it raised."""
    try:
        return fn(*args)
    except ValueError as err:
        return err


def assert_refused_within_bound(path, match, readers=(load, describe)):
    """Every reader refuses the file with a message naming it, within the stated memory bound."""
    for reader in readers:
        peak, result = peak_bytes(lambda: outcome(reader, path))
        assert peak <= load_memory_bound(path.stat().st_size), (reader.__name__, peak)
        assert isinstance(result, ValueError), f"{reader.__name__} accepted the file"
        assert str(path) in str(result) and re.search(match, str(result)), str(result)
        assert len(str(result)) < 1000


def ref(key, dtype, shape, **extra):
    return {"__ndarray__": {"key": key, "dtype": dtype, "shape": shape, **extra}}


def test_compressed_entries_are_refused_before_decompressing(tmp_path):
    # 8 MB of zeros deflate to 8 KB: a zip bomb in an array entry and in the metadata
    zeros = np.zeros(10**6)
    path = model_file(tmp_path / "bomb.ks", {"w_": ref("a0", "<f8", [10**6])}, {"a0": zeros},
                      compressed=("a0",))
    assert path.stat().st_size < 20_000
    assert_refused_within_bound(path, "compressed", readers=(load,))
    meta = json.dumps({"format": FORMAT, "format_version": 1, "params": {}, "fitted": {},
                       "class": "kernelscale.kernels.GaussianKernel"}) + " " * 8 * 2**20
    path = model_file(tmp_path / "meta.ks", meta_text=meta, compressed=(META_KEY,))
    assert_refused_within_bound(path, "compressed")


def test_declared_shape_is_checked_against_the_entry_before_allocating(tmp_path):
    # the .npy header (and the metadata) declare 32 MB; the entry holds 24 bytes
    header = {"descr": "<f8", "fortran_order": False, "shape": (4 * 10**6,)}
    path = model_file(tmp_path / "shape.ks", {"w_": ref("a0", "<f8", [4 * 10**6])},
                      {"a0": npy_bytes(header=header, data=bytes(24))})
    assert_refused_within_bound(path, "declares shape", readers=(load,))


def test_metadata_larger_than_the_limit_is_refused(tmp_path):
    meta = json.dumps({"format": FORMAT, "format_version": 1, "params": {}, "fitted": {},
                       "class": "kernelscale.kernels.GaussianKernel"})
    path = model_file(tmp_path / "big.ks", meta_text=meta + " " * MAX_META_BYTES)
    assert_refused_within_bound(path, "MAX_META_BYTES")


def nested(depth, key="k"):
    value = 0
    for _ in range(depth):
        value = {key: value}
    return value


@pytest.mark.parametrize("fitted", [
    "[" * 10**5 + "]" * 10**5,  # too deep for the JSON parser
    json.dumps(nested(300, key="k" * 2500)),  # quadratic error-context strings when decoded
], ids=["deep", "deep-long-keys"])
def test_deeply_nested_metadata_is_refused(fitted, tmp_path):
    text = json.dumps({"format": FORMAT, "format_version": 1, "params": {}, "fitted": "F",
                       "class": "kernelscale.kernels.GaussianKernel"})
    path = model_file(tmp_path / "deep.ks", meta_text=text.replace('"F"', '{"x_": %s}' % fitted))
    assert_refused_within_bound(path, "nests deeper")


def test_metadata_within_the_limits_loads(tmp_path):
    k = GaussianKernel(sigma=1.0)
    k.tree_ = nested(MAX_DEPTH - 2, key="k" * 10_000)  # the model's own levels take 2
    path = tmp_path / "m.ks"
    save(k, path)
    peak, loaded = peak_bytes(lambda: load(path))
    assert_same(k, loaded)
    assert peak <= load_memory_bound(path.stat().st_size)


def test_repeated_references_are_converted_once(tmp_path):
    # one str array referenced 100 times as an object array, one long str scalar 200 times
    names = np.array(["\U0001F600"] * 4000)
    text = np.array("\U0001F600" * 10**5)
    fitted = {"names_": [ref("a0", names.dtype.str, [4000], object_str=True)] * 100,
              "text_": [{"__scalar__": {"key": "a1", "dtype": text.dtype.str}}] * 200}
    path = model_file(tmp_path / "refs.ks", fitted, {"a0": names, "a1": text})
    peak, loaded = peak_bytes(lambda: load(path))
    assert loaded.names_[0] is loaded.names_[99] and loaded.names_[0].dtype == object
    assert loaded.text_[0] == text[()]
    assert peak <= load_memory_bound(path.stat().st_size)


@pytest.mark.parametrize("fitted, match", [
    ({"x_": {"__type__": []}}, "unsupported type"),
    ({"x_": {"__dtype__": "U" + "9" * 30}}, "unsupported dtype"),
    ({"x_": {"__object__": {"class": "kernelscale." + "x" * 10**6}}}, "refusing to load class"),
    ({"x_": {"__object__": {"class": "kernelscale.ops.feature_blocks.FeatureBlockSpec",
                            "params": {"kernel": "no-such-kernel", "n_features_in": 1,
                                       "block_size": 2, "seed": 0}}}}, "refused the stored"),
    ({"x_": {"__ndarray__": {"key": "a0", "dtype": "<f8", "shape": {"a": 1}}}}, "shape"),
])
def test_malformed_metadata_gives_a_short_error_naming_the_file(fitted, match, tmp_path):
    path = model_file(tmp_path / "m.ks", fitted, {"a0": np.arange(3.0)})
    assert_refused_within_bound(path, match, readers=(load,))


def test_an_integer_too_long_for_python_is_a_clear_error(tmp_path):
    text = json.dumps({"format": FORMAT, "format_version": 1, "params": {}, "fitted": {},
                       "class": "kernelscale.kernels.GaussianKernel"})
    path = model_file(tmp_path / "m.ks", meta_text=text[:-1] + ', "n": ' + "9" * 5000 + "}")
    assert_refused_within_bound(path, "not UTF-8 JSON")


def test_entries_declaring_more_bytes_than_the_file_are_refused(tmp_path):
    path = saved_kernel(tmp_path)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("a0.npy")
    # the central directory's sizes of a0.npy: uncompressed only, then both (forged entries)
    central = central_entries(data)["a0.npy"]
    struct.pack_into("<I", data, central + 24, info.file_size + 8)
    path.write_bytes(bytes(data))
    assert_refused_within_bound(path, "declares")
    struct.pack_into("<II", data, central + 20, 2**31, 2**31)
    path.write_bytes(bytes(data))
    assert_refused_within_bound(path, "more than the file")


# ----------------------------------------------------------------------------------------------
# saving is atomic, exclusive and cleans up (issue 19, item 5; issue 18, persistence)


def weights_model(value, n=200_000):
    k = GaussianKernel(sigma=1.0)
    k.w_ = np.full(n, float(value))
    return k


def test_concurrent_saves_to_one_path_all_succeed_with_one_complete_winner(tmp_path):
    path = tmp_path / "m.ks"
    n_threads, rounds = 6, 3
    barrier = threading.Barrier(n_threads)
    errors = []

    def writer(i):
        model = weights_model(i)
        try:
            barrier.wait()
            for _ in range(rounds):
                save(model, path)
        except BaseException as err:  # noqa: BLE001 - every failure is the finding
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    w = load(path).w_
    assert w.shape == (200_000,) and np.all(w == w[0]) and w[0] in range(n_threads)
    assert [p.name for p in tmp_path.iterdir()] == ["m.ks"]


def test_a_symlink_at_the_temporary_path_is_never_written_through(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    path = tmp_path / "m.ks"
    (tmp_path / "m.ks.tmp").symlink_to(victim)  # the old fixed temporary name
    save(weights_model(1, n=10), path)
    assert victim.read_bytes() == b"precious"
    # even when the random name is guessed, the exclusive creation refuses the planted link
    names = iter(["guessed", "fresh"])
    monkeypatch.setattr("kernelscale.persistence.secrets.token_hex", lambda n: next(names))
    (tmp_path / ".m.ks.guessed.tmp").symlink_to(victim)
    save(weights_model(2, n=10), path)
    assert victim.read_bytes() == b"precious"
    assert load(path).w_[0] == 2.0


def test_a_symlink_at_the_target_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim.ks"
    save(weights_model(1, n=10), victim)
    link = tmp_path / "link.ks"
    link.symlink_to(victim)
    save(weights_model(2, n=10), link)
    assert not link.is_symlink() and load(link).w_[0] == 2.0
    assert load(victim).w_[0] == 1.0


def test_an_interrupted_save_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch):
    path = tmp_path / "m.ks"
    save(weights_model(1, n=10), path)
    before = path.read_bytes()

    def interrupted(f, **arrays):
        f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save(weights_model(2, n=10), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.ks"]


def test_save_fsyncs_the_new_file_before_renaming_it(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", stat.S_ISREG(os.fstat(fd).st_mode)))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    save(weights_model(1, n=10), tmp_path / "m.ks")
    assert events[:2] == [("fsync", True), ("replace", "m.ks")]


def test_saved_file_mode_follows_the_umask(tmp_path):
    umask = os.umask(0o022)
    try:
        save(weights_model(1, n=10), tmp_path / "m.ks")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "m.ks").stat().st_mode) == 0o644


SIGTERM_SCRIPT = """
import sys, time
import numpy as np
from kernelscale.kernels import GaussianKernel
from kernelscale.persistence import save

def slow_savez(f, **arrays):
    f.write(b"partial")
    f.flush()
    open(sys.argv[2], "w").close()
    time.sleep(60)

np.savez = slow_savez
save(GaussianKernel(sigma=1.0), sys.argv[1])
"""


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name != "posix", reason="POSIX signals")
def test_sigterm_during_save_removes_the_temporary_file(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    ready = tmp_path / "ready"
    source = str(Path(kernelscale.__file__).resolve().parents[1])  # the kernelscale under test
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT, str(out / "m.ks"), str(ready)],
                            env=env)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ready.exists(), "the save never started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM  # still terminated by the signal
    finally:
        proc.kill()
        proc.wait()
    assert list(out.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "m.ks"
    os.mkfifo(fifo)
    result = []
    reader = threading.Thread(target=lambda: result.append(outcome(load, fifo)), daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # unblock the reader before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=10)
        pytest.fail("load waited for a writer on a FIFO")
    assert isinstance(result[0], ValueError) and "not a regular file" in str(result[0])


def test_saving_into_a_missing_directory_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such-dir"):
        save(weights_model(1, n=10), tmp_path / "no-such-dir" / "m.ks")


def test_a_corrupt_local_header_is_a_clear_error(tmp_path):
    # found by the fuzz run: the UTF-8 flag set on a local header whose name is not UTF-8
    path = saved_kernel(tmp_path)
    data = bytearray(path.read_bytes())
    local = local_headers(data)[-1]
    data[local + 7] |= 0x08  # general purpose flag bit 11: the name is UTF-8
    data[local + 30] = 0xFF  # first byte of the name
    path.write_bytes(bytes(data))
    assert_refused_within_bound(path, "corrupt", readers=(load,))


def test_metadata_is_stored_described_and_ignored_by_load(tmp_path):
    """save(..., metadata=) keeps a JSON object (kernelscale fit: the data file's columns) that
    describe returns and load ignores; values that are not plain JSON are refused."""
    from kernelscale import ExactKernelRidge, load, save
    from kernelscale.persistence import describe

    X = np.random.default_rng(0).normal(size=(20, 2))
    model = ExactKernelRidge(kernel="rbf").fit(X, X[:, 0])
    columns = {"columns": {"names": ["a", "b", "y"], "target": 2, "one_hot": [[0, ["x", "y"]]]}}
    save(model, tmp_path / "m.ksm", metadata=columns)
    assert describe(tmp_path / "m.ksm")["metadata"] == columns
    np.testing.assert_array_equal(load(tmp_path / "m.ksm").predict(X), model.predict(X))
    save(model, tmp_path / "plain.ksm")
    assert "metadata" not in describe(tmp_path / "plain.ksm")
    for bad in ({"x": np.float32(1)}, {"x": float("nan")}, ["not", "a", "dict"]):
        with pytest.raises(TypeError, match="metadata"):
            save(model, tmp_path / "bad.ksm", metadata=bad)
