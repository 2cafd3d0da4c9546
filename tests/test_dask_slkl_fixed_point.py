"""SLKL (Gram solver) and the fixed-point solver of RegularizedKernel* fitted over dask row chunks
(kernelscale.dask.fit): nothing n-sized gathered while fitting, numpy's model to 1e-8 relative
(the sums over rows taken in another order), with the same number of iterations."""

import numpy as np
import pytest
from sklearn.base import clone

import kernelscale
from kernelscale.dask.fit import supports
from kernelscale.ops import rows as rows_module
from kernelscale.regularized.estimators import AUTO_MAX_ITER

from dask_support import (  # noqa: F401 (fixtures)
    DISTRIBUTED_RTOL, _dask, assert_same_predictions, assert_same_model, client, cluster_client, da, dask, data,
    no_gather, sync,
)


def _fit_both(est, X, y, w=None):
    ref = clone(est).fit(X, y, sample_weight=w)
    got = clone(est).fit(_dask(X), _dask(y), sample_weight=None if w is None else _dask(w))
    return ref, got


def _three_classes(X):
    return (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)


def test_slkl_over_chunks_equals_numpy(data, sync, no_gather):
    X, y_class, y, w = data
    w = w.copy()
    w[:30] = 0.0  # rows of weight zero: never candidates, as on numpy
    cases = [
        (kernelscale.SLKLRegressor(n_components=30, random_state=0), X, y, w),  # sigma="median"
        (kernelscale.SLKLRegressor(n_components=20, update="newton", random_state=0), X, np.column_stack([y, -y]), None),
        (kernelscale.SLKLRegressor(n_components=20, random_state=0), X.astype(np.float32), y, w),  # float64 y
        (kernelscale.SLKLClassifier(kernelscale.GaussianKernel(sigma=1.0), n_components=20, random_state=0), X,
         y_class, w),
        # alpha=1: at the default 0.1 this system is ill-conditioned enough that the chunks'
        # summation order moves dual_coef_ by 5e-6 relative
        (kernelscale.SLKLClassifier(n_components=20, class_weight="balanced", alpha=1.0, random_state=0), X,
         _three_classes(X), None),
    ]
    for est, Xc, yc, wc in cases:
        assert supports(est)
        ref, got = _fit_both(est, Xc, yc, wc)
        assert got.n_iter_ == ref.n_iter_ and got.columns_used_ == "gram"
        assert got.X_fit_.dtype == Xc.dtype
        assert_same_model(ref, got, DISTRIBUTED_RTOL)
    # a warm start reuses the candidates (their weights checked on the chunks)
    est = kernelscale.SLKLRegressor(n_components=20, warm_start=True, random_state=0)
    ref, got = _fit_both(est, X, y, w)
    ref.set_params(alpha=0.5).fit(X, y, sample_weight=w)
    got.set_params(alpha=0.5).fit(_dask(X), _dask(y), sample_weight=_dask(w))
    assert_same_model(ref, got, DISTRIBUTED_RTOL)


# (few iterations: each is a round trip of ~70 tasks on the synchronous scheduler, ~20 ms)
FIXED_POINT = [
    kernelscale.RegularizedKernelClassifier(loss="logistic", solver="fixed_point", step_size="power", C=0.05, tol=1e-6,
                                            random_state=0),
    kernelscale.RegularizedKernelClassifier(kernelscale.GaussianKernel(sigma=2.0), loss="logistic", solver="fixed_point",
                                            step_size="power", C=0.05, class_weight="balanced", tol=1e-5, random_state=0),
    kernelscale.RegularizedKernelRegressor(kernelscale.GaussianKernel(sigma=2.0), solver="fixed_point", C=0.005,
                                           fit_intercept=True, step_size=0.005, tol=1e-5),
]


@pytest.mark.parametrize("est", FIXED_POINT, ids=["logistic-power", "one-vs-rest", "squared-intercept-step"])
def test_fixed_point_over_chunks_equals_numpy(data, sync, no_gather, est):
    X, y_class, y, w = data
    w = w.copy()
    w[:30] = 0.0  # C w_i = 0: c_i = 0, not a support vector
    target = y if isinstance(est, kernelscale.RegularizedKernelRegressor) else (
        _three_classes(X) if est.class_weight else y_class)
    weighted = est.step_size != "power" or est.class_weight  # (the power iteration: 26 iterations unweighted, 44 weighted)
    assert supports(est)
    ref, got = _fit_both(est, X, target, w if weighted else None)
    assert got.n_iter_ == ref.n_iter_ < (AUTO_MAX_ITER if est.max_iter == "auto" else est.max_iter)
    assert_same_model(ref, got, DISTRIBUTED_RTOL)
    if weighted:
        assert not np.any(np.isin(np.arange(30), got.support_))
    if isinstance(est, kernelscale.RegularizedKernelRegressor):  # a warm start from numpy's c, on the chunks
        ref.set_params(warm_start=True, C=0.004).fit(X, target, sample_weight=w)
        got.set_params(warm_start=True, C=0.004).fit(_dask(X), _dask(target), sample_weight=_dask(w))
        assert got.n_iter_ == ref.n_iter_
        assert_same_model(ref, got, DISTRIBUTED_RTOL)


