"""Tests of kernelscale.data.virtual_digits.VirtualDigits: the MNIST8M-style stream of deformed digits
(Dai et al. 2014; Loosli, Canu & Bottou 2007). Synthetic 16x16 images except one real-MNIST test."""

import pickle

import numpy as np
import pytest
from scipy import ndimage

import kernelscale.data.virtual_digits as virtual_digits
from kernelscale.data.datasets import VirtualDigits as ReExported
from kernelscale.data.virtual_digits import VirtualDigits

IDENTITY = dict(max_shift=0.0, max_rotation=0.0, scale_range=(1.0, 1.0), elastic_alpha=0.0)


def blobs(n=7, side=16, seed=0, dtype=np.float64):
    """n smooth blob images in [0, 1] (Gaussian-smoothed random strokes), labels 0..n-1."""
    rng = np.random.default_rng(seed)
    images = np.zeros((n, side, side))
    for k in range(n):
        for _ in range(4):
            r, c = rng.integers(4, side - 4, size=2)
            images[k, r - 1:r + 2, c - 1:c + 2] = 1.0
        images[k] = ndimage.gaussian_filter(images[k], 1.5)
        images[k] /= images[k].max()
    return images.astype(dtype), np.arange(n) * 10 + 3


@pytest.fixture(params=["numba", "scipy"])
def resampler(request, monkeypatch):
    """Runs a test with the compiled resampling and with scipy's map_coordinates."""
    if request.param == "numba" and not virtual_digits.NUMBA_AVAILABLE:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(virtual_digits, "USE_NUMBA", request.param == "numba")
    return request.param


def stream(images=None, labels=None, **kw):
    if images is None:
        images, labels = blobs()
    kw.setdefault("n_examples", 60)
    kw.setdefault("chunk_size", 8)
    return VirtualDigits(images, labels, **kw)


def test_reexported_from_datasets():
    assert ReExported is VirtualDigits


def test_lengths_and_chunk_bounds():
    vd = stream(n_examples=61, chunk_size=8)
    assert len(vd) == 61 and vd.n_chunks == 8
    assert vd.chunk_bounds(0) == (0, 8) and vd.chunk_bounds(7) == (56, 61)
    X, y = vd.chunk(7)
    assert X.shape == (5, 16, 16) and y.shape == (5,)
    with pytest.raises(IndexError, match="8 chunks"):
        vd.chunk(8)
    with pytest.raises(IndexError):
        vd.chunk(-1)


def test_same_chunk_twice_is_bit_identical_and_order_free():
    vd = stream(seed=3)
    in_order = [vd.chunk(c) for c in range(vd.n_chunks)]
    other = stream(seed=3)  # a fresh instance, as another worker would build it
    for c in reversed(range(vd.n_chunks)):
        X, y = other.chunk(c)
        assert X.tobytes() == in_order[c][0].tobytes()
        np.testing.assert_array_equal(y, in_order[c][1])
    X, _ = vd.chunk(5)
    assert X.tobytes() == in_order[5][0].tobytes()
    clone = pickle.loads(pickle.dumps(vd))
    assert clone.chunk(4)[0].tobytes() == in_order[4][0].tobytes()


def test_different_seeds_and_chunks_differ():
    a, b = stream(seed=0), stream(seed=1)
    assert not np.array_equal(a.chunk(3)[0], b.chunk(3)[0])
    # chunks 2 and 3 cover different base images; compare two passes over the same images
    vd = stream(chunk_size=7, include_originals=False)
    assert not np.array_equal(vd.chunk(1)[0], vd.chunk(2)[0])


def test_iter_chunks_and_take():
    vd = stream(n_examples=30, chunk_size=8)
    chunks = list(vd.iter_chunks())
    assert len(chunks) == 4
    X, y = vd.take(30)
    np.testing.assert_array_equal(X, np.concatenate([c[0] for c in chunks]))
    np.testing.assert_array_equal(y, np.concatenate([c[1] for c in chunks]))
    X11, y11 = vd.take(11)
    np.testing.assert_array_equal(X11, X[:11])
    np.testing.assert_array_equal(y11, y[:11])
    middle = list(vd.iter_chunks(1, 3))
    np.testing.assert_array_equal(middle[1][0], chunks[2][0])
    assert vd.take(0)[0].shape == (0, 16, 16)
    with pytest.raises(ValueError, match="n_examples=30"):
        vd.take(31)
    with pytest.raises(ValueError, match="stop"):
        list(vd.iter_chunks(0, 5))


def test_labels_are_the_base_labels_of_i_mod_n():
    images, labels = blobs(n=7)
    vd = stream(images, labels, n_examples=45, chunk_size=6)
    _, y = vd.take(45)
    np.testing.assert_array_equal(y, labels[np.arange(45) % 7])


