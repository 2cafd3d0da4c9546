"""Exact kernel ridge and exact LS-SVM against scikit-learn and dense solves."""

import warnings

import numpy as np
import pytest
from scipy.spatial.distance import pdist, squareform
from sklearn.gaussian_process.kernels import Matern
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics.pairwise import polynomial_kernel, rbf_kernel

from kernelscale.exact import (
    ExactKernelRidge,
    exact_lssvm,
    kernel_predict,
    kernel_ridge_dual,
    kernel_ridge_objective,
)
from kernelscale.kernels import (
    GaussianKernel,
    LaplacianKernel,
    LinearKernel,
    MaternKernel,
    PolynomialKernel,
)
from memcheck import peak_bytes

RTOL = 1e-8


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 4))
    Y = np.column_stack([np.sin(X[:, 0]) + 0.1 * rng.standard_normal(60), X[:, 1] ** 2, X[:, 2]])
    X_test = rng.standard_normal((25, 4))
    w = rng.uniform(0.2, 3.0, 60)
    w[[3, 17]] = 0.0
    return X, Y, X_test, w


def assert_rel_close(actual, desired, rtol=RTOL):
    """Entries agree to rtol relative to the largest entry (the scale of the solution)."""
    assert actual.shape == desired.shape
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=rtol * np.abs(desired).max())


# (ours, the same kernel in scikit-learn's KernelRidge)
KERNEL_PAIRS = {
    "gaussian": (GaussianKernel(sigma=1.3), dict(kernel="rbf", gamma=1 / (2 * 1.3**2))),
    "laplacian": (LaplacianKernel(sigma=2.0), dict(kernel="laplacian", gamma=1 / 2.0)),
    "polynomial": (
        PolynomialKernel(degree=3, gamma=0.5, coef0=1.0),
        dict(kernel="poly", degree=3, gamma=0.5, coef0=1.0),
    ),
    "linear": (LinearKernel(), dict(kernel="linear")),
    "matern": (MaternKernel(sigma=1.5, nu=1.5), dict(kernel=Matern(length_scale=1.5, nu=1.5))),
}


@pytest.mark.parametrize("name", list(KERNEL_PAIRS))
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("multi_output", [False, True])
def test_matches_sklearn_kernel_ridge(data, name, weighted, multi_output):
    X, Y, X_test, w = data
    y = Y if multi_output else Y[:, 0]
    sw = w if weighted else None
    ours, theirs = KERNEL_PAIRS[name]
    alpha = 0.3
    est = ExactKernelRidge(kernel=ours, alpha=alpha).fit(X, y, sample_weight=sw)
    ref = KernelRidge(alpha=alpha, **theirs).fit(X, y, sample_weight=sw)
    assert est.dual_coef_.shape == ref.dual_coef_.shape
    assert_rel_close(est.dual_coef_, ref.dual_coef_)
    assert_rel_close(est.predict(X_test), ref.predict(X_test))


def test_weighted_dual_is_the_weighted_normal_equations(data):
    """dual = (K + alpha W^-1)^-1 y for positive weights (the documented objective)."""
    X, Y, _, w = data
    w = w + 0.5
    kernel = GaussianKernel(sigma=1.1)
    K = rbf_kernel(X, gamma=1 / (2 * 1.1**2))
    dual = kernel_ridge_dual(kernel, X, Y, 0.2, sample_weight=w)
    assert_rel_close(dual, np.linalg.solve(K + 0.2 * np.diag(1 / w), Y))
    # stationarity of sum_i w_i |y_i - f_i|^2 + alpha tr(c^T K c): W (Y - K c) = alpha c
    assert_rel_close(w[:, None] * (Y - K @ dual), 0.2 * dual)


def test_objective_is_minimal_at_the_exact_solution(data):
    X, Y, _, w = data
    kernel = LaplacianKernel(sigma=2.0)
    dual = kernel_ridge_dual(kernel, X, Y, 0.5, sample_weight=w)
    K = np.exp(-squareform(pdist(X, "cityblock")) / 2.0)
    expected = np.sum(w[:, None] * (Y - K @ dual) ** 2) + 0.5 * np.trace(dual.T @ K @ dual)
    f0 = kernel_ridge_objective(kernel, X, Y, dual, 0.5, sample_weight=w)
    assert f0 == pytest.approx(expected, rel=1e-10)
    rng = np.random.default_rng(1)
    for _ in range(5):
        step = 1e-3 * rng.standard_normal(dual.shape)
        assert kernel_ridge_objective(kernel, X, Y, dual + step, 0.5, sample_weight=w) > f0


