"""Tests of kernelscale.data.datasets: sinc data, file loaders, dataset lookup and the real datasets."""

import gzip
import struct

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from kernelscale.data import datasets
from kernelscale.data.datasets import (
    DATASETS, DatasetNotFoundError, coulomb_features, data_dirs, find_dataset, load_dataset, load_file,
    load_idx, load_svmlight, make_sinc, split_dataset, verify_dataset,
)


def naive_sinc(X):
    """sin|x| / |x| one point at a time, 1 at the origin."""
    out = np.empty(len(X))
    for i, x in enumerate(X):
        r = np.sqrt(x[0] ** 2 + x[1] ** 2)
        out[i] = 1.0 if r == 0 else np.sin(r) / r
    return out


# ----------------------------------------------------------------------------------------------
# make_sinc


def test_make_sinc_shapes_range_and_clean_test_targets():
    X_train, y_train, X_test, y_test = make_sinc(300, 200, random_state=0)
    assert X_train.shape == (300, 2) and X_test.shape == (200, 2)
    assert y_train.shape == (300,) and y_test.shape == (200,)
    for a in (X_train, y_train, X_test, y_test):
        assert a.dtype == np.float64
    assert X_train.min() >= -5 and X_train.max() <= 5 and X_test.min() >= -5
    # both halves of the square are used (uniform on [-5, 5]^2, not [0, 5]^2)
    assert X_train.min() < -4 and X_train.max() > 4
    np.testing.assert_allclose(y_test, naive_sinc(X_test), rtol=1e-13, atol=0)
    assert not np.allclose(y_train, naive_sinc(X_train), atol=1e-3)


def test_sinc_is_one_at_the_origin():
    np.testing.assert_array_equal(datasets._sinc_norm(np.zeros((2, 2))), [1.0, 1.0])


@pytest.mark.parametrize("snr_db", [0, 10, 20])
def test_make_sinc_noise_power_matches_snr(snr_db):
    n = 100_000
    X_train, y_train, _, _ = make_sinc(n, 1, snr_db=snr_db, random_state=1)
    clean = naive_sinc(X_train)
    noise = y_train - clean
    expected = np.mean(clean**2) / 10 ** (snr_db / 10)
    # the sample mean of noise^2 has relative standard deviation sqrt(2 / n) ~ 0.45%
    assert abs(np.mean(noise**2) / expected - 1) < 5 * np.sqrt(2 / n)
    assert abs(np.mean(noise)) < 5 * np.sqrt(expected / n)


def test_make_sinc_infinite_snr_is_noise_free():
    X_train, y_train, _, _ = make_sinc(50, 5, snr_db=np.inf, random_state=0)
    np.testing.assert_allclose(y_train, naive_sinc(X_train), rtol=1e-13)


def test_make_sinc_is_deterministic_for_a_seed():
    a = make_sinc(100, 50, random_state=3)
    b = make_sinc(100, 50, random_state=3)
    c = make_sinc(100, 50, random_state=4)
    d = make_sinc(100, 50, random_state=np.random.RandomState(3))
    for x, y, z in zip(a, b, d):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(x, z)
    assert not np.array_equal(a[0], c[0])


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"n_train": 0}, ValueError),
        ({"n_test": -1}, ValueError),
        ({"n_train": 2.5}, TypeError),
        ({"snr_db": float("nan")}, ValueError),
        ({"snr_db": "10"}, ValueError),
    ],
)
def test_make_sinc_rejects_bad_arguments(kwargs, error):
    with pytest.raises(error, match=next(iter(kwargs))):
        make_sinc(**kwargs)


# ----------------------------------------------------------------------------------------------
# IDX


def write_idx(path, arr, code, gz=False):
    """Write an IDX file from the format spec: 0 0 code ndim, big-endian int32 dims, data."""
    big = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}[code]
    payload = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}i", *arr.shape)
    payload += np.ascontiguousarray(arr, dtype=big).tobytes()
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(payload)


