"""Tests of kernelscale.least_squares.stagewise and stagewise_solver (paper 5, Algorithm 3): monotone training residual, blocks
regenerated from seeds (checked against kernelscale.features directly), stage fits against
scikit-learn's Ridge / LinearRegression, the kernel= / feature_method= parameters against
stagewise_regression and the former generator= results, pca_components="auto", conventions.
The weighted PCA is tested in test_preprocessing.py."""


import numpy as np
import pytest
from memcheck import peak_bytes
from scipy.special import expit
from sklearn.base import clone
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.metrics import log_loss
from sklearn.utils.class_weight import compute_sample_weight
from threadpoolctl import threadpool_limits

from kernelscale.kernels import GaussianKernel, LaplacianKernel, LinearKernel, PolynomialKernel
from kernelscale.ops.feature_blocks import FeatureBlockSpec, block_rng
from kernelscale.ops.features import FeatureOperator
from kernelscale.preprocessing import pca_fit, pca_transform
from kernelscale.least_squares.stagewise import StagewiseClassifier, StagewiseRegressor, _auto_block_size, _auto_n_stages
from kernelscale.least_squares.stagewise_solver import feature_spec, stagewise_fit_bytes, stagewise_regression


@pytest.fixture(autouse=True)
def one_blas_thread():
    with threadpool_limits(1):
        yield


def regression_data(n=200, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0] * 2) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


def classification_data(n=240, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] > 0.3).astype(int) + (X[:, 1] * X[:, 2] > 0)  # 3 classes, not linearly separable
    return X, y


def squared_residual(Y, P):
    return np.mean(np.sum((Y - P) ** 2, axis=1))


# ----------------------------------------------------------------------------------------------
# Algorithm 3: the residual never increases, each stage is a ridge fit on a regenerated block


#: the former generators "rff", "sample", "logit", "polynomial" (sigma 2, degree 3)
GENS = {
    "rff": dict(),
    "sample": dict(kernel="linear"),
    "logit": dict(feature_method="logit"),
    "polynomial": dict(kernel=PolynomialKernel(degree=3, gamma=0.25, coef0=1.0)),
}


@pytest.mark.parametrize("generator", list(GENS))
@pytest.mark.parametrize("update", ["linear", "calibrated"])
def test_regressor_training_residual_never_increases(generator, update):
    X, y = regression_data()
    est = StagewiseRegressor(block_size=16, n_stages=6, update=update, pca_components=4, random_state=0,
                             **GENS[generator]).fit(X, y)
    h = est.objective_history_
    assert len(h) == 7 and est.n_iter_ == 6
    assert np.all(np.diff(h) <= 1e-12 * h[0])
    assert h[-1] < h[0]
    # independent: the residual of the staged predictions (blocks regenerated at predict time)
    staged = [squared_residual(y[:, None], p[:, None]) for p in est.staged_predict(X)]
    np.testing.assert_allclose(staged, h[1:], rtol=1e-9)


@pytest.mark.parametrize("update", ["linear", "calibrated"])
def test_classifier_training_residual_never_increases(update):
    X, y = classification_data()
    est = StagewiseClassifier(block_size=24, n_stages=5, update=update, pca_components=None, random_state=1).fit(X, y)
    h = est.objective_history_
    assert np.all(np.diff(h) <= 1e-12)
    staged = [squared_residual(np.eye(3)[y], S) for S in est.staged_decision_function(X)]
    np.testing.assert_allclose(staged, h[1:], rtol=1e-9)
    assert est.score(X, y) > 0.7  # the majority class is 46%


def test_softmax_update_never_increases_the_softmax_loss():
    X, y = classification_data()
    est = StagewiseClassifier(feature_method="logit", block_size=16, n_stages=4, update="softmax", inner_iter=10,
                              pca_components=None, random_state=2).fit(X, y)
    h = est.objective_history_
    assert np.all(np.diff(h) <= 1e-12)
    assert h[0] == pytest.approx(log_loss(y, np.tile(np.bincount(y) / len(y), (len(y), 1))))
    P = est.predict_proba(X)
    assert h[-1] == pytest.approx(log_loss(y, P), rel=1e-9)


