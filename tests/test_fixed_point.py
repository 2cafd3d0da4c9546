"""Tests of kernelscale.regularized.fixed_point: the iteration (10) against independent solutions of problem (2),
the step choices of eq. (11), divergence detection, the row cache and the memory budget.

The independent references (also imported by test_coordinate_descent.py / test_regularized.py):
scikit-learn's KernelRidge for the squared loss, the bias-free dual of each piecewise-linear loss
as a box-constrained QP solved by scipy's L-BFGS-B and then polished exactly on its free set, and
a dense Newton method on the primal for the logistic loss.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from memcheck import peak_bytes
from scipy.optimize import minimize
from sklearn.kernel_ridge import KernelRidge

from kernelscale.regularized.fixed_point import (
    FixedPointDivergenceError, estimate_spectral_norm, kernel_fixed_point, kernel_objective,
    linear_fixed_point,
)
from kernelscale.kernels import GaussianKernel, LinearKernel, PolynomialKernel
from kernelscale.ops.kernel import KernelOperator

SIGMA = 0.5
EPS = 0.2


# ----------------------------------------------------------------------------------------------
# independent references


def box_qp(Q, p, lo, hi):
    """argmin_x x^T Q x / 2 + p^T x on lo <= x <= hi: L-BFGS-B, then exact solves on the free set
    until the active set is stable; asserts the KKT conditions of the result."""
    n = p.size
    x0 = np.clip(np.zeros(n), lo, hi)
    res = minimize(lambda x: (0.5 * x @ Q @ x + p @ x, Q @ x + p), x0, jac=True, method="L-BFGS-B",
                   bounds=list(zip(lo, hi)),
                   options={"maxiter": 100000, "maxfun": 100000, "ftol": 1e-16, "gtol": 1e-13})
    x = res.x
    scale = 1 + np.abs(p).max()
    for _ in range(50):
        g = Q @ x + p
        at_lo = (x <= lo + 1e-10 * scale) & (g >= 0)
        at_hi = (x >= hi - 1e-10 * scale) & (g <= 0)
        free = ~(at_lo | at_hi)
        new = np.where(at_lo, lo, np.where(at_hi, hi, x))
        if free.any():
            rhs = -p[free] - Q[np.ix_(free, ~free)] @ new[~free]
            new[free] = np.linalg.lstsq(Q[np.ix_(free, free)], rhs, rcond=1e-13)[0]
        new = np.clip(new, lo, hi)
        if np.allclose(new, x, rtol=0, atol=1e-15 * scale):
            x = new
            break
        x = new
    g = Q @ x + p
    kkt = np.where(x <= lo, np.minimum(g, 0), np.where(x >= hi, np.maximum(g, 0), g))
    assert np.abs(kkt).max() < 1e-8 * scale, "reference QP did not solve to high precision"
    return x


def reference_coef(loss, K, y, C, eps=EPS):
    """c minimising problem (2) with K (dense) and per-point weights C, solved independently."""
    n = y.size
    C = np.broadcast_to(np.asarray(C, dtype=float), (n,)).copy()
    if loss == "squared":  # (K + I / C) c = y, with zero-weight points removed
        c = np.zeros(n)
        keep = C > 0
        c[keep] = np.linalg.solve(K[np.ix_(keep, keep)] + np.diag(1 / C[keep]), y[keep])
        return c
    if loss == "hinge":  # min a^T (Y K Y) a / 2 - 1^T a, 0 <= a <= C
        return y * box_qp((y[:, None] * K) * y, -np.ones(n), np.zeros(n), C)
    if loss == "squared_hinge":  # + a^2 / (4 C), a >= 0
        diag = np.divide(1.0, 2 * C, out=np.full(n, 1e30), where=C > 0)
        return y * box_qp((y[:, None] * K) * y + np.diag(diag), -np.ones(n), np.zeros(n), np.where(C > 0, np.inf, 0))
    if loss == "absolute":  # min c^T K c / 2 - y^T c, |c| <= C
        return box_qp(K, -y, -C, C)
    if loss == "epsilon_insensitive":  # c = p - q, + eps 1^T (p + q), 0 <= p, q <= C
        Q = np.block([[K, -K], [-K, K]])
        x = box_qp(Q, np.concatenate([-y + eps, y + eps]), np.zeros(2 * n), np.concatenate([C, C]))
        return x[:n] - x[n:]
    if loss == "logistic":  # dense Newton on F: grad = K (C g + c), Newton step (D K + I)^-1 (C g + c)
        c = np.zeros(n)
        for _ in range(100):
            m = y * (K @ c)
            sig = 1 / (1 + np.exp(m))
            r = -C * y * sig + c
            step = np.linalg.solve(np.diag(C * sig * (1 - sig)) @ K + np.eye(n), r)
            c -= step
            if np.abs(step).max() < 1e-14 * (1 + np.abs(c).max()):
                break
        return c
    raise ValueError(loss)


def make_problem(loss, n=60, seed=0, d=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if loss in ("hinge", "squared_hinge", "logistic"):
        y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.4 * rng.normal(size=n) > 0, 1.0, -1.0)
    else:
        y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=n)
        y[::9] += 3.0  # outliers: the absolute / epsilon losses have points at the bounds
    return X, y


def rel_err(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


LOSSES = ["squared", "hinge", "squared_hinge", "absolute", "epsilon_insensitive", "logistic"]


# ----------------------------------------------------------------------------------------------
# solutions


def test_squared_loss_equals_sklearn_kernel_ridge():
    X, y = make_problem("squared", n=80)
    C = 3.0
    kr = KernelRidge(alpha=1 / C, kernel="rbf", gamma=1 / (2 * SIGMA**2)).fit(X, y)
    for alpha in ("trace", "power"):
        r = kernel_fixed_point(GaussianKernel(SIGMA), X, y, "squared", C, step_size=alpha, tol=1e-9, max_iter=50000)
        assert r.converged
        assert rel_err(r.coef, kr.dual_coef_) < 1e-4
        assert rel_err(r.z, kr.predict(X)) < 1e-4


@pytest.mark.parametrize("loss", LOSSES)
def test_matches_independent_solution(loss):
    X, y = make_problem(loss)
    C = 0.5 if loss == "absolute" else 2.0  # a larger C makes the absolute loss interpolate: slow
    kern = GaussianKernel(SIGMA)
    K = kern(X)
    ref = reference_coef(loss, K, y, C)
    r = kernel_fixed_point(kern, X, y, loss, C, step_size="power", tol=1e-8, max_iter=100000, epsilon=EPS)
    assert r.converged
    assert rel_err(r.coef, ref) < 1e-4
    assert rel_err(r.z, K @ ref) < 1e-4
    assert r.objective_history[-1] == pytest.approx(kernel_objective(kern, X, y, ref, loss_for(loss), C), rel=1e-6)
    assert abs(r.duality_gap) < 1e-6 * abs(r.objective_history[-1])


def loss_for(name):
    from kernelscale.losses import make_loss

    return make_loss(name, epsilon=EPS)


def test_dual_objective_decreases_monotonically():
    """Eq. (10) is proximal gradient on the dual: D(c^k) never rises for alpha < 2/||K||."""
    for loss in ("hinge", "logistic", "epsilon_insensitive"):
        X, y = make_problem(loss, seed=3)
        for alpha in ("trace", "power"):
            r = kernel_fixed_point(GaussianKernel(SIGMA), X, y, loss, 5.0, step_size=alpha, tol=1e-7, max_iter=3000,
                                   epsilon=EPS)
            d = r.dual_history
            assert np.all(np.diff(d) <= 1e-12 * (1 + np.abs(d[:-1])))
            assert r.objective_history[-1] + d[-1] >= -1e-9  # weak duality


def test_several_problems_at_once_equal_one_at_a_time():
    X, y = make_problem("hinge", seed=4)
    Y = np.stack([y, -y, np.where(X[:, 1] > 0, 1.0, -1.0)], axis=1)
    kern = GaussianKernel(SIGMA)
    joint = kernel_fixed_point(kern, X, Y, "squared_hinge", 1.5, step_size="power", tol=1e-10, max_iter=50000,
                               random_state=0)
    for j in range(3):
        alone = kernel_fixed_point(kern, X, Y[:, j], "squared_hinge", 1.5, step_size=joint.step_size, tol=1e-10,
                                   max_iter=50000)
        assert rel_err(joint.coef[:, j], alone.coef) < 1e-6


def test_per_point_weights_equal_repeated_points():
    X, y = make_problem("hinge", n=40, seed=5)
    w = np.random.default_rng(0).integers(0, 3, size=40)
    kern = GaussianKernel(SIGMA)
    weighted = kernel_fixed_point(kern, X, y, "hinge", 1.0 * w, step_size="power", tol=1e-10, max_iter=100000)
    Xr, yr = np.repeat(X, w, axis=0), np.repeat(y, w)
    repeated = kernel_fixed_point(kern, Xr, yr, "hinge", 1.0, step_size="power", tol=1e-10, max_iter=100000)
    Xt = np.random.default_rng(1).normal(size=(30, 2))
    assert rel_err(kern(Xt, X) @ weighted.coef, kern(Xt, Xr) @ repeated.coef) < 1e-5
    assert np.all(weighted.coef[w == 0] == 0)


def test_linear_path_dense_and_sparse_match_the_kernel_path():
    X, y = make_problem("squared_hinge", n=70, d=5, seed=6)
    X[X < -0.5] = 0.0
    dense = linear_fixed_point(X, y, "squared_hinge", 0.7, step_size="power", tol=1e-10, max_iter=100000)
    sparse = linear_fixed_point(sp.csr_matrix(X), y, "squared_hinge", 0.7, step_size="power", tol=1e-10, max_iter=100000)
    kernel = kernel_fixed_point(LinearKernel(), X, y, "squared_hinge", 0.7, step_size="power", tol=1e-10, max_iter=100000)
    ref = reference_coef("squared_hinge", X @ X.T, y, 0.7)
    for r in (dense, sparse, kernel):
        assert rel_err(X @ X.T @ r.coef, X @ X.T @ ref) < 1e-5
    np.testing.assert_allclose(dense.w, X.T @ dense.coef, rtol=1e-10)
    np.testing.assert_allclose(sparse.w, dense.w, rtol=1e-8)


def test_intercept_is_the_constant_kernel():
    """intercept_scaling = s solves problem (2) for K + s^2, with b = s^2 sum(c)."""
    X, y = make_problem("hinge", seed=7)
    kern, s = GaussianKernel(SIGMA), 0.7
    r = kernel_fixed_point(kern, X, y, "hinge", 2.0, step_size="power", tol=1e-10, max_iter=100000, intercept_scaling=s)
    ref = reference_coef("hinge", kern(X) + s * s, y, 2.0)
    assert rel_err(r.coef, ref) < 1e-4
    assert r.intercept == pytest.approx(s * s * ref.sum(), rel=1e-4)
    np.testing.assert_allclose(r.z, kern(X) @ r.coef + r.intercept, rtol=1e-5, atol=1e-8)


# ----------------------------------------------------------------------------------------------
# the step alpha: eq. (11)


def test_step_size_choices():
    X, y = make_problem("squared", n=50, seed=8)
    kern = GaussianKernel(SIGMA)
    K = kern(X)
    top = np.linalg.eigvalsh(K)[-1]
    r = kernel_fixed_point(kern, X, y, "squared", 1.0, max_iter=5, tol=1e-12)
    assert r.step_size == pytest.approx(1 / np.trace(K))
    r = kernel_fixed_point(kern, X, y, "squared", 1.0, step_size="power", max_iter=5, tol=1e-12, random_state=0)
    assert r.step_size == pytest.approx(1.8 / top, rel=0.02)
    assert estimate_spectral_norm(lambda v: K @ v, 50, random_state=0) == pytest.approx(top, rel=1e-2)


def test_explicit_step_size_outside_the_interval_is_refused():
    X, y = make_problem("squared", n=50, seed=9)
    kern = GaussianKernel(SIGMA)
    lower = max(1.0, np.ones(50) @ kern(X) @ np.ones(50) / 50)  # what the solver can prove cheaply
    with pytest.raises(ValueError, match=r"step_size=.* is outside \(0, 2/\|\|K\|\|_2\)"):
        kernel_fixed_point(kern, X, y, "squared", 1.0, step_size=2.0 / lower * 1.001)
    with pytest.raises(ValueError, match="step_size"):
        kernel_fixed_point(kern, X, y, "squared", 1.0, step_size=-0.1)
    with pytest.raises(ValueError, match="step_size"):
        kernel_fixed_point(kern, X, y, "squared", 1.0, step_size="spectral")


def test_divergence_is_detected_with_a_clear_message():
    """alpha between 2/||K|| and the provable bound: the dual rises and the solver stops."""
    rng = np.random.default_rng(10)
    X = rng.normal(size=(60, 3)) * np.array([3.0, 1.0, 1.0])
    X -= X.mean(axis=0)  # 1^T K 1 = 0: the cheap bound is max_i k_ii < ||K||_2
    y = rng.normal(size=60)
    K = X @ X.T
    top, cheap = np.linalg.eigvalsh(K)[-1], max(np.diag(K).max(), 0.0)
    alpha = 1.5 * 2 / top
    assert alpha < 2 / cheap
    with pytest.raises(FixedPointDivergenceError, match="diverged.*smaller step_size"):
        linear_fixed_point(X, y, "squared", 1.0, step_size=alpha, tol=1e-12, max_iter=10000)
    with pytest.raises(FixedPointDivergenceError):  # bounded iterates (hinge) oscillate: caught too
        linear_fixed_point(X, np.sign(y), "hinge", 1.0, step_size=alpha, tol=1e-12, max_iter=10000)
    assert issubclass(FixedPointDivergenceError, ValueError)


# ----------------------------------------------------------------------------------------------
# zero diagonal, warm start, dtype, monitoring


def test_zero_diagonal_rows_are_dropped():
    X, y = make_problem("hinge", n=40, d=3, seed=11)
    X[[3, 17]] = 0.0  # polynomial kernel with coef0 = 0: k(0, x) = 0, a zero row of K
    kern = PolynomialKernel(degree=2, gamma=0.5, coef0=0.0)
    r = kernel_fixed_point(kern, X, y, "hinge", 1.0, step_size="power", tol=1e-10, max_iter=100000)
    np.testing.assert_array_equal(r.dropped, [3, 17])
    assert r.coef[3] == 0 and r.coef[17] == 0
    keep = np.setdiff1d(np.arange(40), [3, 17])
    ref = reference_coef("hinge", kern(X[keep]), y[keep], 1.0)
    assert rel_err(r.coef[keep], ref) < 1e-4


def test_warm_start_from_the_solution_stops_at_once():
    X, y = make_problem("logistic", seed=12)
    kern = GaussianKernel(SIGMA)
    first = kernel_fixed_point(kern, X, y, "logistic", 1.0, step_size="power", tol=1e-8, max_iter=50000, random_state=0)
    again = kernel_fixed_point(kern, X, y, "logistic", 1.0, step_size="power", tol=1e-8, max_iter=50000, c0=first.coef,
                               random_state=0)
    assert again.n_iter == 1 and again.converged
    np.testing.assert_allclose(again.coef, first.coef, atol=1e-7)


def test_float32_end_to_end():
    X, y = make_problem("hinge", seed=13)
    r64 = kernel_fixed_point(GaussianKernel(SIGMA), X, y, "hinge", 1.0, step_size="power", tol=1e-8, max_iter=100000)
    r32 = kernel_fixed_point(GaussianKernel(SIGMA), X.astype(np.float32), y, "hinge", 1.0, step_size="power", tol=1e-8,
                             max_iter=100000)
    assert r32.coef.dtype == np.float32 and r32.z.dtype == np.float32
    assert r32.converged
    assert rel_err(r32.z, r64.z) < 1e-3


def test_callback_receives_progress_and_can_stop():
    X, y = make_problem("squared", seed=14)
    seen = []
    r = kernel_fixed_point(GaussianKernel(SIGMA), X, y, "squared", 1.0, tol=1e-12, max_iter=1000,
                           callback=lambda info: seen.append(info) or len(seen) == 7)
    assert r.n_iter == 7 and not r.converged and r.stopped_by_callback
    assert {"iteration", "objective", "dual_objective", "duality_gap", "max_change"} <= set(seen[0])
    assert len(r.objective_history) == 8


# ----------------------------------------------------------------------------------------------
# row cache and memory


def test_row_cache_rows_and_products_equal_dense():
    rng = np.random.default_rng(15)
    X = rng.normal(size=(90, 4))
    kern = GaussianKernel(1.3)
    K = kern(X)
    cache = KernelOperator(kern, X, max_memory=2_000_000).row_cache(batch_rows=8)
    cache_small = KernelOperator(kern, X, max_memory=300_000).row_cache(batch_rows=4)
    assert cache.capacity == 90 and 4 <= cache_small.capacity < 90
    for cch in (cache, cache_small):
        slots = cch.fetch(np.array([5, 1, 70]))
        np.testing.assert_allclose(cch.rows[slots], K[[5, 1, 70]], rtol=1e-12)
        for c in (rng.normal(size=90), np.where(rng.random(90) < 0.1, rng.normal(size=90), 0.0),
                  rng.normal(size=(90, 3))):
            np.testing.assert_allclose(cch.matvec(c), K @ c, rtol=1e-10, atol=1e-12)
    # LRU: fetching more rows than fit evicts the least recently used, never the requested ones
    for start in range(0, 90, cache_small.capacity // 2):
        idx = np.arange(start, min(start + cache_small.capacity // 2, 90))
        slots = cache_small.fetch(idx)
        np.testing.assert_allclose(cache_small.rows[slots], K[idx], rtol=1e-12)
    owned = cache_small.owner[: cache_small.n_used]
    assert np.all(cache_small.slot_of[owned[owned >= 0]] >= 0)
    # a request that mixes the least recently used cached row with new ones keeps that row
    cap = cache_small.capacity
    for i in range(cap):
        cache_small.fetch(np.array([i]))
    idx = np.concatenate([[0], np.arange(cap, cap + cap // 2)])
    slots = cache_small.fetch(idx)
    assert np.unique(slots).size == idx.size
    np.testing.assert_allclose(cache_small.rows[slots], K[idx], rtol=1e-12)


def test_memory_budget_is_respected_and_too_small_fails_at_once():
    rng = np.random.default_rng(16)
    X = rng.normal(size=(300, 5))
    y = np.sin(X[:, 0])
    kern = GaussianKernel(1.0)
    budget = 450_000  # the full K needs 720 kB
    ref = kernel_fixed_point(kern, X, y, "squared", 1.0, step_size=0.003, tol=1e-6, max_iter=100)
    peak, r = peak_bytes(lambda: kernel_fixed_point(kern, X, y, "squared", 1.0, step_size=0.003, tol=1e-6,
                                                    max_iter=100, max_memory=budget))
    assert 0 < r.info["cache_rows"] < 300 and ref.info["cache_rows"] == 300
    assert peak <= budget
    np.testing.assert_allclose(r.coef, ref.coef, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="max_memory=.*too small.*increase max_memory"):
        kernel_fixed_point(kern, X, y, "squared", 1.0, max_memory=5000)
