"""The array namespace the ops are written against.

An ops function never calls numpy for n-sized work directly: it asks its backend for the
namespace (``xp``), for products with an output buffer (``matmul``), for in-place elementwise
work (done with ``xp``'s ufuncs and ``out=``), for the memory it may use (``available_memory``)
and for a host copy of a result (``to_numpy``). numpy is the backend today; a second one (torch,
CPU or GPU) is an addition of this interface, not a rewrite of the ops.
"""

from __future__ import annotations

import numpy as np

from .memory import available_memory

__all__ = ["Backend", "NUMPY", "get_backend"]


class Backend:
    """numpy: arrays live in host memory, products run on the host BLAS."""

    name = "numpy"
    xp = np

    def empty(self, shape, dtype):
        return np.empty(shape, dtype=dtype)

    def asarray(self, a, dtype=None):
        """``a`` as a C-ordered array of ``dtype`` (no copy when it already is one)."""
        return np.ascontiguousarray(a, dtype=dtype)

    def matmul(self, a, b, out=None):
        """``a @ b``, written into ``out`` when given (no temporary of the result's size)."""
        return np.matmul(a, b, out=out)

    def to_numpy(self, a):
        return np.asarray(a)

    def available_memory(self):
        """Bytes this backend's arrays may still take (host memory available now)."""
        return available_memory()

    def __repr__(self):
        return f"Backend({self.name!r})"


NUMPY = Backend()


def get_backend(name=None):
    """The backend called ``name`` (None and "numpy" give numpy, the only one so far)."""
    if name is None or name == "numpy":
        return NUMPY
    raise ValueError(f"backend={name!r} is not available; the available backend is 'numpy'.")
