"""Tests of kernelscale.ops.feature_blocks and kernelscale.ops.features: seeded blocks and the
FeatureOperator's verbs against dense formulas, row chunks and budgets."""

import numpy as np
import pytest

from kernelscale.kernels import GaussianKernel, LaplacianKernel, LinearKernel, MaternKernel, PolynomialKernel
from kernelscale.ops.feature_blocks import METHODS, FeatureBlockSpec, block_rng
from kernelscale.ops.backend import NUMPY
from kernelscale.ops.features import GROUP_COLUMNS, FeatureOperator

# every test runs on each backend of conftest.BACKENDS (numpy, torch CPU)
pytestmark = pytest.mark.usefixtures("ops_backend")

BIG = 2**30
KERNELS = {
    "cos": GaussianKernel(1.5),
    "cossin": MaternKernel(1.5, 1.5),
    "logit": LaplacianKernel(2.0),
    "tensorsketch": PolynomialKernel(3, 0.3, 1.0),
    "maclaurin": PolynomialKernel(2, 0.3, 1.0),
    "gaussian": LinearKernel(),
    "sample": LinearKernel(),
}


def spec_of(method, d=5, block_size=None, seed=3, dtype=np.float64):
    # "sample" draws min(block_size, d) of the d columns: fewer than d, so that blocks differ
    block_size = block_size or (3 if method == "sample" else 16)
    return FeatureBlockSpec(KERNELS[method], d, block_size, seed, dtype, method)


def arrays(block):
    return [v for v in vars(block).values() if isinstance(v, np.ndarray)]


def one_hot_rows(n, d, seed):
    """n float64 rows of d columns with one nonzero each (as one-hot data: few nonzeros)."""
    rng = np.random.default_rng(seed)
    rows = np.zeros((n, d))
    rows[np.arange(n), rng.integers(0, d, size=n)] = rng.normal(size=n)
    return rows


def spy(monkeypatch, module, name, calls):
    """Replace module.name (a sparse loop) by a wrapper that appends its number of rows to ``calls``."""
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a: calls.append(a[0][0].size - 1) or real(*a))
    return real


def dense_cos_features(X, spec, blocks):
    """The features of "cos" blocks by their formula, sqrt(2 / m) cos(X W + b), in float64."""
    features = np.hstack([np.cos(X @ b.weights + b.offset) for b in map(spec.block, blocks)]).astype(np.float64)
    return features * np.sqrt(2.0 / spec.block_size)


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(37, 5))


def test_every_method_is_tested():
    assert set(KERNELS) == set(METHODS)


@pytest.mark.parametrize("method", METHODS)
def test_block_is_regenerated_from_seed_and_index_in_any_order(method, X):
    spec = spec_of(method)
    forward = [spec.block(t) for t in range(6)]
    backward = [spec_of(method).block(t) for t in reversed(range(6))][::-1]
    for a, b in zip(forward, backward):
        assert all(np.array_equal(u, v) for u, v in zip(arrays(a), arrays(b)))
    flat = [np.concatenate([a.ravel() for a in arrays(b)]) for b in forward]
    other_seed = [np.concatenate([a.ravel() for a in arrays(spec_of(method, seed=4).block(t))]) for t in range(6)]
    assert len({f.tobytes() for f in flat}) > 3  # blocks differ ("sample" has 10 possible blocks)
    assert not all(np.array_equal(a, b) for a, b in zip(flat, other_seed))
    # through the operator: with or without the cache, blocks asked for in any order (bit for
    # bit); several consecutive Fourier blocks in one call share a GEMM: the same up to rounding
    width = spec.n_features_out
    single = FeatureOperator(spec, BIG)
    one_by_one = np.hstack([single.transform(X, [t]) for t in range(6)])
    cached = FeatureOperator(spec, BIG, cache_bytes=BIG)
    for t in (4, 0, 5, 2, 2, 1, 3):
        assert np.array_equal(cached.transform(X, [t]), one_by_one[:, t * width : (t + 1) * width])
    np.testing.assert_allclose(FeatureOperator(spec, BIG).transform(X, range(6)), one_by_one, rtol=0, atol=1e-14)
    np.testing.assert_allclose(FeatureOperator(spec, BIG).transform(X, [3, 4, 1]),
                               np.hstack([one_by_one[:, 3 * width : 5 * width], one_by_one[:, width : 2 * width]]),
                               rtol=0, atol=1e-14)


