"""Dask arrays of scipy.sparse row chunks (issue 39, item 1): every estimator of the registry
fits on them and predicts over them what it fits and predicts on the same rows as one in-memory
CSR matrix (and so on the dense rows). The distributed fits (kernelscale.dask.fit.DISTRIBUTED)
run over the sparse chunks, each task taking its chunk as CSR through the in-memory sparse code;
the other fits gather the chunks into one CSR matrix. Sparse chunks split by columns are refused
with the fix; a NaN stored in a sparse chunk is reported with its chunk."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from kernelscale import registry
from kernelscale.dask.fit import DISTRIBUTED, supports

from dask_support import (  # noqa: F401 (fixtures)
    DISTRIBUTED_RTOL, FLOAT32_RTOL, ROWS, _configs, client, cluster_client, da, dask, no_gather, sync,
)
from test_dask import _few_iterations

N, D = 300, 12
MAPPED = ("predict", "decision_function", "predict_proba", "transform")


@pytest.fixture(scope="module")
def sparse_data():
    """X with ~35% stored values (its zeros are not stored), class and regression targets, weights."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, D))
    X[rng.random((N, D)) < 0.65] = 0.0
    X[5] = 0.0  # an empty row
    coef = rng.standard_normal(D)
    y_reg = X @ coef + 0.1 * rng.standard_normal(N)
    y_class = np.digitize(y_reg, np.quantile(y_reg, [1 / 3, 2 / 3]))  # three classes
    w = rng.uniform(0.5, 2.0, size=N)
    return X, y_class, y_reg, w


def _sparse_dask(X, rows=ROWS, cols=None, fmt=sp.csr_matrix):
    """X as a dask array of scipy.sparse chunks of ``rows`` rows (and ``cols`` columns)."""
    return da.from_array(fmt(X), chunks=(rows, cols or X.shape[1]), asarray=False)


def _target(entry, data):
    X, y_class, y_reg, w = data
    return {"classifier": y_class, "regressor": y_reg, "transformer": None}[entry.kind]


def _float32(est):
    return getattr(est, "dtype", None) == np.float32


def _rtol(est):
    """Sparse chunks against the in-memory CSR fit: identical up to rounding for a gathering fit,
    up to the order of the sums for a distributed one."""
    if not supports(est):
        return 1e-5 if _float32(est) else 1e-10
    return FLOAT32_RTOL if _float32(est) else DISTRIBUTED_RTOL


def _values(a):
    a = a.compute() if hasattr(a, "compute") else a
    return a.toarray() if sp.issparse(a) else np.asarray(a)


def _assert_close(got, expected, rtol, what):
    got, expected = _values(got), _values(expected)
    assert got.shape == expected.shape, what
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected, err_msg=what)
        return
    if expected.dtype == np.float32:  # a model computing in single precision (the front door's classifier)
        rtol = max(rtol, FLOAT32_RTOL)
    scale = np.abs(expected).max(initial=0.0)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale, err_msg=what)


def _sparse_attributes(model):
    return sorted(k for k, v in vars(model).items() if k.endswith("_") and sp.issparse(v))