IDX_CASES = [
    (0x08, np.uint8, (3, 4, 5)),
    (0x09, np.int8, (6,)),
    (0x0B, np.int16, (2, 3)),
    (0x0C, np.int32, (7, 2)),
    (0x0D, np.float32, (4, 3)),
    (0x0E, np.float64, (2, 2, 2)),
]


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("code, dtype, shape", IDX_CASES)
def test_idx_round_trip(tmp_path, code, dtype, shape, gz):
    rng = np.random.default_rng(code)
    if np.dtype(dtype).kind == "f":
        arr = rng.normal(size=shape).astype(dtype)
    else:
        info = np.iinfo(dtype)
        arr = rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
    path = tmp_path / ("data-idx-ubyte.gz" if gz else "data-idx-ubyte")
    write_idx(path, arr, code, gz)
    out = load_idx(path)
    assert out.dtype == np.dtype(dtype)  # native byte order
    assert out.dtype.isnative
    np.testing.assert_array_equal(out, arr)


def test_idx_literal_bytes(tmp_path):
    path = tmp_path / "a.idx"
    path.write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x03\x01\x02\xff")
    np.testing.assert_array_equal(load_idx(path), np.array([1, 2, 255], np.uint8))
    # int32 is big-endian: bytes 00 00 01 00 are 256
    path.write_bytes(b"\x00\x00\x0c\x02\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x01\x00")
    np.testing.assert_array_equal(load_idx(path), np.array([[256]], np.int32))


def test_idx_rejects_bad_files(tmp_path):
    path = tmp_path / "bad.idx"
    path.write_bytes(b"\x01\x00\x08\x01\x00\x00\x00\x01\x00")
    with pytest.raises(ValueError, match="not an IDX file"):
        load_idx(path)
    path.write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x05\x00\x01")  # says 5 bytes, holds 2
    with pytest.raises(ValueError, match="truncated"):
        load_idx(path)


def test_load_file_flattens_idx_images(tmp_path):
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    write_idx(path, images, 0x08, gz=True)
    X, y = load_file(path)
    assert y is None
    np.testing.assert_array_equal(X, images.reshape(2, 12))


# ----------------------------------------------------------------------------------------------
# svmlight, csv, npz


def test_svmlight_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 6)) * (rng.random((20, 6)) < 0.4)
    y = rng.choice([-1.0, 1.0], 20)
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    Xs, ys = load_svmlight(path, n_features=6)
    assert Xs.format == "csr"
    np.testing.assert_allclose(Xs.toarray(), X, rtol=1e-15)
    np.testing.assert_array_equal(ys, y)
    Xd, _ = load_svmlight(path, n_features=8, dense=True)
    assert isinstance(Xd, np.ndarray) and Xd.shape == (20, 8)
    np.testing.assert_allclose(Xd[:, :6], X, rtol=1e-15)
    assert not Xd[:, 6:].any()
    gz = tmp_path / "d.libsvm.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    Xg, yg = load_file(gz, n_features=6)
    np.testing.assert_allclose(Xg, X, rtol=1e-15)
    np.testing.assert_array_equal(yg, y)


