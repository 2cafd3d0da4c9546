"""Tests of kernelscale.features: random-feature convergence, seeded blocks, Nystrom."""

import pickle

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import Matern
from sklearn.kernel_approximation import Nystroem
from sklearn.metrics.pairwise import laplacian_kernel, polynomial_kernel, rbf_kernel

from kernelscale.ops.feature_blocks import FeatureBlockSpec, block_rng
from kernelscale.ops import kernel as ops_kernel
from kernelscale.ops.memory import ufunc_workspace_bytes
from kernelscale.features import (
    NystromFeatures,
    PolynomialRandomFeatures,
    RandomFourierFeatures,
    SeededFeatureMap,
)
from kernelscale.kernels import (
    GaussianKernel,
    LaplacianKernel,
    LinearKernel,
    MaternKernel,
    PolynomialKernel,
    median_heuristic,
)

SIGMA = 2.0


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((40, 5)), rng.standard_normal((30, 5))


# independent references: scikit-learn's kernels
def _reference(name, X, Z):
    if name == "gaussian":
        return GaussianKernel(SIGMA), rbf_kernel(X, Z, gamma=0.5 / SIGMA**2)
    if name == "laplacian":
        return LaplacianKernel(2 * SIGMA), laplacian_kernel(X, Z, gamma=1 / (2 * SIGMA))
    if name.startswith("matern"):
        nu = float(name[len("matern"):])
        return MaternKernel(SIGMA, nu), Matern(length_scale=SIGMA, nu=nu)(X, Z)
    degree = int(name[-1])
    # scale so that <x, z> is O(1) and the polynomial stays moderate
    return PolynomialKernel(degree, gamma=0.2, coef0=2.0), polynomial_kernel(X, Z, degree=degree, gamma=0.2, coef0=2.0)


SHIFT_INVARIANT = ["gaussian", "laplacian", "matern0.5", "matern1.5", "matern2.5"]
CASES = (
    [(name, "cos") for name in SHIFT_INVARIANT]
    + [(name, "cossin") for name in ("gaussian", "laplacian", "matern1.5")]
    + [("poly2", "tensorsketch"), ("poly3", "tensorsketch"), ("poly2", "maclaurin"), ("poly3", "maclaurin")]
)


# ----------------------------------------------------------------------------------------------
# convergence to the kernel


def _mean_abs_error(kernel, method, D, X, Z, K, seeds=(0, 1, 2)):
    errors = []
    for seed in seeds:
        fm = SeededFeatureMap(kernel, D, seed, method=method)
        errors.append(np.abs(fm.block(X, 0) @ fm.block(Z, 0).T - K).mean())
    return float(np.mean(errors))


@pytest.mark.parametrize("name, method", CASES)
def test_error_shrinks_like_inverse_sqrt_D(data, name, method):
    X, Z = data
    kernel, K = _reference(name, X, Z)
    e256, e1024, e4096 = (_mean_abs_error(kernel, method, D, X, Z, K) for D in (256, 1024, 4096))
    # 1/sqrt(D) predicts a ratio of 1/4 between D and 16 D (tensorsketch can be faster)
    assert e4096 < 0.5 * e256, (e256, e1024, e4096)
    assert e4096 < e1024 < e256
    # and small on the kernel's own scale, sqrt(k(x, x) k(z, z)) (1 for the bandwidth kernels)
    scale = np.sqrt(np.outer(kernel.diag(X), kernel.diag(Z))).mean()
    assert e4096 < 0.05 * scale


@pytest.mark.parametrize("name, method", [c for c in CASES if c[1] in ("cos", "cossin")])
def test_average_of_blocks_is_unbiased(data, name, method):
    """64 independent blocks of 512: D = 32768, so the error must be small everywhere and its
    signed mean near zero; a wrong spectral density (e.g. nu instead of 2 nu degrees of freedom
    for Matern) leaves a systematic error well above these bounds."""
    X, Z = data
    kernel, K = _reference(name, X, Z)
    fm = SeededFeatureMap(kernel, 512, 7, method=method)
    approx = fm.blocks(X, range(64)) @ fm.blocks(Z, range(64)).T
    assert np.abs(approx - K).max() < 0.03
    assert abs((approx - K).mean()) < 0.005