def test_each_linear_stage_is_a_ridge_fit_of_the_residual_on_its_regenerated_block():
    X, y = regression_data(n=150, d=3, seed=3)
    alpha = 1e-3
    est = StagewiseRegressor(block_size=20, n_stages=2, pca_components=None, alpha=alpha, random_state=5).fit(X, y)
    spec = FeatureBlockSpec(GaussianKernel(sigma=est.kernel_.sigma), 3, 20, 5, np.float64, "cos")
    prediction = np.full(len(y), y.mean())
    for t in range(2):
        F = spec.block(t).apply(X)  # straight from kernelscale.ops.feature_blocks
        prediction = prediction + Ridge(alpha=alpha * len(y)).fit(F, y - prediction).predict(F)
    np.testing.assert_allclose(est.predict(X), prediction, atol=1e-9)
    assert est.kernel_.sigma == pytest.approx(GaussianKernel().resolve(X).sigma)


def test_a_block_holding_every_feature_gives_least_squares_and_then_nothing_changes():
    X, y = regression_data(n=100, d=4, seed=4)
    est = StagewiseRegressor("linear", block_size=10, n_stages=3, pca_components=None, alpha=0.0, random_state=0).fit(X, y)
    np.testing.assert_allclose(est.predict(X), LinearRegression().fit(X, y).predict(X), atol=1e-10)
    h = est.objective_history_
    np.testing.assert_allclose(h[1:], h[1], rtol=1e-10)


# ----------------------------------------------------------------------------------------------
# the fitted state: seeds, the PCA map and block weights only


def manual_predict(est, X):
    """Rebuild the predictions from the fitted state with kernelscale.ops.feature_blocks only."""
    Z = X if est.pca_components_ is None else (X - est.pca_mean_) @ est.pca_components_
    P = np.tile(est.init_, (len(X), 1))
    d = Z.shape[1]
    for t in range(est.n_iter_):
        if est.feature_method_ == "sample":
            idx = np.sort(block_rng(est.seed_, t).choice(d, size=min(est.block_size, d), replace=False))
            F = Z[:, idx]
        elif est.feature_method_ == "tensorsketch":
            spec = FeatureBlockSpec(est.kernel_, d, est.block_size, est.seed_, Z.dtype, "tensorsketch")
            F = spec.block(t).apply(Z)
        else:
            spec = FeatureBlockSpec(est.kernel_, d, est.block_size, est.seed_, Z.dtype, "cos")
            block = spec.block(t)
            if est.feature_method_ == "cos":
                F = np.sqrt(2.0 / est.block_size) * np.cos(Z @ block.weights + block.offset)
            else:
                F = expit(Z @ block.weights + block.offset - np.pi)
        step = F @ est.coef_[t] + est.intercept_[t]
        if est.calibration_ is not None:
            step += P @ est.calibration_[t]
        P = P + step
    return P


@pytest.mark.parametrize(
    "generator, update", [("rff", "linear"), ("sample", "calibrated"), ("logit", "linear"), ("polynomial", "calibrated")]
)
def test_fitted_state_is_seed_pca_map_and_block_weights(generator, update):
    X, y = regression_data(n=120, d=8, seed=6)
    p, T, dp = 12, 3, 5
    est = StagewiseRegressor(block_size=p, n_stages=T, update=update, pca_components=dp, random_state=7, alpha=1e-6,
                             **GENS[generator]).fit(X, y)
    fitted = {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}
    assert fitted == {
        "seed_", "kernel_", "feature_method_", "pca_mean_", "pca_components_", "init_", "coef_", "intercept_",
        "calibration_", "n_iter_", "objective_history_", "update_", "single_output_", "n_features_in_",
        "block_size_", "alpha_",
    }
    assert est.block_size_ == p and est.alpha_ == 1e-6
    assert est.seed_ == 7
    pe = min(p, dp) if generator == "sample" else p
    assert est.coef_.shape == (T, pe, 1) and est.intercept_.shape == (T, 1)
    assert est.pca_components_.shape == (8, dp) and est.pca_mean_.shape == (8,)
    assert (est.calibration_ is None) == (update == "linear")
    # nothing of size n (no stored features or predictions) and no random weights (dp x p)
    arrays = [v for k, v in vars(est).items() if isinstance(v, np.ndarray) and k != "objective_history_"]
    assert all(a.size < dp * p and 120 not in a.shape for a in arrays)
    np.testing.assert_allclose(est.predict(X), manual_predict(est, X)[:, 0], atol=1e-10)


