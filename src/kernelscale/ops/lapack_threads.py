"""BLAS libraries held at one thread for a block of code, re-entrantly and across threads.

:func:`one_lapack_thread`: numpy and scipy installed from wheels each load their own OpenBLAS,
and each OpenBLAS keeps a pool of threads that spin for a while after every call. A scipy
factorization right after a numpy product (a Gram matrix, then its Cholesky: the pattern of every
iteration of the stagewise and least-squares fits) then runs its threads against numpy's spinning
ones. On 2 cores, after a numpy product, a 333 x 333 Cholesky took 3.6 ms with scipy's two
threads and 0.8 ms with one (32 ms inside a stagewise fit); one thread was faster for Cholesky
factors and solves up to order 2048 (by 15-30% at 1024-2048, where the run-to-run spread is of
that order, hence the threshold of 1024) and for eigendecompositions up to 768. It holds scipy's
own BLAS at one thread while the matrix is small (``SMALL_ORDER``; ``SMALL_EIGH_ORDER`` for
eigendecompositions) but not tiny (``THREADED_ORDER``: OpenBLAS threads nothing below it, and
holding costs time), and does nothing where scipy shares numpy's BLAS (one pool, nothing to
fight) or threadpoolctl cannot find scipy's.

:func:`one_blas_thread`: every BLAS library at one thread (SLKL's coordinate loops).

The limits are process-wide: while one thread holds a block, another thread's calls into the
same libraries run on one thread too. threadpoolctl >= 3.7 lets only the thread that last set an
OpenBLAS (pthreads) limit change it again until it lets go, so each change is followed by letting
go: the last holder of a library, whichever thread and context it is, restores the count the
first one found.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager, nullcontext
from pathlib import Path

__all__ = ["SMALL_EIGH_ORDER", "SMALL_ORDER", "THREADED_ORDER", "blas_threads", "one_blas_thread", "one_eigh_thread",
           "one_lapack_thread"]

#: largest matrix order whose factorization runs on one thread of scipy's BLAS
SMALL_ORDER = 1024
#: smallest order held: below it OpenBLAS runs one thread anyway, and holding costs about 0.1 ms
#: a call (after a numpy product on 2 cores: a Cholesky and solve of order 16-112 took 0.09-0.24
#: ms free and 0.1 ms more held, at 128 3.2 ms free and 0.36 ms held; an eigendecomposition of
#: order 16-64 0.28-0.62 ms free and 0.05-0.1 ms more held, at 96 4.0 ms free and 1.2 ms held)
THREADED_ORDER = 64
#: the same for eigendecompositions (two threads won from order 1024 on)
SMALL_EIGH_ORDER = 768


def _let_go():
    """Release threadpoolctl's controlling thread of OpenBLAS (a no-op before threadpoolctl 3.7)."""
    try:
        from threadpoolctl import OpenBLASController
    except ImportError:
        return
    getattr(OpenBLASController, "clear_controlling_thread", lambda: None)()


_found = (None, [])  # (the imported modules then, controllers): the last lookup


def _modules():
    """A key that changes when modules are imported: their number and the latest one."""
    return len(sys.modules), next(reversed(sys.modules), None)


def _blas_libraries():
    """threadpoolctl's controllers of every BLAS library loaded ([] without threadpoolctl).

    The lookup reads the process's loaded libraries (about 4 ms); it is repeated only after
    new modules were imported, since a BLAS library arrives with the module that links it."""
    global _found
    modules = _modules()  # before the lookup: a module imported meanwhile brings a new one
    if _found[0] == modules:
        return _found[1]
    try:
        from threadpoolctl import ThreadpoolController

        libraries = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    except Exception:  # noqa: BLE001 - an unreadable library: leave the thread counts alone
        libraries = []
    _found = (modules, libraries)
    return libraries


def _scipy_blas():
    """The BLAS libraries that scipy ships apart from numpy's ([] when both use one library)."""
    try:
        import scipy
        import scipy.linalg  # noqa: F401 (loads scipy's BLAS)
    except ImportError:
        return []
    blas = _blas_libraries()
    if len({lib.filepath for lib in blas}) < 2:
        return []  # one BLAS for both packages: one pool, nothing to fight
    root = Path(scipy.__file__).resolve().parent
    own = (root, root.parent / "scipy.libs")
    return [lib for lib in blas if any(parent in own for parent in Path(lib.filepath).resolve().parents)]


_lock = threading.Lock()
#: library path -> [holders, thread count before the first holder, controller], shared by both
#: contexts, so that a library held by either is restored only when the last holder of either leaves
_held = {}
_scipy_libraries = None  # scipy's own BLAS, looked up on first use


@contextmanager
def _hold(libraries):
    """Hold ``libraries`` at one thread while any holder (of any thread, of either context) is
    inside: the first holder of a library lowers it, the last one restores what the first found."""
    with _lock:
        for lib in libraries:
            entry = _held.get(lib.filepath)
            if entry is None:
                entry = _held[lib.filepath] = [0, lib.num_threads, lib]
                lib.set_num_threads(1)
            entry[0] += 1
        _let_go()
    try:
        yield
    finally:
        with _lock:
            for lib in libraries:
                entry = _held[lib.filepath]
                entry[0] -= 1
                if entry[0] == 0:
                    del _held[lib.filepath]
                    entry[2].set_num_threads(entry[1])
            _let_go()


def one_lapack_thread(order, small=SMALL_ORDER):
    """Context: scipy's own BLAS at one thread if THREADED_ORDER <= ``order`` <= ``small``
    (module docstring)."""
    global _scipy_libraries
    if not THREADED_ORDER <= order <= small:
        return nullcontext()
    if _scipy_libraries is None:
        _scipy_libraries = _scipy_blas()
    return _hold(_scipy_libraries)


def one_blas_thread():
    """Context: every BLAS library loaded at one thread (module docstring)."""
    return _hold(_blas_libraries())


def one_eigh_thread(order):
    """Context for numpy's eigensolver on a matrix of ``order``: every BLAS library at one thread
    up to SMALL_EIGH_ORDER (one thread is faster there), and at any order once torch is loaded:
    its OpenMP pool's threads spin on the cores the solver's threads need, and a threaded
    eigendecomposition ran 10-30x slower on 2 cores beside it (0.44 s against 0.037 s at order
    400, 12.5 s against 0.68 s at 1600). Otherwise the threads the caller allows (two threads
    took 0.30 s against 0.52 s at order 1600 on 2 cores)."""
    if order <= SMALL_EIGH_ORDER or "torch" in sys.modules:
        return one_blas_thread()
    return nullcontext()


def blas_threads():
    """The most threads a loaded BLAS library would run now (1 while held, or without
    threadpoolctl): the parallelism a user allows, e.g. with ``threadpoolctl.threadpool_limits``."""
    return max([1] + [lib.num_threads for lib in _blas_libraries()])
