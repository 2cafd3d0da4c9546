"""The float64 cosine of the feature blocks (kernelscale.ops.fast_cos) against np.cos."""

import numpy as np
import pytest

import kernelscale.ops.fast_cos as fc
from kernelscale.ops.backend import NUMPY

pytest.importorskip("numba")


def ulps(got, want):
    return np.max(np.abs(got - want) / np.spacing(np.maximum(np.abs(want), np.finfo(float).tiny)))


@pytest.mark.parametrize("scale", [1e-3, 1.0, 50.0, 1e4, 6e6])
def test_within_two_ulps_of_np_cos(scale):
    x = np.random.default_rng(0).uniform(-scale, scale, size=(300, 400))
    quadrants = np.arange(-2000, 2000)[:, None] * (np.pi / 4) + np.array([-1e-9, 0.0, 1e-9])
    for a in (x, np.ascontiguousarray(quadrants[: 40000 // 3].repeat(4, axis=0))):
        got = fc.cos_inplace(a.copy())
        want = np.cos(a)
        # near a zero of cos an ulp of the result is tiny: there the error is absolute
        assert np.max(np.abs(got - want)) <= 4 * np.spacing(1.0)
        big = np.abs(want) > 1e-3
        assert ulps(got[big], want[big]) <= 2


def test_the_kernel_runs_where_it_should_and_np_cos_elsewhere(monkeypatch):
    calls = []
    kernel = fc._compile()
    monkeypatch.setattr(fc, "_kernel", lambda flat, outside: calls.append(flat.size) or kernel(flat, outside))
    fc.cos_inplace(np.linspace(-5, 5, fc.MIN_SIZE))
    assert calls == [fc.MIN_SIZE]
    cases = [
        np.linspace(-5, 5, fc.MIN_SIZE - 1),  # small
        np.linspace(-5, 5, fc.MIN_SIZE).astype(np.float32),  # float32: numpy's SIMD cosine
        np.linspace(-5, 5, 2 * fc.MIN_SIZE).reshape(-1, 2)[:, 0],  # not contiguous
    ]
    for a in cases:
        want = np.cos(a)
        got = fc.cos_inplace(a)
        assert got is a and calls == [fc.MIN_SIZE]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("odd", [2 * fc.LIMIT, np.nan, -np.inf])
@pytest.mark.parametrize("segment", [5, 16])  # 16: the last one, shorter than SEGMENT
def test_a_segment_beyond_the_exact_reduction_is_np_cos(odd, segment, monkeypatch):
    """A value beyond the reduction's range (or NaN, or an infinity) sends its segment of
    SEGMENT values to np.cos, found by the compiled loop itself; the other segments are the
    polynomial's."""
    kernel, calls = fc._compile(), []
    monkeypatch.setattr(fc, "_kernel", lambda flat, outside: calls.append(outside.size) or kernel(flat, outside))
    a = np.linspace(-5, 5, 2 * fc.MIN_SIZE + 123)  # 17 segments, the last of 123 values
    a[segment * fc.SEGMENT + 17] = odd
    with np.errstate(invalid="ignore"):  # cos(inf) is NaN
        want = np.cos(a)
        got = fc.cos_inplace(a.copy())
    assert calls == [17]
    inside = np.zeros(a.size, dtype=bool)
    inside[segment * fc.SEGMENT : (segment + 1) * fc.SEGMENT] = True
    np.testing.assert_array_equal(got[inside], want[inside])  # np.cos's own values there
    assert np.max(np.abs(got[~inside] - want[~inside])) <= 4 * np.spacing(1.0)
    flat, outside = a.copy(), np.zeros(17, dtype=np.uint8)
    kernel(flat, outside)  # the compiled loop flags that segment and leaves it as it was
    assert np.flatnonzero(outside).tolist() == [segment]
    np.testing.assert_array_equal(flat[inside], a[inside])


def test_compiling_from_several_threads_at_once_or_twice_works(monkeypatch):
    import threading
    import time

    monkeypatch.setattr(fc, "_kernel", None)  # compiled again (from the Python functions)
    compiles, real = [], fc._compile_once

    def slow_compile():  # the threads all arrive while the first one compiles
        compiles.append(1)
        time.sleep(0.2)
        return real()

    monkeypatch.setattr(fc, "_compile_once", slow_compile)
    a = np.linspace(-5, 5, 2 * fc.MIN_SIZE)
    results, errors = [], []

    def run():
        try:
            results.append(fc.cos_inplace(a.copy()))
        except Exception as err:  # noqa: BLE001 - the test reports it
            errors.append(err)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 4 and len(compiles) == 1
    assert all(np.max(np.abs(r - np.cos(a))) <= 4 * np.spacing(1.0) for r in results)


def test_without_numba_it_is_np_cos(monkeypatch):
    monkeypatch.setattr(fc, "_kernel", False)
    a = np.random.default_rng(1).normal(size=fc.MIN_SIZE)
    want = np.cos(a)
    np.testing.assert_array_equal(fc.cos_inplace(a), want)


def test_the_numpy_backend_uses_it_in_place_only():
    a = np.random.default_rng(2).uniform(-30, 30, size=(256, 256))
    out = np.empty_like(a)
    np.testing.assert_array_equal(NUMPY.cos(a, out=out), np.cos(a))  # not in place: np.cos
    b = a.copy()
    assert NUMPY.cos(b, out=b) is b and ulps(b, np.cos(a)) <= 2


def _child_cosines(x, conn):
    conn.send((fc.cos_inplace(x.copy()), fc._kernel is False))
    conn.close()


def test_a_process_forked_after_the_parallel_kernel_ran_computes_its_cosines():
    """libgomp aborts a forked child that enters the OpenMP pool its parent started; the child
    falls back to np.cos instead (found when the robustness benchmark's forked fits died)."""
    import multiprocessing as mp

    x = np.random.default_rng(0).uniform(-50, 50, size=4 * fc.MIN_SIZE)
    parent = fc.cos_inplace(x.copy())  # starts the kernel's thread pool, where numba is installed
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_cosines, args=(x, send))
    child.start()
    got, fell_back = recv.recv() if recv.poll(30) else (None, None)
    child.join(30)
    assert child.exitcode == 0 and got is not None
    if fc._kernel:  # numba: the child fell back to np.cos exactly when the pool is GNU OpenMP's
        import numba

        assert fell_back == (numba.threading_layer() == "omp")
    np.testing.assert_allclose(got, parent, rtol=0, atol=4e-16)
    np.testing.assert_allclose(got, np.cos(x), rtol=0, atol=4e-16)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("width", [fc.MIN_ROW - 1, fc.MIN_ROW, 1024])
def test_phase_and_scale_in_one_pass_equal_the_three_operations(width, dtype):
    """scale * cos(a + offset) bit for bit as a += offset, cos_inplace(a), a *= scale: by the row
    kernel (float64 rows of at least MIN_ROW values), else by the three passes. A value beyond
    the reduction's range (or NaN) sends its row to np.cos after the offset (the three passes
    send its segment): equal there, within the kernel's accuracy elsewhere."""
    rng = np.random.default_rng(width)
    rows = -(-2 * fc.MIN_SIZE // width)
    a = (rng.normal(size=(rows, width)) * 3).astype(dtype)
    offset = rng.uniform(0, 2 * np.pi, size=width).astype(dtype)
    scale = (2.0 / width) ** 0.5  # a Python float, as the feature blocks pass it

    def three_passes(a):
        a = a + offset
        fc.cos_inplace(a)
        a *= scale
        return a

    got = fc.cos_inplace(a.copy(), offset, scale)
    np.testing.assert_array_equal(got, three_passes(a))
    assert got.dtype == dtype
    unscaled = fc.cos_inplace(a.copy(), offset)
    unscaled *= scale
    np.testing.assert_array_equal(unscaled, three_passes(a))
    a[3, 1], a[rows - 1, 0] = 2 * fc.LIMIT, np.nan
    with np.errstate(invalid="ignore"):
        got, want = fc.cos_inplace(a.copy(), offset, scale), three_passes(a)
        exact = np.cos(a + offset)
        exact *= scale
    if dtype == np.float64 and width >= fc.MIN_ROW:  # the row kernel: numpy's cosine for those rows
        np.testing.assert_array_equal(got[[3, rows - 1]], exact[[3, rows - 1]])
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * np.spacing(dtype(1)))


def test_the_row_kernel_runs_for_wide_float64_rows_only(monkeypatch):
    kernel, calls = fc._compile(), []
    rows_kernel = fc._rows_kernel
    monkeypatch.setattr(fc, "_rows_kernel", lambda *args: calls.append(args[0].shape) or rows_kernel(*args))
    wide = np.zeros((fc.MIN_SIZE // fc.MIN_ROW, fc.MIN_ROW))
    fc.cos_inplace(wide, np.zeros(fc.MIN_ROW), 2.0)
    assert calls == [wide.shape] and np.all(wide == 2.0) and kernel
    for a, offset in ((np.zeros((fc.MIN_SIZE, fc.MIN_ROW - 1)), np.zeros(fc.MIN_ROW - 1)),
                      (np.zeros((8, fc.MIN_ROW)), np.zeros(fc.MIN_ROW)),  # small
                      (np.zeros((fc.MIN_ROWS - 1, fc.MIN_SIZE)), np.zeros(fc.MIN_SIZE)),  # few rows
                      (np.zeros((fc.MIN_SIZE, fc.MIN_ROW)), np.zeros((1, fc.MIN_ROW))),  # broadcast by numpy
                      (np.zeros((fc.MIN_SIZE, fc.MIN_ROW), np.float32), np.zeros(fc.MIN_ROW, np.float32))):
        fc.cos_inplace(a, offset, 2.0)
        assert calls == [wide.shape] and np.all(a == 2.0)
    for wrong in (np.zeros(fc.MIN_ROW // 2), np.zeros(2 * fc.MIN_ROW)):  # never read past its end
        with pytest.raises(ValueError, match="broadcast"):
            fc.cos_inplace(np.zeros_like(wide), wrong, 2.0)
    assert calls == [wide.shape]


@pytest.mark.parametrize("tile_width", [None, 48])
@pytest.mark.parametrize("n", [300, 1111])
def test_sparse_rows_scores_equal_the_dense_formula(n, tile_width, monkeypatch):
    """sparse_cos_scores: cos(X W + offset) coef from X's nonzeros (CSR), to the kernel's accuracy
    plus the rounding of another summation order, in one tile of features or in tiles of 48 (the
    last one 32 wide), in tasks of rows (1111 rows: several of TILE_ROWS, the last one shorter);
    a row without nonzeros is the phases' cosine's product; a tile beyond the reduction's range
    (or with NaN) takes the C library's cosine."""
    from kernelscale.ops.features import SparseRows

    if tile_width:
        monkeypatch.setattr(fc, "TILE_WIDTH", tile_width)
        assert fc.weight_tiles(np.ones((40, 128))).shape == (3, 40, 48)

    rng = np.random.default_rng(7)
    X = rng.normal(size=(n, 40)) * (rng.random((n, 40)) < 0.15)
    X[5] = 0.0
    X[9, 3], X[11, 0] = 1e7, np.nan  # beyond the range; NaN
    W = rng.normal(size=(40, 128))
    offset = rng.uniform(0, 2 * np.pi, size=128)
    coef = rng.normal(size=(128, 3))
    nonzeros = SparseRows(X)
    assert nonzeros.indptr[-1] == np.count_nonzero(X) and nonzeros.indices.dtype == np.int64
    with np.errstate(invalid="ignore"):
        got = fc.sparse_cos_scores(nonzeros.rows(0, n), fc.weight_tiles(W), offset, coef)
        want = np.cos(X @ W + offset) @ coef
    np.testing.assert_allclose(got[5], np.cos(offset) @ coef, rtol=0, atol=1e-13)
    assert np.all(np.isnan(got[11]))
    assert np.all(np.abs(got[9]) <= np.abs(coef).sum(axis=0))  # cosines of 1e7-sized sums: rounding differs
    ordinary = np.ones(n, dtype=bool)
    ordinary[[9, 11]] = False
    np.testing.assert_allclose(got[ordinary], want[ordinary], rtol=0, atol=1e-12 * np.abs(want[ordinary]).max())
    # a slice of the rows: its indptr reads the whole arrays
    part = fc.sparse_cos_scores(nonzeros.rows(100, 150), fc.weight_tiles(W), offset, coef)
    np.testing.assert_allclose(part, want[100:150], rtol=0, atol=1e-12 * np.abs(want[ordinary]).max())


@pytest.mark.parametrize("tile_width", [None, 32])
@pytest.mark.parametrize("n, scale", [(200, 0.5), (1111, 1.0)])
def test_sparse_rows_features_equal_the_dense_formula(n, scale, tile_width, monkeypatch):
    """sparse_cos_features: scale cos(X W + offset), in one tile or in tiles of 32 (the last one 4
    wide), in one task of rows or several; a tile beyond the reduction's range takes the C
    library's cosine."""
    from kernelscale.ops.features import SparseRows

    if tile_width:
        monkeypatch.setattr(fc, "TILE_WIDTH", tile_width)
        assert fc.weight_tiles(np.ones((30, 100))).shape == (4, 30, 32)

    rng = np.random.default_rng(8)
    X = rng.normal(size=(n, 30)) * (rng.random((n, 30)) < 0.2)
    X[7, 2] = 1e7  # beyond the range
    W, offset = rng.normal(size=(30, 100)), rng.uniform(0, 2 * np.pi, size=100)
    out = fc.sparse_cos_features(SparseRows(X).rows(0, n), fc.weight_tiles(W), offset, scale, np.empty((n, 100)))
    want = scale * np.cos(X @ W + offset)
    ordinary = np.arange(n) != 7
    np.testing.assert_allclose(out[ordinary], want[ordinary], rtol=0, atol=1e-13)
    assert np.all(np.abs(out[7]) <= scale)
    with pytest.raises(ValueError, match="must agree"):
        fc.sparse_cos_features(SparseRows(X).rows(0, n), fc.weight_tiles(W), offset[:99], 0.5, np.empty((n, 100)))


def test_sparse_rows_scores_refuse_arrays_that_do_not_agree():
    """The compiled loop checks no bounds, so its wrapper refuses what would read out of them."""
    from kernelscale.ops.features import SparseRows

    X = np.eye(6, 4)
    rows = SparseRows(X).rows(0, 6)
    W, offset, coef = np.ones((4, 8)), np.zeros(8), np.ones((8, 1))
    tiles = fc.weight_tiles(W)  # one tile of 8 features (fewer than 16)
    np.testing.assert_allclose(fc.sparse_cos_scores(rows, tiles, offset, coef), np.cos(X @ W) @ coef, atol=1e-14)
    indptr, indices, values = rows
    bad = [((np.array([0, 1, 2, 3, 4, 4, 5]), indices, values), tiles, offset, coef),  # beyond the nonzeros
           ((indptr, indices + 3, values), tiles, offset, coef),  # an index beyond d
           ((indptr[::-1].copy(), indices, values), tiles, offset, coef),  # decreasing
           ((np.array([0, 2, 1, 3, 4, 4, 4]), indices, values), tiles, offset, coef),  # not increasing inside
           ((indptr, indices, values[:-1].copy()), tiles, offset, coef),  # values shorter than indices
           ((indptr, indices.astype(np.int32), values), tiles, offset, coef),  # another index type
           (rows, fc.weight_tiles(W[:3]), offset, coef),  # d too small for the indices
           (rows, tiles, np.zeros(17), coef),  # offset longer than the tiles
           (rows, tiles, offset, coef[:7]),  # coef too short
           (rows, tiles[..., ::2], offset[:4], coef[:4]),  # not C-ordered
           (rows, W, offset, coef),  # W itself, not its tiles
           (rows, tiles[..., :0], offset[:0], coef[:0]),  # tiles of no width
           ((np.array([], dtype=np.int64), indices, values), tiles, offset, coef),  # no indptr at all
           ((indptr.astype(float), indices, values), tiles, offset, coef)]  # float indptr
    for args in bad:
        with pytest.raises(ValueError, match="must agree"):
            fc.sparse_cos_scores(*args)


def _threads_after_a_cosine_on_a_new_thread():
    """numba's thread count on a fresh thread after one cosine there (counts are per thread)."""
    import threading

    import numba

    a = np.random.default_rng(1).uniform(-9, 9, size=(64, fc.MIN_SIZE // 64))
    out = {}

    def run():
        out["cos"] = fc.cos_inplace(a.copy())
        out["threads"] = numba.get_num_threads()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert np.max(np.abs(out["cos"] - np.cos(a))) <= 4 * np.spacing(1.0)
    return out["threads"]


@pytest.mark.parametrize("value", ["1", "1,1", " 1 "])
def test_the_loops_keep_to_omp_num_threads(value, monkeypatch):
    """A dask worker (its nanny sets OMP_NUM_THREADS=1) runs its cosines on one thread."""
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert _threads_after_a_cosine_on_a_new_thread() == 1


@pytest.mark.parametrize("value", [None, "", "0", "two", "64"])
def test_without_a_smaller_omp_num_threads_numba_keeps_its_count(value, monkeypatch):
    import numba

    if value is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert _threads_after_a_cosine_on_a_new_thread() == numba.config.NUMBA_NUM_THREADS


@pytest.mark.parametrize("sparse", [False, True])
def test_an_operator_keeps_its_rows_nonzeros_only_while_the_rows_exist(sparse):
    """The nonzeros of the last rows are cached for repeated calls on them, but hold no reference
    to the rows: a dask worker keeps the operators of the tasks whose results it holds, and one
    strong reference per task kept every transformed chunk alive (10M rows: 0.8 GB a worker)."""
    import pickle
    import weakref

    import scipy.sparse as sps

    from kernelscale.kernels import GaussianKernel
    from kernelscale.ops.feature_blocks import FeatureBlockSpec
    from kernelscale.ops.features import FeatureOperator

    if not fc.available():
        pytest.skip("the sparse loops are off in this environment")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 40)) * (rng.random((300, 40)) < 0.02)
    X = sps.csr_matrix(X) if sparse else X
    op = FeatureOperator(FeatureBlockSpec(GaussianKernel(sigma=2.0), 40, 64, 0, np.float64, "cos"), 2**30)
    nonzeros = op._sparse_rows(X)
    assert nonzeros is not None and op._sparse_rows(X) is nonzeros  # one call's rows, reused
    copy = pickle.loads(pickle.dumps(op))  # shipped to another process without them
    assert copy._nonzeros is None and copy._sparse_rows(X) is not None
    rows = weakref.ref(X)
    del X
    assert rows() is None and op._nonzeros is None  # the rows died: their nonzeros went with them
