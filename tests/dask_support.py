"""Shared fixtures and assertions of the dask tests (tests/test_dask*.py): the data, the
synchronous scheduler, a two-process LocalCluster, dask arrays in row chunks, and the checks that
a model or a lazy prediction equals numpy's."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification

import kernelscale
from kernelscale.dask.fit import DISTRIBUTED, supports  # noqa: F401

from estimator_list import ESTIMATORS as CONFIGS
from estimator_list import FLOAT32_LSSVM

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

N, D, ROWS = 300, 5, 70  # row chunks of 70, 70, 70, 70, 20

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
            if getattr(est, "solver", None) == "fixed_point":
                # each iteration of a distributed fixed-point fit is a round trip of ~70 tasks (20 ms on
                # the synchronous scheduler); at C=1 this configuration runs 600 to 1200 iterations, at 0.1
                # 70 to 130 (the same code paths)
                est.set_params(C=0.1)
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


def _assert_close_value(a, b, where, rtol):
    """a == b, floats (and float arrays) to ``rtol`` relative to the largest magnitude."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, where
        scale = np.abs(a[np.isfinite(a)]).max(initial=0.0)  # histories end in NaN after an early stop
        np.testing.assert_allclose(b, a, rtol=rtol, atol=rtol * scale, err_msg=where)
    elif isinstance(a, (float, np.floating)):
        assert b == pytest.approx(a, rel=rtol), where
    elif isinstance(a, (list, tuple)) and len(a) and isinstance(a[0], (float, np.ndarray)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            _assert_close_value(u, v, f"{where}[{i}]", rtol)
    elif hasattr(a, "get_params"):  # a resolved kernel: sigma from a PCA-reduced X
        assert type(a) is type(b), where
        pa, pb = a.get_params(deep=False), b.get_params(deep=False)
        assert pa.keys() == pb.keys(), where
        for k in pa:
            _assert_close_value(pa[k], pb[k], f"{where}[{k!r}]", rtol)
    else:
        _assert_same_value(a, b, where)


def _without_seconds(est, key):
    """The fitted attribute ``key`` of ``est`` less what measures seconds (the front door's
    ``fit_time_`` and the fit times of its ``cv_results_``), which no two fits share."""
    value = vars(est)[key]
    if key == "fit_time_":
        return None
    if key == "cv_results_":
        return {k: v for k, v in value.items() if k != "fit_time"}
    return value


def assert_same_model(a, b, rtol=None):
    """The fitted attributes (ending in ``_``) of a and b are identical (equal to ``rtol``)."""
    fitted = sorted(k for k in vars(a) if k.endswith("_") and not k.startswith("_"))
    assert fitted, f"{type(a).__name__} has no fitted attributes"
    assert fitted == sorted(k for k in vars(b) if k.endswith("_") and not k.startswith("_"))
    for key in fitted:
        va, vb = _without_seconds(a, key), _without_seconds(b, key)
        if rtol is None:
            _assert_same_value(va, vb, f"{type(a).__name__}.{key}")
        else:
            loose = CALIBRATION_RTOL if (type(a).__name__, key) in CALIBRATION else rtol
            _assert_close_value(va, vb, f"{type(a).__name__}.{key}", max(rtol, loose))


#: the distributed fits sum over row chunks in another order than numpy: equal to this
DISTRIBUTED_RTOL = 1e-8
#: except the calibration weights of calibrated least squares: a ridge fit on the nearly
#: collinear basis (y, y^2, y^3) of confident predictions with the small "auto" ridge turns the
#: last-digit differences of the sums into ~1e-7 relative differences of these weights (measured:
#: 1.0e-7 on 300 rows in 70-row chunks); the calibrated predictions still agree to 1e-8
CALIBRATION_RTOL = 1e-6
CALIBRATION = {("CalibratedLeastSquaresClassifier", "calibration_"),
               ("CalibratedLeastSquaresClassifier", "calibration_intercept_")}


#: a distributed float32 fit: float32 sums in another order, amplified by the conditioning of the
#: solves (measured on the LS-SVM in float32 with sigma=1: 1.5e-5 after 50 matching-pursuit
#: iterations; with smoother kernels more: 7e-4 at sigma=2, 5e-3 at the median sigma 4.5)
FLOAT32_RTOL = 1e-4


def model_rtol(est):
    """None (identical) for a gathering fit, DISTRIBUTED_RTOL for a distributed one (an estimator
    of DISTRIBUTED in a configuration that fits over the chunks: ``_dask_fit.supports``;
    FLOAT32_RTOL in float32)."""
    if not supports(est):
        return None
    return FLOAT32_RTOL if getattr(est, "dtype", None) == np.float32 else DISTRIBUTED_RTOL


def assert_same_predictions(expected, lazy, X_dask, est):
    assert isinstance(lazy, da.Array), f"a dask X gave {type(lazy).__name__}, not a dask array"
    assert lazy.chunks[0] == X_dask.chunks[0], "the result lost X's row chunks"
    got = lazy.compute()
    assert isinstance(got, np.ndarray) and got.shape == expected.shape and got.dtype == expected.dtype
    if expected.dtype.kind == "f":
        # each chunk runs numpy's method; float32 models round differently with the block's size
        single = est is FLOAT32_LSSVM or getattr(est, "dtype", None) == np.float32 or expected.dtype == np.float32
        rtol = 1e-5 if single else 1e-8
        scale = np.abs(expected[np.isfinite(expected)]).max(initial=0.0)
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale)
    else:
        np.testing.assert_array_equal(got, expected)


# -- every estimator, synchronous scheduler ---------------------------------------------------


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



def _refuse_gather(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the distributed fit gathered a dask array into this process")

    monkeypatch.setattr(kernelscale.dask.dispatch, "_gather", refuse)
    monkeypatch.setattr(da.Array, "__array__", refuse)


@pytest.fixture
def no_gather(monkeypatch):
    """A distributed fit that gathers its arguments, or converts a dask array to numpy, fails."""
    _refuse_gather(monkeypatch)