def test_fixed_point_over_chunks_float32_and_multioutput(data, sync, no_gather):
    X, _, y, _ = data
    est = kernelscale.RegularizedKernelRegressor(kernelscale.GaussianKernel(sigma=2.0), solver="fixed_point",
                                                 step_size="power", C=0.01, tol=1e-5, random_state=0)
    X32, Y = X.astype(np.float32), np.column_stack([y, 2 * y])
    ref, got = _fit_both(est, X32, Y)
    assert got.dual_coef_.dtype == np.float32 and got.support_vectors_.dtype == np.float32
    assert got.n_iter_ == ref.n_iter_
    assert_same_model(ref, got, 1e-4)  # K c summed in float32 in another order


def test_coordinate_descent_and_the_column_modes_gather(data, sync):
    X, _, y, _ = data
    # coordinate descent, the default, is sequential over the coordinates: it gathers, within max_memory
    assert not supports(kernelscale.RegularizedKernelRegressor())
    assert not supports(kernelscale.RegularizedKernelRegressor("linear", solver="fixed_point"))
    with pytest.raises(ValueError, match=r"RegularizedKernelRegressor fits over dask row chunks only with "
                                         r"solver='fixed_point' and a kernel other than 'linear'"):
        kernelscale.RegularizedKernelRegressor(max_memory="8KB").fit(_dask(X), _dask(y))
    assert not supports(kernelscale.SLKLRegressor(columns="precompute"))  # n-sized columns


def test_on_a_local_cluster(client, data):
    X, y_class, y, w = data
    for est, target in [
        # alpha=1 (see test_slkl_over_chunks_equals_numpy): at 0.1 the rounding of the sums moves
        # dual_coef_ by up to 1e-7 relative, as much as the loop's refresh order does on numpy
        (kernelscale.SLKLClassifier(n_components=20, alpha=1.0, random_state=0), y_class),
        (kernelscale.RegularizedKernelRegressor(kernelscale.GaussianKernel(sigma=2.0), solver="fixed_point", C=0.0005,
                                                tol=1e-5), y),  # a few iterations
    ]:
        ref, got = _fit_both(est, X, target, w)
        assert_same_model(ref, got, DISTRIBUTED_RTOL)
        method = "predict" if target is y else "decision_function"
        assert_same_predictions(getattr(ref, method)(X), getattr(got, method)(_dask(X)), _dask(X), est)


def test_the_graph_of_a_fixed_point_iteration_does_not_grow(data, sync, monkeypatch):
    """Each iteration's kernel product has one task per row chunk (its products with every column
    chunk: the budget holds them all) and as many keys in the last iteration as in the first: c
    and K c are persisted, the graph starts from their keys."""
    X, y_class, _, _ = data
    sizes = []
    original = rows_module.DaskRows.kernel_matvec

    def kernel_matvec(self, kernel, X, V, *, blocks=None, persist=True):
        Z = original(self, kernel, X, V, blocks=blocks, persist=False)
        graph = dict(Z.__dask_graph__())
        products = sum(1 for k in graph if isinstance(k, str) and k.startswith("kernelscale-kernel-matvec-"))
        sizes.append((len(graph), products))
        return Z.persist() if persist else Z

    monkeypatch.setattr(rows_module.DaskRows, "kernel_matvec", kernel_matvec)
    # cache_size below the kernel's 720 KB: every product computes its kernel blocks again
    est = kernelscale.RegularizedKernelClassifier(solver="fixed_point", C=0.1, max_iter=12, tol=1e-12, cache_size=1000)
    with pytest.warns(Warning, match="did not reach tol"):
        est.fit(_dask(X), _dask(y_class))
    chunks = len(_dask(X).chunks[0])
    assert est.n_iter_ == 12 and len(sizes) == 13  # one product per iteration, one at the end
    assert set(sizes) == {sizes[0]}, sizes
    assert sizes[0][1] == chunks


def test_a_gram_state_beyond_the_budget_names_the_fixes_that_keep_x_distributed(data, sync):
    X, _, y, _ = data
    est = kernelscale.SLKLRegressor(n_components=200, max_memory="64KB", random_state=0)
    with pytest.raises(ValueError, match=r"columns='gram' needs .* lower n_components or increase max_memory \(over "
                                         r"dask chunks only the Gram solver"):
        est.fit(_dask(X), _dask(y))