@pytest.mark.parametrize("method", ["cos", "cossin"])
def test_transform_of_runs_equals_block_by_block_within_any_budget(method, X, monkeypatch):
    """Runs of one group's blocks at any position, runs cut at group boundaries, a cached group,
    and a budget that holds the parameters of two blocks at a time (pieces of a run)."""
    import kernelscale.ops.features as ops_features

    monkeypatch.setattr(ops_features, "GROUP_COLUMNS", 64)  # groups of 4 blocks of 16
    spec = spec_of(method)
    width = spec.n_features_out
    blocks = [1, 3, 4, 5, 6, 9]  # runs [1], [3], [4, 5, 6] (3 and 4 are in two groups), [9]
    expected = np.hstack([FeatureOperator(spec, BIG).transform(X, [t]) for t in blocks])
    out_bytes = X.shape[0] * len(blocks) * width * 8
    for op in (FeatureOperator(spec, BIG), FeatureOperator(spec, BIG, cache_bytes=BIG),
               FeatureOperator(spec, out_bytes + 5 * spec.block_bytes)):
        np.testing.assert_allclose(op.transform(X, blocks), expected, rtol=0, atol=1e-14)
    tight = FeatureOperator(spec, out_bytes + 5 * spec.block_bytes)
    drawn = []
    monkeypatch.setattr(tight, "_fourier_run", lambda a, b, **kw: drawn.append((a, b)) or
                        FeatureOperator._fourier_run(tight, a, b, **kw))
    tight.transform(X, blocks)
    assert drawn == [(1, 2), (3, 4), (4, 6), (6, 7), (9, 10)]  # the run [4, 5, 6] in pieces of two


@pytest.mark.parametrize("method", METHODS)
def test_transform_into_a_given_array_writes_all_of_it(method, X, monkeypatch):
    """``out=`` filled with NaN first: every entry is written, by the grouped runs and by one
    block at a time, as a new array would be; a wrong shape or dtype is refused."""
    import kernelscale.ops.features as ops_features

    monkeypatch.setattr(ops_features, "GROUP_COLUMNS", 64)  # groups of 4 blocks of 16
    spec = spec_of(method)
    blocks = [0, 1, 2, 5, 6]
    want = FeatureOperator(spec, BIG).transform(X, blocks)
    op = FeatureOperator(spec, BIG)
    out = op.backend.asarray(np.full_like(want, np.nan))  # an array of the backend in use
    got = op.transform(X, blocks, out=out)
    assert got is out or op.backend is not NUMPY  # a host copy of a device array
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="out must have shape"):
        op.transform(X, blocks, out=op.backend.asarray(np.empty((X.shape[0], want.shape[1] - 1))))


def test_draws_are_float64_rounded_to_the_dtype():
    rng_draw = block_rng(9, 2).standard_normal((5, 16)) / 1.5  # the Gaussian frequencies of block 2
    b64 = spec_of("cos", seed=9).block(2)
    b32 = spec_of("cos", seed=9, dtype=np.float32).block(2)
    assert np.array_equal(b64.weights, rng_draw)
    assert b32.weights.dtype == np.float32 and np.array_equal(b32.weights, rng_draw.astype(np.float32))


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("method", METHODS)
def test_scores_equal_the_dense_product(method, dtype, rtol, X):
    # blocks of GROUP_COLUMNS / 4 columns: groups of 4 blocks, so 10 blocks cross two group borders
    block_size = GROUP_COLUMNS // 4 if method in ("cos", "cossin") else 24
    spec = spec_of(method, block_size=block_size, dtype=dtype)
    Xd = X.astype(dtype)
    for blocks in (list(range(10)), [6, 2, 3, 9]):
        coef = np.random.default_rng(1).normal(size=(len(blocks), spec.n_features_out, 3)).astype(dtype)
        op = FeatureOperator(spec, BIG)
        dense = op.transform(Xd, blocks).astype(np.float64) @ coef.reshape(-1, 3).astype(np.float64)
        F = op.scores(Xd, coef, blocks)
        assert F.dtype == dtype
        np.testing.assert_allclose(F, dense, rtol=rtol, atol=rtol * np.abs(dense).max())


