"""Dask arrays as estimator input (kernelscale._dask, behind DeviceMixin).

Every estimator of the registry, on a dask array chunked by rows, fits the model numpy fits (the
arrays are gathered) and predicts lazily, chunk by chunk, what numpy predicts (to 1e-8 relative
in float64); on the synchronous scheduler for all of them, on a two-process LocalCluster for a
few. Bad dask input gets an error naming the argument and the fix; inside a dask worker the
default memory budget is the worker's memory limit per thread.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline

import kernelscale
from kernelscale import registry
from kernelscale.ops.memory import DEFAULT_MEMORY_FRACTION, available_memory, dask_worker_memory, default_memory_budget

from estimator_list import ESTIMATORS as CONFIGS
from estimator_list import FLOAT32_LSSVM

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

N, D, ROWS = 300, 5, 70  # row chunks of 70, 70, 70, 70, 20
MAPPED = ("predict", "decision_function", "predict_proba", "predict_log_proba", "transform")


@pytest.fixture(scope="module")
def data():
    X, y_class = make_classification(n_samples=N, n_features=D, n_informative=3, random_state=0)
    rng = np.random.default_rng(0)
    y_reg = X @ rng.normal(size=D) + 0.1 * rng.normal(size=N)
    w = rng.uniform(0.5, 2.0, size=N)
    return X, y_class, y_reg, w


@pytest.fixture
def sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def _dask(a, cols=None):
    """``a`` as a dask array with row chunks of ROWS (and column chunks of ``cols``)."""
    return da.from_array(a, chunks=(ROWS,) + ((cols or a.shape[1],) if a.ndim == 2 else ()))


def _configs(cls):
    """The test configurations of ``cls`` (tests/estimator_list.py), each seeded."""
    out = []
    for est in CONFIGS:
        if type(est) is cls:
            est = clone(est)
            if "random_state" in est.get_params() and est.random_state is None:
                est.set_params(random_state=0)  # a seeded fit: two fits give the same model
            out.append(est)
    assert out, f"{cls.__name__} has no configuration in tests/estimator_list.py"
    return out


def _target(entry, data):
    X, y_class, y_reg, w = data
    return {"classifier": y_class, "regressor": y_reg, "transformer": None}[entry.kind]


def _assert_same_value(a, b, where):
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            _assert_same_value(u, v, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same_value(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (int, float, np.number, str, bool, type(None))):
        assert a == b or (a != a and b != b), f"{where}: {a!r} != {b!r}"
    elif hasattr(a, "get_params"):
        assert type(a) is type(b), where
        _assert_same_value(a.get_params(deep=False), b.get_params(deep=False), where)
    elif hasattr(a, "__dict__"):
        assert type(a) is type(b), where
        _assert_same_value(vars(a), vars(b), where)
    else:
        assert repr(a) == repr(b), where


def assert_same_model(a, b):
    """The fitted attributes (ending in ``_``) of a and b are identical."""
    fitted = sorted(k for k in vars(a) if k.endswith("_") and not k.startswith("_"))
    assert fitted, f"{type(a).__name__} has no fitted attributes"
    assert fitted == sorted(k for k in vars(b) if k.endswith("_") and not k.startswith("_"))
    for key in fitted:
        _assert_same_value(vars(a)[key], vars(b)[key], f"{type(a).__name__}.{key}")


def assert_same_predictions(expected, lazy, X_dask, est):
    assert isinstance(lazy, da.Array), f"a dask X gave {type(lazy).__name__}, not a dask array"
    assert lazy.chunks[0] == X_dask.chunks[0], "the result lost X's row chunks"
    got = lazy.compute()
    assert isinstance(got, np.ndarray) and got.shape == expected.shape and got.dtype == expected.dtype
    if expected.dtype.kind == "f":
        # each chunk runs numpy's method; float32 models round differently with the block's size
        rtol = 1e-5 if est is FLOAT32_LSSVM or getattr(est, "dtype", None) == np.float32 else 1e-8
        scale = np.abs(expected[np.isfinite(expected)]).max(initial=0.0)
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale)
    else:
        np.testing.assert_array_equal(got, expected)


# -- every estimator, synchronous scheduler ---------------------------------------------------

@pytest.mark.parametrize("entry", registry.ESTIMATORS, ids=lambda e: e.name)
def test_fit_and_predict_on_dask_equal_numpy(entry, data, sync):
    X, _, _, w = data
    y = _target(entry, data)
    Xd = _dask(X, cols=3)  # columns in two chunks: rechunked to one
    for est in _configs(entry.cls):
        if y is None:
            ref, got = clone(est).fit(X), clone(est).fit(Xd)
        else:
            ref = clone(est).fit(X, y, sample_weight=w)
            got = clone(est).fit(Xd, _dask(y), sample_weight=_dask(w))
        assert_same_model(ref, got)
        methods = [m for m in MAPPED if hasattr(ref, m)]
        assert methods
        for method in methods:
            expected = getattr(ref, method)(X)
            assert_same_predictions(expected, getattr(got, method)(Xd), Xd, est)
            with dask.config.set(scheduler="threads", num_workers=2):  # chunks at once on one shared model
                assert_same_predictions(expected, getattr(got, method)(Xd), Xd, est)
        if entry.kind == "transformer":  # TransformerMixin's fit_transform: a gathering fit, a lazy transform
            assert_same_predictions(clone(est).fit_transform(X), clone(est).fit_transform(Xd), Xd, est)
        if hasattr(ref, "score") and y is not None:
            expected = ref.score(X, y, sample_weight=w)
            assert got.score(Xd, _dask(y), sample_weight=_dask(w)) == pytest.approx(expected, rel=1e-8)
            assert got.score(Xd, y) == pytest.approx(ref.score(X, y), rel=1e-8)  # a numpy y with a dask X


@pytest.mark.parametrize("entry", [e for e in registry.ESTIMATORS if hasattr(e.cls, "partial_fit")],
                         ids=lambda e: e.name)
def test_partial_fit_on_dask_equals_numpy(entry, data, sync):
    X, y_class, _, w = data
    y = _target(entry, data)
    est = _configs(entry.cls)[0]
    extra = {"classes": np.unique(y_class)} if entry.kind == "classifier" else {}
    ref, got = clone(est), clone(est)
    for part in (slice(0, 140), slice(140, N)):
        ref.partial_fit(X[part], y[part], sample_weight=w[part], **extra)
        got.partial_fit(_dask(X[part]), _dask(y[part]), sample_weight=_dask(w[part]), **extra)
    assert_same_model(ref, got)
    np.testing.assert_allclose(got.predict(_dask(X)).compute(), ref.predict(X), rtol=1e-8)


def test_multioutput_targets_and_float32_input(data, sync):
    X, _, y, _ = data
    Y = np.column_stack([y, -2 * y])
    ref = kernelscale.ExactKernelRidge(alpha=0.5).fit(X, Y)
    got = kernelscale.ExactKernelRidge(alpha=0.5).fit(_dask(X), _dask(Y))
    assert_same_model(ref, got)
    lazy = got.predict(_dask(X))
    assert lazy.shape == (N, 2) and lazy.chunks == (_dask(X).chunks[0], (2,))
    np.testing.assert_allclose(lazy.compute(), ref.predict(X), rtol=1e-8)
    X32 = X.astype(np.float32)
    ref32 = kernelscale.ExactKernelRidge(alpha=0.5).fit(X32, Y.astype(np.float32))
    got32 = kernelscale.ExactKernelRidge(alpha=0.5).fit(_dask(X32), _dask(Y.astype(np.float32)))
    assert_same_model(ref32, got32)
    lazy = got32.predict(_dask(X32))
    assert lazy.dtype == np.float32 == ref32.predict(X32).dtype  # float32 in, float32 out, as numpy
    np.testing.assert_allclose(lazy.compute(), ref32.predict(X32), rtol=1e-5, atol=1e-5)


def test_a_pipeline_of_kernelscale_steps_takes_dask_arrays(data, sync):
    X, _, y, _ = data
    pipe = make_pipeline(kernelscale.RandomFourierFeatures(n_components=32, random_state=0),
                         kernelscale.ExactKernelRidge(kernel="linear", alpha=1.0))
    ref, got = clone(pipe).fit(X, y), clone(pipe).fit(_dask(X), _dask(y))
    assert_same_model(ref[-1], got[-1])
    assert_same_predictions(ref.predict(X), got.predict(_dask(X)), _dask(X), ref)


def test_predictions_are_lazy_one_task_per_row_chunk_and_the_state_shipped_once(data, sync):
    X, y, _, _ = data
    est = kernelscale.DoublyStochasticClassifier("gaussian", loss="logistic", n_iter=10, batch_size=64, block_size=16,
                                                 random_state=0).fit(X, y)
    calls = []

    def load(block):  # the chunks of X, counted when they are computed
        calls.append(block.shape[0])
        return block

    Xd = _dask(X).map_blocks(load, dtype=X.dtype, meta=np.empty((0, 0)))
    lazy = est.predict_proba(Xd)
    assert calls == [] and isinstance(lazy, da.Array)  # nothing computed yet
    graph = dict(lazy.__dask_graph__())
    assert len([k for k in graph if isinstance(k, tuple) and k[0] == lazy.name]) == len(Xd.chunks[0])
    states = [k for k in graph if isinstance(k, str) and k.startswith("kernelscale-DoublyStochasticClassifier")]
    assert len(states) == 1  # one key with the fitted estimator, every chunk task depends on it
    expected = est.predict_proba(X)
    est.set_params(random_state=1).fit(X[::-1], y[::-1])  # a refit does not change the graph's model
    np.testing.assert_allclose(lazy.compute(), expected, rtol=1e-8)
    assert sorted(calls) == sorted(Xd.chunks[0])


def test_import_does_not_import_dask():
    code = ("import sys, numpy as np, kernelscale\n"
            "X = np.random.default_rng(0).normal(size=(40, 3))\n"
            "kernelscale.ExactKernelRidge().fit(X, X[:, 0]).predict(X)\n"
            "assert not {'dask', 'distributed'} & set(sys.modules), sorted(m for m in sys.modules if 'dask' in m)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(kernelscale.__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


# -- bad input -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fitted(data):
    X, _, y, _ = data
    return kernelscale.ExactKernelRidge(alpha=1.0).fit(X, y)


def test_unknown_chunk_sizes_are_refused_naming_compute_chunk_sizes(data, fitted, sync):
    X, _, y, _ = data
    Xd = _dask(X)
    masked = Xd[Xd[:, 0] > 0]
    assert np.isnan(masked.shape[0])
    with pytest.raises(ValueError, match=r"X is a dask array with unknown chunk sizes.*X\.compute_chunk_sizes\(\)"):
        fitted.predict(masked)
    with pytest.raises(ValueError, match=r"X is a dask array with unknown chunk sizes"):
        kernelscale.ExactKernelRidge().fit(masked, y[: 10])
    yd = _dask(y)
    with pytest.raises(ValueError, match=r"y is a dask array with unknown chunk sizes.*y\.compute_chunk_sizes"):
        kernelscale.ExactKernelRidge().fit(X, yd[yd > 0])
    with pytest.raises(ValueError, match=r"y is a dask array with unknown chunk sizes"):
        kernelscale.ExactKernelRidge().fit(Xd, yd[yd > 0])
    masked.compute_chunk_sizes()  # the fix the message names
    np.testing.assert_allclose(fitted.predict(masked).compute(), fitted.predict(X[X[:, 0] > 0]), rtol=1e-8)


def test_nan_in_one_chunk_is_reported_with_the_chunk_index(data, fitted, sync):
    X, _, y, _ = data
    bad = X.copy()
    bad[150, 2] = np.nan  # row chunk 2: rows 140 to 209
    lazy = fitted.predict(_dask(bad))  # found when the chunk is computed
    with pytest.raises(ValueError, match=r"X contains NaN or infinity in row chunk 2 \(rows 140 to 209\)"):
        lazy.compute()
    with pytest.raises(ValueError, match=r"X contains NaN or infinity in row chunk 2 \(rows 140 to 209\)"):
        kernelscale.ExactKernelRidge().fit(_dask(bad), _dask(y))
    y_bad = y.copy()
    y_bad[10] = np.inf
    with pytest.raises(ValueError, match=r"y contains NaN or infinity in row chunk 0 \(rows 0 to 69\)"):
        kernelscale.ExactKernelRidge().fit(_dask(X), _dask(y_bad))


def test_misaligned_row_chunks_are_refused_naming_the_argument(data, fitted, sync):
    X, _, y, w = data
    Xd = _dask(X)
    y50 = da.from_array(y, chunks=50)
    with pytest.raises(ValueError, match=r"row chunks of y .* do not match those of X.*y\.rechunk\(\{0: X\.chunks\[0\]\}\)"):
        kernelscale.ExactKernelRidge().fit(Xd, y50)
    with pytest.raises(ValueError, match=r"row chunks of sample_weight"):
        kernelscale.ExactKernelRidge().fit(Xd, _dask(y), sample_weight=da.from_array(w, chunks=50))
    with pytest.raises(ValueError, match=r"row chunks of y"):
        fitted.score(Xd, y50)
    with pytest.raises(ValueError, match=r"y has 299 rows but X has 300"):
        fitted.score(Xd, _dask(y[:-1]))
    ref = kernelscale.ExactKernelRidge().fit(X, y)
    assert_same_model(ref, kernelscale.ExactKernelRidge().fit(Xd, y50.rechunk({0: Xd.chunks[0]})))  # the fix


def test_other_bad_dask_input(data, fitted, sync):
    X, _, y, _ = data
    with pytest.raises(NotFittedError):  # at once, not when computing
        kernelscale.ExactKernelRidge().predict(_dask(X))
    with pytest.raises(ValueError, match=r"X has 4 features, but ExactKernelRidge is expecting 5"):
        fitted.predict(_dask(X[:, :4]))
    with pytest.raises(ValueError, match=r"X must be a 2-d dask array.*reshape"):
        fitted.predict(da.from_array(X[:, 0], chunks=ROWS))


def test_a_fit_beyond_the_memory_budget_is_refused_saying_what_to_do(data, sync):
    X, y, _, _ = data
    est = kernelscale.LSSVMClassifier(max_memory="8KB")
    with pytest.raises(ValueError, match=r"LSSVMClassifier\.fit on dask input gathers X, y into this process: "
                                         r".*memory budget.*distributed fit of LSSVMClassifier is not available yet.*"
                                         r"numpy array or a numpy\.memmap"):
        est.fit(_dask(X), _dask(y))
    assert not hasattr(est, "classes_")


# -- memory budget inside a dask worker ----------------------------------------------------------

def test_outside_a_worker_the_budget_is_the_hosts():
    pytest.importorskip("distributed")
    assert dask_worker_memory() is None
    assert 0 < available_memory()


# -- a two-process LocalCluster ------------------------------------------------------------------

WORKER_MEMORY = 2 * 2**30


@pytest.fixture(scope="module")
def cluster_client():
    """Two worker processes of one thread, started once. Module scope, not session: a live client
    runs a communication thread in this process whose allocations would count in the tracemalloc
    peaks of the memory tests that follow."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=WORKER_MEMORY,
                                  dashboard_address=None, silence_logs=50) as cluster:
        with distributed.Client(cluster, set_as_default=False) as client:
            where = set(client.run(lambda: __import__("kernelscale").__file__).values())
            assert where == {kernelscale.__file__}, f"the workers import another kernelscale: {where}"
            yield client