def test_svmlight_indices_are_one_based(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text("+1 1:0.5 3:2\n-1 2:1\n")
    X, y = load_file(path)
    np.testing.assert_array_equal(X, [[0.5, 0, 2], [0, 1, 0]])
    np.testing.assert_array_equal(y, [1, -1])


def test_load_file_csv_takes_the_last_column_as_target(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b,target\n1,2,3\n4,5,6.5\n")
    X, y = load_file(path)
    np.testing.assert_array_equal(X, [[1, 2], [4, 5]])
    np.testing.assert_array_equal(y, [3, 6.5])
    path.write_text("1,2,3\n")  # no header, one row
    X, y = load_file(path)
    np.testing.assert_array_equal(X, [[1, 2]])
    np.testing.assert_array_equal(y, [3])


def test_load_file_npz(tmp_path):
    X, y = np.arange(6.0).reshape(3, 2), np.array([0, 1, 0])
    np.savez(tmp_path / "a.npz", X=X, y=y)
    np.savez(tmp_path / "b.npz", X_train=X, y_train=y, X_test=X[:1], y_test=y[:1])
    Xa, ya = load_file(tmp_path / "a.npz")
    np.testing.assert_array_equal(Xa, X)
    np.testing.assert_array_equal(ya, y)
    Xt, yt = load_file(tmp_path / "b.npz", part="test")
    np.testing.assert_array_equal(Xt, X[:1])
    with pytest.raises(ValueError, match="part='train'"):
        load_file(tmp_path / "b.npz")


def test_load_npz_refuses_pickled_arrays(tmp_path):
    np.savez(tmp_path / "o.npz", X=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        datasets.load_npz(tmp_path / "o.npz")


def test_load_file_unknown_extension(tmp_path):
    with pytest.raises(ValueError, match=r"\.npz"):
        load_file(tmp_path / "data.parquet")


# ----------------------------------------------------------------------------------------------
# lookup, registry, errors (synthetic files)


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    """Point every search location at empty directories; return the env-var directory."""
    env, home = tmp_path / "env", tmp_path / "home"
    env.mkdir()
    home.mkdir()
    monkeypatch.setenv("KERNELSCALE_DATA", str(env))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(datasets, "SEARCH_BESIDE_CHECKOUT", False)
    return env


def fake_boston(path, seed=0):
    rng = np.random.default_rng(seed)
    names = np.array([f"f{i}" for i in range(13)])
    np.savez_compressed(path, X=rng.normal(size=(506, 13)), y=rng.normal(size=506),
                        feature_names=names)


def test_missing_dataset_message(no_data):
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("boston")
    msg = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    for part in ("boston.npz", "KERNELSCALE_DATA", str(no_data), ".cache/kernelscale", "UCI"):
        assert part in msg


def test_unknown_dataset_name_lists_the_registry():
    with pytest.raises(ValueError, match="mnist"):
        load_dataset("no-such-data")


def test_search_order(no_data, tmp_path, monkeypatch):
    cache = tmp_path / "home" / ".cache" / "kernelscale"
    cache.mkdir(parents=True)
    fake_boston(cache / "boston.npz")
    assert find_dataset("boston") == cache / "boston.npz"
    fake_boston(no_data / "boston.npz")
    assert find_dataset("boston") == no_data / "boston.npz"  # the env var comes first
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(DatasetNotFoundError, match=str(other)):
        find_dataset("boston", data_home=other)  # data_home is searched alone


def test_beside_checkout_lookup_from_cwd(no_data, tmp_path, monkeypatch):
    data = tmp_path / "ws" / "shared" / "data"
    data.mkdir(parents=True)
    work = tmp_path / "ws" / "main" / "src"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert data not in data_dirs()  # switched off by the fixture
    monkeypatch.setattr(datasets, "SEARCH_BESIDE_CHECKOUT", True)
    dirs = data_dirs()
    assert dirs[0] == no_data and dirs[1] == tmp_path / "home" / ".cache" / "kernelscale"
    assert data.resolve() in dirs


def test_load_dataset_from_a_file_and_split(tmp_path):
    fake_boston(tmp_path / "boston.npz")
    bunch = load_dataset("boston", data_home=tmp_path, dtype=np.float32)
    assert bunch.X.dtype == np.float32 and bunch.y.dtype == np.float64
    assert list(bunch.feature_names[:2]) == ["f0", "f1"]
    X_train, y_train, X_test, y_test = split_dataset(bunch, 350, random_state=0)
    assert X_train.shape == (350, 13) and X_test.shape == (156, 13)
    # a permutation: every row used once, X and y rows kept together
    rows = np.concatenate([y_train, y_test])
    np.testing.assert_array_equal(np.sort(rows), np.sort(bunch.y))
    i = int(np.flatnonzero(bunch.y == y_test[0])[0])
    np.testing.assert_array_equal(X_test[0], bunch.X[i])
    again = split_dataset(bunch, 350, random_state=0)
    np.testing.assert_array_equal(again[0], X_train)
    assert not np.array_equal(split_dataset(bunch, 350, random_state=1)[0], X_train)
    assert split_dataset(bunch, 100, n_test=50, random_state=0)[2].shape == (50, 13)
    with pytest.raises(ValueError, match="exceeds"):
        split_dataset(bunch, 500, n_test=10)
    with pytest.raises(ValueError, match="official split"):
        split_dataset({"X_train": X_train, "y_train": y_train}, 10)


def test_load_dataset_rejects_a_file_with_other_arrays(tmp_path):
    np.savez(tmp_path / "boston.npz", X=np.zeros((10, 13)), y=np.zeros(10))
    with pytest.raises(ValueError, match="should be"):
        load_dataset("boston", data_home=tmp_path)


def test_verify_dataset_detects_a_wrong_checksum(tmp_path):
    fake_boston(tmp_path / "boston.npz")
    with pytest.raises(ValueError, match="SHA-256"):
        verify_dataset("boston", data_home=tmp_path)
    with pytest.raises(ValueError, match="SHA-256"):
        load_dataset("boston", data_home=tmp_path, verify=True)


def test_registry_records_are_consistent():
    for name, info in DATASETS.items():
        assert info.name == name and info.filename == f"{name}.npz"
        assert info.task in ("regression", "binary", "multiclass")
        specs = info.array_specs
        rows = sum(specs[k][0][0] for k in specs if k.startswith("X"))
        assert rows == info.n_samples
        x_shape = specs["X_train" if info.official_split else "X"][0]
        assert int(np.prod(x_shape[1:])) == info.n_features
        assert len(info.sha256) == 64 and info.source and info.description


# ----------------------------------------------------------------------------------------------
# the real data (README table of shared/data), skipped only when the files are absent

README_TABLE = {
    "mnist": {"X_train": ((60000, 784), "uint8"), "y_train": ((60000,), "int64"),
              "X_test": ((10000, 784), "uint8"), "y_test": ((10000,), "int64")},
    "usps": {"X_train": ((7291, 256), "float32"), "y_train": ((7291,), "int64"),
             "X_test": ((2007, 256), "float32"), "y_test": ((2007,), "int64")},
    "abalone": {"X": ((4177, 10), "float64"), "y": ((4177,), "float64"),
                "feature_names": ((10,), None)},
    "boston": {"X": ((506, 13), "float64"), "y": ((506,), "float64"),
               "feature_names": ((13,), None)},
    "adult": {"X_train": ((32561, 123), "uint8"), "y_train": ((32561,), "int64"),
              "X_test": ((16281, 123), "uint8"), "y_test": ((16281,), "int64")},
    "cadata": {"X": ((20640, 8), "float64"), "y": ((20640,), "float64"),
               "feature_names": ((8,), None)},
    "qm7": {"X": ((7165, 529), "float32"), "y": ((7165,), "float64"),
            "Z": ((7165, 23), "uint8"), "R_angstrom": ((7165, 23, 3), "float32")},
}


def test_registry_matches_the_readme_table():
    assert set(DATASETS) == set(README_TABLE)


@pytest.mark.real_data
@pytest.mark.parametrize("name", sorted(README_TABLE))
def test_real_dataset_shapes_and_dtypes(name, require_dataset):
    require_dataset(name)
    bunch = load_dataset(name)
    for key, (shape, dtype) in README_TABLE[name].items():
        assert bunch[key].shape == shape, key
        if dtype is None:
            assert bunch[key].dtype.kind == "U"
        else:
            assert bunch[key].dtype == np.dtype(dtype), key
    assert DATASETS[name].official_split == ("X_train" in README_TABLE[name])


@pytest.mark.real_data
def test_real_dataset_contents(require_dataset):
    for name in ("mnist", "usps", "boston", "abalone", "adult", "cadata", "qm7"):
        require_dataset(name)
    mnist = load_dataset("mnist")
    assert np.bincount(mnist.y_train)[:3].tolist() == [5923, 6742, 5958]
    assert np.isclose(mnist.X_train.mean() / 255, 0.1306604762738429)
    usps = load_dataset("usps")
    assert usps.X_train.min() >= 0 and usps.X_train.max() <= 1
    assert np.bincount(usps.y_test).tolist()[:2] == [359, 264]
    assert np.isclose(load_dataset("boston").y.mean(), 22.5328, atol=1e-4)
    assert np.isclose(load_dataset("abalone").y.mean(), 9.9337, atol=1e-4)
    adult = load_dataset("adult")
    assert set(np.unique(adult.y_train)) == {-1, 1} and (adult.y_test == 1).sum() == 3846
    assert (load_dataset("cadata").y == 500001).sum() == 965
    qm7 = load_dataset("qm7")
    assert np.isclose(qm7.y[0], -417.96, atol=1e-2)
    raw = load_dataset("qm7", flatten=False, dtype=np.float64)
    assert raw.X.shape == (7165, 23, 23) and raw.X.dtype == np.float64
    np.testing.assert_array_equal(raw.X.reshape(7165, -1), qm7.X)


@pytest.mark.real_data
@pytest.mark.parametrize("name, sizes", sorted(datasets.PAPER1_SPLITS.items()))
def test_real_paper1_splits(name, sizes, require_dataset):
    require_dataset(name)
    X_train, y_train, X_test, y_test = split_dataset(load_dataset(name), *sizes, random_state=0)
    assert (len(X_train), len(X_test)) == sizes == (len(y_train), len(y_test))


@pytest.mark.real_data
def test_real_checksums_match_sha256sums(require_dataset):
    path = require_dataset("boston")
    sums_file = path.parent / "SHA256SUMS"
    if sums_file.is_file():  # the published list, an independent copy of the registry's hashes
        sums = dict(line.split()[::-1] for line in sums_file.read_text().splitlines() if line)
        for info in DATASETS.values():
            assert sums[info.filename] == info.sha256
    for name in DATASETS:
        require_dataset(name)
        verify_dataset(name)


def _molecules(rng, n=6, a=5):
    """Random Coulomb-like matrices: symmetric, positive entries, the last atoms padding."""
    C = np.zeros((n, a, a))
    for i in range(n):
        m = rng.integers(2, a)  # atoms present; the rest is padding
        A = rng.uniform(0.5, 10.0, size=(m, m))
        C[i, :m, :m] = (A + A.T) / 2
    return C


def _full(tri, a):
    """Rebuild the symmetric matrices from their row-wise upper triangles."""
    r, c = np.triu_indices(a)
    M = np.zeros((tri.shape[0], a, a))
    M[:, r, c] = tri
    M[:, c, r] = tri
    return M


def test_sorted_coulomb_features_do_not_depend_on_the_atom_order():
    rng = np.random.default_rng(0)
    C = _molecules(rng)
    P = C.copy()
    for i in range(C.shape[0]):  # relabel the atoms of each molecule
        p = rng.permutation(C.shape[1])
        P[i] = C[i][np.ix_(p, p)]
    F = coulomb_features(C)
    assert F.shape == (6, 15)
    np.testing.assert_array_equal(F, coulomb_features(P))
    # rows by decreasing norm, padding (zero rows) last
    M = _full(F, 5)
    norms = np.linalg.norm(M, axis=2)
    assert np.all(np.diff(norms, axis=1) <= 1e-12)


def test_random_coulomb_features_are_reorderings_of_the_molecule():
    rng = np.random.default_rng(1)
    C = _molecules(rng)
    F1 = coulomb_features(C, noise=1.0, random_state=0)
    F2 = coulomb_features(C, noise=1.0, random_state=1)
    np.testing.assert_array_equal(F1, coulomb_features(C, noise=1.0, random_state=0))
    assert not np.array_equal(F1, F2)  # another draw, another ordering
    # a Generator is used and advanced: two calls on one stream draw two orderings
    rng = np.random.default_rng(0)
    assert not np.array_equal(coulomb_features(C, noise=1.0, random_state=rng),
                              coulomb_features(C, noise=1.0, random_state=rng))
    assert coulomb_features(C.astype(np.float32), noise=1.0, random_state=0).dtype == np.float32
    for F in (F1, F2):
        M = _full(F, 5)
        for i in range(C.shape[0]):
            # a symmetric permutation keeps the diagonal multiset and the spectrum
            np.testing.assert_allclose(np.sort(np.diag(M[i])), np.sort(np.diag(C[i])))
            np.testing.assert_allclose(np.linalg.eigvalsh(M[i]), np.linalg.eigvalsh(C[i]), atol=1e-9)
            m = np.count_nonzero(np.linalg.norm(C[i], axis=1))
            assert np.all(M[i][m:] == 0) and np.all(np.linalg.norm(M[i][:m], axis=1) > 0)


@pytest.mark.parametrize("kwargs, match", [
    ({"C": np.zeros((3, 4, 5))}, "stack of square matrices"),
    ({"C": np.zeros((4, 4))}, "stack of square matrices"),
    ({"C": np.zeros((2, 3, 3)), "noise": -1.0}, "noise"),
    ({"C": np.full((2, 3, 3), np.nan)}, "NaN"),
])
def test_coulomb_features_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        coulomb_features(**kwargs)


@pytest.mark.real_data
def test_real_qm7_sorted_coulomb_features(require_dataset):
    require_dataset("qm7")
    X = load_dataset("qm7", flatten=False).X[:50]
    F = coulomb_features(X)
    assert F.shape == (50, 276) and F.dtype == np.float32
    # methane: carbon first (0.5 * 6^2.4 = 36.86), then the four hydrogens (0.5)
    assert F[0, 0] == pytest.approx(0.5 * 6**2.4, rel=1e-5)
