"""scipy.sparse input (issue 39): every estimator and transformer of the registry takes CSR/CSC
matrices and sparse arrays in fit, predict, decision_function, predict_proba and transform,
and gives the dense input's result (to 1e-10 in float64); kernels and random features are
computed from the nonzeros, so a wide sparse X fits under a budget its dense copy would break."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

import kernelscale as ks
from kernelscale.kernels import (GaussianKernel, LaplacianKernel, LinearKernel, MaternKernel, PolynomialKernel,
                                 median_heuristic)
from kernelscale.registry import ESTIMATORS

TOL = 1e-10
FORMATS = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "csr_array": sp.csr_array}


def _data(n=120, d=15, density=0.3, seed=0, classes=None):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed, dtype=np.float64).toarray()
    X[X != 0] = rng.standard_normal(np.count_nonzero(X))
    w = rng.standard_normal(d)
    y = X @ w + 0.1 * rng.standard_normal(n)
    if classes:
        y = np.digitize(y, np.quantile(y, np.linspace(0, 1, classes + 1)[1:-1]))
    return X, y


#: small configurations of every registry entry, by class name
CONFIGS = {
    "AutoKernelClassifier": lambda: ks.AutoKernelClassifier(time_budget=5, random_state=0),
    "AutoKernelRegressor": lambda: ks.AutoKernelRegressor(time_budget=5, random_state=0),
    "SLKLRegressor": lambda: ks.SLKLRegressor(GaussianKernel(sigma=2.0), n_components=15, random_state=0),
    "SLKLClassifier": lambda: ks.SLKLClassifier(GaussianKernel(sigma=2.0), n_components=15, random_state=0),
    "DoublyStochasticRegressor": lambda: ks.DoublyStochasticRegressor(
        GaussianKernel(sigma=2.0), n_iter=10, batch_size=32, block_size=16, random_state=0),
    "DoublyStochasticClassifier": lambda: ks.DoublyStochasticClassifier(
        GaussianKernel(sigma=2.0), loss="hinge", n_iter=10, batch_size=32, block_size=16, random_state=0),
    "RegularizedKernelRegressor": lambda: ks.RegularizedKernelRegressor(GaussianKernel(sigma=2.0), tol=1e-12,
                                                                        random_state=0),
    "RegularizedKernelClassifier": lambda: ks.RegularizedKernelClassifier(GaussianKernel(sigma=2.0), tol=1e-12,
                                                                          random_state=0),
    "LSSVMRegressor": lambda: ks.LSSVMRegressor(GaussianKernel(sigma=2.0), C=10.0, batch_size=16, n_iter=20,
                                                tol=None, dtype=None, random_state=0),
    "LSSVMClassifier": lambda: ks.LSSVMClassifier(GaussianKernel(sigma=2.0), C=10.0, batch_size=16, n_iter=20,
                                                  tol=None, dtype=None, random_state=0),
    "GeneralizedLeastSquaresClassifier": lambda: ks.GeneralizedLeastSquaresClassifier(max_iter=20),
    # 5 iterations: each calibration step amplifies the products' rounding (1e-16 -> 8e-12 after 5, 1.6e-10 after 10)
    "CalibratedLeastSquaresClassifier": lambda: ks.CalibratedLeastSquaresClassifier(max_iter=5),
    "StagewiseRegressor": lambda: ks.StagewiseRegressor(GaussianKernel(sigma=2.0), block_size=16, n_stages=2,
                                                        pca_components=None, random_state=0),
    "StagewiseClassifier": lambda: ks.StagewiseClassifier(GaussianKernel(sigma=2.0), block_size=16, n_stages=2,
                                                          pca_components=None, random_state=0),
    "ExactKernelRidge": lambda: ks.ExactKernelRidge(GaussianKernel(sigma=2.0), alpha=0.1),
    "RandomFourierFeatures": lambda: ks.RandomFourierFeatures(GaussianKernel(sigma=2.0), n_components=32,
                                                              random_state=0),
    "PolynomialRandomFeatures": lambda: ks.PolynomialRandomFeatures(n_components=32, random_state=0),
    "NystromFeatures": lambda: ks.NystromFeatures(GaussianKernel(sigma=2.0), n_components=15, random_state=0),
}
#: further kernels through the estimators that take any kernel
KERNEL_CASES = [
    ("SLKLRegressor", LaplacianKernel(sigma=3.0)),
    ("SLKLRegressor", PolynomialKernel(degree=2, gamma=0.1)),
    ("SLKLRegressor", MaternKernel(sigma=2.0, nu=1.5)),
    ("ExactKernelRidge", "laplacian"),
    ("ExactKernelRidge", "gaussian"),
    ("ExactKernelRidge", PolynomialKernel(degree=3, gamma=0.05)),
    ("RegularizedKernelRegressor", LaplacianKernel(sigma=3.0)),
    ("RandomFourierFeatures", LaplacianKernel(sigma=3.0)),
    ("NystromFeatures", "laplacian"),
]


def _outputs(est, X):
    out = {}
    for method in ("predict", "decision_function", "predict_proba", "transform"):
        if hasattr(est, method):
            out[method] = np.asarray(getattr(est, method)(X), dtype=float)
    return out


def _compare(est, fmt, classes):
    X, y = _data(classes=classes)
    Xs = FORMATS[fmt](X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dense = clone(est).fit(X, y)
        sparse = clone(est).fit(Xs, y)
    want, got = _outputs(dense, X), _outputs(sparse, Xs)
    assert want.keys() == got.keys() and want
    # a model that computes in single precision (the front door's classifier) agrees to its rounding
    tol = 1e-4 if getattr(dense, "dtype_", None) == np.float32 else TOL
    for method in want:
        np.testing.assert_allclose(got[method], want[method], rtol=0, atol=tol, err_msg=f"{method} ({fmt})")
    # the sparse-fitted model predicts dense rows as it predicts their sparse form
    for method, value in _outputs(sparse, X).items():
        np.testing.assert_allclose(value, got[method], rtol=0, atol=tol, err_msg=f"{method} on dense rows")


def _kind(name):
    return next(e.kind for e in ESTIMATORS if e.name == name)


def test_every_registry_entry_has_a_sparse_case():
    assert set(CONFIGS) == {e.name for e in ESTIMATORS}


@pytest.mark.parametrize("name", sorted(n for n in CONFIGS if not n.startswith("Auto")))  # Auto*: test_auto_sparse
def test_sparse_equals_dense(name):
    _compare(CONFIGS[name](), "csr", 3 if _kind(name) == "classifier" else None)


@pytest.mark.parametrize("fmt", ["csc", "csr_array"])
@pytest.mark.parametrize("name", ["SLKLClassifier", "RandomFourierFeatures", "LSSVMRegressor", "ExactKernelRidge"])
def test_sparse_formats(name, fmt):
    _compare(CONFIGS[name](), fmt, 3 if _kind(name) == "classifier" else None)


@pytest.mark.parametrize("name,kernel", KERNEL_CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_sparse_kernels_through_estimators(name, kernel):
    _compare(CONFIGS[name]().set_params(kernel=kernel), "csr", None)


@pytest.mark.parametrize("kernel", [GaussianKernel(1.5), LaplacianKernel(2.0), MaternKernel(1.0, nu=0.5),
                                    MaternKernel(1.0, nu=2.5), PolynomialKernel(3, 0.5, 1.0), LinearKernel()],
                         ids=lambda k: repr(k))
def test_kernel_blocks_from_sparse_rows(kernel):
    X, _ = _data(40, 12, seed=1)
    Z, _ = _data(25, 12, seed=2)
    want = kernel(X, Z)
    for a, b in ((sp.csr_matrix(X), sp.csc_array(Z)), (X, sp.csr_matrix(Z)), (sp.csr_matrix(X), Z)):
        np.testing.assert_allclose(kernel(a, b), want, rtol=0, atol=TOL)
    np.testing.assert_allclose(kernel.diag(sp.csr_matrix(X)), kernel.diag(X), rtol=0, atol=TOL)


@pytest.mark.parametrize("metric", ["euclidean", "cityblock"])
def test_median_heuristic_sparse(metric):
    X, _ = _data(60, 10)
    assert median_heuristic(sp.csr_matrix(X), metric) == pytest.approx(median_heuristic(X, metric), abs=1e-12)


def test_auto_sparse():
    """The front door on sparse X: its "standard" scaling candidate does not densify (no
    centring: scaled by the standard deviation only), and the result equals the dense input's."""
    for name in ("AutoKernelRegressor", "AutoKernelClassifier"):
        _compare(CONFIGS[name](), "csr", 2 if _kind(name) == "classifier" else None)