def test_multi_output_equals_separate_fits(data):
    X, Y, X_test, _ = data
    est = ExactKernelRidge(kernel=GaussianKernel(sigma=1.0), alpha=0.1).fit(X, Y)
    for j in range(Y.shape[1]):
        single = ExactKernelRidge(kernel=GaussianKernel(sigma=1.0), alpha=0.1).fit(X, Y[:, j])
        assert_rel_close(est.predict(X_test)[:, j], single.predict(X_test))
    column = ExactKernelRidge(kernel=GaussianKernel(sigma=1.0)).fit(X, Y[:, :1])
    assert column.dual_coef_.shape == (len(X), 1)
    assert column.predict(X_test).shape == (len(X_test), 1)


# ----------------------------------------------------------------------------------------------
# LS-SVM


def dense_saddle_solve(K, Y, C):
    n = K.shape[0]
    theta = np.zeros((n + 1, n + 1))
    theta[0, 1:] = theta[1:, 0] = 1.0
    theta[1:, 1:] = K + np.eye(n) / C
    Z = np.concatenate([np.zeros((1,) + Y.shape[1:]), Y])
    W = np.linalg.solve(theta, Z)
    return W[0], W[1:]


@pytest.mark.parametrize("C", [0.5, 1e4])
def test_lssvm_matches_dense_saddle_solve(data, C):
    X, _, X_test, _ = data
    rng = np.random.default_rng(2)
    Y = np.eye(3)[rng.integers(0, 3, len(X))]  # one-hot, as in the paper
    kernel = PolynomialKernel(degree=2, gamma=0.5, coef0=1.0)
    K = polynomial_kernel(X, degree=2, gamma=0.5, coef0=1.0)
    b_ref, A_ref = dense_saddle_solve(K, Y, C)
    b, A = exact_lssvm(kernel, X, Y, C)
    assert b.shape == (3,) and A.shape == (len(X), 3)
    assert_rel_close(b, b_ref)
    assert_rel_close(A, A_ref)
    np.testing.assert_allclose(A.sum(axis=0), 0.0, atol=1e-10 * np.abs(A).max())  # first row
    scores = kernel_predict(kernel, X_test, X, A, intercept=b)
    K_test = polynomial_kernel(X_test, X, degree=2, gamma=0.5, coef0=1.0)
    assert_rel_close(scores, K_test @ A_ref + b_ref)


def test_lssvm_single_output_and_float32(data):
    X, Y, _, _ = data
    kernel = GaussianKernel(sigma=1.5)
    K = rbf_kernel(X, gamma=1 / (2 * 1.5**2))
    b_ref, A_ref = dense_saddle_solve(K, Y[:, 0], 10.0)
    b, A = exact_lssvm(kernel, X, Y[:, 0], 10.0)
    assert b.shape == () and A.shape == (len(X),)
    assert_rel_close(A, A_ref)
    assert float(b) == pytest.approx(float(b_ref), rel=RTOL)
    b32, A32 = exact_lssvm(kernel, X.astype(np.float32), Y[:, 0].astype(np.float32), 10.0)
    assert A32.dtype == np.float32 and b32.dtype == np.float32
    assert_rel_close(A32.astype(np.float64), A_ref, rtol=1e-3)


def test_lssvm_rejects_bad_arguments(data):
    X, Y, _, _ = data
    with pytest.raises(ValueError, match="C must be"):
        exact_lssvm("linear", X, Y, 0.0)
    with pytest.raises(ValueError, match="Y must have shape"):
        exact_lssvm("linear", X, Y[:-1], 1.0)
    with pytest.raises(ValueError, match="max_memory"):
        exact_lssvm("linear", X, Y, 1.0, max_memory=1000)


