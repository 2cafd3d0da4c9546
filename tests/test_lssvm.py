"""Tests of kernelscale.lssvm: the randomized LS-SVM solvers of paper 4 against dense solves."""

import re
import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils import compute_sample_weight

import kernelscale.lssvm.cholesky as lssvm_cholesky
import kernelscale.lssvm.memory as lssvm_memory
from kernelscale.ops.memory import PLAN_HEADROOM
from kernelscale.base.monitor import IterationMonitor
from kernelscale.data.datasets import make_sinc
from kernelscale.exact import exact_lssvm
from kernelscale.kernels import GaussianKernel, PolynomialKernel
from kernelscale.lssvm import LSSVMClassifier, LSSVMRegressor, lssvm_fit_memory, lssvm_theta, solve_lssvm
from kernelscale.lssvm.cholesky import BlockGramCholesky
from kernelscale.lssvm.solvers import _blocks, _nystrom_committee, _run_blocks
from kernelscale.lssvm.system import ThetaSystem

SIGMA = 1.5
ITERATIVE = ["matching_pursuit", "kaczmarz", "kaczmarz_mp"]


# ----------------------------------------------------------------------------------------------
# independent references


def naive_theta(X, C, sample_weight=None, sigma=SIGMA):
    """Theta of eq. 17 from a double loop over the Gaussian kernel."""
    n = X.shape[0]
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, float)
    T = np.zeros((n + 1, n + 1))
    T[0, 1:] = T[1:, 0] = 1.0
    for i in range(n):
        for j in range(n):
            T[i + 1, j + 1] = np.exp(-np.sum((X[i] - X[j]) ** 2) / (2 * sigma**2))
        T[i + 1, i + 1] += 1.0 / (C * w[i])
    return T


def gaussian_scores(Xt, X, A, b, sigma=SIGMA):
    d2 = ((Xt[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * sigma**2)) @ A + b


def problem(n=120, k=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    Y = np.eye(k)[rng.integers(0, k, n)]
    return X, Y


def stack(sol):
    return np.vstack([np.atleast_2d(sol.intercept), sol.dual_coef])


@pytest.fixture(scope="module")
def small():
    X, Y = problem()
    C = 1.0
    T = naive_theta(X, C)
    Z = np.vstack([np.zeros(Y.shape[1]), Y])
    return X, Y, C, T, Z, np.linalg.solve(T, Z)


# ----------------------------------------------------------------------------------------------
# the system and the exact solution


def test_theta_matches_double_loop_with_weights():
    X, _ = problem(n=30)
    w = np.random.default_rng(1).uniform(0.5, 2.0, 30)
    theta = lssvm_theta(GaussianKernel(sigma=SIGMA), X, 3.0, w)
    np.testing.assert_allclose(theta, naive_theta(X, 3.0, w), rtol=1e-12)


def test_exact_solver_is_the_dense_solve(small):
    X, Y, C, T, Z, W_star = small
    sol = solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, C, "exact")
    np.testing.assert_allclose(stack(sol), W_star, rtol=1e-9, atol=1e-10)


def test_weighted_exact_solution_uses_the_weighted_diagonal():
    X, Y = problem(n=80)
    w = np.random.default_rng(2).uniform(0.2, 3.0, 80)
    sol = solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, 2.0, "exact", sample_weight=w)
    Z = np.vstack([np.zeros(3), Y])
    np.testing.assert_allclose(stack(sol), np.linalg.solve(naive_theta(X, 2.0, w), Z), rtol=1e-9, atol=1e-10)


# ----------------------------------------------------------------------------------------------
# one step against the paper's formulas (bias index included in the block)


def one_step(solver, X, Y, C, block, W0):
    n = X.shape[0]
    system = ThetaSystem(GaussianKernel(sigma=SIGMA), X, np.full(n, 1.0 / C), 10**9, 0)
    Z = np.vstack([np.zeros(Y.shape[1]), Y])
    W = W0.copy()
    hist_r, hist_u = np.zeros(2), np.zeros(1)
    with IterationMonitor() as monitor:
        _run_blocks(system, Z, W, solver, iter([block]), 1, BlockGramCholesky(), monitor, 0, hist_r, hist_u)
    return W


def test_one_kaczmarz_step_is_eq_39_with_unit_norm_rows(small):
    X, Y, C, T, Z, _ = small
    W0 = np.random.default_rng(3).normal(size=Z.shape)
    s = np.array([5, 0, 17, 40, 99, 3])
    norms = np.linalg.norm(T[s], axis=1, keepdims=True)
    A_hat, Z_hat = T[s] / norms, Z[s] / norms  # eqs. 36-37
    expected = W0 + np.linalg.pinv(A_hat) @ (Z_hat - A_hat @ W0)  # eqs. 39-40
    np.testing.assert_allclose(one_step("kaczmarz", X, Y, C, s, W0), expected, rtol=1e-9, atol=1e-11)


def test_one_matching_pursuit_step_is_eqs_57_59(small):
    X, Y, C, T, Z, _ = small
    W0 = np.random.default_rng(4).normal(size=Z.shape)
    s = np.array([0, 7, 8, 60, 119, 120])
    R = Z - T @ W0
    expected = W0.copy()
    expected[s] += np.linalg.pinv(T[:, s]) @ R  # eqs. 57-58
    np.testing.assert_allclose(one_step("matching_pursuit", X, Y, C, s, W0), expected, rtol=1e-9, atol=1e-11)