def test_values_stay_in_the_base_range_and_finite():
    images, labels = blobs()
    images = 3.0 * images - 1.0  # range [-1, 2]: the background is the minimum, -1
    vd = stream(images, labels, max_shift=5.0, max_rotation=40, scale_range=(0.6, 1.5),
                elastic_alpha=40.0, elastic_sigma=2.0, n_examples=200, chunk_size=50)
    X, _ = vd.take(200)
    assert np.isfinite(X).all()
    assert X.min() >= images.min() and X.max() <= images.max()
    assert X.min() == images.min()  # moved-in pixels are background
    assert X.dtype == np.float64


def test_dtypes_and_layouts():
    images, labels = blobs()
    X32, _ = stream(images.astype(np.float32), labels).chunk(2)
    assert X32.dtype == np.float32
    u8 = np.round(255 * images).astype(np.uint8)
    vd = stream(u8.reshape(7, 256), labels)  # flattened in, flattened out
    X, _ = vd.chunk(2)
    assert X.dtype == np.float64 and X.shape == (8, 256)
    assert X.min() >= 0 and X.max() <= 255
    assert stream(u8, labels, dtype=np.float32).chunk(2)[0].dtype == np.float32


def test_identity_setting_returns_the_base_images_exactly():
    images, labels = blobs()
    for imgs in (images, images.astype(np.float32), np.round(255 * images).astype(np.uint8)):
        vd = stream(imgs, labels, include_originals=False, **IDENTITY)
        X, _ = vd.take(40)
        np.testing.assert_array_equal(X, imgs[np.arange(40) % 7])


def test_include_originals_gives_the_first_pass_undeformed():
    images, labels = blobs(n=7)
    vd = stream(images, labels, n_examples=30, chunk_size=4)  # the first pass spans 2 chunks
    X, _ = vd.take(30)
    np.testing.assert_array_equal(X[:7], images)
    later = np.abs(X[7:] - images[np.arange(7, 30) % 7]).reshape(23, -1).max(axis=1)
    assert (later > 0).all()
    X_off, _ = stream(images, labels, n_examples=30, chunk_size=4,
                      include_originals=False).take(7)
    assert (np.abs(X_off - images).reshape(7, -1).max(axis=1) > 0).all()


def relative_change(vd, images):
    X, _ = vd.take(len(vd))
    base = images[np.arange(len(vd)) % len(images)]
    diff = np.linalg.norm((X - base).reshape(len(vd), -1), axis=1)
    return diff / np.linalg.norm(base.reshape(len(vd), -1), axis=1)


def test_deformation_is_small_but_not_trivial():
    images, labels = blobs()
    kw = dict(n_examples=140, chunk_size=70, include_originals=False)
    rel = relative_change(stream(images, labels, **kw), images)
    assert rel.min() > 0.05 and 0.2 < np.median(rel) < 0.75 and rel.max() < 1.1
    small = relative_change(stream(images, labels, max_shift=0.5, max_rotation=2,
                                   scale_range=(0.98, 1.02), elastic_alpha=2.0, **kw), images)
    assert 0 < np.median(small) < 0.5 * np.median(rel)
    # each part of the deformation acts on its own
    for part in (dict(max_shift=1.0), dict(max_rotation=10.0), dict(scale_range=(0.9, 1.1)),
                 dict(elastic_alpha=10.0)):
        only = relative_change(stream(images, labels, **{**kw, **IDENTITY, **part}), images)
        assert (only > 0).all() and np.median(only) < 0.6, part


def test_known_affine_maps(resampler):
    images, labels = blobs(n=2)
    vd = stream(images, labels)
    base = np.array([0, 1])
    # a shift by (1, -2) pixels: output[r, c] = input[r - 1, c + 2], background elsewhere
    out = vd._deform(base, np.array([[1.0, 1.0], [-2.0, -2.0]]), np.zeros(2), np.ones(2), None)
    expected = np.zeros_like(images)
    expected[:, 1:, :-2] = images[:, :-1, 2:]
    np.testing.assert_array_equal(out, expected)
    # a rotation by +90 degrees about the centre is np.rot90 (counter-clockwise on screen)
    out = vd._deform(base, np.zeros((2, 2)), np.full(2, np.pi / 2), np.ones(2), None)
    np.testing.assert_allclose(out, np.rot90(images, 1, axes=(1, 2)), atol=1e-12)
    # scale 2 about the centre magnifies: the centre 8x8 block of a blown-up image
    big = np.kron(images, np.ones((2, 2)))[:, 8:24, 8:24]  # sharp 2x upsampling, then crop
    out = vd._deform(base, np.zeros((2, 2)), np.zeros(2), np.full(2, 2.0), None)
    interior = np.s_[:, 2:-2, 2:-2]
    assert np.abs(out[interior] - big[interior]).max() < 0.35  # bilinear vs nearest upsampling