def test_auto_block_size_and_ridge_follow_the_number_of_samples():
    X, y = regression_data(n=120, d=8, seed=6)
    est = StagewiseRegressor(n_stages=2, random_state=0).fit(X, y)
    assert est.block_size_ == 16 and est.coef_.shape == (2, 16, 1)
    assert est.alpha_ == pytest.approx(0.1 / 120, rel=1e-15)
    w = np.random.default_rng(0).integers(1, 4, size=120).astype(float)
    w_fit = StagewiseRegressor(n_stages=1).fit(X, y, sample_weight=w)
    assert w_fit.alpha_ == pytest.approx(0.1 / w.sum()) and w_fit.block_size_ == 16  # rows, not sum(w)
    # min(1024, max(n // 12, min(16, n // 4))), at least 1
    ns = (1, 7, 63, 64, 112, 133, 191, 192, 331, 426, 1347, 4000, 12287, 12288, 10**6)
    assert [_auto_block_size(n) for n in ns] == [1, 1, 15, 16, 16, 16, 16, 16, 27, 35, 112, 333, 1023, 1024, 1024]
    # no cliff: non-decreasing, and one more sample adds at most one feature per block
    sizes = np.array([_auto_block_size(n) for n in range(1, 20000)])
    assert np.all(np.diff(sizes) >= 0) and np.all(np.diff(sizes) <= 1)
    # fewer features in all than samples with the default 8 stages (the former rule drew 2n at n = 4000)
    assert all(8 * _auto_block_size(n) <= n for n in range(192, 20000, 37))


def test_auto_block_size_is_at_most_what_max_memory_holds():
    X, y = regression_data(n=2400, d=5, seed=3)
    roomy = StagewiseRegressor(n_stages=2, random_state=0, max_memory="1GB").fit(X, y)
    assert roomy.block_size_ == _auto_block_size(2400) == 200
    budget = 6 * 10**6  # the 2400 x 200 block and its workspace need more
    tight = StagewiseRegressor(n_stages=2, random_state=0, max_memory=budget)
    peak, fitted = peak_bytes(lambda: clone(tight).fit(X, y))
    assert 16 <= fitted.block_size_ < 200
    assert peak <= budget
    # the largest block that fits: one more feature would not
    spec = feature_spec(fitted.kernel_, 5, fitted.block_size_ + 1, 0)
    assert stagewise_fit_bytes(2400, 1, spec, "linear", 8) > budget


def test_auto_block_size_of_a_distributed_fit_counts_the_pieces_its_stages_hold():
    """A stage over dask row chunks regenerates its features PIECE_ROWS rows at a time, so the
    block follows what a piece holds, as the fit's own check does, not the whole chunk (10M
    virtual digits on workers of 1.5 GiB: 648 features instead of 1024); softmax keeps the block."""
    da = pytest.importorskip("dask.array")
    from kernelscale.least_squares.stagewise import _auto_block_within
    from kernelscale.least_squares.stagewise_solver import stage_task_rows
    from kernelscale.ops.features import PIECE_ROWS

    n, rows, kernel = 10**7, 10_000, GaussianKernel(sigma=1.0)
    Z = da.zeros((n, 50), chunks=(rows, 50), dtype=np.float32)
    piece = stagewise_fit_bytes(PIECE_ROWS, 10, feature_spec(kernel, 50, 1024, 0, dtype=np.float32), "calibrated", 4)
    budget = piece + 1  # the block on a piece, not on the chunk's 10000 rows
    assert stage_task_rows(Z, "calibrated") == PIECE_ROWS and stage_task_rows(Z, "softmax") == rows
    assert _auto_block_within(n, 10, kernel, Z, "cos", "calibrated", budget, 0) == 1024
    host = np.zeros((rows, 50), dtype=np.float32)  # on the host a stage holds its rows' features
    assert _auto_block_within(n, 10, kernel, host, "cos", "calibrated", budget, 0) < 1024
    assert _auto_block_within(n, 10, kernel, Z, "cos", "softmax", budget, 0) < 1024


