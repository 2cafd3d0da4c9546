"""The array backends the ops are written against, and the one in use.

An ops function never calls numpy for n-sized work directly: it asks its backend for the
namespace (``xp``, numpy's names), for arrays on the backend (``empty``, ``zeros``,
``asarray``), for products with an output buffer (``matmul``), for the memory it may use
(``available_memory``) and for a host copy of a result (``to_numpy``). Two backends exist:

- numpy (:data:`NUMPY`): host arrays and the host BLAS; the default;
- torch (:class:`~kernelscale.ops.torch_backend.TorchBackend`): blocks on a torch device,
  a CUDA GPU or torch's CPU kernels; imported only when asked for.

Estimators take ``device=`` (see :func:`get_backend`) and run their fit and predictions inside
:func:`using`, so the operators they create pick the backend up from :func:`current_backend`;
solvers never name a backend.
"""

from __future__ import annotations

import contextlib

import numpy as np
import scipy.sparse as sp

from . import memory
from .context import ACTIVE_BACKEND
from .fast_cos import cos_inplace
from .ridge import ridge_solve

__all__ = ["Backend", "GEMM_ROWS", "NUMPY", "get_backend", "current_backend", "device_type", "using", "DEVICES"]

DEVICES = "None (numpy), 'auto', 'cpu', 'cuda' or 'cuda:N'"


#: a product of a matrix with more rows runs in slices of this many: OpenBLAS's GEMM keeps
#: buffers resident for the rest of the process that grow with the rows of one call, which no
#: memory plan counts; slices of this size run at the same speed (benchmarks/studies/compute_layer.md)
GEMM_ROWS = 1024


class Backend:
    """numpy: arrays live in host memory, products run on the host BLAS."""

    name = "numpy"
    xp = np
    device = None

    def empty(self, shape, dtype):
        return np.empty(shape, dtype=dtype)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype=dtype)

    def asarray(self, a, dtype=None):
        """``a`` as a C-ordered array of ``dtype`` (no copy when it already is one); a scipy.sparse
        ``a`` stays sparse (CSR of ``dtype``): products with it are sparse products."""
        if sp.issparse(a):
            a = a.tocsr() if a.format != "csr" else a
            return a if dtype is None or a.dtype == dtype else a.astype(dtype)
        return np.ascontiguousarray(a, dtype=dtype)

    def matmul(self, a, b, out=None):
        """``a @ b``, written into ``out`` when given (no temporary of the result's size; for a
        scipy.sparse ``a``, a sparse product whose dense result is copied into ``out``)."""
        if sp.issparse(a) or sp.issparse(b):
            product = a @ b
            product = product.toarray() if sp.issparse(product) else np.asarray(product)
            if out is None:
                return product
            out[...] = product
            return out
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] <= GEMM_ROWS or b.shape[1] == 1:
            return np.matmul(a, b, out=out)
        if out is None:
            out = np.empty((a.shape[0], b.shape[1]), dtype=np.result_type(a, b))
        for start in range(0, a.shape[0], GEMM_ROWS):
            np.matmul(a[start : start + GEMM_ROWS], b, out=out[start : start + GEMM_ROWS])
        return out

    def to_numpy(self, a):
        return np.asarray(a)

    def cos(self, a, out=None):
        if out is a:  # the feature blocks' pass in place: numba's faster float64 cosine
            return cos_inplace(a)
        return np.cos(a, out=out)

    def sin(self, a, out=None):
        return np.sin(a, out=out)

    def phase_cos(self, a, offset, scale=None):
        """a <- scale * cos(a + offset) in place (offset per column; scale None: 1), in one pass
        over ``a`` where numba is installed (:func:`~kernelscale.ops.fast_cos.cos_inplace`)."""
        return cos_inplace(a, offset, scale)

    def ridge_solve(self, C, G, ridge, overwrite=False):
        """(C + ridge I)^{-1} G, a float64 host array, for a symmetric positive semidefinite C
        (D, D) of this backend and a host G (D, k), by Cholesky (:func:`ridge_solve`; C is never
        overwritten on the host, whatever ``overwrite`` says: the torch backend's may be)."""
        return ridge_solve(np.asarray(C, dtype=np.float64), G, ridge)

    def available_memory(self):
        """Bytes this backend's arrays may still take (host memory available now)."""
        return memory.available_memory()

    def synchronize(self):
        """Wait for queued device work (nothing to wait for on the host)."""

    def __repr__(self):
        return f"Backend({self.name!r})"

    def __reduce_ex__(self, protocol):
        # the numpy backend is one object, compared by identity (``backend is NUMPY`` chooses the
        # host's sparse and compiled paths): pickled (shipped to a dask worker) or copied, it
        # stays that object
        if self is NUMPY:
            return "NUMPY"
        return super().__reduce_ex__(protocol)


NUMPY = Backend()


_TORCH_BACKENDS = {}


def current_backend():
    """The backend the estimator being run asked for (numpy outside any :func:`using`)."""
    backend = ACTIVE_BACKEND.get()
    return NUMPY if backend is None else backend


def device_type(backend):
    """The torch device type of ``backend`` ("cuda", "cpu"), or None for numpy."""
    return getattr(getattr(backend, "device", None), "type", None)


@contextlib.contextmanager
def using(backend):
    """Run the block with ``backend`` as :func:`current_backend` (this thread only)."""
    token = ACTIVE_BACKEND.set(backend)
    try:
        yield backend
    finally:
        ACTIVE_BACKEND.reset(token)


def get_backend(device=None, name="device"):
    """The backend of a ``device`` argument, the same meaning for every estimator.

    - None or "numpy": numpy on the host (the default);
    - "cpu": torch's CPU kernels; "cuda", "cuda:N" or a ``torch.device``: that torch device;
    - "auto": the first CUDA GPU when torch sees one, else numpy;
    - a backend object: itself.
    Torch devices need torch (``pip install "kernelscale[torch]"``).
    """
    if device is None or (isinstance(device, str) and device == "numpy"):
        return NUMPY
    if isinstance(device, Backend) or (hasattr(device, "xp") and hasattr(device, "matmul")):
        return device
    if not isinstance(device, str) and type(device).__module__ != "torch":
        raise TypeError(f"{name} must be {DEVICES}; got {device!r}.")
    try:
        from .torch_backend import TorchBackend, resolve_device
    except ImportError as err:
        if device == "auto":
            return NUMPY
        raise ValueError(
            f"{name}={device!r} needs torch, which is not installed: pip install 'kernelscale[torch]', "
            f"or use {name}=None for numpy."
        ) from err
    try:
        dev = resolve_device(device)
    except ValueError as err:
        raise ValueError(str(err).replace("device=", f"{name}=", 1)) from None
    if dev is None:
        return NUMPY
    return _TORCH_BACKENDS.setdefault(str(dev), TorchBackend(dev))  # one per device: nested calls see the same