def test_polynomial_average_of_blocks_is_unbiased(data):
    X, Z = data
    kernel, K = _reference("poly3", X, Z)
    for method in ("tensorsketch", "maclaurin"):
        fm = SeededFeatureMap(kernel, 1024, 3, method=method)
        approx = fm.blocks(X, range(32)) @ fm.blocks(Z, range(32)).T
        assert abs((approx - K).mean()) < 0.02 * np.abs(K).mean()
        assert np.abs(approx - K).mean() < 0.05 * np.abs(K).mean()


@pytest.mark.parametrize("method", ["tensorsketch", "maclaurin"])
def test_polynomial_tiny_blocks_are_unbiased(data, method):
    """Blocks of 8 features: a bias of order 1/D (e.g. count sketches without random signs)
    stays visible after averaging many blocks, while the variance averages out."""
    X, Z = data[0][:12], data[1][:10]
    kernel, K = _reference("poly3", X, Z)
    fm = SeededFeatureMap(kernel, 8, 0, method=method)
    error = fm.blocks(X, range(400)) @ fm.blocks(Z, range(400)).T - K
    scale = np.abs(K).mean()
    assert abs(error.mean()) < 0.05 * scale
    assert np.abs(error).max() < 0.5 * scale


def test_linear_projections(data):
    X, Z = data
    fm = SeededFeatureMap(LinearKernel(), 1024, 0)
    approx = fm.blocks(X, range(16)) @ fm.blocks(Z, range(16)).T
    assert np.abs(approx - X @ Z.T).mean() < 0.05 * np.abs(X @ Z.T).mean() + 0.05


# ----------------------------------------------------------------------------------------------
# seeded blocks


def test_block_rng_is_the_spawned_child():
    child = np.random.SeedSequence(123).spawn(6)[5]
    assert np.array_equal(block_rng(123, 5).random(8), np.random.default_rng(child).random(8))


@pytest.mark.parametrize("name, method", CASES + [("linear", "gaussian")])
def test_regenerated_block_is_bit_identical(data, name, method):
    X, _ = data
    kernel = LinearKernel() if name == "linear" else _reference(name, X, X)[0]
    first = SeededFeatureMap(kernel, 64, 11, method=method).block(X, 3)
    fm = SeededFeatureMap(kernel, 64, 11, method=method)
    for t in (0, 5, 3):  # other blocks in between change nothing: no hidden state
        again = fm.block(X, t)
    assert np.array_equal(first, again)
    assert again.shape == (X.shape[0], 64)
    assert not np.allclose(first, fm.block(X, 4))
    assert not np.allclose(first, SeededFeatureMap(kernel, 64, 12, method=method).block(X, 3))
    spec = FeatureBlockSpec(kernel, X.shape[1], 64, 11, np.float64, method)
    assert np.array_equal(spec.block(3).apply(X), first)


def test_spec_block_arrays_identical():
    spec = FeatureBlockSpec(MaternKernel(1.0, 1.5), 4, 32, 99)
    a, b = spec.block(7), spec.block(7)
    assert np.array_equal(a.weights, b.weights) and np.array_equal(a.offset, b.offset)
    c = spec.block(8)
    assert not np.array_equal(a.weights, c.weights)


def test_blocks_concatenate_and_average(data):
    X, Z = data
    fm = SeededFeatureMap(GaussianKernel(SIGMA), 16, 0)
    stacked = fm.blocks(X, [2, 5, 9])
    expected = np.hstack([fm.block(X, t) for t in (2, 5, 9)]) / np.sqrt(3)
    assert np.allclose(stacked, expected)
    inner = fm.blocks(X, [2, 5, 9]) @ fm.blocks(Z, [2, 5, 9]).T
    assert np.allclose(inner, np.mean([fm.block(X, t) @ fm.block(Z, t).T for t in (2, 5, 9)], axis=0))