def test_no_bleeding_between_images_of_a_chunk(resampler):
    """The chunk is resampled as one stacked image: big moves must not pull in a neighbour."""
    images = np.zeros((3, 32, 32))
    images[1] = 1.0
    images[2, 8:24, 8:24] = 0.5
    vd = VirtualDigits(images, [0, 1, 2], n_examples=300, chunk_size=100, max_shift=3.0,
                       max_rotation=30, elastic_alpha=10.0, include_originals=False)
    X, _ = vd.take(300)
    assert (X[0::3] == 0).all()  # the blank image stays blank next to the full one
    assert (X[2::3] <= 0.5).all()
    full = X[1::3]
    # the centre samples well inside the full image (|offset| <= 1.6 + 4.3 + elastic < 9)
    np.testing.assert_allclose(full[:, 14:18, 14:18], 1.0, rtol=0, atol=1e-12)
    assert (full.min(axis=(1, 2)) < 1).all()  # background moves in at the borders


def test_resampling_matches_map_coordinates_image_by_image(resampler):
    images, labels = blobs(n=5)
    vd = stream(images, labels, include_originals=False)
    rng = np.random.default_rng(1)
    base = rng.integers(0, 5, size=9)
    shift = rng.uniform(-3, 3, size=(2, 9))
    angle = rng.uniform(-0.5, 0.5, size=9)
    scale = rng.uniform(0.8, 1.2, size=9)
    out = vd._deform(base, shift, angle, scale, None)
    cr = 7.5
    rows, cols = np.mgrid[0:16, 0:16] - cr
    for k in range(9):
        c, s = np.cos(angle[k]) / scale[k], np.sin(angle[k]) / scale[k]
        u, v = rows - shift[0, k], cols - shift[1, k]
        coords = np.array([c * u + s * v + cr, c * v - s * u + cr])
        ref = ndimage.map_coordinates(images[base[k]], coords, order=1, mode="grid-constant",
                                      cval=0.0)
        np.testing.assert_allclose(out[k], ref, atol=1e-12)


def test_compiled_and_scipy_resampling_give_the_same_chunks(monkeypatch):
    """Elastic field included: the two resamplers interpolate in float64 and agree to rounding."""
    if not virtual_digits.NUMBA_AVAILABLE:
        pytest.skip("numba is not installed")
    images, labels = blobs(n=5)
    vd = stream(images, labels, include_originals=False, max_rotation=20.0, elastic_alpha=7.3)
    compiled = np.concatenate([vd.chunk(c)[0] for c in range(3)])
    monkeypatch.setattr(virtual_digits, "USE_NUMBA", False)
    reference = np.concatenate([vd.chunk(c)[0] for c in range(3)])
    np.testing.assert_allclose(compiled, reference, rtol=0, atol=1e-12)
    assert np.abs(compiled - images[np.arange(24) % 5]).max() > 0.1  # really deformed