def test_one_nystrom_member_is_eq_27(small):
    X, Y, C, T, Z, _ = small
    s = np.array([11, 0, 23, 42, 64, 100, 2, 77])
    system = ThetaSystem(GaussianKernel(sigma=SIGMA), X, np.full(X.shape[0], 1.0 / C), 10**9, 0)
    with IterationMonitor() as monitor:
        W, _ = _nystrom_committee(system, Z, iter([s]), 1, BlockGramCholesky(), monitor, 0)
    expected = np.linalg.pinv(T[s, :]) @ T[np.ix_(s, s)] @ np.linalg.pinv(T[:, s]) @ Z
    np.testing.assert_allclose(W, expected, rtol=1e-8, atol=1e-10)


def test_blocks_are_contiguous_pieces_of_reshuffled_permutations():
    rng = np.random.default_rng(0)
    gen = _blocks(rng, 11, 3)  # 11 rows (10 samples + bias): 3 blocks per permutation
    for _ in range(4):
        epoch = np.concatenate([next(gen) for _ in range(3)])
        assert len(set(epoch.tolist())) == 9 and epoch.min() >= 0 and epoch.max() <= 10
    seen = np.concatenate([next(gen) for _ in range(30)])
    assert set(seen.tolist()) == set(range(11))  # the bias index 0 is drawn like any other


# ----------------------------------------------------------------------------------------------
# convergence and monotonicity (float64)


@pytest.mark.parametrize("solver, n_iter", [("matching_pursuit", 120), ("kaczmarz", 120), ("kaczmarz_mp", 120)])
def test_iterative_solvers_converge_to_exact(small, solver, n_iter):
    X, Y, C, T, Z, W_star = small
    sol = solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, C, solver, batch_size=30, n_iter=n_iter, random_state=0)
    err = np.linalg.norm(stack(sol) - W_star) / np.linalg.norm(W_star)
    assert err < 1e-6, err


def test_matching_pursuit_residual_never_increases(small):
    X, Y, C, T, Z, _ = small
    true_residuals = []
    sol = solve_lssvm(
        GaussianKernel(sigma=SIGMA), X, Y, C, "matching_pursuit", batch_size=7, n_iter=60, random_state=1,
        callback=lambda info: true_residuals.append(np.linalg.norm(Z - T @ info["coef"])),
    )
    hist = sol.residual_history[0]
    np.testing.assert_allclose(hist[1:], true_residuals, rtol=1e-8)  # the kept R is Z - Theta W
    assert np.all(np.diff(hist) <= 1e-12 * hist[0])  # eq. 60
    assert hist[-1] < 0.5 * hist[0]


@pytest.mark.parametrize("solver", ["kaczmarz", "kaczmarz_mp"])
def test_kaczmarz_solvers_are_monotone(small, solver):
    X, Y, C, T, Z, W_star = small
    errors = []
    sol = solve_lssvm(
        GaussianKernel(sigma=SIGMA), X, Y, C, solver, batch_size=7, n_iter=60, random_state=2,
        callback=lambda info: errors.append(np.linalg.norm(info["coef"] - W_star)),
    )
    errors = np.array([np.linalg.norm(W_star)] + errors)
    if solver == "kaczmarz":
        assert np.all(np.diff(errors) <= 1e-12 * errors[0])  # eq. 44
        # and the updates are the projections of eq. 44: |e(t)|^2 - |e(t+1)|^2 = |dW|^2
        np.testing.assert_allclose(-np.diff(errors**2), sol.update_history[0] ** 2, rtol=1e-6, atol=1e-10)
    else:  # the hybrid keeps the residual monotone
        hist = sol.residual_history[0]
        assert np.all(np.diff(hist) <= 1e-12 * hist[0])
    assert errors[-1] < 0.7 * errors[0]


def test_paper_hybrid_with_unit_steps_can_diverge_which_is_why_we_line_search(small):
    """Dense reference of the paper's Kaczmarz-MP (unit steps) on the same problem with J = 7:
    its error grows, while ours (step length minimising the residual) converges."""
    X, Y, C, T, Z, W_star = small
    rng = np.random.default_rng(0)
    W = np.zeros_like(Z)
    for _ in range(150):
        s = rng.permutation(T.shape[0])[:7]
        W = W + np.linalg.pinv(T[s]) @ (Z[s] - T[s] @ W)
        W[s] += np.linalg.pinv(T[:, s]) @ (Z - T @ W)
    assert np.linalg.norm(W - W_star) > 10 * np.linalg.norm(W_star)
    sol = solve_lssvm(
        GaussianKernel(sigma=SIGMA), X, Y, C, "kaczmarz_mp", batch_size=7, n_iter=150, random_state=0
    )
    assert np.linalg.norm(stack(sol) - W_star) < 0.2 * np.linalg.norm(W_star)