def _array_bytes(obj, seen=None):
    """Bytes of every numpy array reachable from obj's attributes and containers."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_array_bytes(k, seen) + _array_bytes(v, seen) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set)):
        return sum(_array_bytes(v, seen) for v in obj)
    if hasattr(obj, "__dict__"):
        return _array_bytes(vars(obj), seen)
    return 0


def test_seeded_map_memory_does_not_grow_with_blocks(data):
    X, _ = data
    fm = SeededFeatureMap(GaussianKernel(SIGMA), 256, 0)
    fm.block(X, 0)
    size_one, arrays_one = len(pickle.dumps(fm)), _array_bytes(fm)
    for t in range(1, 100):
        fm.block(X, t)
    assert len(pickle.dumps(fm)) == size_one
    assert _array_bytes(fm) == arrays_one == 0


def test_float32_stays_float32(data):
    X, Z = data
    X32 = X.astype(np.float32)
    for kernel in (GaussianKernel(SIGMA), LaplacianKernel(SIGMA), PolynomialKernel(2, 0.2, 1.0)):
        fm = SeededFeatureMap(kernel, 128, 0)
        b32 = fm.block(X32, 1)
        assert b32.dtype == np.float32
        # the same draws, rounded: the float32 block is the float64 block to float32 accuracy
        assert np.allclose(b32, fm.block(X32.astype(np.float64), 1), atol=2e-4)
    for est in (
        RandomFourierFeatures(GaussianKernel(SIGMA), n_components=64, random_state=0),
        RandomFourierFeatures(GaussianKernel(SIGMA), n_components=64, method="cossin", random_state=0),
        PolynomialRandomFeatures(n_components=64, random_state=0),
        PolynomialRandomFeatures(n_components=64, method="maclaurin", random_state=0),
        NystromFeatures(GaussianKernel(SIGMA), n_components=16, random_state=0),
    ):
        assert est.fit(X32).transform(Z.astype(np.float32)).dtype == np.float32
        assert est.transform(Z).dtype == np.float64
    forced = RandomFourierFeatures(GaussianKernel(SIGMA), n_components=64, random_state=0, dtype=np.float32).fit(X)
    assert forced.random_weights_.dtype == np.float32 and forced.transform(Z).dtype == np.float32


# ----------------------------------------------------------------------------------------------
# transformers


def test_rff_transformer_is_seeded_block_zero(data):
    X, Z = data
    rff = RandomFourierFeatures(MaternKernel(SIGMA, 2.5), n_components=128, random_state=5).fit(X)
    fm = SeededFeatureMap(rff.kernel_, 128, 5)
    assert rff.seed_ == 5
    assert np.array_equal(rff.transform(Z), fm.block(Z, 0))
    assert rff.random_weights_.shape == (5, 128) and rff.random_offset_.shape == (128,)
    poly = PolynomialRandomFeatures(PolynomialKernel(3, 1.0, 1.0), n_components=64, random_state=5).fit(X)
    assert np.array_equal(poly.transform(Z), SeededFeatureMap(PolynomialKernel(3, 1.0, 1.0), 64, 5).block(Z, 0))


def test_rff_median_bandwidth_resolved_in_fit(data):
    X, Z = data
    rff = RandomFourierFeatures("gaussian", n_components=4096, random_state=0).fit(X)
    sigma = median_heuristic(X, random_state=0)
    assert rff.kernel_.sigma == pytest.approx(sigma)
    assert rff.kernel == "gaussian"  # the parameter is untouched
    K = rbf_kernel(X, Z, gamma=0.5 / sigma**2)
    assert np.abs(rff.transform(X) @ rff.transform(Z).T - K).mean() < 0.03


def test_rff_cossin_shape(data):
    X, _ = data
    rff = RandomFourierFeatures(GaussianKernel(SIGMA), n_components=64, method="cossin", random_state=0).fit(X)
    assert rff.transform(X).shape == (40, 64) and rff.random_weights_.shape == (5, 32)
    assert rff.random_offset_ is None
    # a point's cos/sin features have squared norm exactly k(x, x) = 1
    assert np.allclose((rff.transform(X) ** 2).sum(axis=1), 1.0)


def test_get_feature_names_out(data):
    X, _ = data
    names = RandomFourierFeatures(n_components=8, random_state=0).fit(X).get_feature_names_out()
    assert list(names) == [f"randomfourierfeatures{i}" for i in range(8)]
    assert len(NystromFeatures(n_components=7, random_state=0).fit(X).get_feature_names_out()) == 7


@pytest.mark.parametrize("kernel, sk_kernel, sk_params", [
    (GaussianKernel(SIGMA), "rbf", {"gamma": 0.5 / SIGMA**2}),
    (LaplacianKernel(3.0), "laplacian", {"gamma": 1 / 3.0}),
    (PolynomialKernel(2, 0.5, 1.0), "poly", {"degree": 2, "gamma": 0.5, "coef0": 1.0}),
])
def test_nystrom_matches_sklearn(data, kernel, sk_kernel, sk_params):
    X, Z = data
    ours = NystromFeatures(kernel, n_components=12, random_state=3).fit(X)
    ref = Nystroem(kernel=sk_kernel, kernel_params=sk_params, n_components=12, random_state=3).fit(X)
    assert np.array_equal(ours.component_indices_, ref.component_indices_)
    inner = ours.transform(X) @ ours.transform(Z).T
    assert np.abs(inner - ref.transform(X) @ ref.transform(Z).T).max() < 1e-8
    # and the formula itself, with a dense pseudo-inverse
    L = X[ours.component_indices_]
    K_xl, K_ll, K_lz = (kernel(a, b) for a, b in ((X, L), (L, L), (L, Z)))
    assert np.abs(inner - K_xl @ np.linalg.pinv(K_ll) @ K_lz).max() < 1e-8


def test_nystrom_blocks_under_tiny_memory_budget(data, monkeypatch):
    X, Z = data
    expected = NystromFeatures(GaussianKernel(SIGMA), n_components=16, random_state=0).fit(X).transform(Z)
    # room for a few rows of the 30 x 16 kernel block beyond the fixed scratch
    tiny = NystromFeatures(GaussianKernel(SIGMA), n_components=16, random_state=0, max_memory=ufunc_workspace_bytes() + 4000)
    tiny.fit(X)
    n_blocks = []
    blocks = ops_kernel._blocks

    def counting(*args, **kwargs):
        for item in blocks(*args, **kwargs):
            n_blocks.append(item[1] - item[0])
            yield item

    monkeypatch.setattr(ops_kernel, "_blocks", counting)
    assert np.allclose(tiny.transform(Z), expected, rtol=1e-12, atol=1e-12)
    assert len(n_blocks) > 2 and sum(n_blocks) == Z.shape[0]
    with pytest.raises(ValueError, match="max_memory"):
        NystromFeatures(GaussianKernel(SIGMA), n_components=16, random_state=0, max_memory=100).fit(X)


def test_nystrom_rank_deficient_landmarks():
    """Duplicate landmarks make K_LL singular: the cut eigenvalues give the pseudo-inverse."""
    rng = np.random.default_rng(1)
    X = np.repeat(rng.standard_normal((5, 3)), 4, axis=0)
    ny = NystromFeatures(GaussianKernel(1.0), n_components=12, random_state=0).fit(X)
    F = ny.transform(X)
    assert np.all(np.isfinite(F))
    assert np.allclose(F @ F.T, GaussianKernel(1.0)(X), atol=1e-8)


def test_nystrom_more_components_than_samples_warns(data):
    X, _ = data
    with pytest.warns(UserWarning, match="n_components"):
        ny = NystromFeatures(GaussianKernel(SIGMA), n_components=100, random_state=0).fit(X)
    assert ny.transform(X).shape == (40, 40)


# ----------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("cls", [RandomFourierFeatures, PolynomialRandomFeatures, NystromFeatures])
def test_n_components_must_be_positive(data, cls):
    with pytest.raises(ValueError, match="n_components"):
        cls(n_components=0).fit(data[0])


def test_clear_errors(data):
    X, _ = data
    with pytest.raises(ValueError, match="PolynomialRandomFeatures"):
        RandomFourierFeatures(kernel="polynomial").fit(X)
    with pytest.raises(ValueError, match="even n_components"):
        RandomFourierFeatures(GaussianKernel(1.0), n_components=7, method="cossin").fit(X)
    with pytest.raises(ValueError, match="dtype"):
        RandomFourierFeatures(GaussianKernel(1.0), dtype=np.int32).fit(X)
    with pytest.raises(ValueError, match="n_samples=1"):
        RandomFourierFeatures().fit(X[:1])
    with pytest.raises(ValueError, match="sigma"):
        RandomFourierFeatures(GaussianKernel(sigma=-1.0)).fit(X)
    with pytest.raises(ValueError, match="coef0"):
        PolynomialRandomFeatures(PolynomialKernel(coef0=-1.0)).fit(X)
    rff = RandomFourierFeatures(GaussianKernel(1.0), n_components=16).fit(X)
    with pytest.raises(ValueError, match="features"):
        rff.transform(X[:, :3])
    with pytest.raises(ValueError, match="NaN"):
        rff.transform(np.full((2, 5), np.nan))
    with pytest.raises(ValueError, match="max_memory"):
        NystromFeatures(max_memory="lots").fit(X)

    with pytest.raises(ValueError, match="resolve"):
        SeededFeatureMap(GaussianKernel(), 16, 0)  # sigma="median" is not resolved
    with pytest.raises(ValueError, match="method"):
        SeededFeatureMap(GaussianKernel(1.0), 16, 0, method="tensorsketch")
    with pytest.raises(ValueError, match="block_size must be even"):
        SeededFeatureMap(GaussianKernel(1.0), 15, 0, method="cossin")
    with pytest.raises(ValueError, match="block_size"):
        SeededFeatureMap(GaussianKernel(1.0), 0, 0)
    with pytest.raises(ValueError, match="coef0"):
        SeededFeatureMap(PolynomialKernel(2, 1.0, -1.0), 16, 0)
    with pytest.raises(ValueError, match="random_state"):
        SeededFeatureMap(GaussianKernel(1.0), 16, -1)
    fm = SeededFeatureMap(GaussianKernel(1.0), 16, 0, n_features_in=5)
    with pytest.raises(ValueError, match="t must be an integer"):
        fm.block(X, -1)
    with pytest.raises(ValueError, match="features"):
        fm.block(X[:, :2], 0)
    with pytest.raises(ValueError, match="NaN"):
        fm.block(np.full((2, 5), np.inf), 0)


def test_random_state_none_draws_a_seed(data):
    X, _ = data
    a, b = SeededFeatureMap(GaussianKernel(1.0), 8), SeededFeatureMap(GaussianKernel(1.0), 8)
    assert isinstance(a.seed, int) and a.seed != b.seed
    rs = np.random.RandomState(0)
    assert SeededFeatureMap(GaussianKernel(1.0), 8, rs).seed == SeededFeatureMap(
        GaussianKernel(1.0), 8, np.random.RandomState(0)
    ).seed


# ----------------------------------------------------------------------------------------------
# scikit-learn compatibility (to move into the shared estimator-check test)


def test_polynomial_features_take_the_kernel_and_the_former_parameters_with_a_warning(data):
    X, Z = data
    new = PolynomialRandomFeatures(PolynomialKernel(3, 0.5, 2.0), n_components=32, random_state=1).fit(X)
    with pytest.warns(FutureWarning, match="kernel=PolynomialKernel"):
        old = PolynomialRandomFeatures(degree=3, gamma=0.5, coef0=2.0, n_components=32, random_state=1).fit(X)
    with pytest.warns(FutureWarning, match="degree=3"):
        positional = PolynomialRandomFeatures(3, gamma=0.5, coef0=2.0, n_components=32, random_state=1).fit(X)
    np.testing.assert_allclose(old.transform(Z), new.transform(Z), rtol=1e-12)
    np.testing.assert_allclose(positional.transform(Z), new.transform(Z), rtol=1e-12)
    default = PolynomialRandomFeatures(n_components=32, random_state=1).fit(X)
    assert (default.kernel_.degree, default.kernel_.gamma, default.kernel_.coef0) == (2, 1.0, 1.0)
    with pytest.raises(ValueError, match="not both"):
        PolynomialRandomFeatures(PolynomialKernel(2), degree=3).fit(X)


@pytest.mark.parametrize("make", [
    lambda: RandomFourierFeatures(n_components=16, random_state=0),
    lambda: PolynomialRandomFeatures(n_components=16, random_state=0),
    lambda: NystromFeatures(n_components=16, random_state=0),
])
def test_transformers_take_max_memory_and_verbose(make, data, capsys):
    X, Z = data
    quiet = make().fit(X)
    loud = make().set_params(verbose=1, max_memory="1MB").fit(X)
    np.testing.assert_allclose(loud.transform(Z), quiet.transform(Z), rtol=1e-12, atol=1e-12)
    assert ".transform" in capsys.readouterr().err  # the progress bar
    with pytest.raises(ValueError, match="max_memory"):
        make().set_params(max_memory=64).fit(X).transform(Z)
