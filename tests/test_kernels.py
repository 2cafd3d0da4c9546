"""Kernels against naive double-loop references; one base class gives every kernel the battery."""

import math

import numpy as np
import pytest
from sklearn.base import clone

from kernelscale import kernels as K


def naive_block(k, X, Z):
    out = np.empty((len(X), len(Z)))
    for i, x in enumerate(X.astype(np.float64)):
        for j, z in enumerate(Z.astype(np.float64)):
            out[i, j] = k(x, z)
    return out


def gaussian(sigma):
    return lambda x, z: math.exp(-np.sum((x - z) ** 2) / (2 * sigma**2))


def laplacian(sigma):
    return lambda x, z: math.exp(-np.sum(np.abs(x - z)) / sigma)


def matern(sigma, nu):
    def k(x, z):
        r = math.sqrt(np.sum((x - z) ** 2)) / sigma
        if nu == 0.5:
            return math.exp(-r)
        if nu == 1.5:
            return (1 + math.sqrt(3) * r) * math.exp(-math.sqrt(3) * r)
        return (1 + math.sqrt(5) * r + 5 * r**2 / 3) * math.exp(-math.sqrt(5) * r)

    return k


class KernelTests:
    """Subclass with ``kernel`` (resolved) and ``reference`` (a scalar function) to test a kernel."""

    kernel = None
    reference = None
    psd = True

    @pytest.fixture
    def data(self):
        rng = np.random.default_rng(0)
        return rng.normal(size=(23, 4)), rng.normal(size=(17, 4))

    def test_block_matches_double_loop(self, data):
        X, Z = data
        np.testing.assert_allclose(self.kernel(X, Z), naive_block(type(self).reference, X, Z), rtol=1e-10, atol=1e-12)

    def test_default_second_argument_is_first(self, data):
        X, _ = data
        np.testing.assert_allclose(self.kernel(X), self.kernel(X, X))

    #: kernels of sqrt(distance) turn rounding of order eps in squared distances into sqrt(eps)
    diag_rtol = 1e-10

    def test_diag_matches_block_diagonal(self, data):
        X, _ = data
        np.testing.assert_allclose(self.kernel.diag(X), np.diag(self.kernel(X, X)), rtol=self.diag_rtol, atol=1e-12)

    def test_float32_stays_float32(self, data):
        X, Z = (a.astype(np.float32) for a in data)
        block = self.kernel(X, Z)
        assert block.dtype == np.float32
        assert self.kernel.diag(X).dtype == np.float32
        np.testing.assert_allclose(block, self.kernel(X.astype(np.float64), Z.astype(np.float64)), rtol=2e-4, atol=2e-5)
        assert self.kernel(X, Z.astype(np.float64)).dtype == np.float64

    def test_symmetric_and_psd(self, data):
        X, _ = data
        G = self.kernel(X)
        np.testing.assert_allclose(G, G.T, rtol=1e-12, atol=1e-12)
        if self.psd:
            assert np.linalg.eigvalsh(G).min() > -1e-8 * np.abs(G).max()

    def test_clone_keeps_parameters(self):
        copy = clone(self.kernel)
        assert copy is not self.kernel
        assert copy.get_params() == self.kernel.get_params()

    def test_block_writes_into_given_buffer(self, data):
        X, Z = data
        prepared = self.kernel.prepare(Z)
        out = np.empty((len(X), len(Z)))
        assert self.kernel.block(X, prepared, out=out) is out
        np.testing.assert_allclose(out, self.kernel(X, Z))

    def test_mismatched_features_rejected(self, data):
        X, Z = data
        with pytest.raises(ValueError, match="features"):
            self.kernel(X, Z[:, :3])


class TestGaussian(KernelTests):
    kernel = K.GaussianKernel(sigma=1.7)
    reference = staticmethod(gaussian(1.7))


class TestLaplacian(KernelTests):
    kernel = K.LaplacianKernel(sigma=2.5)
    reference = staticmethod(laplacian(2.5))