def test_byte_swapped_images_give_the_same_stream():
    images, labels = blobs(n=5)
    swapped = images.astype(images.dtype.newbyteorder(">" if images.dtype.byteorder != ">" else "<"))
    kw = dict(include_originals=False, elastic_alpha=7.3)
    np.testing.assert_allclose(stream(swapped, labels, **kw).take(24)[0], stream(images, labels, **kw).take(24)[0],
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("n, sigma", [(16, 3.0), (28, 3.0), (9, 1.5)])
def test_gaussian_matrix_is_the_reflecting_gaussian_filter(n, sigma):
    field = np.random.default_rng(0).uniform(-1, 1, size=(4, 2, n, n))
    G = virtual_digits._gaussian_matrix(n, sigma, np.float64)
    smoothed = np.matmul(G, field @ G.T)
    expected = ndimage.gaussian_filter(field, sigma=(0, 0, sigma, sigma), truncate=3.0)
    np.testing.assert_allclose(smoothed, expected, rtol=0, atol=1e-13)


@pytest.mark.parametrize("kw, match", [
    (dict(n_examples=0), "n_examples"),
    (dict(n_examples=2.5), "n_examples"),
    (dict(chunk_size=0), "chunk_size"),
    (dict(seed=-1), "seed"),
    (dict(seed=None), "seed"),
    (dict(max_shift=-1.0), "max_shift"),
    (dict(max_shift=np.nan), "max_shift"),
    (dict(max_rotation=-5), "max_rotation"),
    (dict(max_rotation=200), "max_rotation"),
    (dict(scale_range=(1.1, 0.9)), "swap"),
    (dict(scale_range=(0.0, 1.0)), r"scale_range\[0\]"),
    (dict(scale_range=1.0), "scale_range"),
    (dict(elastic_alpha=-1.0), "elastic_alpha"),
    (dict(elastic_sigma=0.0), "elastic_sigma"),
    (dict(include_originals="yes"), "include_originals"),
    (dict(dtype=np.int32), "dtype"),
])
def test_bad_arguments_name_the_argument(kw, match):
    with pytest.raises(ValueError, match=match):
        stream(**kw)


def test_bad_images_and_labels():
    images, labels = blobs()
    with pytest.raises(ValueError, match="not a square image"):
        VirtualDigits(images.reshape(7, 256)[:, :200], labels, n_examples=10)
    with pytest.raises(ValueError, match="shape"):
        VirtualDigits(images[0], labels, n_examples=10)
    with pytest.raises(ValueError, match="at least one image"):
        VirtualDigits(images[:0], labels[:0], n_examples=10)
    bad = images.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        VirtualDigits(bad, labels, n_examples=10)
    with pytest.raises(ValueError, match="labels"):
        VirtualDigits(images, labels[:-1], n_examples=10)
    with pytest.raises(ValueError, match="numeric"):
        VirtualDigits(images.astype(str), labels, n_examples=10)


@pytest.mark.real_data
def test_real_mnist_deformed_digits_keep_their_class(require_dataset):
    from kernelscale import load_dataset

    require_dataset("mnist")
    mnist = load_dataset("mnist")
    vd = VirtualDigits(mnist.X_test[:300], mnist.y_test[:300], n_examples=1200, chunk_size=400,
                       dtype=np.float32)
    X, y = vd.take(1200)
    assert X.shape == (1200, 784) and X.dtype == np.float32
    assert X.min() >= 0 and X.max() <= 255 and np.isfinite(X).all()
    np.testing.assert_array_equal(X[:300], mnist.X_test[:300])
    np.testing.assert_array_equal(y, mnist.y_test[np.arange(1200) % 300])
    base = mnist.X_test[np.arange(300, 1200) % 300].astype(np.float64)
    rel = np.linalg.norm(X[300:] - base, axis=1) / np.linalg.norm(base, axis=1)
    assert rel.min() > 0.05 and np.median(rel) < 1.0  # thin strokes: a 2-pixel shift is a lot
    # 1-nearest-neighbour (5000 training digits, each moved to its centre of mass, as pixel
    # distances are not shift-invariant) reads the deformed digits about as well as the originals
    def centred(A):
        A = A.reshape(-1, 28, 28).astype(np.float32)
        mass = A.sum(axis=(1, 2))
        r = np.arange(28)
        dr = np.rint(A.sum(axis=2) @ r / mass - 13.5).astype(int)
        dc = np.rint(A.sum(axis=1) @ r / mass - 13.5).astype(int)
        return np.stack([np.roll(a, (-i, -j), axis=(0, 1)) for a, i, j in zip(A, dr, dc)]
                        ).reshape(len(A), -1)

    train = centred(mnist.X_train[:5000])
    sq = (train ** 2).sum(axis=1)

    def nn_accuracy(A, labels):
        d = sq[None, :] - 2 * centred(A) @ train.T
        return np.mean(mnist.y_train[:5000][d.argmin(axis=1)] == labels)

    original, deformed = nn_accuracy(X[:300], y[:300]), nn_accuracy(X[300:], y[300:])
    assert original > 0.85 and deformed > original - 0.08, (original, deformed)


def test_to_dask_is_the_stream_chunk_by_chunk_regenerated_where_computed():
    dask = pytest.importorskip("dask")
    s = stream(n_examples=30, chunk_size=8)  # chunks of 8, 8, 8, 6; the first 7 are the originals
    X, y = s.to_dask()
    assert X.shape == (30, 256) and X.chunks[0] == (8, 8, 8, 6) and y.chunks == X.chunks[:1]
    expected = np.concatenate([s.chunk(c)[0].reshape(-1, 256) for c in range(s.n_chunks)])
    labels = np.concatenate([s.chunk(c)[1] for c in range(s.n_chunks)])
    with dask.config.set(scheduler="threads", num_workers=2):
        got, got_y = dask.compute(X, y)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_y, labels)
    np.testing.assert_array_equal(X[17:23].compute(scheduler="synchronous"), expected[17:23])
    # the stream (base images included) is one key of the graph, shared by the chunks' tasks
    graph = dict(X.__dask_graph__())
    assert sum(1 for k in graph if str(k).startswith("virtual-digits-")) == 1
    assert s.to_dask()[0].name == X.name  # deterministic: the same stream gives the same keys
    assert stream(n_examples=30, chunk_size=8, seed=1).to_dask()[0].name != X.name