# ----------------------------------------------------------------------------------------------
# bandwidth, memory, dtype


def test_median_sigma_is_recorded_in_kernel_and_parameter_untouched(data):
    X, Y, _, _ = data
    kernel = GaussianKernel()
    est = ExactKernelRidge(kernel=kernel).fit(X, Y)
    assert kernel.sigma == "median" and est.kernel is kernel
    assert est.kernel_ is not kernel
    assert est.kernel_.sigma == pytest.approx(np.median(pdist(X)))
    by_name = ExactKernelRidge(kernel="laplacian").fit(X, Y)
    assert by_name.kernel == "laplacian"
    assert by_name.kernel_.sigma == pytest.approx(np.median(pdist(X, "cityblock")))
    numeric = GaussianKernel(sigma=2.0)
    fitted = ExactKernelRidge(kernel=numeric).fit(X, Y)
    assert fitted.kernel_ is not numeric and fitted.kernel_.sigma == 2.0


def test_median_with_integer_weights_equals_repeated_data(data):
    X, Y, X_test, _ = data
    rng = np.random.default_rng(3)
    w = rng.integers(0, 4, len(X))
    w[0] = 2
    weighted = ExactKernelRidge(kernel="gaussian", alpha=0.5).fit(X, Y, sample_weight=w)
    repeated = ExactKernelRidge(kernel="gaussian", alpha=0.5).fit(np.repeat(X, w, 0), np.repeat(Y, w, 0))
    Xr = np.repeat(X, w, 0)
    d = pdist(Xr)
    assert weighted.kernel_.sigma == pytest.approx(np.median(d[d > 0]), rel=1e-12)
    assert_rel_close(weighted.predict(X_test), repeated.predict(X_test))
    equal = ExactKernelRidge(kernel="gaussian").fit(X, Y, sample_weight=np.full(len(X), 0.3))
    assert equal.kernel_.sigma == pytest.approx(np.median(pdist(X)), rel=1e-12)


def test_median_needs_two_samples():
    with pytest.raises(ValueError, match="sigma"):
        ExactKernelRidge(kernel="gaussian").fit([[1.0, 2.0]], [1.0])
    # a numeric sigma fits one sample: dual = y / (1 + alpha)
    est = ExactKernelRidge(kernel=GaussianKernel(sigma=1.0), alpha=1.0).fit([[1.0, 2.0]], [4.0])
    assert est.dual_coef_ == pytest.approx([2.0])


def test_max_memory_too_small_names_max_memory(data):
    X, Y, _, _ = data
    with pytest.raises(ValueError, match="max_memory") as err:
        ExactKernelRidge(kernel=GaussianKernel(sigma=1.0), max_memory=20_000).fit(X, Y)
    assert "28800 bytes" in str(err.value)  # 60 x 60 float64
    with pytest.raises(ValueError, match="max_memory"):
        ExactKernelRidge(kernel=GaussianKernel(sigma=1.0), max_memory="1KB").fit(X, Y)


def test_predict_is_blocked_under_a_small_budget(data):
    X, Y, _, _ = data
    X_test = np.random.default_rng(5).standard_normal((3000, X.shape[1]))
    est = ExactKernelRidge(kernel=GaussianKernel(sigma=1.0)).fit(X, Y)
    expected = rbf_kernel(X_test, X, gamma=0.5) @ est.dual_coef_  # K(X_test, X) is 1.4 MB
    budget = 600_000
    est.set_params(max_memory=budget)
    peak, pred = peak_bytes(lambda: est.predict(X_test))
    assert_rel_close(pred, expected, rtol=1e-12)
    assert peak <= budget + pred.nbytes, peak


def test_fit_factorises_in_place():
    """Peak memory of fit stays near one n x n matrix (no second copy for the factor)."""
    rng = np.random.default_rng(4)
    n = 400
    X, y = rng.standard_normal((n, 3)), rng.standard_normal(n)
    est = ExactKernelRidge(kernel=GaussianKernel(sigma=1.0), alpha=0.1)
    est.fit(X[:50], y[:50])  # first-call imports and caches are not the solver's memory
    peak, _ = peak_bytes(lambda: est.fit(X, y))
    assert peak < 1.25 * n * n * 8, peak