@pytest.mark.parametrize("entry", registry.ESTIMATORS, ids=lambda e: e.name)
def test_fit_and_predict_on_sparse_chunks_equal_in_memory_sparse_and_dense(entry, sparse_data, sync):
    X, _, _, w = sparse_data
    y = _target(entry, sparse_data)
    Xs, Xd = sp.csr_matrix(X), _sparse_dask(X)
    for est in map(_few_iterations, _configs(entry.cls)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence warnings of the few iterations, on both sides
            fit = {} if y is None else {"sample_weight": w}
            fit_d = {} if y is None else {"sample_weight": da.from_array(w, chunks=ROWS)}
            ref = clone(est).fit(Xs, *([] if y is None else [y]), **fit)
            dense = clone(est).fit(X, *([] if y is None else [y]), **fit)
            got = clone(est).fit(Xd, *([] if y is None else [da.from_array(y, chunks=ROWS)]), **fit_d)
        assert _sparse_attributes(got) == _sparse_attributes(ref), "the training rows a model keeps stay sparse"
        methods = [m for m in MAPPED if hasattr(ref, m)]
        assert methods
        rtol = _rtol(est)
        for method in methods:
            lazy = getattr(got, method)(Xd)
            assert isinstance(lazy, da.Array) and lazy.chunks[0] == Xd.chunks[0], "predictions keep X's row chunks"
            expected = getattr(ref, method)(Xs)
            _assert_close(lazy, expected, rtol, f"{type(est).__name__}.{method}, sparse chunks against CSR")
            _assert_close(lazy, getattr(dense, method)(X), max(rtol, 1e-5 if _float32(est) else 1e-8),
                          f"{type(est).__name__}.{method}, sparse chunks against dense X")
            # a model fitted in memory predicts over sparse chunks what it predicts on the CSR matrix
            # (float32 models round differently with the block's size)
            _assert_close(getattr(ref, method)(Xd), expected, 1e-5 if _float32(est) else 1e-10,
                          f"{type(est).__name__}.{method} over chunks")


def _distributed_configs(entry):
    """The test configurations of ``entry`` that fit over chunks; the fixed-point solver for a
    regularized estimator whose test configurations all gather (coordinate descent)."""
    configs = [e for e in map(_few_iterations, _configs(entry.cls)) if supports(e)]
    if not configs and entry.name.startswith("RegularizedKernel"):
        configs = [_few_iterations(_configs(entry.cls)[0].set_params(solver="fixed_point", C=0.1))]
    assert configs and all(map(supports, configs)), f"{entry.name}: no configuration fits over chunks"
    return configs


@pytest.mark.parametrize("entry", [e for e in registry.ESTIMATORS if e.name in DISTRIBUTED], ids=lambda e: e.name)
def test_distributed_fits_take_sparse_chunks_without_gathering(entry, sparse_data, sync, no_gather):
    """The distributed fits run over the sparse chunks: nothing gathered into this process, the
    model equal to the in-memory CSR fit up to the order of the sums."""
    X, _, _, _ = sparse_data
    y = _target(entry, sparse_data)
    Xs, Xd = sp.csr_matrix(X), _sparse_dask(X)
    configs = _distributed_configs(entry)
    for est in configs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = clone(est).fit(Xs, y)
            got = clone(est).fit(Xd, da.from_array(y, chunks=ROWS))
        method = next(m for m in ("predict_proba", "decision_function", "predict") if hasattr(got, m))
        # the fitted model compared on the in-memory rows (the dask predictions are tested above)
        _assert_close(getattr(got, method)(Xs), getattr(ref, method)(Xs), _rtol(est), f"{type(est).__name__}.{method}")


def test_sparse_formats_and_float32_chunks(sparse_data, sync):
    """CSC chunks and csr_array chunks are taken as CSR; float32 chunks fit in float32."""
    X, y_class, y_reg, _ = sparse_data
    from kernelscale import SLKLRegressor, DoublyStochasticClassifier

    est = SLKLRegressor(n_components=40, random_state=0)
    ref = clone(est).fit(sp.csr_matrix(X), y_reg)
    for fmt in (sp.csc_matrix, sp.csr_array):
        got = clone(est).fit(_sparse_dask(X, fmt=fmt), da.from_array(y_reg, chunks=ROWS))
        _assert_close(got.predict(_sparse_dask(X, fmt=fmt)), ref.predict(sp.csr_matrix(X)), DISTRIBUTED_RTOL,
                      fmt.__name__)
    X32 = X.astype(np.float32)
    est = DoublyStochasticClassifier(n_iter=10, block_size=16, batch_size=32, random_state=0)
    ref = clone(est).fit(sp.csr_matrix(X32), y_class)
    got = clone(est).fit(_sparse_dask(X32), da.from_array(y_class, chunks=ROWS))
    scores = got.decision_function(_sparse_dask(X32)).compute()
    assert scores.dtype == np.float32
    _assert_close(scores, ref.decision_function(sp.csr_matrix(X32)), FLOAT32_RTOL, "float32")


def test_partial_fit_on_sparse_chunks_equals_in_memory(sparse_data, sync):
    from kernelscale import DoublyStochasticRegressor

    X, _, y, w = sparse_data
    est = DoublyStochasticRegressor(n_iter=6, block_size=16, batch_size=32, random_state=0)
    ref, got = clone(est), clone(est)
    for part in (slice(0, 140), slice(140, N)):
        ref.partial_fit(sp.csr_matrix(X[part]), y[part], sample_weight=w[part])
        got.partial_fit(_sparse_dask(X[part]), da.from_array(y[part], chunks=ROWS),
                        sample_weight=da.from_array(w[part], chunks=ROWS))
    _assert_close(got.predict(_sparse_dask(X)), ref.predict(sp.csr_matrix(X)), DISTRIBUTED_RTOL, "partial_fit")


def test_sparse_chunks_split_by_columns_are_refused_naming_the_fix(sparse_data, sync):
    from kernelscale import SLKLRegressor

    X, _, y, _ = sparse_data
    Xd = _sparse_dask(X, cols=5)
    fitted = SLKLRegressor(n_components=20, random_state=0).fit(sp.csr_matrix(X), y)
    for call in (lambda: SLKLRegressor(n_components=20).fit(Xd, da.from_array(y, chunks=ROWS)),
                 lambda: fitted.predict(Xd)):
        with pytest.raises(ValueError, match=r"X is a dask array of scipy\.sparse chunks split into 3 column "
                                             r"chunks.*one column chunk.*asarray=False"):
            call()


def test_nan_stored_in_a_sparse_chunk_is_reported_with_the_chunk(sparse_data, sync):
    from kernelscale import ExactKernelRidge, SLKLRegressor

    X, _, y, _ = sparse_data
    Xs = sp.csr_matrix(X)
    Xs.data[Xs.indptr[290]] = np.nan  # row chunk 4: rows 280 to 299
    Xd = da.from_array(Xs, chunks=(ROWS, D), asarray=False)
    yd = da.from_array(y, chunks=ROWS)
    for est in (SLKLRegressor(n_components=20, random_state=0), ExactKernelRidge(kernel="gaussian")):
        with pytest.raises(ValueError, match=r"X.*NaN or infinity.*row chunk 4 \(rows 280 to 299\)"):
            est.fit(Xd, yd)
    fitted = SLKLRegressor(n_components=20, random_state=0).fit(sp.csr_matrix(X), y)
    with pytest.raises(ValueError, match=r"X contains NaN or infinity in row chunk 4 \(rows 280 to 299\)"):
        fitted.predict(Xd).compute()


def test_a_gathering_fit_counts_the_sparse_chunks_stored_values_against_the_budget(sync):
    """A fit that gathers (the exact solver) stacks the chunks into one CSR matrix: 2000 x 20000 at
    0.1% stored values is 0.5 MiB as CSR (298 MiB dense), within 8 MiB; a budget below the CSR
    matrix itself is refused naming max_memory."""
    from kernelscale import ExactKernelRidge, GaussianKernel

    rng = np.random.default_rng(0)
    Xs = sp.random(2000, 20000, density=0.001, format="csr", random_state=1)
    Xs.data[:] = rng.standard_normal(Xs.nnz)
    y = rng.standard_normal(2000)
    Xd = da.from_array(Xs, chunks=(400, Xs.shape[1]), asarray=False)
    yd = da.from_array(y, chunks=400)
    est = ExactKernelRidge(kernel=GaussianKernel(sigma=1.0), alpha=1.0, max_memory="200MB")
    got = clone(est).fit(Xd, yd)
    assert sp.issparse(got.X_fit_) and got.X_fit_.nnz == Xs.nnz
    _assert_close(got.predict(Xd), clone(est).fit(Xs, y).predict(Xs), 1e-10, "gathered exact fit")
    with pytest.raises(ValueError, match=r"gathers X, y into this process.*max_memory="):
        clone(est).set_params(max_memory=100_000).fit(Xd, yd)


@pytest.mark.parametrize("name", ["SLKLClassifier", "DoublyStochasticClassifier", "LSSVMRegressor",
                                  "RegularizedKernelRegressor", "GeneralizedLeastSquaresClassifier",
                                  "StagewiseRegressor", "ExactKernelRidge"])
def test_sparse_chunks_on_a_local_cluster(client, sparse_data, name):
    """Two worker processes: the sparse chunks travel to the workers, each task runs the in-memory
    sparse code on its chunk; the model and predictions are the in-memory CSR fit's."""
    X, _, _, _ = sparse_data
    entry = next(e for e in registry.ESTIMATORS if e.name == name)
    y = _target(entry, sparse_data)
    est = _distributed_configs(entry)[0] if name in DISTRIBUTED else _configs(entry.cls)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = clone(est).fit(sp.csr_matrix(X), y)
        got = clone(est).fit(_sparse_dask(X), da.from_array(y, chunks=ROWS))
    method = next(m for m in ("predict_proba", "predict") if hasattr(ref, m))
    _assert_close(getattr(got, method)(_sparse_dask(X)), getattr(ref, method)(sp.csr_matrix(X)), _rtol(est), name)