class TestMatern05(KernelTests):
    kernel = K.MaternKernel(sigma=1.3, nu=0.5)
    diag_rtol = 1e-7
    reference = staticmethod(matern(1.3, 0.5))


class TestMatern15(KernelTests):
    kernel = K.MaternKernel(sigma=1.3, nu=1.5)
    reference = staticmethod(matern(1.3, 1.5))


class TestMatern25(KernelTests):
    kernel = K.MaternKernel(sigma=0.8, nu=2.5)
    reference = staticmethod(matern(0.8, 2.5))


class TestPolynomial(KernelTests):
    kernel = K.PolynomialKernel(degree=3, gamma=0.5, coef0=1.0)
    reference = staticmethod(lambda x, z: (0.5 * x @ z + 1.0) ** 3)


class TestPolynomialNoOffset(KernelTests):
    kernel = K.PolynomialKernel(degree=4, gamma=1.0, coef0=0.0)
    reference = staticmethod(lambda x, z: (x @ z) ** 4)


class TestLinear(KernelTests):
    kernel = K.LinearKernel()
    reference = staticmethod(lambda x, z: x @ z)


def test_gemm_form_distances_are_clipped_and_centred():
    # far from the origin |x|^2 + |z|^2 - 2<x,z> cancels catastrophically unless centred
    rng = np.random.default_rng(5)
    X = 1e4 + 1e-3 * rng.normal(size=(20, 3))
    for kernel, ref in [(K.GaussianKernel(sigma=1e-3), gaussian(1e-3)), (K.MaternKernel(1e-3, 2.5), matern(1e-3, 2.5))]:
        G = kernel(X, X)
        assert np.all(G <= 1.0)
        np.testing.assert_allclose(G, naive_block(ref, X, X), atol=1e-6)
    G32 = K.GaussianKernel(sigma=1.0)(rng.normal(size=(30, 50)).astype(np.float32) + 300)
    assert np.all(G32 <= 1.0) and np.all(np.diag(G32) >= 1 - 1e-4)


def test_sklearn_equivalents():
    from sklearn.gaussian_process.kernels import Matern
    from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

    rng = np.random.default_rng(1)
    X, Z = rng.normal(size=(30, 6)), rng.normal(size=(20, 6))
    np.testing.assert_allclose(K.GaussianKernel(2.0)(X, Z), rbf_kernel(X, Z, gamma=1 / 8), rtol=1e-12)
    np.testing.assert_allclose(K.LaplacianKernel(2.0)(X, Z), laplacian_kernel(X, Z, gamma=0.5), rtol=1e-12)
    np.testing.assert_allclose(K.MaternKernel(2.0, 1.5)(X, Z), Matern(2.0, nu=1.5)(X, Z), rtol=1e-12)


def test_median_heuristic_matches_definition():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3))
    dists = [np.linalg.norm(X[i] - X[j]) for i in range(40) for j in range(i + 1, 40)]
    assert K.median_heuristic(X) == pytest.approx(np.median(dists), rel=1e-12)
    l1 = [np.abs(X[i] - X[j]).sum() for i in range(40) for j in range(i + 1, 40)]
    assert K.median_heuristic(X, metric="cityblock") == pytest.approx(np.median(l1), rel=1e-12)


def test_median_subsamples_reproducibly():
    X = np.random.default_rng(3).normal(size=(3000, 2))
    a = K.median_heuristic(X, n_samples=200, random_state=0)
    assert a == K.median_heuristic(X, n_samples=200, random_state=0)
    exact = np.median([np.linalg.norm(X[i] - X[j]) for i in range(0, 3000, 7) for j in range(i + 1, 3000, 7)])
    assert K.median_heuristic(X, random_state=0) == pytest.approx(exact, rel=0.05)


