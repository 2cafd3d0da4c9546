"""Blocked kernel algebra: equal to dense products, and never above the memory budget."""


import numpy as np
import pytest

from kernelscale import blocks
from kernelscale.kernels import GaussianKernel, LaplacianKernel, LinearKernel, MaternKernel, PolynomialKernel
from memcheck import peak_bytes

KERNELS = [GaussianKernel(1.5), LaplacianKernel(3.0), MaternKernel(1.5, 2.5), PolynomialKernel(2, 0.3, 1.0), LinearKernel()]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(97, 6)), rng.normal(size=(61, 6)), rng.normal(size=(61, 3))


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: type(k).__name__)
@pytest.mark.parametrize("budget", [None, 300_000, 270_000])
def test_matvec_equals_dense_product(kernel, budget, data):
    X, Z, V = data
    dense = kernel(X, Z)
    np.testing.assert_allclose(blocks.kernel_matvec(kernel, X, Z, V, max_memory=budget), dense @ V, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(blocks.kernel_matvec(kernel, X, Z, V[:, 0], max_memory=budget), dense @ V[:, 0], rtol=1e-10, atol=1e-10)


def test_matvec_with_z_none_is_symmetric_product(data):
    X, _, _ = data
    v = np.arange(len(X), dtype=float)
    np.testing.assert_allclose(blocks.kernel_matvec("linear", X, None, v, max_memory=275_000), X @ (X.T @ v), rtol=1e-10)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: type(k).__name__)
@pytest.mark.parametrize("budget", [300_000, 400_000, 1_000_000])
def test_matvec_stays_within_budget(kernel, budget):
    rng = np.random.default_rng(1)
    X, Z, V = rng.normal(size=(400, 8)), rng.normal(size=(300, 8)), rng.normal(size=(300, 2))
    peak, out = peak_bytes(lambda: blocks.kernel_matvec(kernel, X, Z, V, max_memory=budget))
    slack = 4096  # small bookkeeping objects (slices, generator frames)
    assert peak <= budget + out.nbytes + slack, f"peak {peak} over budget {budget} + output {out.nbytes}"
    assert blocks.matvec_memory(kernel, 400, 300, 8, max_memory=budget) <= budget


def test_float32_blocks_stay_within_budget_and_dtype():
    rng = np.random.default_rng(2)
    X, Z = rng.normal(size=(300, 5)).astype(np.float32), rng.normal(size=(200, 5)).astype(np.float32)
    v = rng.normal(size=200).astype(np.float32)
    for kernel in KERNELS:
        peak, out = peak_bytes(lambda: blocks.kernel_matvec(kernel, X, Z, v, max_memory=280_000))
        assert out.dtype == np.float32
        assert peak <= 280_000 + out.nbytes + 4096
        np.testing.assert_allclose(out, kernel(X, Z).astype(np.float64) @ v, rtol=1e-3, atol=1e-3)
    # a float64 right-hand side promotes the whole product to float64
    assert blocks.kernel_matvec(KERNELS[0], X, Z, v.astype(np.float64)).dtype == np.float64


def test_budget_below_one_row_names_the_fix():
    X = np.ones((10, 3))
    with pytest.raises(ValueError, match=r"max_memory=.*too small for one row.*increase max_memory"):
        blocks.kernel_matvec(GaussianKernel(1.0), X, X, np.ones(10), max_memory=100)


def test_kernel_rows_match_dense_rows(data):
    X, Z, _ = data
    rows = np.array([5, 0, 96, 5, 40])
    for kernel in KERNELS:
        np.testing.assert_allclose(blocks.kernel_rows(kernel, X, rows, Z, max_memory=270_000), kernel(X, Z)[rows], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(blocks.kernel_rows(kernel, X, rows), kernel(X, X)[rows], rtol=1e-12, atol=1e-12)
    assert blocks.kernel_rows(KERNELS[0], X, np.array([], dtype=int)).shape == (0, len(X))


def test_kernel_rows_within_budget():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 10))
    rows = np.arange(0, 500, 5)
    peak, out = peak_bytes(lambda: blocks.kernel_rows(GaussianKernel(2.0), X, rows, max_memory=800_000))
    assert peak <= 800_000 + 4096
    with pytest.raises(ValueError, match="fewer rows"):
        blocks.kernel_rows(GaussianKernel(2.0), X, rows, max_memory=300_000)