@pytest.mark.parametrize("n", [12288, 30000, 32561, 60000, 581012, 10**7])
def test_auto_block_size_is_the_former_rule_from_12288_samples(n):
    # the papers' benchmarks (MNIST 60000, adult 32561, covtype 581012, ...) keep their defaults
    assert _auto_block_size(n) == int(min(1024, max(1, n // 4))) == 1024


@pytest.mark.parametrize("cls", [StagewiseRegressor, StagewiseClassifier])
def test_defaults_resolved_at_30000_samples_are_the_papers(monkeypatch, cls):
    # the resolved defaults handed to Algorithm 3 at n = 30000 (captured there; no stage is fitted)
    import kernelscale.least_squares.stagewise as sw

    seen = {}

    class Captured(Exception):
        pass

    def capture(Z, Y, spec, **kw):
        seen.update(p=spec.n_features_out, method=spec.method, d=Z.shape[1], **kw)
        raise Captured

    monkeypatch.setattr(sw, "stagewise_regression", capture)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30000, 60)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int) if cls is StagewiseClassifier else X[:, 0]
    with pytest.raises(Captured):
        cls().fit(X, y)
    # the paper's block; the stages follow n (issue #37): 8 sqrt(30000 / 12288) = 12.5 -> 12
    assert seen["p"] == 1024 and seen["n_stages"] == _auto_n_stages(30000) == 12 and seen["update"] == "linear"
    assert seen["method"] == "cos" and seen["d"] == 50  # PCA to 50 components
    assert seen["alpha"] == pytest.approx(0.1 / 30000, rel=1e-12)
    assert cls().get_params()["block_size"] == "auto" and cls().get_params()["n_stages"] == "auto"


@pytest.mark.tuning
def test_default_fit_on_a_small_problem_is_close_to_exact_kernel_ridge():
    # the "auto" block on 600 samples (50 features x 8 stages) against exact kernel ridge at the
    # same (median) bandwidth: the robustness goal of test RMSE within 1.5x
    from sklearn.datasets import make_friedman1
    from sklearn.kernel_ridge import KernelRidge

    X, y = make_friedman1(n_samples=800, n_features=10, noise=1.0, random_state=0)
    Xtr, ytr, Xte, yte = X[:600], y[:600], X[600:], y[600:]
    est = StagewiseRegressor(random_state=0).fit(Xtr, ytr)
    assert est.block_size_ == 50
    sigma = est.kernel_.sigma
    peer = KernelRidge(alpha=1.0, kernel="rbf", gamma=1.0 / (2.0 * sigma**2)).fit(Xtr, ytr)
    rmse = np.sqrt(np.mean((est.predict(Xte) - yte) ** 2))
    peer_rmse = np.sqrt(np.mean((peer.predict(Xte) - yte) ** 2))
    assert rmse <= 1.5 * peer_rmse, (rmse, peer_rmse)
    # the explicit former defaults are kept as given
    old = StagewiseRegressor(block_size=1024, alpha=1e-6, n_stages=1).fit(X, y)
    assert old.block_size_ == 1024 and old.alpha_ == 1e-6


def test_blocks_are_regenerated_bit_for_bit_and_differ_between_stages():
    Z = np.random.default_rng(8).normal(size=(30, 5))
    gen = FeatureOperator(feature_spec(GaussianKernel(sigma=1.5), 5, 8, 11), 2**30)
    again = FeatureOperator(feature_spec(GaussianKernel(sigma=1.5), 5, 8, 11), 2**30)
    np.testing.assert_array_equal(gen.transform(Z, [3]), again.transform(Z, [3]))
    assert not np.allclose(gen.transform(Z, [3]), gen.transform(Z, [4]))
    s = feature_spec("linear", 5, 3, 2)
    assert s.method == "sample"
    np.testing.assert_array_equal(s.block(1).indices, feature_spec(LinearKernel(), 5, 3, 2).block(1).indices)
    assert len(set(s.block(1).indices)) == 3


# ----------------------------------------------------------------------------------------------
# conventions


def test_float32_end_to_end():
    X, y = classification_data(n=150)
    e32 = StagewiseClassifier(block_size=16, n_stages=2, update="calibrated", pca_components=4, random_state=0)
    e32.fit(X.astype(np.float32), y)
    for name in ("coef_", "intercept_", "calibration_", "init_", "pca_mean_", "pca_components_"):
        assert getattr(e32, name).dtype == np.float32, name
    S32 = e32.decision_function(X.astype(np.float32))
    assert S32.dtype == np.float32 and e32.predict_proba(X.astype(np.float32)).dtype == np.float32
    e64 = clone(e32).fit(X, y)
    np.testing.assert_allclose(S32, e64.decision_function(X), atol=1e-3)


def test_predict_proba_on_the_simplex_and_consistent_with_predict():
    X, y = classification_data(seed=10)
    for update in ("linear", "softmax"):
        est = StagewiseClassifier(block_size=16, n_stages=2, update=update, inner_iter=5, pca_components=None,
                                  random_state=0).fit(X, y)
        P = est.predict_proba(X)
        assert np.all(P >= 0)
        np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_array_equal(est.predict(X), est.classes_[np.argmax(P, axis=1)])


def test_warm_start_adds_stages():
    X, y = regression_data(seed=11)
    kw = dict(block_size=8, pca_components=3, update="calibrated", random_state=3)
    est = StagewiseRegressor(n_stages=2, warm_start=True, **kw).fit(X, y)
    est.set_params(n_stages=5).fit(X, y)
    full = StagewiseRegressor(n_stages=5, **kw).fit(X, y)
    assert est.n_iter_ == 5
    np.testing.assert_allclose(est.predict(X), full.predict(X), atol=1e-12)
    np.testing.assert_allclose(est.objective_history_, full.objective_history_, rtol=1e-12)
    with pytest.raises(ValueError, match="n_stages"):
        est.set_params(n_stages=3).fit(X, y)
    with pytest.raises(ValueError, match="warm_start"):
        est.set_params(n_stages=6).fit(X[:, :4], y)


def test_sample_weight_acts_as_repetition_and_class_weight_balanced():
    X, y = classification_data(n=90, seed=12)
    reps = np.random.default_rng(0).integers(0, 3, size=90)
    kw = dict(block_size=12, n_stages=3, pca_components=4, random_state=0)
    a = StagewiseClassifier(**kw).fit(X, y, sample_weight=reps)
    b = StagewiseClassifier(**kw).fit(np.repeat(X, reps, axis=0), np.repeat(y, reps))
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=1e-9)
    c = StagewiseClassifier(class_weight="balanced", **kw).fit(X, y)
    d = StagewiseClassifier(**kw).fit(X, y, sample_weight=compute_sample_weight("balanced", y))
    np.testing.assert_allclose(c.decision_function(X), d.decision_function(X), atol=1e-12)