def test_float32_in_float32_out(data):
    X, Y, X_test, _ = data
    est = ExactKernelRidge(kernel=GaussianKernel(sigma=1.0), alpha=0.5)
    est.fit(X.astype(np.float32), Y.astype(np.float32))
    assert est.X_fit_.dtype == np.float32 and est.dual_coef_.dtype == np.float32
    pred = est.predict(X_test.astype(np.float32))
    assert pred.dtype == np.float32
    ref = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.5).fit(X, Y).predict(X_test)
    assert_rel_close(pred.astype(np.float64), ref, rtol=1e-4)


# ----------------------------------------------------------------------------------------------
# solver fallbacks


def test_indefinite_matrix_falls_back_to_symmetric_solve(data):
    X, Y, X_test, _ = data
    kernel = PolynomialKernel(degree=1, gamma=1.0, coef0=-5.0)  # not a PSD kernel
    K = X @ X.T - 5.0
    assert np.linalg.eigvalsh(K + np.eye(len(X)))[0] < 0  # Cholesky must fail
    with pytest.warns(RuntimeWarning, match="not positive definite"):
        est = ExactKernelRidge(kernel=kernel, alpha=1.0).fit(X, Y)
    assert_rel_close(est.dual_coef_, np.linalg.solve(K + np.eye(len(X)), Y))


def test_singular_matrix_falls_back_to_least_squares(data):
    X, Y, _, _ = data
    Xs = X[:, :2]  # K = X X^T has rank 2; a ridge of 1e-20 vanishes in float64
    with pytest.warns(RuntimeWarning) as record:  # Cholesky may fail first, or succeed badly
        dual = kernel_ridge_dual(LinearKernel(), Xs, Y, 1e-20)
    assert any("singular" in str(r.message) for r in record)
    ref = np.linalg.lstsq(Xs @ Xs.T, Y, rcond=None)[0]
    assert_rel_close(dual, ref, rtol=1e-6)


def test_well_conditioned_fit_does_not_warn(data):
    X, Y, _, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ExactKernelRidge(kernel=LinearKernel(), alpha=1e-3).fit(X, Y)


# ----------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("alpha", [0.0, -1.0])
def test_non_positive_alpha(data, alpha):
    X, Y, _, _ = data
    with pytest.raises(ValueError, match="alpha"):
        ExactKernelRidge(kernel="linear", alpha=alpha).fit(X, Y)
    with pytest.raises(ValueError, match="alpha"):
        kernel_ridge_dual("linear", X, Y, alpha)


def test_bad_inputs_are_named(data):
    X, Y, X_test, _ = data
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="X.*NaN"):
        ExactKernelRidge(kernel="linear").fit(bad, Y)
    bad_y = Y.copy()
    bad_y[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        ExactKernelRidge(kernel="linear").fit(X, bad_y)
    est = ExactKernelRidge(kernel="linear").fit(X, Y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X_test[:, :3])
    with pytest.raises(ValueError, match="'kernel'"):
        ExactKernelRidge(kernel="sigmoid").fit(X, Y)
    with pytest.raises(ValueError, match="sigma"):
        ExactKernelRidge(kernel=GaussianKernel(sigma=-1.0)).fit(X, Y)
    with pytest.raises(ValueError, match="sample_weight"):
        ExactKernelRidge(kernel="linear").fit(X, Y, sample_weight=-np.ones(len(X)))
    with pytest.raises(ValueError, match="sample_weight"):
        kernel_ridge_dual("linear", X, Y, 1.0, sample_weight=np.ones(3))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_entry_in_the_last_row_block_is_refused(bad):
    """The solve checks H's finiteness through its 1-norm, taken in row blocks: a nan in a late
    block must not be dropped by the maximum over the blocks."""
    from kernelscale.exact import _solve_spd
    from kernelscale.linalg import one_norm

    n = 64  # 16 row blocks of 4 rows
    H = np.eye(n)
    H[-1, -2] = H[-2, -1] = bad
    assert not np.isfinite(one_norm(H))
    with pytest.raises(ValueError, match="overflowed"):
        _solve_spd(lambda: H.copy(), np.ones(n))