def test_resolve_returns_copy_and_leaves_parameter_alone():
    X = np.random.default_rng(4).normal(size=(50, 3))
    kernel = K.GaussianKernel()
    resolved = kernel.resolve(X, random_state=0)
    assert kernel.sigma == "median" and not kernel.is_resolved
    assert resolved.sigma == pytest.approx(K.median_heuristic(X))
    assert resolved.resolve(X) is resolved
    assert K.LaplacianKernel().resolve(X).sigma == pytest.approx(K.median_heuristic(X, "cityblock"))


def test_unresolved_median_kernel_says_how_to_fix():
    with pytest.raises(ValueError, match="resolve"):
        K.GaussianKernel()(np.ones((2, 2)))


def test_median_of_identical_points_is_an_error():
    with pytest.raises(ValueError, match="sigma"):
        K.GaussianKernel().resolve(np.ones((10, 2)))


@pytest.mark.parametrize(
    "name, cls",
    [("gaussian", K.GaussianKernel), ("rbf", K.GaussianKernel), ("laplacian", K.LaplacianKernel),
     ("matern", K.MaternKernel), ("polynomial", K.PolynomialKernel), ("linear", K.LinearKernel),
     ("RBF", K.GaussianKernel)],
)
def test_make_kernel_shortcuts(name, cls):
    assert type(K.make_kernel(name)) is cls


def test_make_kernel_rejects_unknown():
    with pytest.raises(ValueError, match="kernel='cosine'.*gaussian"):
        K.make_kernel("cosine")
    with pytest.raises(ValueError, match="not a kernel"):
        K.make_kernel(3)


@pytest.mark.parametrize(
    "kernel, match",
    [(K.GaussianKernel(sigma=0.0), "sigma"), (K.GaussianKernel(sigma=-1), "sigma"),
     (K.LaplacianKernel(sigma="mean"), "sigma"), (K.MaternKernel(sigma=1.0, nu=1.0), "nu"),
     (K.PolynomialKernel(degree=0), "degree"), (K.PolynomialKernel(degree=2.5), "degree"),
     (K.PolynomialKernel(gamma=0), "gamma"), (K.PolynomialKernel(coef0=np.inf), "coef0")],
)
def test_bad_parameters_are_named(kernel, match):
    with pytest.raises((ValueError, TypeError), match=match):
        kernel(np.ones((2, 2)))


@pytest.mark.parametrize(
    "X, error, match",
    [([[1.0, np.nan]], ValueError, "NaN"), ([[1.0, np.inf]], ValueError, "infinity"),
     (np.zeros((0, 3)), ValueError, "empty"), (np.array([["a", "b"]]), TypeError, "numeric"),
     (np.ones(3), ValueError, "2D")],
)
def test_bad_input_is_named(X, error, match):
    with pytest.raises(error, match=match) as info:
        K.GaussianKernel(1.0)(X)
    assert "X" in str(info.value)


def test_weighted_median_equals_median_of_repeated_points():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(30, 3))
    w = rng.integers(0, 4, size=30)
    # copies of one point are at distance 0 and ignored, so the repeated data's median is over
    # pairs of distinct points counted w_i w_j times
    dists = []
    for i in range(30):
        for j in range(i + 1, 30):
            dists += [np.linalg.norm(X[i] - X[j])] * int(w[i] * w[j])
    assert K.median_heuristic(X, sample_weight=w) == pytest.approx(np.median(dists), rel=1e-12)
    assert K.median_heuristic(X, sample_weight=np.ones(30)) == pytest.approx(K.median_heuristic(X), rel=1e-12)
    assert K.median_heuristic(X, sample_weight=3.5 * w) == pytest.approx(K.median_heuristic(X, sample_weight=w), rel=1e-12)


def test_weighted_resolve_ignores_zero_weight_points():
    X = np.array([[0.0], [1.0], [3.0], [100.0]])
    resolved = K.GaussianKernel().resolve(X, sample_weight=[1, 1, 1, 0])
    assert resolved.sigma == pytest.approx(2.0)
    with pytest.raises(ValueError, match="at least 2 samples"):
        K.GaussianKernel().resolve(X, sample_weight=[0, 0, 1, 0])