@pytest.fixture
def client(cluster_client):
    """The LocalCluster's client as dask's scheduler for this test."""
    with cluster_client.as_current():
        yield cluster_client


def test_worker_budget_is_the_memory_limit_per_thread(client):
    share = client.submit(dask_worker_memory, pure=False).result()
    assert share == WORKER_MEMORY  # one thread per worker
    assert client.submit(default_memory_budget, pure=False).result() == int(DEFAULT_MEMORY_FRACTION * WORKER_MEMORY)


@pytest.mark.parametrize("name, method", [
    ("ExactKernelRidge", "predict"),
    ("RandomFourierFeatures", "transform"),
    ("DoublyStochasticClassifier", "predict_proba"),
    ("RegularizedKernelClassifier", "predict"),
])
def test_predictions_on_a_local_cluster_equal_numpy(client, data, name, method):
    X, _, _, w = data
    entry = registry.by_name(name)
    y = _target(entry, data)
    est = next(e for e in _configs(entry.cls) if hasattr(e, method))
    ref = clone(est).fit(X) if y is None else clone(est).fit(X, y, sample_weight=w)
    got = clone(est).fit(_dask(X)) if y is None else clone(est).fit(_dask(X), _dask(y), sample_weight=_dask(w))
    assert_same_model(ref, got)  # gathered from the workers
    assert_same_predictions(getattr(ref, method)(X), getattr(got, method)(_dask(X)), _dask(X), est)


def test_nan_chunk_on_a_local_cluster(client, data, fitted):
    X = data[0].copy()
    X[290, 0] = np.inf  # row chunk 4: rows 280 to 299
    with pytest.raises(ValueError, match=r"X contains NaN or infinity in row chunk 4 \(rows 280 to 299\)"):
        fitted.predict(_dask(X)).compute()


def test_string_class_labels_in_a_dask_y(data, sync):
    X, y, _, _ = data
    labels = np.array(["neg", "pos"])[y]
    ref = kernelscale.LSSVMClassifier(random_state=0).fit(X, labels)
    got = kernelscale.LSSVMClassifier(random_state=0).fit(_dask(X), _dask(labels))
    assert_same_model(ref, got)
    assert_same_predictions(ref.predict(X), got.predict(_dask(X)), _dask(X), ref)
    assert got.score(_dask(X), _dask(labels)) == ref.score(X, labels)