def test_predictions_in_row_chunks_equal_one_pass():
    X, y = regression_data(n=300)
    est = StagewiseRegressor(block_size=64, n_stages=2, pca_components=None, random_state=0).fit(X, y)
    full = est.predict(X)
    est.set_params(max_memory=20_000)  # a few dozen rows per chunk
    np.testing.assert_allclose(est.predict(X), full, atol=1e-12)


def test_memory_budget_is_checked_before_allocating():
    X, y = regression_data(n=3000, d=10)

    def fit():
        try:
            StagewiseRegressor(GaussianKernel(sigma=1.0), block_size=512, pca_components=None, max_memory="2MB").fit(X, y)
        except ValueError as err:
            return str(err)

    peak, message = peak_bytes(fit)
    assert "block_size" in message and "max_memory" in message
    assert peak < 1_000_000  # the block alone would be 3000 x 512 x 8 = 12 MB


def test_callback_stops_and_multi_output():
    X, y = regression_data()
    Y = np.column_stack([y, -2 * y])
    seen = []
    est = StagewiseRegressor(block_size=8, n_stages=10, pca_components=None, random_state=0,
                             callback=lambda info: seen.append(info["objective"]) or len(seen) == 3, verbose=1).fit(X, Y)
    assert est.n_iter_ == 3 and est.predict(X).shape == (200, 2)
    np.testing.assert_allclose(seen, est.objective_history_[1:])
    np.testing.assert_allclose(est.predict(X)[:, 1], -2 * est.predict(X)[:, 0], atol=1e-9)