def test_monotone_even_when_blocks_are_singular():
    """Duplicate samples and a huge C make block Gram matrices singular: the solve is
    regularised (with a warning), the result stays finite and the residual monotone."""
    rng = np.random.default_rng(5)
    X = np.repeat(rng.normal(size=(20, 2)), 3, axis=0)
    Y = np.eye(2)[rng.integers(0, 2, 60)]
    with pytest.warns(RuntimeWarning, match="singular"):
        sol = solve_lssvm(
            GaussianKernel(sigma=1.0), X, Y, 1e14, "matching_pursuit", batch_size=30, n_iter=20, random_state=0
        )
    assert sol.n_regularized > 0
    assert np.all(np.isfinite(sol.dual_coef))
    hist = sol.residual_history[0]
    assert np.all(np.diff(hist) <= 1e-9 * hist[0])
    with pytest.warns(RuntimeWarning, match="singular"):
        sol = solve_lssvm(
            GaussianKernel(sigma=1.0), X, Y, 1e14, "kaczmarz", batch_size=30, n_iter=5, random_state=0
        )
    assert np.all(np.isfinite(sol.dual_coef))


def test_nystrom_is_exact_with_all_rows_and_improves_with_batch_size(small):
    X, Y, C, T, Z, W_star = small
    n = X.shape[0]
    full = solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, C, "nystrom", batch_size=n + 1, n_iter=2, random_state=0)
    np.testing.assert_allclose(stack(full), W_star, rtol=1e-7, atol=1e-8)
    Xt = np.random.default_rng(9).normal(size=(200, 3))
    exact = gaussian_scores(Xt, X, W_star[1:], W_star[0])
    errors = []
    for J in (10, 40, 90):
        errs = []
        for seed in range(3):
            sol = solve_lssvm(
                GaussianKernel(sigma=SIGMA), X, Y, C, "nystrom", batch_size=J, n_iter=5, random_state=seed
            )
            errs.append(np.linalg.norm(gaussian_scores(Xt, X, sol.dual_coef, sol.intercept) - exact))
        errors.append(np.mean(errs))
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.2 * np.linalg.norm(exact)


def test_nystrom_callback_sees_the_committee_average(small):
    """The callback's "coef" after member t is the average of the first t members (eq. 27)."""
    X, Y, *_ = small
    seen = []
    sol = solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, 10.0, "nystrom", batch_size=20, n_iter=3,
                      random_state=0, callback=lambda info: seen.append(info["coef"].copy()))
    assert len(seen) == 3 and not np.allclose(seen[0], seen[2])
    np.testing.assert_allclose(seen[-1], stack(sol), rtol=1e-12)
    first = solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, 10.0, "nystrom", batch_size=20, n_iter=3,
                        random_state=0, callback=lambda info: info["step"] == 1)
    np.testing.assert_allclose(seen[0], stack(first), rtol=1e-12)


def test_n_averaged_is_the_mean_of_the_seeded_runs(small):
    """eq. 68: the solution is the average of S independently seeded runs."""
    X, Y, C, *_ = small
    finals = {}

    def keep_last(info):
        if info["step"] == 4:
            finals[info["run"]] = info["coef"].copy()

    sol = solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, C, "kaczmarz", batch_size=10, n_iter=4, n_averaged=3,
                      random_state=0, callback=keep_last)
    assert len(finals) == 3 and not np.allclose(finals[0], finals[1])
    np.testing.assert_allclose(stack(sol), np.mean([finals[r] for r in range(3)], axis=0), rtol=1e-12)
    assert sol.update_history.shape == (3, 4)


# ----------------------------------------------------------------------------------------------
# estimators


def test_classifier_matches_exact_lssvm_and_proba_is_the_simplex_projection():
    X, Y = problem(n=150, k=3, seed=3)
    y = np.array(["a", "b", "c"])[Y.argmax(1)]
    clf = LSSVMClassifier(kernel=GaussianKernel(sigma=SIGMA), C=2.0, solver="matching_pursuit", batch_size=40,
                          n_iter=150, tol=None, dtype=np.float64, random_state=0).fit(X, y)
    b, A = exact_lssvm(GaussianKernel(sigma=SIGMA), X, Y, 2.0)
    Xt = np.random.default_rng(4).normal(size=(50, 3))
    scores = gaussian_scores(Xt, X, A, b)
    np.testing.assert_allclose(clf.decision_function(Xt), scores, rtol=1e-6, atol=1e-7)
    proba = clf.predict_proba(Xt)
    # the least-squares rule: the nearest point of the simplex, p = max(s - tau, 0), sum(p) = 1
    assert np.all(proba >= 0) and np.allclose(proba.sum(1), 1.0)
    tau = np.array([np.mean((s - p)[p > 0]) for s, p in zip(scores, proba)])
    np.testing.assert_allclose(proba, np.maximum(scores - tau[:, None], 0.0), atol=1e-6)
    assert np.array_equal(clf.classes_[proba.argmax(1)], clf.predict(Xt))
    assert np.array_equal(clf.predict(Xt), clf.classes_[scores.argmax(1)])
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(Xt)), proba, rtol=1e-10, atol=0)


def test_binary_decision_function_is_the_score_difference():
    X, Y = problem(n=80, k=2, seed=6)
    y = Y.argmax(1)
    clf = LSSVMClassifier(kernel=GaussianKernel(sigma=SIGMA), C=1.0, solver="exact", dtype=None).fit(X, y)
    b, A = exact_lssvm(GaussianKernel(sigma=SIGMA), X, Y, 1.0)
    s = gaussian_scores(X, X, A, b)
    np.testing.assert_allclose(clf.decision_function(X), s[:, 1] - s[:, 0], rtol=1e-8, atol=1e-10)
    assert np.array_equal(clf.predict(X), (clf.decision_function(X) > 0).astype(int))
    assert np.array_equal(clf.predict_proba(X).argmax(1), clf.predict(X))


