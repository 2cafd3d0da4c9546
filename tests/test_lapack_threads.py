"""scipy's BLAS at one thread around small factorizations (kernelscale.ops.lapack_threads)."""

import threading
from pathlib import Path

import numpy as np
import pytest
from scipy import linalg

from kernelscale.ops import lapack_threads
from kernelscale.ops.lapack_threads import SMALL_ORDER, THREADED_ORDER, one_lapack_thread


class FakeLibrary:
    def __init__(self, num_threads, filepath="fake-blas.so"):
        self.num_threads = num_threads
        self.filepath = filepath
        self.calls = []

    def set_num_threads(self, n):
        self.calls.append(n)
        self.num_threads = n


@pytest.fixture
def fake(monkeypatch):
    lib = FakeLibrary(2)
    monkeypatch.setattr(lapack_threads, "_scipy_libraries", [lib])
    return lib


def test_small_orders_run_on_one_thread_and_the_count_is_restored(fake):
    with one_lapack_thread(SMALL_ORDER):
        assert fake.num_threads == 1
        with one_lapack_thread(200):  # nested: still one thread, restored only by the outer block
            assert fake.num_threads == 1
        assert fake.num_threads == 1
    assert fake.num_threads == 2 and fake.calls == [1, 2]


def test_large_and_tiny_orders_keep_every_thread(fake):
    with one_lapack_thread(SMALL_ORDER + 1):
        assert fake.num_threads == 2
    with one_lapack_thread(600, small=500):
        assert fake.num_threads == 2
    with one_lapack_thread(THREADED_ORDER - 1):  # OpenBLAS runs it on one thread anyway
        assert fake.num_threads == 2
    assert fake.calls == []


def test_the_count_is_restored_after_an_exception(fake):
    with pytest.raises(RuntimeError):
        with one_lapack_thread(500):
            raise RuntimeError("inside")
    assert fake.num_threads == 2


def test_overlapping_blocks_of_several_threads_restore_the_original_count(fake):
    """The first block to enter lowers the count, the last to leave restores it, whatever the
    interleaving (a per-block save and restore would leave 1 behind)."""
    inside, release = threading.Barrier(4), threading.Event()

    def work():
        with one_lapack_thread(800):
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    inside.wait()
    assert fake.num_threads == 1
    release.set()
    for t in threads:
        t.join()
    assert fake.num_threads == 2 and fake.calls == [1, 2]


def test_the_two_contexts_share_the_count_of_a_library(fake, monkeypatch):
    """A small factorization enters, SLKL's every-BLAS block enters (it finds 1), the factorization
    leaves, then the block: the library must end at its original count, not at the 1 found."""
    other = FakeLibrary(4, "other-blas.so")
    monkeypatch.setattr(lapack_threads, "_blas_libraries", lambda: [fake, other])
    small = lapack_threads.one_lapack_thread(800)
    small.__enter__()
    with lapack_threads.one_blas_thread():
        assert fake.num_threads == 1 and other.num_threads == 1
        small.__exit__(None, None, None)
        assert fake.num_threads == 1  # still held by the outer block
    assert fake.num_threads == 2 and other.num_threads == 4


def _scipy_own():
    libraries = lapack_threads._scipy_blas()
    if not libraries:
        pytest.skip("scipy shares numpy's BLAS here: one pool, nothing is throttled")
    return libraries


def test_only_scipy_s_own_blas_is_throttled():
    """With pip's wheels numpy and scipy load two OpenBLAS: only scipy's is found, and a small
    Cholesky inside the block equals the one outside it (up to the rounding of two threads)."""
    import numpy
    import scipy

    libraries = _scipy_own()
    numpy_root = Path(numpy.__file__).resolve().parent
    for lib in libraries:
        path = Path(lib.filepath).resolve()
        assert numpy_root not in path.parents and numpy_root.parent / "numpy.libs" not in path.parents
        assert Path(scipy.__file__).resolve().parent.parent in path.parents
    M = np.cov(np.random.default_rng(0).normal(size=(150, 600)))
    with one_lapack_thread(150):
        inside = linalg.cholesky(M, lower=True)
        assert all(lib.num_threads == 1 for lib in libraries)
    np.testing.assert_allclose(inside, linalg.cholesky(M, lower=True), rtol=1e-12, atol=1e-14)


def test_real_libraries_are_restored_when_another_thread_leaves_last():
    """threadpoolctl >= 3.7 ignores a limit set from a thread other than the one that last set
    it until that one lets go: the main thread enters, a worker enters, the main thread leaves,
    the worker leaves last and restores; a limit set in a worker afterwards still takes effect."""
    from threadpoolctl import threadpool_limits

    libraries = _scipy_own()
    before = [lib.num_threads for lib in libraries]
    entered, main_left, errors = threading.Event(), threading.Event(), []

    def worker():
        try:
            with one_lapack_thread(1000):
                entered.set()
                main_left.wait(10)
        except Exception as err:  # reported in the main thread
            errors.append(err)

    thread = threading.Thread(target=worker)
    with one_lapack_thread(1000):
        thread.start()
        assert entered.wait(10)
    main_left.set()
    thread.join(10)
    assert not errors and [lib.num_threads for lib in libraries] == before

    seen = []

    def limited():
        with threadpool_limits(limits=1, user_api="blas"):
            seen.append([lib.num_threads for lib in lapack_threads._blas_libraries()])

    thread = threading.Thread(target=limited)
    thread.start()
    thread.join(10)
    assert seen and all(count == 1 for count in seen[0]), seen


def test_the_library_lookup_is_repeated_only_after_new_imports(monkeypatch):
    import sys
    import types

    lapack_threads._blas_libraries()  # the first lookup may import threadpoolctl itself
    first = lapack_threads._blas_libraries()
    assert lapack_threads._blas_libraries() is first  # no new module: the same lookup
    monkeypatch.setitem(sys.modules, "kernelscale_test_new_module", types.ModuleType("kernelscale_test_new_module"))
    again = lapack_threads._blas_libraries()
    assert again is not first and {lib.filepath for lib in again} == {lib.filepath for lib in first}


def test_eigendecompositions_keep_the_threads_only_when_large_and_without_torch(monkeypatch):
    import sys

    from kernelscale.ops.lapack_threads import SMALL_EIGH_ORDER, one_eigh_thread

    lib = FakeLibrary(2, "fake-eigh-blas.so")
    monkeypatch.setattr(lapack_threads, "_blas_libraries", lambda: [lib])
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with one_eigh_thread(SMALL_EIGH_ORDER):
        assert lib.num_threads == 1
    with one_eigh_thread(SMALL_EIGH_ORDER + 1):
        assert lib.num_threads == 2
    monkeypatch.setitem(sys.modules, "torch", object())  # its OpenMP pool would spin beside the solver
    with one_eigh_thread(SMALL_EIGH_ORDER + 1):
        assert lib.num_threads == 1
    assert lib.num_threads == 2 and lib.calls == [1, 2, 1, 2]