def test_bad_input():
    X, y = classification_data(n=40, d=3)
    with pytest.raises(ValueError, match="block_size"):
        StagewiseClassifier(block_size=0).fit(X, y)
    with pytest.raises(ValueError, match="pca_components"):
        StagewiseClassifier(pca_components=5).fit(X, y)
    with pytest.raises(ValueError, match="one class"):
        StagewiseClassifier(pca_components=None).fit(X, np.ones(40))
    with pytest.raises(ValueError, match="update"):
        StagewiseRegressor(update="softmax").fit(X, y)
    with pytest.raises(ValueError, match="feature_method"):
        StagewiseRegressor(feature_method="wavelet").fit(X, y)
    with pytest.raises(ValueError, match="kernel"):
        StagewiseRegressor("wavelet").fit(X, y)
    with pytest.raises(TypeError, match="generator"):  # replaced by kernel= and feature_method=
        StagewiseRegressor(generator="rff")
    with pytest.raises(ValueError, match="coincide"):  # median trick on identical points
        StagewiseRegressor(pca_components=None).fit(np.ones((10, 3)), np.arange(10.0))
    # zero-variance features: the ridge keeps every block fit well posed
    Xc = np.hstack([X, np.zeros((40, 2))])
    est = StagewiseRegressor("linear", block_size=5, n_stages=2, pca_components=None).fit(Xc, y.astype(float))
    assert np.all(np.isfinite(est.predict(Xc)))


# ----------------------------------------------------------------------------------------------
# kernel= and feature_method= (formerly generator=, sigma=, degree=)


@pytest.mark.parametrize(
    "params, kernel, method",
    [
        (dict(), GaussianKernel(), "cos"),
        (dict(feature_method="logit"), GaussianKernel(), "logit"),
        (dict(kernel="linear"), LinearKernel(), "sample"),
        (dict(kernel=PolynomialKernel(degree=3, gamma=0.25)), PolynomialKernel(degree=3, gamma=0.25), "tensorsketch"),
        (dict(kernel=LaplacianKernel(sigma=2.0), feature_method="cossin"), LaplacianKernel(sigma=2.0), "cossin"),
    ],
)
@pytest.mark.parametrize("update", ["linear", "calibrated"])
def test_estimator_equals_stagewise_regression_on_the_same_spec(params, kernel, method, update):
    X, y = regression_data(n=150, d=8, seed=13)
    est = StagewiseRegressor(block_size=10, n_stages=3, update=update, pca_components=5, random_state=9, alpha=1e-6, **params)
    est.fit(X, y)
    mean, components = pca_fit(X, 5)
    Z = pca_transform(X, mean, components)
    resolved = kernel.resolve(Z) if not kernel.is_resolved else kernel
    spec = FeatureBlockSpec(resolved, 5, 10, 9, np.float64, method)
    alpha = 1e-6
    ref = stagewise_regression(Z, y[:, None], spec, update=update, n_stages=3, alpha=alpha, init=[y.mean()])
    assert est.feature_method_ == method
    assert type(est.kernel_) is type(kernel) and est.kernel_.get_params() == resolved.get_params()
    # the same function on the same arrays: the same operations in the same order on any machine
    np.testing.assert_array_equal(est.pca_components_, components)
    # The rest is not bit for bit: the estimator's stage-0 prediction is the weighted mean w @ y
    # (a BLAS dot product), ref's is y.mean() (numpy's pairwise sum); they differ by an ulp on some
    # BLAS kernels (OPENBLAS_CORETYPE=Haswell on AMD Zen). Each stage is a ridge solve with
    # alpha = 1e-6, which can amplify that ulp by up to its condition number, at most
    # 1 + trace(Gram) / alpha: the Gram matrix of a block's features (and, for "calibrated", of the
    # predictions, whose variance is at most y's), weights summing to 1. So the coefficients agree
    # to a few hundred eps times that bound, relative to the largest entry of their array or to
    # the largest target if that is larger (a stage fitting a residual at rounding level, as
    # "sample" does after its first stage, has coefficients at rounding level, set by rounding);
    # the training residual, a well-conditioned function of the fit, to a few hundred eps.
    eps = np.finfo(np.float64).eps
    op = FeatureOperator(spec, 2**30)
    trace = max(op.transform(Z, [t]).var(axis=0).sum() for t in range(3)) + (y.var() if update == "calibrated" else 0)
    tol = 300 * eps * (1 + trace / alpha)
    fitted = [("coef_", ref.coef), ("intercept_", ref.intercept)]
    if update == "calibrated":
        fitted.append(("calibration_", ref.calibration))
    for name, expected in fitted:
        scale = max(np.abs(expected).max(), np.abs(y).max())
        np.testing.assert_allclose(getattr(est, name), expected, rtol=0, atol=tol * scale, err_msg=name)
    np.testing.assert_allclose(est.objective_history_, ref.objective_history, rtol=300 * eps)