@pytest.mark.parametrize("solver", ["matching_pursuit", "kaczmarz", "kaczmarz_mp", "exact"])
def test_regressor_matches_exact_on_real_targets(solver):
    X, y, Xt, _ = make_sinc(n_train=150, n_test=60, random_state=0)
    kernel = GaussianKernel(sigma=1.0)
    reg = LSSVMRegressor(kernel=kernel, C=1.0, solver=solver, batch_size=40, n_iter=250, tol=None, dtype=None,
                         random_state=0).fit(X, y)
    b, A = exact_lssvm(kernel, X, y, 1.0)
    expected = gaussian_scores(Xt, X, A, b, sigma=1.0)
    assert reg.predict(Xt).shape == (60,) and np.ndim(reg.intercept_) == 0
    np.testing.assert_allclose(reg.predict(Xt), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("solver", ["matching_pursuit", "kaczmarz_mp", "kaczmarz"])
def test_tol_stops_a_run_at_the_first_iterate_within_it(solver):
    X, y, _, _ = make_sinc(n_train=150, n_test=10, random_state=0)
    kw = dict(kernel=GaussianKernel(sigma=1.0), C=1.0, solver=solver, batch_size=30, n_iter=500, dtype=None,
              random_state=0)
    reg = LSSVMRegressor(tol=1e-3, **kw).fit(X, y)
    full = LSSVMRegressor(tol=None, **kw).fit(X, y)
    t = reg.n_iter_
    assert 1 < t < 500 and full.n_iter_ == 500
    if solver == "kaczmarz":  # ||W(t+1) - W(t)|| <= tol ||W(t+1)||, first at t
        W = np.concatenate([[reg.intercept_], reg.dual_coef_])
        updates = reg.update_history_[0]
        assert updates[t - 1] <= 1e-3 * np.linalg.norm(W) and np.all(np.isnan(updates[t:]))
    else:  # ||R|| <= tol ||Z|| = tol ||y||, first at t
        R = reg.residual_history_[0]
        assert R[t] <= 1e-3 * np.linalg.norm(y) < R[t - 1] and np.all(np.isnan(R[t + 1:]))
    # the same blocks as the full run up to t: its iterate t is the early stop's
    np.testing.assert_allclose(full.residual_history_[0, : t + 1] if solver != "kaczmarz" else
                               full.update_history_[0, :t], reg.objective_history_, rtol=1e-10)


def test_auto_batch_is_the_whole_system_up_to_4096_rows():
    X, y, Xt, _ = make_sinc(n_train=150, n_test=30, random_state=0)
    kernel = GaussianKernel(sigma=1.0)
    reg = LSSVMRegressor(kernel=kernel, random_state=0).fit(X, y)  # defaults: C=10, tol=1e-4
    assert reg.batch_size_ == 151 and reg.n_iter_ == 1  # one exact block solve
    b, A = exact_lssvm(kernel, X, y, 10.0)
    np.testing.assert_allclose(reg.predict(Xt), gaussian_scores(Xt, X, A, b, sigma=1.0), rtol=1e-6, atol=1e-7)
    block = lssvm_memory.AUTO_BLOCK
    assert lssvm_memory.auto_batch_size(4095) == 4096 and lssvm_memory.auto_batch_size(4096) == block
    # larger systems whole only where their memory fits, and not beyond AUTO_WHOLE_MAX
    assert lssvm_memory.auto_batch_size(10000, lambda J: True) == 10001
    assert lssvm_memory.auto_batch_size(10000, lambda J: False) == block
    assert lssvm_memory.auto_batch_size(lssvm_memory.AUTO_WHOLE_MAX, lambda J: True) == block


def test_auto_batch_beyond_4096_rows_is_whole_within_the_budget():
    """n = 4500: one exact solve by default (the exact LS-SVM), blocks of 1000 when max_memory
    cannot hold the n x n system or on another solver's path."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, size=(4500, 2))
    y = np.sinc(X[:, 0]) + 0.1 * rng.normal(size=4500)
    kernel = GaussianKernel(sigma=1.0)
    reg = LSSVMRegressor(kernel=kernel, random_state=0).fit(X, y)
    assert reg.batch_size_ == 4501 and reg.n_iter_ == 1
    b, A = exact_lssvm(kernel, X, y, 10.0)
    np.testing.assert_allclose(reg.dual_coef_, A, rtol=1e-6, atol=1e-8 * np.abs(A).max())
    tight = lssvm_fit_memory(4500, 2, 1, 4501, np.float64, kernel) - 1
    small = LSSVMRegressor(kernel=kernel, max_memory=tight, n_iter=1, random_state=0).fit(X, y)
    assert small.batch_size_ == lssvm_memory.AUTO_BLOCK
    assert (LSSVMRegressor(kernel=kernel, solver="nystrom", n_iter=1, random_state=0).fit(X, y).batch_size_
            == lssvm_memory.AUTO_BLOCK)


def test_auto_block_leaves_the_headroom_of_the_budget():
    """Under a budget that cannot hold AUTO_BLOCK rows, "auto" takes the largest block whose
    estimate fits in (1 - PLAN_HEADROOM) of it: the rest is for what no estimate counts."""
    rng = np.random.default_rng(4)
    X = rng.uniform(-3, 3, size=(13000, 2))
    y = np.sinc(X[:, 0])
    kernel = GaussianKernel(sigma=1.0)
    budget = int(lssvm_fit_memory(13000, 2, 1, 600, np.float64, kernel) / (1 - PLAN_HEADROOM))
    reg = LSSVMRegressor(kernel=kernel, max_memory=budget, n_iter=1, random_state=0).fit(X, y)
    room = budget * (1 - PLAN_HEADROOM)
    J = reg.batch_size_
    assert lssvm_fit_memory(13000, 2, 1, J, np.float64, kernel) <= room < lssvm_fit_memory(13000, 2, 1, J + 1,
                                                                                           np.float64, kernel)
    assert 590 <= J <= 600


def test_regressor_multi_output_equals_separate_fits():
    X, y, Xt, _ = make_sinc(n_train=100, n_test=20, random_state=1)
    Y = np.column_stack([y, np.cos(X[:, 0])])
    reg = LSSVMRegressor(kernel=GaussianKernel(sigma=1.0), C=5.0, solver="exact", dtype=None).fit(X, Y)
    for j in range(2):
        one = clone(reg).fit(X, Y[:, j])
        np.testing.assert_allclose(reg.predict(Xt)[:, j], one.predict(Xt), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("solver", ["matching_pursuit", "exact"])
def test_sample_weight_is_the_weighted_diagonal(solver):
    X, Y = problem(n=90, k=2, seed=7)
    y = Y.argmax(1)
    w = np.random.default_rng(8).uniform(0.3, 3.0, 90)
    clf = LSSVMClassifier(kernel=GaussianKernel(sigma=SIGMA), C=2.0, solver=solver, batch_size=30, n_iter=200, tol=None,
                          dtype=None, random_state=0).fit(X, y, sample_weight=w)
    W = np.linalg.solve(naive_theta(X, 2.0, w), np.vstack([np.zeros(2), Y]))
    np.testing.assert_allclose(clf.dual_coef_, W[1:], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(clf.intercept_, W[0], rtol=1e-6, atol=1e-8)


def test_zero_and_integer_weights_equal_dropping_and_repeating():
    X, Y = problem(n=40, k=2, seed=10)
    y = Y.argmax(1)
    w = np.random.default_rng(11).integers(0, 4, 40)
    params = dict(kernel=GaussianKernel(sigma=SIGMA), C=3.0, solver="exact", dtype=None)
    weighted = LSSVMClassifier(**params).fit(X, y, sample_weight=w)
    repeated = LSSVMClassifier(**params).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    assert weighted.X_fit_.shape[0] == np.count_nonzero(w)
    Xt = np.random.default_rng(12).normal(size=(30, 3))
    np.testing.assert_allclose(
        weighted.decision_function(Xt), repeated.decision_function(Xt), rtol=1e-8, atol=1e-10
    )


def test_class_weight_balanced_is_sample_weight():
    X, Y = problem(n=60, k=3, seed=13)
    y = np.r_[Y.argmax(1)[:50], np.zeros(10, int)]
    params = dict(kernel=GaussianKernel(sigma=SIGMA), C=2.0, solver="exact", dtype=None)
    a = LSSVMClassifier(class_weight="balanced", **params).fit(X, y)
    b = LSSVMClassifier(**params).fit(X, y, sample_weight=compute_sample_weight("balanced", y))
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-12)


def test_float32_end_to_end():
    X, Y = problem(n=100, k=3, seed=14)
    y = Y.argmax(1)
    dtypes = []
    clf = LSSVMClassifier(kernel=GaussianKernel(sigma=SIGMA), C=1.0, batch_size=20, n_iter=30, random_state=0,
                          dtype=np.float32, callback=lambda info: dtypes.append(info["coef"].dtype))
    clf.fit(X, y)  # float64 input, dtype=np.float32 asked for
    assert set(dtypes) == {np.dtype(np.float32)}
    assert clf.X_fit_.dtype == clf.dual_coef_.dtype == clf.intercept_.dtype == np.float32
    assert clf.decision_function(X).dtype == np.float64  # returned in the input's dtype
    assert clf.decision_function(X.astype(np.float32)).dtype == np.float32
    assert clf.predict_proba(X.astype(np.float32)).dtype == np.float32
    ref = clone(clf).set_params(dtype=np.float64, callback=None).fit(X, y)
    np.testing.assert_allclose(clf.decision_function(X), ref.decision_function(X), atol=1e-4)
    reg = LSSVMRegressor(
        kernel=GaussianKernel(sigma=SIGMA), C=1.0, batch_size=20, n_iter=10, dtype=None, random_state=0
    )
    assert reg.fit(X.astype(np.float32), Y[:, 0]).dual_coef_.dtype == np.float32
    assert reg.fit(X, Y[:, 0]).dual_coef_.dtype == np.float64


@pytest.mark.parametrize("solver", ["matching_pursuit", "kaczmarz", "kaczmarz_mp", "nystrom"])
def test_memory_stays_within_budget_and_no_n_by_n_array(solver):
    X, Y = problem(n=300, k=3, seed=15)
    budget = lssvm_fit_memory(300, 3, 3, 25, np.float64, GaussianKernel(sigma=SIGMA), solver)
    assert budget < 300 * 300 * 8  # an n x n float64 matrix cannot fit
    tracemalloc.start()
    try:
        solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, 1.0, solver, batch_size=25, n_iter=3, random_state=0,
                    max_memory=budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= budget


@pytest.mark.parametrize("solver", ["matching_pursuit", "nystrom"])
def test_regularised_singular_blocks_stay_within_the_memory_estimate(solver):
    # duplicate samples make the J x J block Gram matrices singular, so every factorisation
    # takes the ridge path; with J^2 terms dominating, a retry that allocated more J x J
    # float64 arrays (identity, scaled identity, sum) broke the estimate
    X, Y = problem(n=200, k=2, seed=18)
    X, Y = np.vstack([X, X]), np.vstack([Y, Y])
    J = 300
    budget = lssvm_fit_memory(400, 3, 2, J, np.float64, GaussianKernel(sigma=SIGMA), solver)
    tracemalloc.start()
    try:
        with pytest.warns(RuntimeWarning, match="singular"):
            solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, 1e6, solver, batch_size=J, n_iter=2,
                        random_state=0, max_memory=budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= budget


@pytest.mark.parametrize("solver", ["matching_pursuit", "nystrom", "exact"])
@pytest.mark.parametrize("batch_size", [20, "auto"])
def test_max_memory_none_is_read_once_per_fit_and_the_plan_does_not_drift(solver, batch_size, monkeypatch):
    """The free-memory reading behind max_memory=None changes during the fit (here it collapses
    to 1 KiB after the first reading): the fit resolves it once, at the estimator, and every
    plan below takes those bytes."""
    import kernelscale.ops.memory as ops_memory

    readings = []

    def default_memory_budget():
        readings.append(None)
        return 2**30 if len(readings) == 1 else 2**10

    monkeypatch.setattr(ops_memory, "default_memory_budget", default_memory_budget)
    X, Y = problem(n=60, k=3, seed=21)
    for est, y in ((LSSVMClassifier, Y.argmax(1)), (LSSVMRegressor, Y)):
        readings.clear()
        model = est(kernel=GaussianKernel(sigma=SIGMA), solver=solver, batch_size=batch_size, n_iter=3,
                    random_state=0).fit(X, y)
        assert len(readings) == 1, est
        readings.clear()
        assert model.predict(X).shape[0] == 60 and len(readings) == 1


def test_too_small_budget_fails_at_once_naming_batch_size():
    X, Y = problem(n=300, k=3, seed=16)
    kernel = GaussianKernel(sigma=SIGMA)
    budget = lssvm_fit_memory(300, 3, 3, 64, np.float64, kernel, "matching_pursuit")
    clf = LSSVMClassifier(kernel=kernel, C=1.0, batch_size=256, n_iter=2, dtype=None, max_memory=budget)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"batch_size <= (\d+)") as info:
            clf.fit(X, Y.argmax(1))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 300 * 8  # failed before allocating the 256 x 300 block
    suggested = int(re.search(r"batch_size <= (\d+)", str(info.value)).group(1))
    assert 64 <= suggested < 256
    clf.set_params(batch_size=suggested).fit(X, Y.argmax(1))  # the suggestion works


def test_batch_size_larger_than_system_is_clipped_with_warning_and_bad_values_refused():
    X, Y = problem(n=30, k=2, seed=17)
    clf = LSSVMClassifier(kernel=GaussianKernel(sigma=SIGMA), C=1.0, batch_size=500, n_iter=2, dtype=None)
    with pytest.warns(UserWarning, match="batch_size=500.*31 rows"):
        clf.fit(X, Y.argmax(1))
    assert clf.batch_size_ == 31
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match="batch_size"):
            clone(clf).set_params(batch_size=bad).fit(X, Y.argmax(1))


def test_bad_input_messages():
    X, Y = problem(n=30, k=2, seed=18)
    y = Y.argmax(1)
    clf = LSSVMClassifier(kernel=GaussianKernel(sigma=SIGMA), batch_size=10, n_iter=2)
    with pytest.raises(ValueError, match="2 classes"):
        clone(clf).fit(X, np.zeros(30))
    with pytest.raises(ValueError, match="dtype"):
        clone(clf).set_params(dtype=np.int32).fit(X, y)
    with pytest.raises(ValueError, match="solver"):
        clone(clf).set_params(solver="cg").fit(X, y)
    with pytest.raises(ValueError, match="weight"):
        clone(clf).fit(X, y, sample_weight=np.zeros(30))
    fitted = clone(clf).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        fitted.predict(X[:, :2])
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clone(clf).fit(Xn, y)


def test_warm_start_continues_and_callback_stops():
    X, Y = problem(n=120, k=3, seed=19)
    y = Y.argmax(1)
    params = dict(kernel=GaussianKernel(sigma=SIGMA), C=1.0, batch_size=10, n_iter=15, dtype=None, random_state=0)
    cold = LSSVMClassifier(**params).fit(X, y)
    warm = LSSVMClassifier(warm_start=True, **params).fit(X, y)
    first = warm.residual_history_[0, -1]
    warm.set_params(n_iter=30).fit(X, y)  # n_iter is the total: 15 more
    np.testing.assert_allclose(warm.residual_history_[0, 0], first, rtol=1e-8)  # starts where it stopped
    assert warm.residual_history_.shape == (1, 16) and warm.n_iter_ == 30
    assert warm.residual_history_[0, -1] < 0.9 * cold.residual_history_[0, -1]
    assert warm.n_updates_ == 30
    before = warm.dual_coef_.copy()
    with pytest.warns(UserWarning, match="does nothing"):
        warm.fit(X, y)  # the total is reached: the model is unchanged
    np.testing.assert_array_equal(warm.dual_coef_, before)
    with pytest.raises(ValueError, match="n_iter=10 is smaller than the 30 iterations"):
        warm.set_params(n_iter=10).fit(X, y)
    # nystrom: new members join the committee with their weight
    nys = LSSVMClassifier(solver="nystrom", warm_start=True, **{**params, "n_iter": 2}).fit(X, y)
    one = nys.dual_coef_.copy()
    nys.set_params(n_iter=4).fit(X, y)
    assert nys.n_updates_ == 4 and not np.allclose(nys.dual_coef_, one)
    stopped = LSSVMClassifier(callback=lambda info: info["step"] == 3, **params).fit(X, y)
    assert stopped.n_iter_ == 3 and np.isnan(stopped.residual_history_[0, 4])


def test_defaults_follow_the_library_convention_and_string_kernels_resolve():
    clf = LSSVMClassifier()
    assert clf.kernel == "gaussian" and clf.dtype is None  # the paper's poly-4 / float32 live in the benchmark
    X, Y = problem(n=50, k=2, seed=20)
    fitted = LSSVMClassifier(batch_size=10, n_iter=3, random_state=0).fit(X, Y.argmax(1))
    assert isinstance(fitted.kernel_, GaussianKernel) and fitted.kernel_.is_resolved
    assert fitted.dual_coef_.dtype == np.float64
    fitted = LSSVMClassifier("polynomial", batch_size=10, n_iter=3, random_state=0).fit(X, Y.argmax(1))
    assert isinstance(fitted.kernel_, PolynomialKernel)
    with pytest.raises(TypeError):
        LSSVMClassifier("gaussian", 1.0)  # everything after the kernel is keyword-only


def test_no_warnings_in_an_ordinary_fit():
    X, Y = problem(n=100, k=3, seed=23)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = LSSVMClassifier(kernel=GaussianKernel(sigma=SIGMA), C=10.0, batch_size=20, n_iter=5, random_state=0)
        clf.fit(X, Y.argmax(1))


# ----------------------------------------------------------------------------------------------
# the whole system as one block (J = n + 1): Cholesky of K + D, the block path as the fallback


def _spy_whole(monkeypatch, force_fallback=False):
    """Record what each WholeSystemCholesky.factor returned (optionally forcing the block path)."""
    calls = []
    original = lssvm_cholesky.WholeSystemCholesky.factor

    def factor(self):
        ok = False if force_fallback else original(self)
        calls.append(ok)
        return ok

    monkeypatch.setattr(lssvm_cholesky.WholeSystemCholesky, "factor", factor)
    return calls


@pytest.mark.parametrize("solver", ITERATIVE)
@pytest.mark.parametrize("weighted", [False, True])
def test_whole_system_cholesky_equals_the_block_solve(small, solver, weighted, monkeypatch):
    X, Y, C, T, Z, W_star = small
    n = X.shape[0]
    w = np.random.default_rng(3).uniform(0.5, 2.0, n) if weighted else None
    kw = dict(sample_weight=w, batch_size=n + 1, n_iter=3, tol=1e-13, random_state=0)
    calls = _spy_whole(monkeypatch)
    new = solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, C, solver, **kw)
    assert calls == [True]
    monkeypatch.undo()
    calls = _spy_whole(monkeypatch, force_fallback=True)
    old = solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, C, solver, **kw)
    assert calls == [False]
    scale = np.abs(stack(old)).max()
    np.testing.assert_allclose(stack(new), stack(old), rtol=0, atol=1e-10 * scale)
    if not weighted:
        np.testing.assert_allclose(stack(new), W_star, rtol=0, atol=1e-10 * np.abs(W_star).max())
    if new.residual_history is not None:
        hist = new.residual_history[0][~np.isnan(new.residual_history[0])]
        assert np.all(np.diff(hist) <= 0) and hist[-1] <= 1e-10 * hist[0]
    # a warm start from a perturbed solution converges to the same system's solution
    b0, A0 = new.intercept + 0.1, new.dual_coef * 1.1
    warm = solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, C, solver, init=(b0, A0), **kw)
    np.testing.assert_allclose(stack(warm), stack(old), rtol=0, atol=1e-10 * scale)


def test_whole_system_falls_back_to_the_block_path_on_a_singular_system(monkeypatch):
    """Duplicate samples and a huge C: K + D is singular to float64 precision, so the Cholesky
    path declines (LAPACK's condition estimate) and the block path's ridge takes over."""
    rng = np.random.default_rng(5)
    X = np.repeat(rng.normal(size=(20, 2)), 3, axis=0)
    Y = np.eye(2)[rng.integers(0, 2, 60)]
    calls = _spy_whole(monkeypatch)
    with pytest.warns(RuntimeWarning, match="singular"):
        sol = solve_lssvm(GaussianKernel(sigma=1.0), X, Y, 1e17, "matching_pursuit", batch_size=61, n_iter=20,
                          random_state=0)
    assert calls == [False] and sol.n_regularized > 0
    assert np.all(np.isfinite(sol.dual_coef))
    hist = sol.residual_history[0]
    hist = hist[~np.isnan(hist)]
    assert np.all(np.diff(hist) <= 1e-9 * hist[0])


def test_whole_system_falls_back_to_the_block_path_on_an_indefinite_kernel(monkeypatch):
    """(x.z - 5) is not a kernel: K + D is indefinite, Cholesky fails, the block path (whose Gram
    matrix Theta Theta^T is SPD) solves the system exactly."""
    X, Y = problem(n=80, k=2, seed=7)
    kernel = PolynomialKernel(degree=1, gamma=1.0, coef0=-5.0)
    calls = _spy_whole(monkeypatch)
    sol = solve_lssvm(kernel, X, Y, 1.0, "matching_pursuit", batch_size=81, n_iter=5, tol=1e-12, random_state=0)
    assert calls == [False]
    theta = lssvm_theta(kernel, X, 1.0)
    W = np.linalg.solve(theta, np.vstack([np.zeros(2), Y]))
    np.testing.assert_allclose(stack(sol), W, rtol=0, atol=1e-8 * np.abs(W).max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_whole_system_stays_within_the_memory_estimate(dtype, monkeypatch):
    X, Y = problem(n=300, k=3, seed=15)
    X, Y = X.astype(dtype), Y.astype(dtype)
    budget = lssvm_fit_memory(300, 3, 3, 301, dtype, GaussianKernel(sigma=SIGMA), "matching_pursuit")
    calls = _spy_whole(monkeypatch)
    tracemalloc.start()
    try:
        sol = solve_lssvm(GaussianKernel(sigma=SIGMA), X, Y, 1.0, "matching_pursuit", batch_size=301, n_iter=3,
                          random_state=0, max_memory=budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert calls == [True] and peak <= budget
    assert sol.dual_coef.dtype == dtype


def test_one_norm_after_the_in_place_cholesky_reads_only_what_it_leaves():
    from scipy import linalg

    rng = np.random.default_rng(1)
    A = rng.normal(size=(300, 20))
    H = A @ A.T + np.eye(300)
    expected, diag = np.abs(H).sum(axis=0).max(), np.diag(H).copy()
    linalg.cho_factor(H.T, lower=True, overwrite_a=True, check_finite=False)  # as WholeSystemCholesky does
    assert lssvm_cholesky.one_norm_lower_free(H, diag) == pytest.approx(expected, rel=1e-12)


def test_auto_n_iter_follows_n_within_its_cap():
    """n_iter="auto" (issue #37): on blocks, T J ~ 150 sqrt(n) block rows, so the centres the model
    can use, min(n, T J), never fall as n grows; T stays within [1, AUTO_MAX_ITER]; a whole-system
    block keeps AUTO_MAX_ITER (it stops at tol)."""
    sizes = [100, 4095, 4096, 12287, 12288, 20000, 50000, 10**5, 250000, 10**6, 10**7]

    def centres(n):
        J = lssvm_memory.auto_batch_size(n, lambda J: True)
        T = lssvm_memory.auto_n_iter(n, J)
        assert 1 <= T <= lssvm_memory.AUTO_MAX_ITER
        return n if J == n + 1 else min(n, T * J)
    got = [centres(n) for n in sizes]
    assert got == sorted(got)
    assert lssvm_memory.auto_n_iter(4000, 4001) == lssvm_memory.AUTO_MAX_ITER
    assert lssvm_memory.auto_n_iter(50000, 1000) == 34 and lssvm_memory.auto_n_iter(10**7, 1000) == 100
    # T grows with n at a fixed block
    Ts = [lssvm_memory.auto_n_iter(n, 500) for n in sizes if n > 500]
    assert Ts == sorted(Ts)


def test_auto_batch_size_is_bounded_by_the_budget():
    """Beyond the whole system "auto" takes AUTO_BLOCK rows, or the largest block the budget holds;
    non-decreasing in n at a given budget."""
    n, d, k = 60000, 30, 1
    kernel = GaussianKernel(sigma=1.0)
    budget = lssvm_fit_memory(n, d, k, 300, np.float64, kernel)

    def block_fits(J):
        return lssvm_fit_memory(n, d, k, J, np.float64, kernel) <= budget
    J = lssvm_memory.auto_batch_size(n, lambda J: False, block_fits)
    assert J == 300
    assert lssvm_memory.auto_batch_size(n, lambda J: False, lambda J: True) == lssvm_memory.AUTO_BLOCK
    sizes = [10, 4095, 4096, 5000, lssvm_memory.AUTO_WHOLE_MAX - 1, lssvm_memory.AUTO_WHOLE_MAX, 10**6]
    Js = [lssvm_memory.auto_batch_size(m, lambda J: True) for m in sizes]
    assert Js[:2] == [11, 4096] and Js[-1] == lssvm_memory.AUTO_BLOCK


def test_default_n_iter_on_blocks_is_the_auto_rule():
    X, y, _, _ = make_sinc(n_train=600, n_test=10, random_state=0)
    reg = LSSVMRegressor(kernel=GaussianKernel(sigma=1.0), batch_size=50, tol=None, random_state=0).fit(X, y)
    assert reg.n_iter_ == lssvm_memory.auto_n_iter(600, 50) == 74  # ceil(150 sqrt(600) / 50)
    # warm start: "auto" is the total, so a refit on the same data runs nothing more
    with pytest.warns(UserWarning, match="does nothing"):
        reg.set_params(warm_start=True).fit(X, y)
    assert reg.n_iter_ == 74
