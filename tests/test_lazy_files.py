"""load_file(..., chunks=): files as dask arrays in row chunks, read one chunk per task at its
offset for .npy, stored .npz members and uncompressed IDX (kernelscale.data.lazy_files)."""

import numpy as np
import pytest

from kernelscale import GeneralizedLeastSquaresClassifier, load_file

from test_datasets import write_idx

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


@pytest.fixture
def arrays():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(103, 4))
    return X, (X[:, 0] > 0).astype(np.int64)


def _no_whole_reads(monkeypatch):
    """Reading a whole array (np.load of the data, np.fromfile of everything) fails the test."""
    import kernelscale.data.lazy_files as lazy

    original = np.fromfile

    def fromfile(fh, dtype, count=-1, offset=0):
        assert count != -1, "a chunk read without a count reads the rest of the file"
        return original(fh, dtype=dtype, count=count, offset=offset)

    monkeypatch.setattr(lazy.np, "fromfile", fromfile)


@pytest.mark.parametrize("chunks, expected", [(25, (25, 25, 25, 25, 3)), ("auto", (103,))])
def test_npy_and_stored_npz_are_read_chunk_by_chunk(tmp_path, arrays, monkeypatch, chunks, expected):
    X, y = arrays
    np.save(tmp_path / "X.npy", X)
    np.savez(tmp_path / "d.npz", X=X, y=y)  # stored, not deflated
    _no_whole_reads(monkeypatch)
    Xd, none = load_file(tmp_path / "X.npy", chunks=chunks)
    assert none is None and isinstance(Xd, da.Array) and Xd.chunks[0] == expected
    np.testing.assert_array_equal(Xd[30:60].compute(), X[30:60])
    Xz, yz = load_file(tmp_path / "d.npz", chunks=chunks)
    assert Xz.chunks[0] == expected and yz.chunks[0] == expected
    np.testing.assert_array_equal(Xz.compute(), X)
    np.testing.assert_array_equal(yz.compute(), y)
    # a distributed fit over the chunks read from the file gives numpy's model
    ref = GeneralizedLeastSquaresClassifier(max_iter=5).fit(X, y)
    got = GeneralizedLeastSquaresClassifier(max_iter=5).fit(Xz, yz)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-10, atol=1e-12)


def test_a_compressed_npz_member_is_read_whole_within_the_budget_and_refused_beyond(tmp_path, arrays):
    X, y = arrays
    path = tmp_path / "d.npz"
    np.savez_compressed(path, X_train=X, y_train=y)
    Xd, yd = load_file(path, part="train", chunks=50)
    assert Xd.chunks[0] == (50, 50, 3)
    np.testing.assert_array_equal(Xd.compute(), X)
    with pytest.raises(ValueError, match=r"'X_train' \(0 MiB\) is compressed.*np.savez"):
        load_file(path, part="train", chunks=50, max_memory=1000)


def test_idx_uncompressed_lazily_and_gzipped_whole(tmp_path):
    images = np.arange(7 * 3 * 4, dtype=np.int16).reshape(7, 3, 4)
    write_idx(tmp_path / "a-ubyte", images, 0x0B)
    write_idx(tmp_path / "b-ubyte.gz", images, 0x0B, gz=True)
    for name in ("a-ubyte", "b-ubyte.gz"):
        X, y = load_file(tmp_path / name, chunks=3)
        assert y is None and X.shape == (7, 12) and X.chunks[0] == (3, 3, 1) and X.dtype == np.int16
        np.testing.assert_array_equal(X.compute(), images.reshape(7, 12))


def test_text_formats_are_cut_into_chunks_and_bad_chunks_are_refused(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("1,2,3\n4,5,6\n7,8,9\n")
    X, y = load_file(path, chunks=2)
    assert X.chunks[0] == (2, 1) and y.chunks[0] == (2, 1)
    np.testing.assert_array_equal(X.compute(), [[1, 2], [4, 5], [7, 8]])
    for bad in (0, -1, 2.5, "big", True):
        with pytest.raises(ValueError, match="chunks must be None, 'auto' or a number of rows"):
            load_file(path, chunks=bad)


def test_a_truncated_npy_file_names_the_missing_rows(tmp_path, arrays):
    X, _ = arrays
    path = tmp_path / "X.npy"
    np.save(path, X)
    path.write_bytes(path.read_bytes()[:-8 * 4 * 10])  # the last 10 rows cut off
    Xd, _ = load_file(path, chunks=50)
    np.testing.assert_array_equal(Xd[:50].compute(), X[:50])
    with pytest.raises(ValueError, match="shorter than its header says"):
        Xd.compute()


@pytest.mark.real_data
def test_load_dataset_in_row_chunks(require_dataset):
    from kernelscale import load_dataset

    require_dataset("abalone")
    ref = load_dataset("abalone")
    got = load_dataset("abalone", chunks=1000)
    assert isinstance(got.X, da.Array) and got.X.chunks[0][0] == 1000 and got.y.chunks == got.X.chunks[:1]
    np.testing.assert_array_equal(got.X.compute(), ref.X)
    np.testing.assert_array_equal(got.y.compute(), ref.y)


def test_auto_chunks_give_y_the_row_chunks_of_x(tmp_path, arrays):
    X, y = arrays
    np.savez(tmp_path / "d.npz", X=X, y=y)
    np.savez_compressed(tmp_path / "c.npz", X=X, y=y)
    (tmp_path / "d.csv").write_text("\n".join(",".join(map(str, row)) for row in np.column_stack([X, y])))
    with dask.config.set({"array.chunk-size": "1KiB"}):  # 32 rows of X, 128 of y
        for name in ("d.npz", "c.npz", "d.csv"):
            Xd, yd = load_file(tmp_path / name, chunks="auto")
            assert Xd.chunks[0] == yd.chunks[0] and Xd.chunks[0][0] == 32, name