#: predict(X[:3]) of the former StagewiseRegressor(generator, block_size=12, n_stages=3,
#: update="calibrated", pca_components=5, random_state=7), "polynomial" with sigma=2, degree=3
#: (taken from the tree before kernel= at commit f327fdc)
FORMER_PREDICTIONS = {
    "rff": [-1.662223607015111, 0.2932774635617392, 1.0513307426684528],
    "logit": [-1.719410755323525, -0.3052471377502878, 1.6212574675019402],
    "sample": [0.09650919918231841, 0.1792534006496375, 0.16869386700511796],
    "polynomial": [-0.989283834225174, -0.4264793116542871, 1.1680370882225835],
}


@pytest.mark.parametrize("generator", list(GENS))
def test_kernel_and_feature_method_reproduce_the_former_generators(generator):
    X, y = regression_data(n=120, d=8, seed=6)
    est = StagewiseRegressor(block_size=12, n_stages=3, update="calibrated", pca_components=5, random_state=7, alpha=1e-6,
                             **GENS[generator]).fit(X, y)
    np.testing.assert_allclose(est.predict(X[:3]), FORMER_PREDICTIONS[generator], rtol=1e-10, atol=1e-12)


def test_classifier_takes_kernel_first_and_the_linear_kernel_samples_columns():
    X, y = classification_data(n=120, d=6, seed=14)
    a = StagewiseClassifier("linear", block_size=3, n_stages=2, pca_components=None, random_state=0).fit(X, y)
    b = StagewiseClassifier(kernel=LinearKernel(), feature_method="sample", block_size=3, n_stages=2,
                            pca_components=None, random_state=0).fit(X, y)
    assert isinstance(a.kernel_, LinearKernel) and a.feature_method_ == "sample"
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert a.coef_.shape == (2, 3, 3)  # 3 of the 6 columns per stage, 3 classes
    assert a.get_params()["kernel"] == "linear" and list(a.get_params()).count("kernel") == 1


@pytest.mark.parametrize(
    "kernel, feature_method",
    [
        (PolynomialKernel(degree=2), "logit"),
        (PolynomialKernel(degree=2), "cos"),
        ("gaussian", "tensorsketch"),
        ("gaussian", "sample"),
        ("linear", "logit"),
        ("linear", "cos"),
    ],
)
def test_feature_method_of_another_kernel_family_is_refused(kernel, feature_method):
    X, y = classification_data(n=60, d=4)
    for est in (StagewiseRegressor(kernel, feature_method=feature_method, pca_components=None),
                StagewiseClassifier(kernel, feature_method=feature_method, pca_components=None)):
        with pytest.raises(ValueError, match=f"feature_method='{feature_method}' is not available") as err:
            est.fit(X, y)
        assert "feature_method=None" in str(err.value)  # names the fix
        assert not hasattr(est, "coef_")


def test_warm_start_keeps_the_fitted_kernel_and_feature_method():
    X, y = regression_data(n=100, seed=15)
    est = StagewiseRegressor(feature_method="logit", block_size=8, n_stages=2, pca_components=None,
                             warm_start=True, random_state=1).fit(X, y)
    sigma = est.kernel_.sigma
    est.set_params(n_stages=4).fit(X, y)
    full = StagewiseRegressor(feature_method="logit", block_size=8, n_stages=4, pca_components=None,
                              random_state=1).fit(X, y)
    assert est.kernel_.sigma == sigma and est.feature_method_ == "logit"
    np.testing.assert_allclose(est.predict(X), full.predict(X), rtol=1e-12, atol=1e-12)
    for change in (dict(feature_method=None), dict(kernel="laplacian"), dict(kernel=GaussianKernel(sigma=2 * sigma))):
        with pytest.raises(ValueError, match="kernel or feature_method changed"):
            _warm(est, change).fit(X, y)
    # the resolved bandwidth itself continues
    _warm(est, dict(kernel=GaussianKernel(sigma=sigma), n_stages=5)).fit(X, y)


def _warm(est, change):
    """A copy of the fitted ``est`` (still warm-startable) with ``change`` set."""
    import copy

    return copy.deepcopy(est).set_params(**change)