def test_kernel_rows_rejects_bad_indices(data):
    X = data[0]
    with pytest.raises(ValueError, match="rows"):
        blocks.kernel_rows("linear", X, np.array([0, 97]))
    with pytest.raises(ValueError, match="rows"):
        blocks.kernel_rows("linear", X, np.array([0.5]))


def test_kernel_matrix_refuses_when_it_does_not_fit(data):
    X = data[0]
    np.testing.assert_allclose(blocks.kernel_matrix(LinearKernel(), X), X @ X.T, rtol=1e-12)
    with pytest.raises(ValueError, match="max_memory"):
        blocks.kernel_matrix(LinearKernel(), X, max_memory=len(X) ** 2 * 8 - 1)


def test_kernel_diag(data):
    X = data[0]
    for kernel in KERNELS:
        np.testing.assert_allclose(blocks.kernel_diag(kernel, X), np.diag(kernel(X)), rtol=1e-7)


def test_iter_kernel_blocks_cover_all_rows(data):
    X, Z, _ = data
    seen = np.zeros(len(X), dtype=int)
    for start, stop, block in blocks.iter_kernel_blocks("linear", X, Z, max_memory=270_000):
        assert block.nbytes <= 270_000 - blocks.ufunc_workspace_bytes()
        np.testing.assert_allclose(block, X[start:stop] @ Z.T, rtol=1e-12)
        seen[start:stop] += 1
    np.testing.assert_array_equal(seen, 1)


@pytest.mark.parametrize(
    "given, expected",
    [(1000, 1000), (2.5e3, 2500), ("2GB", 2 * 10**9), ("512MiB", 512 * 2**20), ("1.5 gib", int(1.5 * 2**30)),
     ("300kb", 300_000), ("64", 64), ("1e6", 10**6)],
)
def test_parse_memory(given, expected):
    assert blocks.parse_memory(given) == expected


@pytest.mark.parametrize("given", ["lots", "2 parsecs", "-1GB", 0, -5, float("nan")])
def test_parse_memory_rejects(given):
    with pytest.raises(ValueError, match="max_memory"):
        blocks.parse_memory(given)


def test_parse_memory_type_error():
    with pytest.raises(TypeError, match="max_memory"):
        blocks.parse_memory([1])


def test_default_budget_is_a_fraction_of_available_memory():
    assert 0 < blocks.default_memory_budget() <= blocks.available_memory()
    assert blocks.parse_memory(None) == pytest.approx(blocks.default_memory_budget(), rel=0.05)


def test_bad_inputs_are_named(data):
    X, Z, V = data
    with pytest.raises(ValueError, match="V must have shape"):
        blocks.kernel_matvec("linear", X, Z, V[:10])
    with pytest.raises(ValueError, match="Z has 5 features"):
        blocks.kernel_matvec("linear", X, Z[:, :5], V)
    with pytest.raises(ValueError, match="NaN"):
        blocks.kernel_matvec("linear", X, Z, np.full(61, np.nan))


def test_blocks_are_capped_even_under_a_large_budget(data, monkeypatch):
    X, Z, V = data
    monkeypatch.setattr(blocks, "MAX_BLOCK_BYTES", 2_000)
    sizes = [block.nbytes for _, _, block in blocks.iter_kernel_blocks("linear", X, Z, max_memory="1GB")]
    assert len(sizes) > 1 and max(sizes) <= 2_000
    np.testing.assert_allclose(blocks.kernel_matvec("linear", X, Z, V, max_memory="1GB"), X @ (Z.T @ V), rtol=1e-10)
