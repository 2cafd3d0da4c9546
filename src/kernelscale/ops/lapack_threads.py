"""One thread for scipy's small factorizations when numpy and scipy each bring their own BLAS.

numpy and scipy installed from wheels each load their own OpenBLAS, and each OpenBLAS keeps a
pool of threads that spin for a while after every call. A scipy factorization right after a
numpy product (a Gram matrix, then its Cholesky: the pattern of every iteration of the
stagewise and least-squares fits) then runs its threads against numpy's spinning ones. On 2 cores,
after a numpy product, a 333 x 333 Cholesky took 3.6 ms with scipy's two threads and 0.8 ms with
one (32 ms inside a stagewise fit); one thread was also faster for Cholesky factors and solves
up to order 2048 and for eigendecompositions up to 768. :func:`one_lapack_thread` runs a block
with scipy's own BLAS at one thread when the matrix is small (``SMALL_ORDER``; ``SMALL_EIGH_ORDER``
for eigendecompositions); it does
nothing where scipy shares numpy's BLAS (one pool, nothing to fight) or threadpoolctl cannot
find scipy's.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path

__all__ = ["SMALL_EIGH_ORDER", "SMALL_ORDER", "one_lapack_thread"]

#: largest matrix order whose factorization runs on one thread of scipy's BLAS
SMALL_ORDER = 1024
#: the same for eigendecompositions (two threads won from order 1024 on)
SMALL_EIGH_ORDER = 768

_lock = threading.Lock()
_libraries = None  # scipy's own BLAS libraries (threadpoolctl controllers), found on first use
_depth = 0  # blocks inside one_lapack_thread, over all threads
_saved = ()  # their thread counts before the first of those blocks


def _scipy_blas():
    """threadpoolctl's controllers of the BLAS libraries that scipy ships apart from numpy's."""
    try:
        import scipy
        import scipy.linalg  # noqa: F401 (loads scipy's BLAS)
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return []
    root = Path(scipy.__file__).resolve().parent
    own = (root, root.parent / "scipy.libs")
    blas = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    if len({lib.filepath for lib in blas}) < 2:
        return []  # one BLAS for both packages: one pool, nothing to fight
    return [lib for lib in blas if any(parent in own for parent in Path(lib.filepath).resolve().parents)]


@contextmanager
def one_lapack_thread(order, small=SMALL_ORDER):
    """Run the block with scipy's own BLAS at one thread if ``order`` <= ``small``.

    Safe across threads: the thread counts are lowered by the first block to enter and restored
    by the last to leave."""
    global _libraries, _depth, _saved
    if order > small:
        yield
        return
    with _lock:
        if _libraries is None:
            _libraries = _scipy_blas()
        libs = _libraries
        if libs:
            if _depth == 0:
                _saved = tuple(lib.num_threads for lib in libs)
                for lib in libs:
                    lib.set_num_threads(1)
            _depth += 1
    try:
        yield
    finally:
        if libs:
            with _lock:
                _depth -= 1
                if _depth == 0:
                    for lib, count in zip(libs, _saved):
                        lib.set_num_threads(count)