# ----------------------------------------------------------------------------------------------
# pca_components="auto"


@pytest.mark.parametrize("Estimator", [StagewiseRegressor, StagewiseClassifier])
def test_defaults_fit_and_predict_on_few_features(Estimator):
    # pca_components=50 by default used to refuse any X with fewer than 50 features
    X, y = classification_data(n=150, d=8, seed=16)
    y = y if Estimator is StagewiseClassifier else X[:, 0] * X[:, 1]
    est = Estimator(n_stages=2, block_size=32, random_state=0).fit(X, y)
    assert est.get_params()["pca_components"] == "auto" and est.pca_components_ is None
    out = est.predict(X)
    assert out.shape == (150,) and np.all(np.isfinite(out))
    if Estimator is StagewiseClassifier:
        P = est.predict_proba(X)
        assert np.all(np.isfinite(P)) and est.score(X, y) > 0.5  # the majority class is 46%
    else:
        assert est.objective_history_[-1] < est.objective_history_[0]


def test_auto_pca_is_50_components_above_50_features():
    X, y = regression_data(n=120, d=60, seed=17)
    auto = StagewiseRegressor(block_size=8, n_stages=2, random_state=0).fit(X, y)
    fifty = StagewiseRegressor(block_size=8, n_stages=2, pca_components=50, random_state=0).fit(X, y)
    assert auto.pca_components_.shape == (60, 50)
    np.testing.assert_array_equal(auto.pca_components_, fifty.pca_components_)
    np.testing.assert_array_equal(auto.predict(X), fifty.predict(X))
    X50 = X[:, :50]  # exactly 50 features: no PCA
    assert StagewiseRegressor(block_size=8, n_stages=1, random_state=0).fit(X50, y).pca_components_ is None


def test_explicit_pca_components_above_the_features_still_fails_clearly():
    X, y = regression_data(n=60, d=8)
    with pytest.raises(ValueError, match=r"pca_components=50 is larger than the number of features.*'auto'"):
        StagewiseRegressor(pca_components=50).fit(X, y)
    with pytest.raises(ValueError, match="pca_components"):
        StagewiseRegressor(pca_components="all").fit(X, y)


def test_string_rows_at_prediction_are_refused_naming_x():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), rng.normal(size=40)
    est = StagewiseRegressor(block_size=8, n_stages=2, random_state=0).fit(X, y)
    with pytest.raises((TypeError, ValueError), match=r"\bX\b"):
        est.predict(np.array([["a", "b", "c"]] * 3))


def test_score_stays_finite_for_huge_targets():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    y = 1e160 * rng.normal(size=40)
    est = StagewiseRegressor(block_size=8, n_stages=2, random_state=0).fit(X, y)
    assert np.isfinite(est.score(X, y))


def test_auto_n_stages_follow_the_number_of_samples():
    """n_stages="auto" (issue #37): 8 while the "auto" block grows with n, then 8 sqrt(n / 12288)
    (the features n_stages * 1024 grow like sqrt(n)), at most 64; non-decreasing in n."""
    ns = (1, 100, 4000, 12288, 13872, 13873, 50000, 60000, 250000, 10**6, 10**8)
    assert [_auto_n_stages(n) for n in ns] == [8, 8, 8, 8, 8, 9, 16, 18, 36, 64, 64]
    stages = np.array([_auto_n_stages(n) for n in range(1, 400000, 97)])
    assert np.all(np.diff(stages) >= 0) and stages.min() == 8 and stages.max() <= 64
    features = np.array([_auto_n_stages(n) * _auto_block_size(n) for n in range(1, 400000, 97)])
    assert np.all(np.diff(features) >= 0)


@pytest.mark.parametrize("cls", [StagewiseRegressor, StagewiseClassifier])
def test_default_n_stages_is_auto(cls):
    X, y = regression_data(n=300, d=4, seed=1)
    if cls is StagewiseClassifier:
        y = (y > np.median(y)).astype(int)
    est = cls(random_state=0).fit(X, y)
    assert est.n_stages == "auto" and est.n_iter_ == 8 and est.coef_.shape[0] == 8
    # a warm start to "auto" on the same data adds nothing
    with pytest.warns(UserWarning, match="does nothing"):
        assert est.set_params(warm_start=True).fit(X, y).n_iter_ == 8