@pytest.mark.parametrize("method", ["cos", "cossin"])
def test_scores_in_row_chunks_share_one_projection_buffer(method, X, monkeypatch):
    """Runs of 1, 2 and 3 blocks, each in row chunks of its own size (some of them partial),
    through the one projection buffer of a call: the scores of one chunk up to rounding."""
    spec = spec_of(method, block_size=GROUP_COLUMNS // 4)
    blocks = [5, 0, 1, 2, 6, 7]  # runs [5], [0, 1, 2], [6, 7]
    coef = np.random.default_rng(4).normal(size=(len(blocks), spec.n_features_out, 2))
    whole = FeatureOperator(spec, BIG).scores(X, coef, blocks)
    item, width = X.dtype.itemsize, spec.n_features_out
    op = FeatureOperator(spec, BIG)
    outs = []
    matmul = op.backend.matmul
    monkeypatch.setattr(op.backend, "matmul", lambda a, b, out=None: outs.append(out) or matmul(a, b, out=out))
    for rows in (5 * 3, 100):  # runs of 1, 2 and 3 blocks in chunks of 15, 7 and 5 rows; of 100, 50 and 33
        op.projection_bytes = rows * width * item
        outs.clear()
        chunked = op.scores(X, coef, blocks)
        np.testing.assert_allclose(chunked, whole, rtol=0, atol=1e-12 * np.abs(whole).max())
        projections = [o for o in outs if o is not None]
        chunks = sum(-(-X.shape[0] // (rows // count)) for count in (1, 3, 2))
        assert len(projections) == chunks  # every chunk's projection went into a buffer


@pytest.mark.parametrize("verb", ["scores", "transform"])
def test_float32_phases_go_into_the_gemm_on_the_host(verb, X, monkeypatch):
    """float32 "cos" blocks on numpy: the projection's GEMM adds the phases, [X, 1] [W^T, b]^T,
    to the features of the phases added after the GEMM up to float32 rounding; float64 and the
    torch backend add them after it."""
    import kernelscale.ops.features as ops_features

    calls = []
    real = ops_features._project_with_phase
    monkeypatch.setattr(ops_features, "_project_with_phase", lambda *a, **k: calls.append(a[0].dtype) or real(*a, **k))
    blocks = [0, 1, 2, 5]  # runs [0, 1, 2] and [5]
    for dtype in (np.float32, np.float64):
        spec = spec_of("cos", block_size=GROUP_COLUMNS // 4, dtype=dtype)
        Xd = X.astype(dtype)
        coef = np.random.default_rng(5).normal(size=(len(blocks), spec.n_features_out, 3)).astype(dtype)
        op = FeatureOperator(spec, BIG)
        got = op.scores(Xd, coef, blocks) if verb == "scores" else op.transform(Xd, blocks)
        features = dense_cos_features(Xd, spec, blocks)
        want = features @ coef.reshape(-1, 3).astype(np.float64) if verb == "scores" else features
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=0, atol=(2e-5 if dtype == np.float32 else 1e-12) * np.abs(want).max())
    assert calls == ([np.float32] * (2 if verb == "scores" else 1) if op.backend is NUMPY else [])


def test_sparse_float64_rows_take_sparse_axpys_on_the_host(X, monkeypatch):
    """float64 rows with at most SPARSE_DENSITY nonzeros: ``scores`` of "cos" blocks by sparse
    AXPYs with the cosine fused (numba), the dense formula's scores to 1e-12; dense rows and the
    torch backend take the GEMM."""
    pytest.importorskip("numba")
    from kernelscale.ops import fast_cos
    from kernelscale.ops.features import SPARSE_DENSITY

    calls = []
    real = spy(monkeypatch, fast_cos, "sparse_cos_scores", calls)
    Xs = one_hot_rows(200, 5, seed=8)
    rng = np.random.default_rng(8)
    assert np.count_nonzero(Xs) <= SPARSE_DENSITY * Xs.size
    spec = spec_of("cos", block_size=GROUP_COLUMNS // 4)
    blocks = [0, 1, 2, 5]
    coef = rng.normal(size=(len(blocks), spec.n_features_out, 2))
    op = FeatureOperator(spec, BIG)
    for rows in (Xs, X):
        calls.clear()
        got = op.scores(rows, coef, blocks)
        want = dense_cos_features(rows, spec, blocks) @ coef.reshape(-1, 2)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())
        assert len(calls) == (2 if rows is Xs and op.backend is NUMPY else 0)  # the runs [0, 1, 2] and [5]
    # without numba's loops (sparse_cos_scores gives None back) the GEMM takes over
    monkeypatch.setattr(fast_cos, "sparse_cos_scores", lambda *a: calls.append(None))
    calls.clear()
    want = dense_cos_features(Xs, spec, blocks) @ coef.reshape(-1, 2)
    np.testing.assert_allclose(op.scores(Xs, coef, blocks), want, rtol=0, atol=1e-12 * np.abs(want).max())
    assert len(calls) == (2 if op.backend is NUMPY else 0)
    monkeypatch.setattr(fast_cos, "sparse_cos_scores", lambda *a: calls.append(a[0][0].size - 1) or real(*a))
    # a run whose frequencies exceed SPARSE_WEIGHTS_BYTES takes the GEMM: here the run of three blocks
    import kernelscale.ops.features as ops_features

    monkeypatch.setattr(ops_features, "SPARSE_WEIGHTS_BYTES", 5 * spec.block_size * 8)
    calls.clear()
    np.testing.assert_allclose(op.scores(Xs, coef, blocks), want, rtol=0, atol=1e-12 * np.abs(want).max())
    assert len(calls) == (1 if op.backend is NUMPY else 0)  # the run [5] only


def test_sparse_float32_rows_take_the_float64_loops_for_scores_only(monkeypatch):
    """float32 rows with at most SPARSE_DENSITY_FLOAT32 nonzeros: ``scores`` from their nonzeros
    in float64 (the formula's scores to float32 rounding, returned as float32); denser
    float32 rows, and every float32 ``transform``, take the float32 GEMM."""
    pytest.importorskip("numba")
    from kernelscale.ops import fast_cos
    from kernelscale.ops.features import SPARSE_DENSITY_FLOAT32

    calls = []
    spy(monkeypatch, fast_cos, "sparse_cos_scores", calls)
    spy(monkeypatch, fast_cos, "sparse_cos_features", calls)
    monkeypatch.setattr(fast_cos, "TILE_WIDTH", 48)  # the run's 128 features in tiles of 48, 48 and 32
    spec = spec_of("cos", d=10, block_size=64, dtype=np.float32)
    sparse = one_hot_rows(200, 10, seed=10).astype(np.float32)  # 10% nonzeros
    denser = sparse + np.roll(sparse, 1, axis=1)  # 20%
    assert np.count_nonzero(sparse) <= SPARSE_DENSITY_FLOAT32 * sparse.size < np.count_nonzero(denser)
    coef = np.random.default_rng(10).normal(size=(2, 64, 3)).astype(np.float32)
    for rows, sparse_calls in ((sparse, 1), (denser, 0)):
        calls.clear()
        op = FeatureOperator(spec, BIG)
        got = op.scores(rows, coef, [0, 1])
        want = dense_cos_features(rows.astype(np.float64), spec, [0, 1]) @ coef.reshape(-1, 3).astype(np.float64)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())
        assert len(calls) == (sparse_calls if op.backend is NUMPY else 0)
        calls.clear()
        np.testing.assert_allclose(op.transform(rows, [0]), dense_cos_features(rows, spec, [0]), rtol=0, atol=1e-5)
        assert calls == []


def test_sparse_float64_rows_take_sparse_axpys_for_one_blocks_features(monkeypatch):
    """``transform`` of one "cos" block (its features are whole rows of the output, as in the
    doubly stochastic fit) on float64 rows with few nonzeros: from the nonzeros, the dense
    features to 1e-12; several blocks side by side take the GEMM."""
    pytest.importorskip("numba")
    from kernelscale.ops import fast_cos

    calls = []
    spy(monkeypatch, fast_cos, "sparse_cos_features", calls)
    Xs = one_hot_rows(300, 6, seed=9)
    spec = spec_of("cos", d=6, block_size=64)
    op = FeatureOperator(spec, BIG, cache_bytes=BIG)
    for blocks in ([3], [3, 4]):
        calls.clear()
        got = op.transform(Xs, blocks)
        want = dense_cos_features(Xs, spec, blocks)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        assert len(calls) == (1 if len(blocks) == 1 and op.backend is NUMPY else 0)
    want = dense_cos_features(Xs, spec, [3])
    # row chunks (a budget of about 100 rows of features): each chunk's slice of the nonzeros
    small = FeatureOperator(spec, want.nbytes + spec.block_bytes + 100 * 64 * 8 * (spec.workspace + 1))
    calls.clear()
    np.testing.assert_allclose(small.transform(Xs, [3]), want, rtol=0, atol=1e-12)
    assert len(calls) == (3 if small.backend is NUMPY else 0)  # chunks of 100 rows
    # without numba's loops (None back) the GEMM writes every feature
    monkeypatch.setattr(fast_cos, "sparse_cos_features", lambda *a: calls.append(None))
    np.testing.assert_allclose(FeatureOperator(spec, BIG).transform(Xs, [3]), want, rtol=0, atol=1e-12)


def test_scores_do_not_depend_on_the_cache(X):
    spec = spec_of("cossin", block_size=8)
    coef = np.random.default_rng(2).normal(size=(700, 8, 2))  # 512 blocks per group: two groups
    plain = FeatureOperator(spec, BIG).scores(X, coef, range(700))
    cached = FeatureOperator(spec, BIG, cache_bytes=BIG)
    cached.scores(X, coef[:300], range(300))  # fills the first group part way
    assert np.array_equal(cached.scores(X, coef, range(700)), plain)


def test_weighted_moments_equal_the_dense_formulas():
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(50, 4)) + 2.0, rng.normal(size=(50, 3))
    w = rng.uniform(0.1, 1.0, 50)
    w /= w.sum()
    op = FeatureOperator(None, BIG)
    mean = op.weighted_mean(A, w)
    np.testing.assert_allclose(mean, w @ A, rtol=1e-13)
    np.testing.assert_allclose(op.weighted_gram(A, w), (A * w[:, None]).T @ A, rtol=1e-13)
    np.testing.assert_allclose(op.weighted_gram(A, w, B), (A * w[:, None]).T @ B, rtol=1e-13)
    wide = rng.normal(size=(50, 6))  # B wider than A: the weights scale A's rows instead
    np.testing.assert_allclose(op.weighted_gram(A, w, wide), (A * w[:, None]).T @ wide, rtol=1e-13)
    C = A - mean
    np.testing.assert_allclose(op.weighted_gram(A, w, center=mean), (C * w[:, None]).T @ C, rtol=1e-12)
    u = np.full(50, 1 / 50)
    np.testing.assert_allclose(op.weighted_gram(A, u, B, uniform=True), A.T @ B / 50, rtol=1e-13)
    # float32 rows, float64 sums
    g32 = op.weighted_gram(A.astype(np.float32), w, center=mean)
    assert g32.dtype == np.float64
    np.testing.assert_allclose(g32, (C * w[:, None]).T @ C, rtol=1e-5)


def _smallest_budget(verb, step=64):
    """(result, budget) of ``verb(budget)`` at the smallest budget (in steps) it runs within."""
    budget = step
    while True:
        try:
            return verb(budget), budget
        except ValueError:
            budget += step


@pytest.mark.parametrize("method", ["cos", "cossin", "tensorsketch", "sample"])
def test_a_tiny_budget_takes_several_row_chunks_and_gives_the_same_result(method, monkeypatch, X):
    from kernelscale.ops import features as ops_features

    chunks = []
    real = ops_features.plan_rows
    monkeypatch.setattr(ops_features, "plan_rows", lambda *a, **k: chunks.append(real(*a, **k)) or chunks[-1])
    spec = spec_of(method)
    coef = np.random.default_rng(4).normal(size=(3, spec.n_features_out, 2))
    w = np.random.default_rng(5).uniform(size=X.shape[0])
    center = X.mean(axis=0)
    verbs = {
        "transform": lambda op: op.transform(X, range(3)),
        "scores": lambda op: op.scores(X, coef, range(3)),
        "weighted_mean": lambda op: op.weighted_mean(X, w),
        "weighted_gram": lambda op: op.weighted_gram(X, w, center=center),
    }
    for name, verb in verbs.items():
        expected = verb(FeatureOperator(spec, BIG))
        chunks.clear()
        got, budget = _smallest_budget(lambda b: verb(FeatureOperator(spec, b)))
        assert 1 <= chunks[-1] < X.shape[0], (name, chunks)
        # BLAS may take another kernel for a few rows: equal up to rounding
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


def test_a_budget_too_small_for_one_row_names_max_memory(X):
    spec = spec_of("cos")
    op = FeatureOperator(spec, 100)
    with pytest.raises(ValueError, match="max_memory"):
        op.transform(X, [0])
    with pytest.raises(ValueError, match="max_memory"):
        op.scores(X, np.zeros((1, 16, 1)), [0])
    with pytest.raises(ValueError, match="max_memory"):
        FeatureOperator(None, 10).weighted_gram(X, np.ones(X.shape[0]), center=np.zeros(5))


def test_rows_must_match_the_map(X):
    with pytest.raises(ValueError, match="5 features"):
        FeatureOperator(spec_of("cos", d=5), BIG).transform(X[:, :3], [0])


def test_a_block_whose_draws_exceed_memory_is_refused_naming_the_fix():
    from kernelscale.kernels import PolynomialKernel

    with pytest.raises(ValueError, match="degree"):
        FeatureBlockSpec(PolynomialKernel(degree=10**15), 5, 64, 0)
    with pytest.raises(ValueError, match="block_size"):
        FeatureBlockSpec("linear", 5, 10**15, 0, method="gaussian")