def test_sparse_input_is_not_altered():
    X, y = _data()
    Xs = sp.csc_matrix(X)
    before = (Xs.data.copy(), Xs.indices.copy(), Xs.indptr.copy())
    CONFIGS["SLKLRegressor"]().fit(Xs, y).predict(Xs)
    for a, b in zip(before, (Xs.data, Xs.indices, Xs.indptr)):
        np.testing.assert_array_equal(a, b)


WIDE_BUDGET = 64 * 2**20  # the dense copy of the wide X below is 381 MiB


@pytest.mark.parametrize("make", [
    lambda: ks.SLKLRegressor(GaussianKernel(sigma=1.0), n_components=40, max_memory=WIDE_BUDGET, random_state=0),
    lambda: ks.RegularizedKernelRegressor(GaussianKernel(sigma=1.0), max_memory=WIDE_BUDGET, random_state=0),
    lambda: ks.LSSVMRegressor(GaussianKernel(sigma=1.0), batch_size=256, n_iter=5, max_memory=WIDE_BUDGET,
                              random_state=0),
    lambda: ks.ExactKernelRidge(GaussianKernel(sigma=1.0), max_memory=WIDE_BUDGET),
    lambda: ks.StagewiseRegressor(GaussianKernel(sigma=1.0), block_size=64, n_stages=2, pca_components=None,
                                  max_memory=WIDE_BUDGET, random_state=0),
    lambda: ks.NystromFeatures(GaussianKernel(sigma=1.0), n_components=100, random_state=0),
], ids=["SLKL", "Regularized", "LSSVM", "Exact", "Stagewise", "Nystrom"])
def test_wide_sparse_fits_within_budget(make):
    """1000 x 50000 at 0.1% nonzeros (0.6 MiB as CSR, 381 MiB dense): fit and predict (or
    transform) within a 64 MiB budget, measured by tracemalloc, so nothing densified X."""
    import tracemalloc

    X = sp.random(1000, 50000, density=0.001, format="csr", random_state=0)
    y = np.asarray(X.sum(axis=1)).ravel()
    est = make()
    tracemalloc.start()
    try:
        if hasattr(est, "transform"):
            out = est.fit(X).transform(X)
        else:
            out = est.fit(X, y).predict(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.all(np.isfinite(out))
    assert peak <= WIDE_BUDGET, f"peak {peak / 2**20:.1f} MiB over the {WIDE_BUDGET / 2**20:.0f} MiB budget"


def test_saved_sparse_model_loads_and_predicts(tmp_path):
    """A model fitted on sparse X keeps sparse training rows; kernelscale.save stores them (CSR
    matrix or array) and the loaded model predicts the same."""
    X, y = _data()
    for Xs in (sp.csr_matrix(X), sp.csr_array(X)):
        model = CONFIGS["SLKLRegressor"]().fit(Xs, y)
        ks.save(model, tmp_path / "m.ks")
        loaded = ks.load(tmp_path / "m.ks")
        assert type(loaded.X_fit_) is type(model.X_fit_)
        np.testing.assert_array_equal(loaded.predict(Xs), model.predict(Xs))
