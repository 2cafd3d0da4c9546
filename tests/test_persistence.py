"""Tests of kernelscale.persistence: round trips of every estimator, value fidelity, tampering."""

import dataclasses
import json
import math
import pickle
import warnings
import zipfile

import numpy as np
import pytest
from estimator_list import ESTIMATORS
from sklearn.base import BaseEstimator, clone, is_classifier, is_regressor
from sklearn.preprocessing import StandardScaler

from kernelscale import kernels
from kernelscale.kernels import GaussianKernel, LaplacianKernel, PolynomialKernel
from kernelscale.persistence import (
    FORMAT,
    FORMAT_VERSION,
    META_KEY,
    PersistenceWarning,
    describe,
    load,
    save,
)

METHODS = ("predict", "transform", "decision_function", "predict_proba")


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
    assert meta["class"] == "kernelscale.kernels.GaussianKernel"
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
